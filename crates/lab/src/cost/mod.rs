//! `signet bench cost`: the server's own CPU per operation against the crypto floor of that
//! operation, measured in one run.
//!
//! On two cores shared with the load generator a throughput ratio measures the generator as
//! much as the server. The server's CPU per answered operation (from `/proc`, over a run at a
//! fixed rate well under the ceiling) does not, and the crypto it must do (timed here, in the
//! same run) is the floor no implementation goes under. What lies between is overhead, and
//! `--profile` says where it goes.
//!
//! - [`op`]: the operations, their rates and their crypto recipes.
//! - [`floor`]: the primitives timed through aws-lc-rs, and each operation's floor.
//! - [`batches`]: the checkpoint signatures shared by a batch, from the server's metrics.
//! - [`instance`]: the dev instance measured when no `--target` is given.
//! - [`profile`]: `perf` samples of the server, by layer.
//! - [`report`]: the JSON result and the tables.

pub mod batches;
pub mod floor;
pub mod instance;
pub mod op;
pub mod profile;
pub mod report;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use http::Uri;

use crate::dial::Dialer;
use crate::load::{LoadError, LoadSpec};
use crate::transport::Transport;
use crate::workload::Workload;
use batches::Batches;
use floor::{FloorError, Primitives};
use instance::{Instance, InstanceError};
use op::Op;
use profile::{Profile, ProfileError};
use report::{CostReport, OpCost};

/// Which server to measure.
#[derive(Debug, Clone)]
pub enum Server {
    /// A dev instance of this binary, started and stopped by the run.
    Dev { binary: PathBuf },
    /// A server already running: its URL, its process (whose CPU is read), and a token for
    /// the operations that need one.
    Running { target: Uri, pid: u32, token: Option<String> },
}

