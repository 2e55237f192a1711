//! `cargo bench -p signet-ca`: the suite `signet bench micro ca` runs.
fn main() {
    signet_core::micro::main(signet_ca::micro::suite());
}
