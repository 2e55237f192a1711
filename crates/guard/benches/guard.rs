//! `cargo bench -p signet-guard`: the suite `signet bench micro guard` runs.
fn main() {
    signet_core::micro::main(signet_guard::micro::suite());
}
