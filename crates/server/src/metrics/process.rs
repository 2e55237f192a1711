//! The process's own gauges in Prometheus' standard names (`process_*`), read from `/proc` at
//! each scrape, and `signet_build_info`. A scraper's dashboards and alerts for "restarted",
//! "leaking descriptors" or "growing" then work as they do for any other exporter.

use std::fmt::Write as _;

/// What `/proc/self` says of this process; `None` where it can't be read (not Linux).
#[derive(Debug, PartialEq)]
pub struct Sample {
    pub cpu_seconds: f64,
    pub resident_bytes: u64,
    pub virtual_bytes: u64,
    pub threads: u64,
    pub start_time_seconds: f64,
    pub open_fds: u64,
    pub max_fds: Option<u64>,
}

/// The fields of `/proc/PID/stat` after the command name, which may itself hold spaces and
/// parentheses: everything after the last `)`. `fields[0]` is field 3 (state).
fn stat_fields(stat: &str) -> Option<Vec<&str>> {
    let rest = &stat[stat.rfind(')')? + 1..];
    Some(rest.split_whitespace().collect())
}

/// Parses the three files; `ticks` is the clock's ticks per second, `page` the page size.
pub fn parse(stat: &str, statm: &str, proc_stat: &str, ticks: f64, page: u64) -> Option<(f64, u64, u64, u64, f64)> {
    let f = stat_fields(stat)?;
    // Field n (1-based, man 5 proc) is f[n - 3].
    let field = |n: usize| f.get(n - 3).and_then(|v| v.parse::<u64>().ok());
    let (utime, stime, threads, start_ticks) = (field(14)?, field(15)?, field(20)?, field(22)?);
    let mut m = statm.split_whitespace().map(|v| v.parse::<u64>().ok());
    let (size, resident) = (m.next()??, m.next()??);
    let boot = proc_stat.lines().find_map(|l| l.strip_prefix("btime ")).and_then(|v| v.trim().parse::<u64>().ok())?;
    let cpu = (utime + stime) as f64 / ticks;
    let start = boot as f64 + start_ticks as f64 / ticks;
    Some((cpu, resident * page, size * page, threads, start))
}

/// This process's sample, or `None` where `/proc` is not there.
pub fn sample() -> Option<Sample> {
    let read = |p: &str| std::fs::read_to_string(p).ok();
    // SAFETY: sysconf only reads a system constant.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if ticks <= 0 || page <= 0 {
        return None;
    }
    let (cpu_seconds, resident_bytes, virtual_bytes, threads, start_time_seconds) =
        parse(&read("/proc/self/stat")?, &read("/proc/self/statm")?, &read("/proc/stat")?, ticks as f64, page as u64)?;
    let open_fds = std::fs::read_dir("/proc/self/fd").ok()?.count() as u64;
    let max_fds = read("/proc/self/limits").and_then(|l| max_open_files(&l));
    Some(Sample { cpu_seconds, resident_bytes, virtual_bytes, threads, start_time_seconds, open_fds, max_fds })
}

/// The soft limit of `Max open files` in `/proc/PID/limits` ("unlimited": none).
fn max_open_files(limits: &str) -> Option<u64> {
    limits.lines().find(|l| l.starts_with("Max open files")).and_then(|l| l["Max open files".len()..].split_whitespace().next()?.parse().ok())
}

/// Appends the `process_*` gauges (when `/proc` answers) and `signet_build_info`.
pub fn render(out: &mut String) {
    out.push_str("# HELP signet_build_info This signet's version (always 1).\n# TYPE signet_build_info gauge\n");
    let _ = writeln!(out, "signet_build_info{{version=\"{}\"}} 1", env!("CARGO_PKG_VERSION"));
    let Some(s) = sample() else { return };
    let mut gauge = |name: &str, kind: &str, help: &str, value: String| {
        let _ = write!(out, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}\n");
    };
    gauge("process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.", format!("{:.2}", s.cpu_seconds));
    gauge("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.", s.resident_bytes.to_string());
    gauge("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.", s.virtual_bytes.to_string());
    gauge("process_threads", "gauge", "Number of OS threads in the process.", s.threads.to_string());
    gauge("process_start_time_seconds", "gauge", "Start time of the process since unix epoch in seconds.", format!("{:.2}", s.start_time_seconds));
    gauge("process_open_fds", "gauge", "Number of open file descriptors.", s.open_fds.to_string());
    if let Some(max) = s.max_fds {
        gauge("process_max_fds", "gauge", "Maximum number of open file descriptors.", max.to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_files_whose_command_name_has_spaces_and_parentheses() {
        // Fields 3..: state, ppid, …; utime (14) = 250, stime (15) = 50, threads (20) = 7,
        // starttime (22) = 1000 ticks after boot.
        let stat = "4242 (sig net) (x)) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 7 0 1000 123456 789";
        let statm = "5000 1200 300 10 0 900 0";
        let proc_stat = "cpu  1 2 3\nbtime 1764500000\nprocesses 10\n";
        let (cpu, rss, vsz, threads, start) = parse(stat, statm, proc_stat, 100.0, 4096).unwrap();
        assert_eq!((cpu, rss, vsz, threads, start), (3.0, 1200 * 4096, 5000 * 4096, 7, 1_764_500_010.0));
        assert_eq!(parse("garbage", statm, proc_stat, 100.0, 4096), None);
        assert_eq!(parse(stat, statm, "no btime here", 100.0, 4096), None);
    }

    #[test]
    fn reads_the_open_files_limit() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units\nMax open files            1024                 524288               files\n";
        assert_eq!(max_open_files(limits), Some(1024));
        assert_eq!(max_open_files("Max open files            unlimited            unlimited            files\n"), None);
    }

    #[test]
    fn this_process_is_sampled_and_rendered() {
        let s = sample().expect("/proc/self on Linux");
        assert!(s.resident_bytes > 0 && s.threads >= 1 && s.open_fds >= 3, "{s:?}");
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
        assert!(s.start_time_seconds <= now + 1.0 && s.start_time_seconds > now - 86_400.0 * 365.0, "{s:?}");
        let mut out = String::new();
        render(&mut out);
        for name in ["signet_build_info{version=", "process_cpu_seconds_total ", "process_resident_memory_bytes ", "process_open_fds ", "process_start_time_seconds "] {
            assert!(out.contains(name), "{name} missing:\n{out}");
        }
    }
}
