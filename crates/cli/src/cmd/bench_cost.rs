//! `signet bench cost`: the server's CPU per operation against the crypto floor of that
//! operation, in one run. See `signet_lab::cost`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use signet_lab::cost::op::Op;
use signet_lab::cost::{self, CostSpec, Server};

#[derive(clap::Args)]
pub struct Args {
    /// Operations, comma-separated: v1-append, v2-append, cert, stamp, read, sign [default: all].
    #[arg(long, value_delimiter = ',')]
    ops: Vec<Op>,
    /// A server already running (plain http://); without it, a dev instance of this binary is
    /// started on a fresh data directory and stopped at the end.
    #[arg(long, requires = "server_pid")]
    target: Option<String>,
    /// The process of the server at --target, whose CPU is read from /proc.
    #[arg(long, requires = "target")]
    server_pid: Option<u32>,
    /// An identity token for `cert` and `sign` against --target (a dev instance makes its own).
    #[arg(long, requires = "target")]
    token: Option<String>,
    /// Seconds of each operation's measured run.
    #[arg(long, default_value_t = 8.0)]
    seconds: f64,
    /// Seconds of arrivals at the same rate before each measured run, not counted.
    #[arg(long, default_value_t = 2.0)]
    warmup: f64,
    /// An offered rate other than the operation's default, as OP=RATE (repeatable), e.g. v1-append=6000.
    #[arg(long = "rate")]
    rates: Vec<String>,
    /// Run each operation a second time under `perf record`, and split its cost by layer.
    #[arg(long)]
    profile: bool,
    /// Seconds each crypto primitive is timed, per repeat (5 repeats).
    #[arg(long, default_value_t = 0.5)]
    floor_seconds: f64,
    /// Write the machine-readable result here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write the tables as a self-contained HTML page here.
    #[arg(long)]
    html: Option<PathBuf>,
}

fn usage(why: impl std::fmt::Display) -> ExitCode {
    errln!("signet bench cost: {why}");
    ExitCode::from(2)
}

pub fn run(a: Args) -> ExitCode {
    let mut rates = Vec::new();
    for r in &a.rates {
        match r.split_once('=').map(|(op, rate)| (op.trim().parse::<Op>(), rate.trim().parse::<f64>())) {
            Some((Ok(op), Ok(rate))) => rates.push((op, rate)),
            Some((Err(e), _)) => return usage(format!("--rate {r:?}: {e}")),
            _ => return usage(format!("--rate {r:?} is not OP=RATE, e.g. v1-append=6000")),
        }
    }
    if !(a.floor_seconds > 0.0 && a.floor_seconds <= 10.0) {
        return usage(format!("--floor-seconds must be in (0, 10], got {}", a.floor_seconds));
    }
    let server = match (a.target, a.server_pid) {
        (Some(t), Some(pid)) => match t.parse() {
            Ok(target) => Server::Running { target, pid, token: a.token },
            Err(_) => return usage(format!("--target {t:?} is not a URL")),
        },
        _ => match std::env::current_exe() {
            Ok(binary) => Server::Dev { binary },
            Err(e) => return usage(format!("cannot find this binary to start a dev instance: {e}")),
        },
    };
    let spec = CostSpec {
        server,
        ops: if a.ops.is_empty() { Op::ALL.to_vec() } else { a.ops },
        seconds: a.seconds,
        warmup: a.warmup,
        rates,
        profile: a.profile,
        floor_budget: Duration::from_secs_f64(a.floor_seconds),
        floor_repeats: 5,
    };
    let report = match cost::run(&spec, &mut |step| errln!("signet bench cost: {step}")) {
        Ok(r) => r,
        Err(e) if e.is_usage() => return usage(e),
        Err(e) => {
            errln!("signet bench cost: {e}");
            return ExitCode::FAILURE;
        }
    };
    if !super::bench_json::write_json("cost", a.json.as_deref(), &report) {
        return ExitCode::FAILURE;
    }
    let table = report.table();
    if let Some(path) = &a.html {
        if let Err(e) = std::fs::write(path, signet_lab::report::tables_html("signet bench cost", &table)) {
            errln!("signet bench cost: --html {}: cannot write: {e}", path.display());
            return ExitCode::FAILURE;
        }
    }
    out!("{table}");
    ExitCode::SUCCESS
}
