//! The server's own CPU over a run, per operation: what an operation costs the server, never
//! the generator that shares the machine with it (`--server-pid`).
//!
//! Read from `/proc/PID/stat`. For a whole process the kernel scales utime and stime so that
//! their sum is the scheduler's exact run time of all its threads, ended ones included
//! (`thread_group_cputime_adjusted`), so a tokio blocking thread that exits mid-run still
//! counts. The split between user and kernel time is sampled at the tick. Both are in USER_HZ
//! ticks (10 ms): a run should use a few seconds of server CPU for the figure to be good to a
//! percent.

use serde::{Deserialize, Serialize};

/// Ticks per second in `/proc/PID/stat` (USER_HZ: fixed at 100 in the kernel's ABI).
const USER_HZ: f64 = 100.0;

/// A process's CPU time so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuTime {
    pub user_ticks: u64,
    pub system_ticks: u64,
}

impl CpuTime {
    /// The CPU time `pid` has used so far, all its threads together.
    pub fn of(pid: u32) -> std::io::Result<CpuTime> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
        parse_stat(&stat).ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::InvalidData, format!("/proc/{pid}/stat has no utime and stime fields"))
        })
    }
}

/// utime and stime (fields 14 and 15) of a `/proc/PID/stat` line. The command name (field 2)
/// is in parentheses and may itself hold spaces and parentheses, so fields are counted from
/// the last `)`.
fn parse_stat(stat: &str) -> Option<CpuTime> {
    let rest = stat.rsplit_once(')')?.1;
    let mut fields = rest.split_whitespace().skip(11);
    let user_ticks = fields.next()?.parse().ok()?;
    let system_ticks = fields.next()?.parse().ok()?;
    Some(CpuTime { user_ticks, system_ticks })
}

/// The server's CPU over a run's measured window, per answered operation.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ServerCpu {
    pub pid: u32,
    /// The measured window, in seconds.
    pub seconds: f64,
    /// Operations answered with a 2xx status in the window (transactions, for `sign`, `verify`
    /// and `mixed`).
    pub ops: u64,
    /// Server CPU per operation, user and kernel together, in µs.
    pub us_per_op: f64,
    pub user_us_per_op: f64,
    pub kernel_us_per_op: f64,
    /// Cores the server kept busy on average over the window.
    pub cores: f64,
}

impl ServerCpu {
    /// None when no operation was answered, or the counters went backwards (another process).
    pub fn between(pid: u32, before: CpuTime, after: CpuTime, ops: u64, seconds: f64) -> Option<ServerCpu> {
        let user = after.user_ticks.checked_sub(before.user_ticks)? as f64 / USER_HZ * 1e6;
        let kernel = after.system_ticks.checked_sub(before.system_ticks)? as f64 / USER_HZ * 1e6;
        if !(ops > 0 && seconds > 0.0) {
            return None;
        }
        let per = |us: f64| (us / ops as f64 * 100.0).round() / 100.0;
        Some(ServerCpu {
            pid,
            seconds,
            ops,
            us_per_op: per(user + kernel),
            user_us_per_op: per(user),
            kernel_us_per_op: per(kernel),
            cores: ((user + kernel) / 1e6 / seconds * 1000.0).round() / 1000.0,
        })
    }

    /// The line under the run's table.
    pub fn summary(&self) -> String {
        format!(
            "server pid {}: {:.1} µs of CPU per operation ({:.1} user, {:.1} kernel) over {} operations in {:.1} s, {:.2} cores busy\n",
            self.pid, self.us_per_op, self.user_us_per_op, self.kernel_us_per_op, self.ops, self.seconds, self.cores
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_from_the_last_parenthesis() {
        let line = "4242 (a) b (c) S 1 4242 4242 0 -1 4194560 100 0 0 0 1234 567 0 0 20 0 9 0 100 0 0";
        assert_eq!(parse_stat(line), Some(CpuTime { user_ticks: 1234, system_ticks: 567 }));
        assert_eq!(parse_stat("4242 (short) S 1 2 3"), None);
        assert_eq!(parse_stat("no parenthesis at all"), None);
    }

    #[test]
    fn cost_per_operation_from_two_readings() {
        let before = CpuTime { user_ticks: 1_000, system_ticks: 200 };
        let after = CpuTime { user_ticks: 1_300, system_ticks: 250 };
        // 3 s of user time and 0.5 s of kernel time over 10,000 operations in 5 s.
        let c = ServerCpu::between(7, before, after, 10_000, 5.0).unwrap();
        assert_eq!((c.us_per_op, c.user_us_per_op, c.kernel_us_per_op, c.cores), (350.0, 300.0, 50.0, 0.7));
        assert_eq!(ServerCpu::between(7, before, after, 0, 5.0), None, "nothing answered");
        assert_eq!(ServerCpu::between(7, after, before, 10, 5.0), None, "counters went backwards");
    }

    #[test]
    fn reads_its_own_process_and_sees_it_work() {
        let me = std::process::id();
        let before = CpuTime::of(me).unwrap();
        // Until the kernel has counted 50 ms more for this process, however slow the machine.
        let give_up = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let mut x = 1u64;
        loop {
            for _ in 0..1_000_000 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
            }
            let now = CpuTime::of(me).unwrap();
            if now.user_ticks + now.system_ticks >= before.user_ticks + before.system_ticks + 5 || std::time::Instant::now() > give_up {
                break;
            }
        }
        let after = CpuTime::of(me).unwrap();
        assert!(after.user_ticks + after.system_ticks >= before.user_ticks + before.system_ticks + 5, "{before:?} {after:?}");
        assert!(CpuTime::of(u32::MAX).is_err());
    }
}
