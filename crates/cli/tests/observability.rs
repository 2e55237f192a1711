//! `/metrics` speaks OpenTelemetry's HTTP names, counts each service's work, and exports every
//! metric that the shipped dashboard (deploy/grafana/signet.json) and alert rules
//! (deploy/prometheus/rules.yml) reference; where promtool is installed, the rules pass it.

use crate::common;

use std::collections::BTreeSet;
use std::process::Command;

use common::*;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

/// The metric families in a Prometheus text exposition.
fn exported(text: &str) -> BTreeSet<String> {
    text.lines().filter_map(|l| l.strip_prefix("# TYPE ")).filter_map(|l| l.split_whitespace().next()).map(str::to_string).collect()
}

/// The metric names a PromQL expression reads: identifiers followed by `{`, or standing
/// alone, that are not functions, keywords, label names or durations.
fn metric_names(expr: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let bytes = expr.as_bytes();
    let (mut i, mut in_braces, mut in_string) = (0, false, false);
    while i < bytes.len() {
        let c = bytes[i] as char;
        if in_string {
            in_string = c != '"';
            i += 1;
            continue;
        }
        match c {
            '"' => in_string = true,
            '{' => in_braces = true,
            '}' => in_braces = false,
            '[' => {
                // A range: skip to its end.
                while i < bytes.len() && bytes[i] != b']' {
                    i += 1;
                }
            }
            c if c.is_ascii_alphabetic() || c == '_' => {
                let start = i;
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_' || bytes[i] == b':') {
                    i += 1;
                }
                let word = &expr[start..i];
                let rest = expr[i..].trim_start();
                // A grouping's label list, `by (a, b)`: labels, not metrics.
                if ["by", "without", "on", "ignoring", "group_left", "group_right"].contains(&word) && rest.starts_with('(') {
                    while i < bytes.len() && bytes[i] != b')' {
                        i += 1;
                    }
                    continue;
                }
                let keyword = ["and", "or", "unless", "bool", "offset"].contains(&word);
                if !in_braces && !keyword && !rest.starts_with('(') && word.starts_with(|c: char| c.is_ascii_lowercase()) && word.contains('_') {
                    names.insert(word.to_string());
                }
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    names
}

/// A histogram's series are read as `_bucket`, `_sum` and `_count` of its family.
fn family(name: &str) -> &str {
    ["_bucket", "_sum", "_count"].iter().find_map(|s| name.strip_suffix(s)).unwrap_or(name)
}

fn dashboard_exprs() -> Vec<String> {
    let text = std::fs::read_to_string(format!("{ROOT}/deploy/grafana/signet.json")).unwrap();
    let dash: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut exprs = Vec::new();
    for panel in dash["panels"].as_array().unwrap() {
        for t in panel["targets"].as_array().into_iter().flatten() {
            exprs.push(t["expr"].as_str().unwrap().replace("$__rate_interval", "5m").replace("$instance", ".*"));
        }
    }
    for v in dash["templating"]["list"].as_array().unwrap() {
        if let Some(q) = v["query"].as_str().and_then(|q| q.strip_prefix("label_values(")) {
            exprs.push(q.split(',').next().unwrap().to_string());
        }
    }
    exprs
}

fn rule_exprs() -> Vec<String> {
    let text = std::fs::read_to_string(format!("{ROOT}/deploy/prometheus/rules.yml")).unwrap();
    text.lines().filter_map(|l| l.trim_start().strip_prefix("expr: ")).map(str::to_string).collect()
}

#[test]
fn promql_names_are_read_from_expressions() {
    let names = metric_names(r#"sum by (instance, http_route, le) (rate(a_b_bucket{x="y_z",le!~"1"}[5m])) / on (log_name) c_d > 0.5 and e_f"#);
    assert_eq!(names.into_iter().collect::<Vec<_>>(), ["a_b_bucket", "c_d", "e_f"]);
}

#[test]
fn every_metric_the_dashboard_and_the_alerts_read_is_exported() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("signet.toml");
    // The audit log, a witness (one that never answers) and the monitor on, so that their
    // metrics are there too.
    let witness_key = dir.path().join("witness.pem");
    assert!(Command::new("openssl").args(["genpkey", "-algorithm", "ed25519", "-out"]).arg(&witness_key).status().unwrap().success());
    let vkey = Command::new(env!("CARGO_BIN_EXE_signet")).args(["witness", "vkey", "--name", "w.example", "--key"]).arg(&witness_key).output().unwrap();
    assert!(vkey.status.success(), "{}", String::from_utf8_lossy(&vkey.stderr));
    let vkey = String::from_utf8(vkey.stdout).unwrap();
    let watch = dir.path().join("watch.toml");
    std::fs::write(&watch, "emails = [\"you@example.com\"]\n").unwrap();
    std::fs::write(
        &config,
        format!(
            "[guard.audit]\nenabled = true\nanchor_interval_secs = 1\n[log.witnesses]\nquorum = 1\nmembers = [{{ url = \"http://127.0.0.1:9\", vkey = \"{}\" }}]\n[monitor]\nwatch = \"{}\"\ninterval_secs = 1\n",
            vkey.trim(),
            watch.display()
        ),
    )
    .unwrap();
    let server = Server::start(dir.path(), &["--config", config.to_str().unwrap()]);
    let agent = agent();
    // Work for each service: an append to each log, a certificate (and its SCT), a timestamp.
    let signer = Signer::new();
    assert_eq!(post_json(&agent, &format!("{}/api/v1/log/entries", server.url), &signer.v1_entry(b"metrics v1")).unwrap().status, 201);
    assert_eq!(post_json(&agent, &format!("{}/api/v2/log/entries", server.url), &signer.v2_entry(b"metrics v2")).unwrap().status, 201);
    let token = Command::new(env!("CARGO_BIN_EXE_signet"))
        .args(["dev-token", "--data-dir", dir.path().to_str().unwrap(), "--subject", "metrics@example.com"])
        .output()
        .unwrap();
    let token = String::from_utf8(token.stdout).unwrap().trim().to_string();
    let cert = post_raw(&agent, &format!("{}/api/v2/signingCert", server.url), "application/json", cert_request(&token, "metrics@example.com")).unwrap();
    assert_eq!(cert.status, 200, "{}", cert.text());
    let query = dir.path().join("q.tsq");
    let made = Command::new("openssl")
        .args(["ts", "-query", "-data", config.to_str().unwrap(), "-sha256", "-cert", "-out", query.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(made.success());
    let stamped = post_raw(&agent, &format!("{}/api/v1/timestamp", server.url), "application/timestamp-query", std::fs::read(&query).unwrap()).unwrap();
    assert_eq!(stamped.status, 200);
    assert_eq!(get(&agent, &format!("{}/no/such/path", server.url)).unwrap().status, 404);
    // The first anchor (1 s) makes the anchor-age gauge appear.
    std::thread::sleep(std::time::Duration::from_millis(2500));

    let text = get(&agent, &format!("{}/metrics", server.url)).unwrap().text();
    let have = exported(&text);
    let mut missing = Vec::new();
    for expr in dashboard_exprs().into_iter().chain(rule_exprs()) {
        for name in metric_names(&expr) {
            // `up` is Prometheus's own, one per scrape target.
            if name != "up" && !have.contains(family(&name)) {
                missing.push(format!("{name} (in {expr})"));
            }
        }
    }
    assert!(missing.is_empty(), "referenced but not exported:\n{}\n\nexported: {have:?}", missing.join("\n"));
    assert!(rule_exprs().len() >= 10 && dashboard_exprs().len() >= 20);

    // What the work above counted, under OpenTelemetry's names.
    let line = |prefix: &str| text.lines().find(|l| l.starts_with(prefix)).unwrap_or_else(|| panic!("no {prefix} in\n{text}")).to_string();
    let value = |prefix: &str| line(prefix).rsplit(' ').next().unwrap().parse::<f64>().unwrap();
    assert_eq!(value("http_server_request_duration_seconds_count{http_request_method=\"POST\",http_route=\"/api/v2/signingCert\",http_response_status_code=\"200\",url_scheme=\"http\"}"), 1.0);
    assert_eq!(value("http_server_request_duration_seconds_count{http_request_method=\"GET\",http_response_status_code=\"404\",url_scheme=\"http\"}"), 1.0);
    assert!(line("http_server_request_duration_seconds_bucket{http_request_method=\"POST\",http_route=\"/api/v1/log/entries\",http_response_status_code=\"201\",url_scheme=\"http\",le=\"0.005\"}").len() > 0);
    assert_eq!(value("signet_ca_certificates_issued_total"), 1.0);
    assert_eq!(value("signet_tsa_timestamps_total"), 1.0);
    assert!(value("signet_log_entries_appended_total{log=\"rekor_v2\"}") >= 1.0);
    assert!(value("signet_log_entries_appended_total{log=\"ct\"}") >= 1.0, "the certificate's precertificate");
    assert_eq!(value("signet_log_sequencer{log=\"rekor_v2\"}"), 1.0);
    assert!(value("signet_log_integration_seconds_count{log=\"rekor_v2\"}") >= 1.0);
    // No commit failed, so no reconcile: the counter and the histogram are there, at zero.
    assert_eq!(value("signet_log_reconciles_total{log=\"rekor_v2\"}"), 0.0);
    assert_eq!(value("signet_log_reconcile_seconds_count{log=\"rekor_v2\"}"), 0.0);
    for role in ["root", "targets", "snapshot", "timestamp"] {
        assert!(value(&format!("signet_tuf_expiry_timestamp_seconds{{role=\"{role}\"}}")) > 1.7e9);
    }
    assert!(value("signet_certificate_expiry_timestamp_seconds{certificate=\"ca_intermediate\"}") > 1.7e9);
    // The scrape itself is the one active request.
    assert_eq!(value("http_server_active_requests{http_request_method=\"GET\"}"), 1.0);
    // /readyz says 200, and so does the gauge the unready alert reads.
    assert_eq!(value("signet_ready "), 1.0);
    // The witness that never answers has failed, so the appends wait unwitnessed.
    assert!(value("signet_log_witness_failures_total{witness=\"w.example\"}") >= 1.0);
    assert!(value("signet_log_unwitnessed_entries ") >= 1.0);
    // The process's own gauges under Prometheus' standard names, and the build.
    assert_eq!(value(&format!("signet_build_info{{version=\"{}\"}}", env!("CARGO_PKG_VERSION"))), 1.0);
    assert!(value("process_resident_memory_bytes ") > 1e6 && value("process_open_fds ") >= 3.0 && value("process_threads ") >= 2.0);
    assert!(value("process_start_time_seconds ") > 1.7e9 && value("process_cpu_seconds_total ") > 0.0);
    // The whole exposition passes promtool's linter.
    if let Some(promtool) = promtool() {
        use std::io::Write as _;
        let piped = std::process::Stdio::piped;
        let mut child = Command::new(promtool).args(["check", "metrics"]).stdin(piped()).stdout(piped()).stderr(piped()).spawn().unwrap();
        child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    }
}

/// promtool, where it is installed (scripts/install-deps puts Debian's in .tools/bin); in CI it must be.
fn promtool() -> Option<String> {
    let promtool = [format!("{ROOT}/.tools/bin/promtool"), "promtool".to_string()]
        .into_iter()
        .find(|p| Command::new(p).arg("--version").output().is_ok_and(|o| o.status.success()));
    if promtool.is_none() {
        assert!(std::env::var("CI").is_err(), "promtool is missing; scripts/install-deps installs it");
        eprintln!("promtool not installed; skipped");
    }
    promtool
}

/// `promtool check rules`, and the alerts' unit tests (each alert firing, and quiet where it
/// should be), where promtool is installed (scripts/install-deps puts Debian's in .tools/bin).
#[test]
fn the_alert_rules_pass_promtool_and_their_unit_tests() {
    let Some(promtool) = promtool() else { return };
    for (verb, file) in [("check", "rules.yml"), ("test", "rules.test.yml")] {
        let out = Command::new(&promtool).args([verb, "rules", &format!("{ROOT}/deploy/prometheus/{file}")]).output().unwrap();
        assert!(out.status.success(), "{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    }
    // The availability, monitor and witness alerts each have a test that shows them firing.
    let tests = std::fs::read_to_string(format!("{ROOT}/deploy/prometheus/rules.test.yml")).unwrap();
    let rules = std::fs::read_to_string(format!("{ROOT}/deploy/prometheus/rules.yml")).unwrap();
    let untested: Vec<&str> = ["SignetInstanceDown", "SignetInstanceUnready", "SignetMonitorIdentitySeen", "SignetMonitorLogMisbehaving", "SignetWitnessFailing", "SignetUnwitnessedBacklog"]
        .into_iter()
        .filter(|a| !rules.contains(&format!("alert: {a}")) || !tests.contains(&format!("alertname: {a}")))
        .collect();
    assert!(untested.is_empty(), "alerts missing, or without a unit test: {untested:?}");
}

/// Issue 44: `/metrics` and the admin API on ports of their own ([http] metrics_listen and
/// admin_listen). Moved, they are gone from the public port, whose 404 says where they are;
/// each port of its own answers the probes too, and nothing else.
#[test]
fn metrics_and_the_admin_api_move_to_ports_of_their_own() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let free = || std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let (metrics, admin) = (free(), free());
    let config = dir.path().join("signet.toml");
    std::fs::write(&config, format!("[http]\nmetrics_listen = \"127.0.0.1:{metrics}\"\nadmin_listen = \"127.0.0.1:{admin}\"\n")).unwrap();
    let server = Server::start(&data, &["--config", config.to_str().unwrap()]);
    let agent = agent();
    let (metrics_url, admin_url) = (format!("http://127.0.0.1:{metrics}"), format!("http://127.0.0.1:{admin}"));

    // The public port serves the APIs, and says where the moved routes went.
    assert_eq!(get(&agent, &format!("{}/api/v2/trustBundle", server.url)).unwrap().status, 200);
    let gone = get(&agent, &format!("{}/metrics", server.url)).unwrap();
    assert_eq!(gone.status, 404);
    assert!(gone.text().contains("http.metrics_listen"), "{}", gone.text());
    let gone = get(&agent, &format!("{}/api/admin/bans", server.url)).unwrap();
    assert_eq!(gone.status, 404);
    assert!(gone.text().contains("http.admin_listen"), "{}", gone.text());
    assert!(!get(&agent, &format!("{}/api/v2/nothing", server.url)).unwrap().text().contains("_listen"), "an unknown path is just unknown");

    // The metrics port: metrics and the probes, nothing else.
    let m = get(&agent, &format!("{metrics_url}/metrics")).unwrap();
    assert_eq!(m.status, 200);
    assert!(m.text().contains("signet_"), "{}", m.text());
    for probe in ["/healthz", "/readyz"] {
        assert_eq!(get(&agent, &format!("{metrics_url}{probe}")).unwrap().status, 200, "{probe}");
    }
    assert_eq!(get(&agent, &format!("{metrics_url}/api/v2/trustBundle")).unwrap().status, 404);
    let not_here = get(&agent, &format!("{metrics_url}/api/admin/bans")).unwrap();
    assert!(not_here.status == 404 && not_here.text().contains("http.admin_listen"), "{}", not_here.text());

    // The admin port: the admin API, behind its token as ever; the CLI reaches it there.
    assert_eq!(get(&agent, &format!("{admin_url}/api/admin/bans")).unwrap().status, 401);
    let token = crate::shards::admin_token(&["--data-dir".as_ref(), data.as_os_str()]);
    let rotated = (0..40)
        .map(|_| {
            std::thread::sleep(std::time::Duration::from_millis(100));
            Command::new(env!("CARGO_BIN_EXE_signet")).args(["admin", "log", "rotate", "--log", "rekor-v1", "--url", &admin_url, "--token", &token]).output().unwrap()
        })
        .find(|o| !String::from_utf8_lossy(&o.stderr).contains("HTTP 401"))
        .expect("the admin token was never accepted");
    assert!(rotated.status.success(), "{}", String::from_utf8_lossy(&rotated.stderr));
    assert_eq!(get(&agent, &format!("{admin_url}/metrics")).unwrap().status, 404);

    // A port of its own that is the public one is refused before anything starts.
    std::fs::write(&config, "listen = \"127.0.0.1:9\"\n[http]\nmetrics_listen = \"127.0.0.1:9\"\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_signet")).args(["config", "check", "--dev", "--config", config.to_str().unwrap()]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("http.metrics_listen is the public address"), "{}", String::from_utf8_lossy(&out.stderr));
}
