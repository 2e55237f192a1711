//! The performance lab behind `signet bench`.
//!
//! - [`load`]: the open-loop load generator (constant arrival rate, latency from the intended
//!   send time, HdrHistogram).
//! - [`workload`]: what each request is: log appends, log reads, custom requests.
//! - [`txn`]: transactions of several requests: `sign`, `verify` and `mixed`.
//! - [`preset`]: `--preset low|medium|high|stress|soak`.
//! - [`soak`]: sampling the server process during a soak, and the growth verdict.
//! - [`server_cpu`]: the server's own CPU per operation over a run (`--server-pid`).
//! - [`cost`]: the server's CPU per operation against its crypto floor, and where the rest
//!   goes (`signet bench cost`).
//! - [`result`]: the JSON result and the printed table.
//! - [`transport`]: HTTP/1.1 or HTTP/2, keep-alive or a new connection per request; the
//!   clients the workers send through.
//! - [`conn`]: one HTTP/1.1 connection with a minimal, cheap client (the default path).
//! - [`h2`]: HTTP/2 clients on hyper, streams multiplexed on shared connections.
//! - [`error`]: what a connection, a micro-benchmark run and a TLS bench fail with.
//! - [`dial`]: opening a connection: TCP, TLS for https (rustls on aws-lc-rs, trust from
//!   `signet-tls`), setup times.
//! - [`compare`]: the regression gate between two results (`signet bench compare`).
//! - [`gonogo`]: the GO/NO-GO decision against a criteria file (`signet bench gonogo`).
//! - [`report`]: the HTML report with charts and the summary table (`signet bench report`).
//! - [`table`]: markdown tables as the reference reports print them.
//! - [`disk`]: the disk probe, `fdatasync` latency sampled beside a run (`--disk-probe`).
//! - [`crypto`]: crypto micro-benchmarks, aws-lc-rs beside OpenSSL (`signet bench crypto`).
//! - [`micro`]: the crates' criterion suites, run by name; medians read back (`signet bench micro`).
//! - [`tlsbench`]: report 003's TLS handshake and payload table, signet's backends side by
//!   side (and external servers such as nginx) (`signet bench tls`).
//! - [`verify`]: in-process bundle verification, beside a peer verifier (`signet bench verify`).
//! - [`fill`]: large logs built through the storage API, as the sequencer commits.
//! - [`scale`]: one log of millions of entries: open time, memory, lookups, disk (`signet bench scale`).
//! - [`monitor`]: the monitor catching up with a long log, in entries/s (`signet bench monitor`).

pub mod compare;
pub mod conn;
pub mod cost;
pub mod crypto;
pub mod dial;
pub mod disk;
pub mod error;
pub mod fill;
#[cfg(test)]
mod fixture;
pub mod gonogo;
pub mod h2;
pub mod load;
pub mod micro;
pub mod monitor;
pub mod preset;
pub mod report;
pub mod result;
pub mod scale;
pub mod server_cpu;
pub mod soak;
pub mod table;
pub mod tlsbench;
pub mod transport;
pub mod txn;
pub mod verify;
pub mod workload;

pub use load::{run, LoadSpec};
pub use result::LoadResult;
pub use workload::Workload;
