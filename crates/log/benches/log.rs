//! `cargo bench -p signet-log`: the suite `signet bench micro log` runs.
fn main() {
    signet_core::micro::main(signet_log::micro::suite());
}
