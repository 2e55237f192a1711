//! The result of `signet bench cost`: JSON (`--json`) and markdown tables, as
//! docs/performance.md quotes them.

use serde::Serialize;

use super::floor::{Floor, Primitives};
use super::op::Op;
use super::profile::{Category, Profile, ProfileError};
use crate::result::LoadResult;
use crate::server_cpu::ServerCpu;

#[derive(Debug, Clone, Serialize)]
pub struct CostReport {
    pub target: String,
    pub server_pid: u32,
    /// The run started the server itself (`signet serve --dev` of this binary).
    pub dev_instance: bool,
    pub primitives: Primitives,
    pub ops: Vec<OpCost>,
    pub cpus: usize,
    pub cpu_model: Option<String>,
    pub loadavg_start: Option<String>,
    pub loadavg_end: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct OpCost {
    pub op: Op,
    pub offered_rps: f64,
    pub achieved_rps: f64,
    pub ok: u64,
    pub errors: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    /// The server's CPU per answered operation; None when `/proc` could not say.
    pub cpu: Option<ServerCpu>,
    pub floor: Floor,
    /// The cost minus the floor, in µs.
    pub overhead_us: Option<f64>,
    /// `--profile`: the second run's samples by layer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile: Option<Profile>,
    /// `--profile`: why the second run gave no profile.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile_error: Option<String>,
}

impl OpCost {
    pub fn new(op: Op, run: &LoadResult, floor: Floor, profile: Option<Result<Profile, ProfileError>>) -> OpCost {
        let overhead_us = run.server_cpu.as_ref().map(|c| round2(c.us_per_op - floor.us));
        OpCost {
            op,
            offered_rps: run.offered_rps,
            achieved_rps: run.achieved_rps,
            ok: run.ok,
            errors: run.error_count(),
            p50_ms: run.latency_ms.p50,
            p99_ms: run.latency_ms.p99,
            cpu: run.server_cpu.clone(),
            floor,
            overhead_us,
            profile_error: profile.as_ref().and_then(|p| p.as_ref().err().map(ToString::to_string)),
            profile: profile.and_then(Result::ok),
        }
    }

    /// µs of each layer: its share of the profile's samples times the measured cost.
    pub fn by_layer(&self) -> Option<Vec<(Category, f64)>> {
        let (Some(profile), Some(cpu)) = (&self.profile, &self.cpu) else { return None };
        Some(Category::ALL.iter().map(|c| (*c, profile.shares.get(c).copied().unwrap_or(0.0) * cpu.us_per_op)).collect())
    }
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

impl CostReport {
    pub fn new(target: &http::Uri, server_pid: u32, dev_instance: bool, primitives: Primitives, ops: Vec<OpCost>, loadavg_start: Option<String>) -> CostReport {
        CostReport {
            target: target.to_string(),
            server_pid,
            dev_instance,
            primitives,
            ops,
            cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
            cpu_model: crate::crypto::cpu_model(),
            loadavg_start,
            loadavg_end: crate::crypto::loadavg(),
        }
    }

