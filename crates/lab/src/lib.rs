//! The performance lab behind `signet bench`.
//!
//! - [`load`]: the open-loop load generator (constant arrival rate, latency from the intended
//!   send time, HdrHistogram).
//! - [`workload`]: what each request is: log appends, log reads, custom requests.
//! - [`result`]: the JSON result and the printed table.
//! - [`conn`]: one HTTP/1.1 keep-alive connection with a minimal, cheap client.
//! - [`crypto`]: crypto micro-benchmarks, aws-lc-rs beside OpenSSL (`signet bench crypto`).

pub mod conn;
pub mod crypto;
pub mod load;
pub mod result;
pub mod workload;

pub use load::{run, LoadSpec};
pub use result::LoadResult;
pub use workload::Workload;
