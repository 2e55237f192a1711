//! `signet bench tls` in small: both in-process backends measured by both methods, with
//! every figure present and the handshake named; bad specs refused as usage errors.

use signet_lab::tlsbench::{self, BenchError, Method, Spec};
use signet_tls::Backend;

fn spec(method: Method) -> Spec {
    Spec {
        method,
        backends: Backend::ALL.to_vec(),
        targets: Vec::new(),
        ca_file: None,
        server_name: "localhost".into(),
        cert: None,
        handshakes: 8,
        sizes: vec![1, 4096, 65536],
        seconds_per_size: 0.03,
        repeats: 1,
        max_messages: 200,
        connections: 1,
        pids: Vec::new(),
    }
}

#[test]
fn both_methods_measure_both_backends() {
    for method in [Method::Echo, Method::Get] {
        let report = tlsbench::run(&spec(method), &mut |_| {}).unwrap();
        assert_eq!(report.servers.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["rustls", "openssl"]);
        for s in &report.servers {
            assert_eq!((s.agreed.version.as_str(), s.handshakes), ("TLSv1.3", 8), "{}", s.name);
            assert!(s.agreed.cipher.starts_with("TLS_"), "{}", s.agreed.cipher);
            assert!(s.handshake_ms_p50 > 0.0 && s.handshake_ms_p99 >= s.handshake_ms_p50);
            // Every resumed handshake is checked to have resumed (else the run fails), on
            // both backends' tickets.
            assert_eq!(s.resumed, 8, "{}", s.name);
            assert!(s.resumed_ms_p50 > 0.0 && s.resumed_ms_p99 >= s.resumed_ms_p50);
            assert_eq!(s.payloads.iter().map(|p| p.bytes).collect::<Vec<_>>(), [1, 4096, 65536]);
            for p in &s.payloads {
                assert!(p.messages >= 20 && p.mb_s > 0.0 && p.latency_ms_p50 > 0.0, "{} {}: {p:?}", s.name, p.bytes);
            }
        }
        let tables = report.tables();
        assert!(tables.contains("| openssl vs rustls MB/s |") && tables.contains("64 KiB"), "{tables}");
        assert!(tables.contains("resumed/s, one at a time"), "{tables}");
        // The in-process servers' own CPU per handshake is read from their threads.
        for s in &report.servers {
            let cpu = s.handshake_cpu_ms_per_1000.unwrap_or_else(|| panic!("{}: no CPU figure", s.name));
            assert!(cpu > 1.0 && cpu < 100_000.0, "{}: {cpu} ms per 1,000 handshakes ({} handshakes)", s.name, s.handshakes);
        }
    }
}

/// Many connections at once (`--connections`), and report 003's verdict on the pair.
#[test]
fn concurrent_payloads_and_a_verdict() {
    let mut s = spec(Method::Get);
    s.connections = 4;
    s.sizes = vec![16384, 1 << 20];
    let report = tlsbench::run(&s, &mut |_| {}).unwrap();
    for server in &report.servers {
        for p in &server.payloads {
            assert!(p.messages >= 4 && p.mb_s > 0.0, "{} {}: {p:?}", server.name, p.bytes);
        }
    }
    assert!(report.tables().contains("over 4 keep-alive connections at once"));
    // Against itself the verdict is parity, whatever the noise.
    let verdict = tlsbench::compare::judge(&report, "rustls", "rustls", &tlsbench::compare::Criteria::default()).unwrap();
    assert!(verdict.go, "{}", verdict.text);
    assert!(verdict.text.contains("| 1048576 B: MB/s"), "{}", verdict.text);
}

