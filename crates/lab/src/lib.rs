//! The performance lab behind `signet bench`.
//!
//! - [`load`]: the open-loop load generator (constant arrival rate, latency from the intended
//!   send time, HdrHistogram).
//! - [`workload`]: what each request is: log appends, log reads, custom requests.
//! - [`txn`]: transactions of several requests: `sign`, `verify` and `mixed`.
//! - [`preset`]: `--preset low|medium|high|stress|soak`.
//! - [`soak`]: sampling the server process during a soak, and the growth verdict.
//! - [`result`]: the JSON result and the printed table.
//! - [`conn`]: one HTTP/1.1 keep-alive connection with a minimal, cheap client.
//! - [`compare`]: the regression gate between two results (`signet bench compare`).
//! - [`gonogo`]: the GO/NO-GO decision against a criteria file (`signet bench gonogo`).
//! - [`report`]: the HTML report with charts and the summary table (`signet bench report`).
//! - [`table`]: markdown tables as the reference reports print them.
//! - [`disk`]: the disk probe, `fdatasync` latency sampled beside a run (`--disk-probe`).
//! - [`crypto`]: crypto micro-benchmarks, aws-lc-rs beside OpenSSL (`signet bench crypto`).

pub mod compare;
pub mod conn;
pub mod crypto;
pub mod disk;
#[cfg(test)]
mod fixture;
pub mod gonogo;
pub mod load;
pub mod preset;
pub mod report;
pub mod result;
pub mod soak;
pub mod table;
pub mod txn;
pub mod workload;

pub use load::{run, LoadSpec};
pub use result::LoadResult;
pub use workload::Workload;
