//! Where an operation's cost goes besides crypto: the server sampled with `perf record`
//! (`cpu-clock`, so it works where hardware counters are not exposed, as on this VM), each
//! sample put in one category by the function it landed in.
//!
//! The category is the sampled function's own (its "self" time): a `memcpy` called by the
//! JSON encoder counts as memory, not JSON. Samples have no call chains, because release
//! builds keep no frame pointers; the categories are therefore a floor for each layer's
//! cost, and the table says so.
//!
//! Profiling runs the operation a second time, after the measured run: perf's sampling
//! interrupts are billed to the process they sample, and would raise the figure it explains.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde::Serialize;

/// Samples per second: enough for a few thousand samples in a short run, few enough that
/// perf itself stays a small part of the machine.
const FREQUENCY: u32 = 997;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Category {
    /// aws-lc (its C and assembly, and the Rust wrapper), OpenSSL.
    Crypto,
    /// The kernel: syscalls, the network stack, the scheduler, page faults.
    Kernel,
    /// hyper, h2, http, httparse, axum, tower, and the server's connection code.
    Http,
    /// serde_json and serde, the canonical JSON encoder.
    Json,
    /// SQLite and the storage layers over it.
    Storage,
    /// The guard's layers.
    Guard,
    /// The allocator (mimalloc, or libc's malloc), memcpy and their kin.
    Memory,
    /// tokio, locks and channels.
    Runtime,
    /// Everything else: the protocols' own code (DER, checkpoints, the tree), std, tracing.
    Other,
}

impl Category {
    pub const ALL: [Category; 9] = [
        Category::Crypto,
        Category::Kernel,
        Category::Http,
        Category::Json,
        Category::Storage,
        Category::Guard,
        Category::Memory,
        Category::Runtime,
        Category::Other,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Category::Crypto => "crypto",
            Category::Kernel => "kernel",
            Category::Http => "HTTP",
            Category::Json => "JSON",
            Category::Storage => "storage",
            Category::Guard => "guard",
            Category::Memory => "memory",
            Category::Runtime => "runtime",
            Category::Other => "other",
        }
    }

    /// The category of a sample in `dso`, in a kernel or user function named `symbol`
    /// (demangled). The first rule that matches wins.
    pub fn of(dso: &str, kernel: bool, symbol: &str) -> Category {
        let has = |needles: &[&str]| needles.iter().any(|n| symbol.contains(n));
        let starts = |prefixes: &[&str]| prefixes.iter().any(|p| symbol.starts_with(p));
        if kernel || dso.starts_with("[kernel") || dso == "[vdso]" {
            Category::Kernel
        } else if dso.starts_with("libcrypto")
            || dso.starts_with("libssl")
            || starts(&["aws_lc_", "bignum_", "Lbignum_", "p256_", "Lp256_", "p384_", "Lp384_", "beeu_", "sha256_block", "edwards25519", "curve25519"])
            || has(&["nistz256", "aws_lc_rs::", "aws_lc_sys::"])
        {
            Category::Crypto
        } else if starts(&["sqlite3", "pcache", "pager", "btree"]) || has(&["rusqlite::", "signet_db::", "signet_log::storage", "signet_log::store"]) {
            Category::Storage
        } else if has(&["serde_json::", "serde::", "signet_core::jcs", "signet_core::json"]) {
            Category::Json
        } else if has(&["signet_guard::"]) {
            Category::Guard
        } else if has(&["hyper::", "hyper_util::", "h2::", "http::", "httparse::", "axum::", "tower::", "tower_http::", "matchit::", "signet_server::conn"]) {
            Category::Http
        } else if starts(&["malloc", "free", "cfree", "realloc", "calloc", "_int_", "__libc_", "tcache", "__mem", "mem", "__GI_mem", "_mi_", "mi_"])
            || has(&["alloc::alloc::", "__rust_alloc", "__rust_dealloc", "__rust_realloc"])
        {
            Category::Memory
        } else if has(&["tokio::", "parking_lot", "crossbeam", "std::sync::", "futex", "pthread_"]) {
            Category::Runtime
        } else {
            Category::Other
        }
    }
}

/// A profile: each category's share of the samples, and the functions most sampled.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Profile {
    pub samples: u64,
    /// Fractions of all samples, summing to 1.
    pub shares: BTreeMap<Category, f64>,
    /// The [`HOTTEST`] functions, most sampled first: where to look next.
    pub hottest: Vec<Hot>,
}

