//! `signet bench compare`, `gonogo` and `report` on small result files: exit codes 0/1/2 and
//! the lines a CI log or a person reads.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn signet(args: &[&str], dir: &Path) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_signet")).args(args).current_dir(dir).output().expect("run signet");
    Run {
        code: out.status.code().expect("exit code"),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A `bench load --json` result with the documented fields, a per-second series and a histogram.
fn result(workload: &str, offered: f64, achieved: f64, p99: f64, errors: Value) -> Value {
    json!({
        "workload": workload, "target": "http://127.0.0.1:3000", "offered_rps": offered, "achieved_rps": achieved,
        "duration_s": 3.0, "connections": 8, "scheduled": (offered * 3.0) as u64, "ok": (achieved * 3.0) as u64,
        "latency_ms": {"p50": p99 / 2.0, "p90": p99 * 0.8, "p99": p99, "p999": p99 * 1.2, "max": p99 * 1.5, "mean": p99 / 2.0},
        "errors": errors, "dropped": 0,
        "per_second": [
            {"t": 0, "ok": achieved as u64, "p50_ms": p99 / 2.0, "p99_ms": p99},
            {"t": 1, "ok": achieved as u64, "p50_ms": p99 / 2.1, "p99_ms": p99 * 0.9},
            {"t": 2, "ok": achieved as u64, "p50_ms": p99 / 1.9, "p99_ms": p99 * 1.1},
        ],
        "histogram": [
            {"le_ms": 1.0, "count": (achieved * 1.0) as u64},
            {"le_ms": 1.584893, "count": (achieved * 1.5) as u64},
            {"le_ms": 2.511886, "count": (achieved * 0.5) as u64},
        ],
    })
}

/// The trimmed cells of the markdown table row whose first cell is `first`.
fn cells(stdout: &str, first: &str) -> Vec<String> {
    stdout
        .lines()
        .map(|l| l.trim_matches('|').split('|').map(|c| c.trim().to_string()).collect::<Vec<_>>())
        .find(|c| c[0] == first)
        .unwrap_or_else(|| panic!("no row {first:?} in\n{stdout}"))
}

fn write(dir: &Path, name: &str, v: &Value) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, serde_json::to_string_pretty(v).unwrap()).unwrap();
    p
}

fn setup() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(d, "base.json", &result("log-append", 2000.0, 1990.0, 20.0, json!({})));
    write(d, "same.json", &result("log-append", 2000.0, 1985.0, 21.0, json!({})));
    write(d, "slow.json", &result("log-append", 2000.0, 1990.0, 30.0, json!({})));
    write(d, "failing.json", &result("log-append", 2000.0, 1990.0, 20.0, json!({"status_500": 7})));
    write(d, "read.json", &result("log-read", 5000.0, 4990.0, 5.0, json!({})));
    write(d, "verify.json", &json!({"signet": {"median_ns": 590000}, "peer": null}));
    dir
}

#[test]
fn compare_passes_flags_regressions_and_refuses_bad_input() {
    let dir = setup();
    let d = dir.path();

    let ok = signet(&["bench", "compare", "base.json", "same.json", "--max-regression", "10%"], d);
    assert_eq!(ok.code, 0, "{}{}", ok.stdout, ok.stderr);
    assert!(
        ok.stdout.starts_with("compare log-append: base.json (base) -> same.json (new), max regression 10%"),
        "{}",
        ok.stdout
    );
    assert_eq!(cells(&ok.stdout, "p99 ms"), ["p99 ms", "20.00", "21.00", "+5.0%", "ok"]);
    assert_eq!(cells(&ok.stdout, "achieved rps"), ["achieved rps", "1,990.0", "1,985.0", "-0.3%", "ok"]);
    assert!(ok.stdout.ends_with("no regression beyond 10%\n"), "{}", ok.stdout);

    let slow = signet(&["bench", "compare", "base.json", "slow.json", "--max-regression", "10"], d);
    assert_eq!(slow.code, 1, "{}{}", slow.stdout, slow.stderr);
    assert_eq!(cells(&slow.stdout, "p99 ms")[4], "REGRESSION");
    assert!(
        slow.stdout.contains("REGRESSION: p99 latency rose 50.0% (20.00 ms -> 30.00 ms), more than the 10% allowed"),
        "{}",
        slow.stdout
    );
    // The same change under a looser threshold passes.
    assert_eq!(signet(&["bench", "compare", "base.json", "slow.json", "--max-regression", "50%"], d).code, 0);

    let failing = signet(&["bench", "compare", "base.json", "failing.json"], d);
    assert_eq!(failing.code, 1, "{}", failing.stdout);
    assert!(
        failing.stdout.contains("REGRESSION: errors appeared: none in the base, 7 now (status_500: 7)"),
        "{}",
        failing.stdout
    );

    let other = signet(&["bench", "compare", "base.json", "read.json"], d);
    assert_eq!(other.code, 2);
    assert!(other.stderr.contains("different workloads: base \"log-append\", new \"log-read\""), "{}", other.stderr);
    let allowed = signet(&["bench", "compare", "base.json", "read.json", "--allow-different-workloads"], d);
    assert_ne!(allowed.code, 2, "{}", allowed.stderr);
    assert!(allowed.stdout.contains("note: different workloads compared"), "{}", allowed.stdout);

    let missing = signet(&["bench", "compare", "base.json", "nope.json"], d);
    assert_eq!(missing.code, 2);
    assert!(missing.stderr.starts_with("signet bench compare: nope.json: cannot read"), "{}", missing.stderr);
    let verify = signet(&["bench", "compare", "base.json", "verify.json"], d);
    assert_eq!(verify.code, 2);
    assert!(verify.stderr.contains("verify.json: this is a `signet bench verify` result"), "{}", verify.stderr);
    let bad = signet(&["bench", "compare", "base.json", "same.json", "--max-regression", "lots"], d);
    assert_eq!(bad.code, 2);
    assert!(bad.stderr.contains("--max-regression \"lots\": expected a percentage"), "{}", bad.stderr);
}