#[test]
fn bad_specs_are_usage_errors() {
    let mut s = spec(Method::Echo);
    s.sizes = vec![0];
    assert!(matches!(tlsbench::run(&s, &mut |_| {}), Err(BenchError::Usage(_))));
    let mut s = spec(Method::Echo);
    s.targets = vec![("nginx".into(), "127.0.0.1:9".parse().unwrap())];
    let err = tlsbench::run(&s, &mut |_| {}).unwrap_err();
    assert!(err.to_string().contains("--target needs --ca-file"), "{err}");
    let mut s = spec(Method::Echo);
    s.pids = vec![("nginx".into(), 1)];
    let err = tlsbench::run(&s, &mut |_| {}).unwrap_err();
    assert!(err.to_string().contains("no --target is named \"nginx\""), "{err}");
}

/// `signet bench tls lookup` in small: every source on both backends, at 1 and 4 threads; the
/// per-handshake read (reload) costs far more than an atomic load (file), as report 000 found.
#[test]
fn the_lookup_bench_measures_every_source_and_reload_reads_the_disk() {
    use signet_lab::tlsbench::lookup::{run_lookup, LookupSpec};
    let spec = LookupSpec { threads: vec![1, 4], rounds: 3, round: std::time::Duration::from_millis(15), ..LookupSpec::default() };
    let report = run_lookup(&spec, &mut |_| {}).unwrap();
    let names: Vec<(&str, &str)> = report.rows.iter().map(|r| (r.source.as_str(), r.backend.as_str())).collect();
    assert_eq!(names.len(), 8, "{names:?}");
    for backend in ["rustls", "openssl"] {
        for source in ["file", "watch", "cached", "reload"] {
            assert!(names.contains(&(source, backend)), "{source} on {backend}: {names:?}");
        }
    }
    let ns = |source: &str, backend: &str| report.rows.iter().find(|r| r.source == source && r.backend == backend).unwrap().ns_per_lookup[0].1;
    for row in &report.rows {
        assert!(row.lookups > 0 && row.ns_per_lookup.iter().all(|(_, ns)| ns.is_finite() && *ns > 0.0), "{row:?}");
    }
    for backend in ["rustls", "openssl"] {
        assert!(ns("reload", backend) > 10.0 * ns("file", backend), "{backend}: reload {} ns, file {} ns", ns("reload", backend), ns("file", backend));
    }
    let table = report.table();
    assert!(table.contains("| 4 threads ns/lookup |") && table.contains("~90 µs"), "{table}");

    let bad = LookupSpec { threads: vec![0], ..LookupSpec::default() };
    assert!(matches!(run_lookup(&bad, &mut |_| {}), Err(BenchError::Usage(_))));
}

/// `signet bench tls rotation` in small: with the timer at an hour, `watch` serves a rewritten
/// certificate within a second on both backends, and no handshake fails meanwhile; `file`
/// serves it within its (short) interval.
#[test]
fn rotation_lag_is_measured_and_watch_is_within_a_second() {
    use signet_lab::tlsbench::rotation::{run_rotation, RotationSpec};
    use std::time::Duration;
    let spec = RotationSpec { sources: vec![signet_tls::SourceKind::Watch], rotations: 3, interval: Duration::from_secs(3600), ..RotationSpec::default() };
    let report = run_rotation(&spec, &mut |_| {}).unwrap();
    assert_eq!(report.rows.len(), 2);
    for r in &report.rows {
        assert_eq!((r.rotations, r.failed_handshakes), (3, 0), "{r:?}");
        assert!(r.lag_ms_max < 1000.0 && r.lag_ms_p50 > 0.0, "{r:?}");
    }
    let spec = RotationSpec { sources: vec![signet_tls::SourceKind::File], backends: vec![signet_tls::Backend::Rustls], rotations: 2, interval: Duration::from_millis(200) };
    let report = run_rotation(&spec, &mut |_| {}).unwrap();
    assert!(report.rows[0].lag_ms_max < 1500.0, "{:?}", report.rows[0]);
    assert!(report.table().contains("| file   | rustls"), "{}", report.table());
    let bad = RotationSpec { sources: vec![signet_tls::SourceKind::Reload], ..RotationSpec::default() };
    assert!(matches!(run_rotation(&bad, &mut |_| {}), Err(signet_lab::tlsbench::BenchError::Usage(_))));
}