/// How many functions [`Profile::hottest`] lists.
pub const HOTTEST: usize = 25;

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Hot {
    pub symbol: String,
    pub category: Category,
    /// Fraction of all samples.
    pub share: f64,
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProfileError {
    #[error("could not run perf (is linux-perf installed?): {0}")]
    Spawn(#[source] std::io::Error),
    #[error("perf {what} failed: {stderr}")]
    Perf { what: &'static str, stderr: String },
    #[error("perf recorded no samples of the server")]
    NoSamples,
    #[error("a temporary directory for perf's data: {0}")]
    TempDir(#[source] std::io::Error),
    /// The profiled run itself failed.
    #[error("the profiled run: {0}")]
    Load(#[source] Box<crate::load::LoadError>),
}

/// A `perf record` of one process, running for a fixed time.
pub struct Recording {
    child: Child,
    file: PathBuf,
}

impl Recording {
    /// Records `pid` for `seconds` into `dir/name.perf.data`.
    pub fn start(pid: u32, seconds: f64, dir: &Path, name: &str) -> Result<Recording, ProfileError> {
        let file = dir.join(format!("{name}.perf.data"));
        let child = Command::new("perf")
            .args(["record", "-q", "-e", "cpu-clock", "-F", &FREQUENCY.to_string(), "-p", &pid.to_string(), "-o"])
            .arg(&file)
            .args(["--", "sleep", &format!("{seconds:.1}")])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(ProfileError::Spawn)?;
        Ok(Recording { child, file })
    }

    /// Waits for the recording to end and reads it back.
    pub fn finish(self) -> Result<Profile, ProfileError> {
        let out = self.child.wait_with_output().map_err(ProfileError::Spawn)?;
        if !out.status.success() {
            return Err(ProfileError::Perf { what: "record", stderr: String::from_utf8_lossy(&out.stderr).trim().to_string() });
        }
        let report = Command::new("perf")
            .args(["report", "--stdio", "--no-children", "--sort", "dso,sym", "--percent-limit", "0", "-i"])
            .arg(&self.file)
            .stdin(Stdio::null())
            .output()
            .map_err(ProfileError::Spawn)?;
        if !report.status.success() {
            return Err(ProfileError::Perf { what: "report", stderr: String::from_utf8_lossy(&report.stderr).trim().to_string() });
        }
        let _ = std::fs::remove_file(&self.file);
        let text = String::from_utf8_lossy(&report.stdout);
        let (samples, (shares, hottest)) = (sample_count(&text), read_report(&text));
        if samples == 0 || shares.is_empty() {
            return Err(ProfileError::NoSamples);
        }
        Ok(Profile { samples, shares, hottest })
    }
}

/// The report header's `# Samples: 2K of event 'cpu-clock'` (perf abbreviates thousands).
fn sample_count(report: &str) -> u64 {
    let Some(n) = report.lines().find_map(|l| l.strip_prefix("# Samples: ")?.split_whitespace().next()) else { return 0 };
    match n.strip_suffix('K') {
        Some(k) => k.parse::<u64>().map_or(0, |k| k * 1000),
        None => n.parse().unwrap_or(0),
    }
}

/// Each category's share and the hottest functions, from `perf report --stdio --sort dso,sym`
/// lines such as `    12.34%  signet  [.] aws_lc_0_47_0_sha256_block_data_order_avx`, which
/// come most sampled first.
fn read_report(report: &str) -> (BTreeMap<Category, f64>, Vec<Hot>) {
    let mut by: BTreeMap<Category, f64> = BTreeMap::new();
    let mut hottest = Vec::new();
    let mut total = 0.0;
    for line in report.lines().filter(|l| !l.starts_with('#')) {
        let Some((pct, rest)) = line.trim_start().split_once('%') else { continue };
        let Ok(pct) = pct.trim().parse::<f64>() else { continue };
        let rest = rest.trim_start();
        let Some((dso, rest)) = rest.split_once(char::is_whitespace) else { continue };
        let rest = rest.trim_start();
        let (kernel, symbol) = match rest.get(..3) {
            Some("[k]") => (true, rest[3..].trim()),
            Some("[.]") => (false, rest[3..].trim()),
            _ => (false, rest),
        };
        let category = Category::of(dso, kernel, symbol);
        *by.entry(category).or_insert(0.0) += pct;
        total += pct;
        if hottest.len() < HOTTEST {
            hottest.push(Hot { symbol: symbol.to_string(), category, share: pct });
        }
    }
    if total > 0.0 {
        for v in by.values_mut() {
            *v /= total;
        }
        for h in &mut hottest {
            h.share /= total;
        }
    }
    (by, hottest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_are_put_in_their_layer() {
        let c = |dso, kernel, sym| Category::of(dso, kernel, sym);
        assert_eq!(c("[kernel.kallsyms]", true, "tcp_sendmsg"), Category::Kernel);
        assert_eq!(c("signet", false, "aws_lc_0_47_0_sha256_block_data_order_avx"), Category::Crypto);
        assert_eq!(c("signet", false, "bignum_montinv_p256"), Category::Crypto);
        assert_eq!(c("signet", false, "<aws_lc_rs::ec::signature::EcdsaVerificationAlgorithm as aws_lc_rs::signature::VerificationAlgorithm>::verify_sig"), Category::Crypto);
        assert_eq!(c("libcrypto.so.3", false, "EVP_DigestUpdate"), Category::Crypto);
        assert_eq!(c("signet", false, "sqlite3VdbeExec"), Category::Storage);
        assert_eq!(c("signet", false, "<serde_json::ser::Compound<W,F> as serde::ser::SerializeMap>::serialize_entry"), Category::Json);
        assert_eq!(c("signet", false, "signet_guard::audit::queue::Queue::push"), Category::Guard);
        assert_eq!(c("signet", false, "hyper::proto::h1::role::Server::parse"), Category::Http);
        assert_eq!(c("libc.so.6", false, "__memmove_avx_unaligned_erms"), Category::Memory);
        assert_eq!(c("libc.so.6", false, "malloc"), Category::Memory);
        assert_eq!(c("signet", false, "_mi_page_malloc_zero"), Category::Memory);
        assert_eq!(c("signet", false, "mi_free"), Category::Memory);
        assert_eq!(c("signet", false, "__ecp_nistz256_mul_montx"), Category::Crypto);
        assert_eq!(c("signet", false, "ecp_nistz256_points_mul_public"), Category::Crypto);
        assert_eq!(c("signet", false, "aws_lc_0_47_0_beeu_mod_inverse_vartime"), Category::Crypto);
        assert_eq!(c("signet", false, "tokio::runtime::scheduler::multi_thread::worker::Context::run"), Category::Runtime);
        assert_eq!(c("signet", false, "signet_log::tree::Tree::root"), Category::Other);
    }

    #[test]
    fn shares_are_read_from_the_report_and_sum_to_one() {
        let report = "    40.00%  signet             [.] aws_lc_0_47_0_ecp_nistz256_point_double\n\
                      \x20   30.00%  [kernel.kallsyms]  [k] do_syscall_64\n\
                      \x20   20.00%  signet             [.] hyper::proto::h1::role::Server::parse\n\
                      \x20   10.00%  libc.so.6          [.] malloc\n\
                      \n# a comment line with 100.00% in it\n";
        let (s, hottest) = read_report(report);
        assert_eq!(hottest.len(), 4);
        assert_eq!((hottest[1].symbol.as_str(), hottest[1].category, hottest[1].share), ("do_syscall_64", Category::Kernel, 0.3));
        assert_eq!(s.get(&Category::Crypto), Some(&0.4));
        assert_eq!(s.get(&Category::Kernel), Some(&0.3));
        assert_eq!(s.get(&Category::Http), Some(&0.2));
        assert_eq!(s.get(&Category::Memory), Some(&0.1));
        assert!((s.values().sum::<f64>() - 1.0).abs() < 1e-9);
        assert!(read_report("").0.is_empty());
    }

    #[test]
    fn the_sample_count_is_read_from_the_header() {
        assert_eq!(sample_count("# Total Lost Samples: 0\n#\n# Samples: 199  of event 'cpu-clock'\n"), 199);
        assert_eq!(sample_count("# Samples: 12K of event 'cpu-clock'\n"), 12_000);
        assert_eq!(sample_count("no header\n"), 0);
    }
}