#[derive(Debug, Clone)]
pub struct CostSpec {
    pub server: Server,
    pub ops: Vec<Op>,
    /// Each operation's measured run, after its warm-up.
    pub seconds: f64,
    pub warmup: f64,
    /// Offered rates other than [`Op::default_rate`].
    pub rates: Vec<(Op, f64)>,
    /// Profile each operation with `perf` in a second run.
    pub profile: bool,
    /// Time budget of each repeat of each crypto primitive.
    pub floor_budget: Duration,
    pub floor_repeats: usize,
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CostError {
    /// Bad options (exit 2).
    #[error("{0}")]
    Usage(String),
    #[error(transparent)]
    Instance(#[from] InstanceError),
    #[error("the crypto floor: {0}")]
    Floor(#[from] FloorError),
    #[error("{op}: {source}")]
    Load { op: &'static str, source: Box<LoadError> },
    #[error("{op}: the server answered none of {scheduled} requests; errors: {errors}")]
    NothingAnswered { op: &'static str, scheduled: u64, errors: String },
    #[error("the runtime: {0}")]
    Runtime(#[source] std::io::Error),
}

impl CostError {
    pub fn is_usage(&self) -> bool {
        matches!(self, CostError::Usage(_))
    }
}

impl CostSpec {
    fn check(&self) -> Result<(), CostError> {
        let usage = |m: String| Err(CostError::Usage(m));
        if self.ops.is_empty() {
            return usage("--ops names no operation".into());
        }
        if !(1.0..=600.0).contains(&self.seconds) {
            return usage(format!("--seconds must be in [1, 600], got {}", self.seconds));
        }
        if !(0.0..=60.0).contains(&self.warmup) {
            return usage(format!("--warmup must be in [0, 60] seconds, got {}", self.warmup));
        }
        if let Some((op, rate)) = self.rates.iter().find(|(_, r)| !(*r > 0.0 && *r <= 1_000_000.0)) {
            return usage(format!("--rate {}={rate}: a rate must be in (0, 1000000]", op.name()));
        }
        if let Server::Running { target, token, .. } = &self.server {
            if target.scheme_str() != Some("http") {
                return usage(format!("--target {target}: plain http:// only (the TLS layer's cost is `signet bench tls`'s)"));
            }
            if let Some(op) = self.ops.iter().find(|op| op.needs_token() && token.is_none()) {
                return usage(format!("{} needs --token (an identity token the server accepts)", op.name()));
            }
        }
        Ok(())
    }

    fn rate(&self, op: Op) -> f64 {
        self.rates.iter().rev().find(|(o, _)| *o == op).map_or(op.default_rate(), |(_, r)| *r)
    }
}

/// Measures the floor, then each operation in turn; `progress` is told what starts.
pub fn run(spec: &CostSpec, progress: &mut dyn FnMut(&str)) -> Result<CostReport, CostError> {
    spec.check()?;
    let mut ops = spec.ops.clone();
    ops.sort();
    ops.dedup();
    let (instance, target, pid, token) = match &spec.server {
        Server::Dev { binary } => {
            progress(&format!("starting {} serve --dev", binary.display()));
            let i = Instance::start(binary)?;
            let (target, pid, token) = (i.url.clone(), i.pid(), Some(i.token.clone()));
            (Some(i), target, pid, token)
        }
        Server::Running { target, pid, token } => (None, target.clone(), *pid, token.clone()),
    };
    progress("timing the crypto primitives");
    let loadavg_start = crate::crypto::loadavg();
    let primitives = Primitives::measure(spec.floor_budget, spec.floor_repeats)?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(CostError::Runtime)?;
    let dialer = Arc::new(Dialer::plain(&target));
    // Reads need entries; the v1 appends make them when they run first.
    if ops.contains(&Op::Read) && !ops.contains(&Op::V1Append) {
        progress("appending entries for the reads");
        let fill = load_spec(&target, Workload::LogAppend, 2_000.0, 2.0, 0.0, 64, None, None);
        runtime.block_on(crate::load::run(fill)).map_err(|e| CostError::Load { op: "fill", source: Box::new(e) })?;
    }
    let mut results = Vec::new();
    for op in ops {
        let rate = spec.rate(op);
        progress(&format!("{}: {rate}/s for {} s", op.name(), spec.seconds));
        let token = op.needs_token().then(|| token.clone()).flatten();
        let load = load_spec(&target, op.workload(), rate, spec.seconds, spec.warmup, op.connections(), token, Some(pid));
        let before = runtime.block_on(Batches::read(&dialer, &target));
        let result = runtime.block_on(crate::load::run(load.clone())).map_err(|e| CostError::Load { op: op.name(), source: Box::new(e) })?;
        let after = runtime.block_on(Batches::read(&dialer, &target));
        if result.ok == 0 {
            let errors = result.errors.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", ");
            return Err(CostError::NothingAnswered { op: op.name(), scheduled: result.scheduled, errors });
        }
        let batch_signs = match (before, after) {
            (Some(b), Some(a)) => Batches::signs_per_op(&b, &a),
            _ => 0.0,
        };
        let floor = primitives.floor(op.recipe(), batch_signs);
        let profile = match spec.profile {
            true => {
                progress(&format!("{}: profiling a second run", op.name()));
                Some(profile_run(&runtime, &load, pid, spec.seconds + spec.warmup, op))
            }
            false => None,
        };
        results.push(OpCost::new(op, &result, floor, profile));
    }
    Ok(CostReport::new(&target, pid, instance.is_some(), primitives, results, loadavg_start))
}

/// A second run of the same load under `perf record`.
fn profile_run(runtime: &tokio::runtime::Runtime, load: &LoadSpec, pid: u32, seconds: f64, op: Op) -> Result<Profile, ProfileError> {
    let dir = tempfile::tempdir().map_err(ProfileError::TempDir)?;
    let recording = profile::Recording::start(pid, seconds, dir.path(), op.name())?;
    let mut load = load.clone();
    load.server_pid = None;
    let ran = runtime.block_on(crate::load::run(load));
    let profile = recording.finish()?;
    ran.map_err(|e| ProfileError::Load(Box::new(e)))?;
    Ok(profile)
}

#[allow(clippy::too_many_arguments)]
fn load_spec(
    target: &Uri,
    workload: Workload,
    rate: f64,
    seconds: f64,
    warmup: f64,
    connections: usize,
    token: Option<String>,
    server_pid: Option<u32>,
) -> LoadSpec {
    LoadSpec {
        target: target.clone(),
        workload,
        rate,
        duration: Duration::from_secs_f64(seconds),
        connections,
        method: http::Method::GET,
        body: bytes::Bytes::new(),
        headers: Vec::new(),
        timeout: Duration::from_secs(10),
        progress: false,
        token,
        rekor_version: 1,
        seed_entries: 0,
        rng_seed: 1,
        soak: None,
        server_pid,
        disk_probe: None,
        warmup: Duration::from_secs_f64(warmup),
        transport: Transport::default(),
    }
}
