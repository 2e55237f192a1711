//! Records the rustls version this crate is built with, for `/metrics` (`signet_tls_info`)
//! and the startup line: rustls exports no version constant, and Cargo.lock is what the
//! build resolved.

use std::path::PathBuf;

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default());
    let lock = manifest.join("../../Cargo.lock");
    println!("cargo:rerun-if-changed={}", lock.display());
    let text = std::fs::read_to_string(&lock).unwrap_or_default();
    let versions: Vec<&str> = text
        .split("[[package]]")
        .filter(|block| block.lines().any(|l| l.trim() == "name = \"rustls\""))
        .filter_map(|block| block.lines().find_map(|l| l.trim().strip_prefix("version = \"")?.strip_suffix('"')))
        .collect();
    // Several rustls versions in one build would make the answer a guess: say so instead.
    let version = match versions.as_slice() {
        [one] => one.to_string(),
        _ => "unknown".to_string(),
    };
    println!("cargo:rustc-env=SIGNET_RUSTLS_VERSION={version}");
}
