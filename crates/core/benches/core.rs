//! `cargo bench -p signet-core`: the suite `signet bench micro core` runs.
fn main() {
    signet_core::micro::main(signet_core::micro::suite());
}
