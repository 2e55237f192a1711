//! `cargo bench -p signet-tls`: the suite `signet bench micro tls` runs.
fn main() {
    signet_core::micro::main(signet_tls::micro::suite());
}