#[test]
fn gonogo_decides_and_rejects_unknown_keys() {
    let dir = setup();
    let d = dir.path();
    let criteria = "[[rule]]\nworkload = \"log-append\"\nmin_rps = 1900\nmax_p99_ms = 25\nmax_error_pct = 0\n\n\
                    [[rule]]\nname = \"parity\"\nworkload = \"log-append\"\nbaseline = \"base.json\"\nparity_pct = 10\n";
    std::fs::write(d.join("criteria.toml"), criteria).unwrap();

    let go = signet(&["bench", "gonogo", "--criteria", "criteria.toml", "same.json"], d);
    assert_eq!(go.code, 0, "{}{}", go.stdout, go.stderr);
    assert!(go.stdout.contains("| 1 log-append | same.json | p99 <= 25.00 ms"), "{}", go.stdout);
    assert!(
        go.stdout.contains("| 2 parity     | same.json | p99 <= 22.00 ms (baseline 20.00 ms +10%)"),
        "{}",
        go.stdout
    );
    assert!(go.stdout.ends_with("GO: all 5 checks pass\n"), "{}", go.stdout);

    let nogo = signet(&["bench", "gonogo", "--criteria", "criteria.toml", "same.json", "slow.json"], d);
    assert_eq!(nogo.code, 1, "{}{}", nogo.stdout, nogo.stderr);
    assert!(nogo.stdout.contains("30.00 ms | FAIL"), "{}", nogo.stdout);
    assert!(nogo.stdout.ends_with("NO-GO: 2 of 10 checks fail\n"), "{}", nogo.stdout);

    std::fs::write(d.join("typo.toml"), "[[rule]]\nworkload = \"log-append\"\nmax_p99 = 25\n").unwrap();
    let typo = signet(&["bench", "gonogo", "--criteria", "typo.toml", "same.json"], d);
    assert_eq!(typo.code, 2);
    assert!(typo.stderr.contains("typo.toml:3: unknown field `max_p99`"), "{}", typo.stderr);

    let unreadable = signet(&["bench", "gonogo", "--criteria", "criteria.toml", "verify.json"], d);
    assert_eq!(unreadable.code, 2);
    assert!(unreadable.stderr.contains("verify.json: this is a `signet bench verify` result"), "{}", unreadable.stderr);
}

#[test]
fn report_prints_the_table_and_writes_a_self_contained_page() {
    let dir = setup();
    let d = dir.path();
    let run = signet(&["bench", "report", "base.json", "read.json", "failing.json", "--html", "out.html"], d);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert!(
        lines[0].starts_with(
            "| result       | workload   | offered/s | achieved/s | p50 ms | p90 ms | p99 ms | p99.9 ms |"
        ),
        "{}",
        run.stdout
    );
    assert!(
        lines[4].starts_with(
            "| failing.json | log-append |     2,000 |    1,990.0 |  10.00 |  16.00 |  20.00 |    24.00 | 7 (0.12%) |"
        ),
        "{}",
        run.stdout
    );
    assert_eq!(lines[5], "wrote out.html");
    let page = std::fs::read_to_string(d.join("out.html")).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>"));
    // 2 charts across results + 3 per result (latency, throughput, histogram).
    assert_eq!(page.matches("<svg").count(), 2 + 3 * 3);
    assert!(page.contains("<h2>log-read @ 5,000/s</h2>") && page.contains("log-append @ 2,000/s (base.json)"));
    assert!(!page.contains("<script"));

    let missing = signet(&["bench", "report", "base.json", "gone.json"], d);
    assert_eq!(missing.code, 2);
    assert!(missing.stderr.contains("gone.json: cannot read"), "{}", missing.stderr);
}