    /// The cost table, the primitives under it, and the profile's table when there is one.
    pub fn table(&self) -> String {
        let mut s = String::new();
        s.push_str("| Operation | offered /s | answered /s | errors | server CPU µs/op | user | kernel | crypto floor µs | the floor | overhead µs | cost / floor |\n");
        s.push_str("|---|---|---|---|---|---|---|---|---|---|---|\n");
        for o in &self.ops {
            let (cost, user, kernel) = match &o.cpu {
                Some(c) => (format!("{:.1}", c.us_per_op), format!("{:.1}", c.user_us_per_op), format!("{:.1}", c.kernel_us_per_op)),
                None => ("n/a".into(), "n/a".into(), "n/a".into()),
            };
            let ratio = match &o.cpu {
                Some(c) if o.floor.us > 0.0 => format!("{:.2}×", c.us_per_op / o.floor.us),
                _ => "–".into(),
            };
            s.push_str(&format!(
                "| {} | {:.0} | {:.0} | {} | {cost} | {user} | {kernel} | {:.1} | {} | {} | {ratio} |\n",
                o.op.name(),
                o.offered_rps,
                o.achieved_rps,
                o.errors,
                o.floor.us,
                o.floor.describe(),
                o.overhead_us.map_or("n/a".into(), |x| format!("{x:.1}")),
            ));
        }
        let p = &self.primitives;
        s.push_str(&format!(
            "\nThe floor's primitives, timed in this run (aws-lc-rs, one thread, median): {} {:.1} µs, {} {:.1} µs, {} {:.2} µs.\n",
            p.sign.label, p.sign.us, p.verify.label, p.verify.us, p.hash.label, p.hash.us
        ));
        if self.ops.iter().any(|o| o.profile.is_some() || o.profile_error.is_some()) {
            s.push_str("\nWhere the server's CPU goes (µs per operation: each layer's share of perf samples × the cost above; a sample counts where it landed, so a memcpy in the JSON encoder is memory):\n\n| Operation | samples |");
            for c in Category::ALL {
                s.push_str(&format!(" {} |", c.name()));
            }
            s.push_str("\n|---|---|");
            s.push_str(&"---|".repeat(Category::ALL.len()));
            s.push('\n');
            for o in &self.ops {
                match (&o.profile, o.by_layer(), &o.profile_error) {
                    (Some(p), Some(layers), _) => {
                        s.push_str(&format!("| {} | {} |", o.op.name(), p.samples));
                        for (_, us) in layers {
                            s.push_str(&format!(" {us:.1} |"));
                        }
                        s.push('\n');
                    }
                    (_, _, Some(why)) => s.push_str(&format!("| {} | no profile: {why} |\n", o.op.name())),
                    _ => {}
                }
            }
        }
        s.push_str(&format!(
            "\nServer pid {} at {}{}; {} CPUs ({}); load average {} at the start, {} at the end.\n",
            self.server_pid,
            self.target,
            if self.dev_instance { " (a dev instance this run started)" } else { "" },
            self.cpus,
            self.cpu_model.as_deref().unwrap_or("unknown model"),
            self.loadavg_start.as_deref().unwrap_or("?"),
            self.loadavg_end.as_deref().unwrap_or("?"),
        ));
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::floor::example_primitives as primitives;
    use crate::fixture::result;

    #[test]
    fn the_table_shows_cost_floor_overhead_and_layers() {
        let mut run = result("log-append", 4000.0, 5.0, &[]);
        run.offered_rps = 4000.0;
        run.server_cpu = Some(ServerCpu {
            pid: 9,
            seconds: 8.0,
            ops: 32_000,
            us_per_op: 120.0,
            user_us_per_op: 100.0,
            kernel_us_per_op: 20.0,
            cores: 0.48,
        });
        let floor = primitives().floor(Op::V1Append.recipe(), 0.025);
        let shares = [(Category::Crypto, 0.6), (Category::Kernel, 0.25), (Category::Other, 0.15)].into_iter().collect();
        let op = OpCost::new(Op::V1Append, &run, floor, Some(Ok(Profile { samples: 4_000, shares, hottest: Vec::new() })));
        assert_eq!(op.overhead_us, Some(120.0 - 72.5));
        let layers = op.by_layer().unwrap();
        assert_eq!(layers[0], (Category::Crypto, 72.0));
        assert_eq!(layers[1], (Category::Kernel, 30.0));
        let report = CostReport::new(&"http://127.0.0.1:1/".parse().unwrap(), 9, true, primitives(), vec![op], None);
        let t = report.table();
        assert!(t.contains("| v1-append | 4000 | 4000 | 0 | 120.0 | 100.0 | 20.0 | 72.5 | 1 verify + 1 sign + 2 SHA-256 + 1/40 checkpoint | 47.5 | 1.66× |"), "{t}");
        assert!(t.contains("| v1-append | 4000 | 72.0 | 30.0 |"), "{t}");
    }

    #[test]
    fn a_read_has_no_floor_and_a_failed_profile_says_why() {
        let run = result("log-read", 20_000.0, 1.0, &[]);
        let op = OpCost::new(Op::Read, &run, primitives().floor(Op::Read.recipe(), 0.0), Some(Err(ProfileError::NoSamples)));
        assert_eq!(op.overhead_us, None, "no CPU reading, no overhead");
        let t = CostReport::new(&"http://127.0.0.1:1/".parse().unwrap(), 9, false, primitives(), vec![op], None).table();
        assert!(t.contains("| read | 1000 | 20000 | 0 | n/a | n/a | n/a | 0.0 | none | n/a | – |"), "{t}");
        assert!(t.contains("| read | no profile: perf recorded no samples of the server |"), "{t}");
    }
}
