//! deploy/: the systemd unit passes `systemd-analyze verify` and its offline security review,
//! and the command lines and config of the unit, the Dockerfile and the compose file are ones
//! signet accepts. (No container engine runs here: the images themselves are not built.)

use std::process::Command;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
const BIN: &str = env!("CARGO_BIN_EXE_signet");

fn read(path: &str) -> String {
    std::fs::read_to_string(format!("{ROOT}/{path}")).unwrap()
}

fn available(tool: &str) -> bool {
    Command::new(tool).arg("--version").output().is_ok_and(|o| o.status.success())
}

#[test]
fn the_systemd_unit_verifies_and_is_hardened() {
    let unit = read("deploy/systemd/signet.service");
    let exec = unit.lines().find_map(|l| l.strip_prefix("ExecStart=")).unwrap();
    assert!(exec.starts_with("/usr/local/bin/signet serve --config /etc/signet/signet.toml --data-dir /var/lib/signet"), "{exec}");
    for must in ["DynamicUser=yes", "ProtectSystem=strict", "NoNewPrivileges=yes", "StateDirectory=signet", "UMask=0077", "CapabilityBoundingSet=\n"] {
        assert!(unit.contains(must), "{must}");
    }
    if !available("systemd-analyze") {
        assert!(std::env::var("CI").is_err(), "systemd-analyze is missing");
        return eprintln!("systemd-analyze not installed; skipped");
    }
    // Verified as installed, with the binary under test where the unit expects signet.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("signet.service");
    std::fs::write(&path, unit.replace("/usr/local/bin/signet", BIN)).unwrap();
    let out = Command::new("systemd-analyze").arg("verify").arg(&path).output().unwrap();
    assert!(out.status.success() && out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = Command::new("systemd-analyze").args(["security", "--offline=true"]).arg(&path).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let level: f64 = text
        .lines()
        .find_map(|l| l.split("Overall exposure level for signet.service: ").nth(1))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no exposure level in {text}"));
    assert!(level <= 2.0, "systemd rates the unit's exposure {level} (of 10); it was 1.4\n{text}");
}

#[test]
fn the_shipped_command_lines_and_compose_config_are_accepted() {
    let serve_help = String::from_utf8(Command::new(BIN).args(["serve", "--help"]).output().unwrap().stdout).unwrap();
    let dockerfile = read("deploy/Dockerfile");
    let compose = read("deploy/compose/compose.yaml");
    let flags = ["--config", "--data-dir", "--listen"];
    for flag in flags {
        assert!(serve_help.contains(flag), "{flag}");
    }
    assert!(dockerfile.contains(r#"CMD ["serve", "--config", "/etc/signet/signet.toml", "--data-dir", "/var/lib/signet"]"#));
    assert!(dockerfile.contains("USER 10001"), "the image runs as a non-root user");
    // The Dockerfile copies the checkout: the build context leaves out builds, tools and any
    // dev data dir with its private keys.
    let ignore = read(".dockerignore");
    for left_out in ["target/", ".venv/", ".tools/", "signet-data/", "**/keys/", "**/*.sqlite"] {
        assert!(ignore.lines().any(|l| l.trim() == left_out), ".dockerignore lacks {left_out}");
    }
    assert!(compose.contains("\"127.0.0.1:8080:8080\""), "published on loopback only");
    // The compose file's config, with the environment compose gives it, is valid.
    let out = Command::new(BIN)
        .args(["config", "check", "--config", &format!("{ROOT}/deploy/compose/signet.toml")])
        .env("SIGNET_PUBLIC_URL", "https://signet.example.com")
        .env("SIGNET_LISTEN", "0.0.0.0:8080")
        .env("SIGNET_STORAGE", "postgres://signet:secret@postgres:5432/signet?sslmode=verify-full&sslrootcert=/etc/ssl/certs/ca-certificates.crt")
        .env("SIGNET_GUARD_REDIS_URL", "redis://:secret@redis:6379/0")
        .output()
        .unwrap();
    assert!(out.status.success() && out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
    // Every SIGNET_ variable compose gives an instance is one signet reads.
    let env = String::from_utf8(Command::new(BIN).args(["config", "env"]).output().unwrap().stdout).unwrap();
    for (var, how) in [("SIGNET_PUBLIC_URL", ":"), ("SIGNET_LISTEN", ":"), ("SIGNET_STORAGE", "=\""), ("SIGNET_GUARD_REDIS_URL", "=\"")] {
        assert!(compose.contains(&format!("{var}{how}")), "{var}");
        assert!(env.lines().any(|l| l.split_whitespace().next() == Some(var)), "{var}");
    }
}

/// Issue 44: every key has its SIGNET_* variable (`config env` lists them, derived from the
/// config types), a value that does not fit is named with its key, and a misspelled name is
/// pointed out rather than silently ignored.
#[test]
fn every_option_can_be_set_from_the_environment() {
    let env = String::from_utf8(Command::new(BIN).args(["config", "env"]).output().unwrap().stdout).unwrap();
    let listed: Vec<(&str, &str)> = env.lines().filter_map(|l| l.split_once(' ').map(|(v, k)| (v, k.trim()))).collect();
    assert!(listed.len() > 100, "{env}");
    // Each variable is its key's path, upper-cased, and every key of the example has one.
    for (var, key) in &listed {
        assert_eq!(*var, format!("SIGNET_{}", key.replace('.', "_").to_uppercase()));
    }
    for key in ["log.batch_max_entries", "guard.audit.mode", "oidc.issuers", "witness.logs", "tls.client_auth", "monitor.watch"] {
        assert!(listed.iter().any(|(_, k)| *k == key), "{key} has no variable");
    }
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("signet.toml");
    std::fs::write(&config, "public_url = \"https://signet.example.com\"\n").unwrap();
    let check = |vars: &[(&str, &str)]| {
        let mut cmd = Command::new(BIN);
        cmd.args(["config", "check", "--config"]).arg(&config);
        for (k, v) in vars {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stderr).to_string())
    };
    // Keys that had no variable before: an issuer list, and a guard setting.
    let issuers = r#"[{ url = "https://token.actions.githubusercontent.com", type = "github-workflow" }]"#;
    let (code, err) = check(&[("SIGNET_OIDC_ISSUERS", issuers), ("SIGNET_GUARD_RATE_LIMIT_ENABLED", "true")]);
    assert_eq!(code, Some(0), "{err}");
    assert!(!err.contains("no OIDC issuer"), "the issuer from the environment counts: {err}");
    // A value that does not fit names the variable and the key; the limits still apply to it.
    let (code, err) = check(&[("SIGNET_LOG_BATCH_MAX_ENTRIES", "lots")]);
    assert_eq!(code, Some(2));
    assert!(err.contains("SIGNET_LOG_BATCH_MAX_ENTRIES") && err.contains("log.batch_max_entries"), "{err}");
    let (code, err) = check(&[("SIGNET_LOG_BATCH_MAX_ENTRIES", "0")]);
    assert!(code == Some(2) && err.contains("log.batch_max_entries must be 1..=65536"), "{err}");
    // A misspelling does nothing, and says so.
    let (code, err) = check(&[("SIGNET_LOG_BATCH_MAX_ENTRYS", "64"), ("SIGNET_OIDC_ISSUERS", issuers)]);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("SIGNET_LOG_BATCH_MAX_ENTRYS names no option"), "{err}");
}

/// Issue 44: `signet probe`, the image's HEALTHCHECK, finds the port that answers the probes
/// from the config alone, over plain HTTP and over the instance's own issued HTTPS (verified
/// against the data dir's TLS CA), and exits 1 once nothing answers.
#[test]
fn the_probe_finds_the_instance_from_its_config_and_fails_when_it_is_gone() {
    use crate::common::Server;
    let free = || std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let probe = |config: &std::path::Path, data: &std::path::Path, ready: bool| {
        let mut cmd = Command::new(BIN);
        cmd.args(["probe", "--timeout-secs", "3", "--config"]).arg(config).arg("--data-dir").arg(data);
        if ready {
            cmd.arg("--ready");
        }
        let out = cmd.output().unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stdout).to_string(), String::from_utf8_lossy(&out.stderr).to_string())
    };
    for tls in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let (data, config) = (dir.path().join("data"), dir.path().join("signet.toml"));
        let port = free();
        let source = if tls { "[tls]\nsource = \"issued\"\n" } else { "" };
        std::fs::write(&config, format!("{source}[http]\nmetrics_listen = \"127.0.0.1:{port}\"\n")).unwrap();
        let extra: &[&str] = if tls { &["--config", config.to_str().unwrap(), "--tls-source", "issued"] } else { &["--config", config.to_str().unwrap()] };
        let server = Server::start(&data, extra);
        assert_eq!(server.url.starts_with("https://"), tls, "{}", server.url);
        let scheme = if tls { "https" } else { "http" };
        let (code, out, err) = probe(&config, &data, false);
        assert_eq!(code, Some(0), "tls {tls}: {err}");
        assert_eq!(out.trim(), format!("{scheme}://127.0.0.1:{port}/healthz: alive"), "the metrics port");
        let (code, out, err) = probe(&config, &data, true);
        assert!(code == Some(0) && out.contains("/readyz: ready"), "tls {tls}: {out}{err}");
        drop(server);
        let (code, _, err) = probe(&config, &data, false);
        assert_eq!(code, Some(1), "tls {tls}: nothing answers: {err}");
        assert!(err.starts_with("signet probe: ") && err.contains(&format!("127.0.0.1:{port}")), "{err}");
    }
    // As the image runs it: a config file that says nothing, completed by the environment
    // (SIGNET_DEV, SIGNET_LISTEN), and the HEALTHCHECK's probe reading the same.
    let dir = tempfile::tempdir().unwrap();
    let (data, config) = (dir.path().join("data"), dir.path().join("signet.toml"));
    std::fs::write(&config, "# empty\n").unwrap();
    let listen = format!("127.0.0.1:{}", free());
    let mut serve = Command::new(BIN);
    serve.args(["serve", "--config"]).arg(&config).arg("--data-dir").arg(&data).env("SIGNET_DEV", "true").env("SIGNET_LISTEN", &listen);
    let server = Server::spawn(serve, &data);
    assert!(server.url.starts_with("https://"), "--dev from the environment issues its certificate: {}", server.url);
    let out = Command::new(BIN).args(["probe", "--config"]).arg(&config).arg("--data-dir").arg(&data).env("SIGNET_DEV", "true").env("SIGNET_LISTEN", &listen).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let healthcheck = read("deploy/Dockerfile").lines().skip_while(|l| !l.starts_with("HEALTHCHECK")).take(2).collect::<String>();
    assert!(healthcheck.contains(r#"["/usr/local/bin/signet", "probe", "--config", "/etc/signet/signet.toml", "--data-dir", "/var/lib/signet"]"#), "{healthcheck}");
    drop(server);

    // HTTPS verified, not merely spoken: against CAs that did not issue the certificate, it fails.
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let server = Server::start(&data, &["--tls-source", "issued"]);
    let other = tempfile::tempdir().unwrap();
    let _ = Server::start(&other.path().join("data"), &["--tls-source", "issued"]);
    let foreign = signet_ca::serving::certificate_path(&other.path().join("data"));
    let out = Command::new(BIN).args(["probe", "--url", &server.url, "--ca-file"]).arg(&foreign).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stdout));
    let own = signet_ca::serving::certificate_path(&data);
    let out = Command::new(BIN).args(["probe", "--url", &server.url, "--ca-file"]).arg(&own).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
}

/// Issue 44: `signet config example` is a config that starts, both for an instance `init` made
/// (production) and under `--dev`: nothing set in it names a file or token that is not there.
#[test]
fn the_example_config_starts_an_instance() {
    use crate::common::Server;
    let dir = tempfile::tempdir().unwrap();
    let (data, config) = (dir.path().join("data"), dir.path().join("signet.toml"));
    let example = Command::new(BIN).args(["config", "example"]).output().unwrap();
    assert!(example.status.success());
    std::fs::write(&config, &example.stdout).unwrap();
    let public_url = String::from_utf8_lossy(&example.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("public_url = \"")?.split('"').next().map(str::to_string))
        .expect("the example sets public_url");
    let init = Command::new(BIN).args(["init", "--public-url", &public_url, "--data-dir"]).arg(&data).output().unwrap();
    assert!(init.status.success(), "{}", String::from_utf8_lossy(&init.stderr));
    // Its public URL is not this machine: the probe finds the port from the config and the
    // environment, as the image's HEALTHCHECK does.
    let listen = format!("127.0.0.1:{}", std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port());
    let mut serve = Command::new(BIN);
    // The example's one issuer is GitHub's, found by discovery over the Internet, which tests
    // must not reach: the environment empties the list (and shows that a list can be set so).
    serve.args(["serve", "--config"]).arg(&config).arg("--data-dir").arg(&data).env("SIGNET_LISTEN", &listen).env("SIGNET_OIDC_ISSUERS", "[]");
    let server = Server::spawn(serve, &data);
    let out = Command::new(BIN).args(["probe", "--ready", "--config"]).arg(&config).arg("--data-dir").arg(&data).env("SIGNET_LISTEN", &listen).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    drop(server);
    // Under --dev, on a data dir of its own.
    let listen = format!("127.0.0.1:{}", std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port());
    let mut serve = Command::new(BIN);
    serve.args(["serve", "--dev", "--plain-http", "--config"]).arg(&config).arg("--data-dir").arg(dir.path().join("dev"));
    serve.env("SIGNET_LISTEN", &listen).env("SIGNET_OIDC_ISSUERS", "[]");
    let _server = Server::spawn(serve, &dir.path().join("dev"));
    let out = Command::new(BIN).args(["probe", "--ready", "--url", &format!("http://{listen}")]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

/// Issue 44: the Helm chart passes `helm lint --strict`, and every manifest it renders decodes
/// strictly into its Kubernetes API type (interop/k8s's kubecheck, which links helm's own linter
/// and template engine: an unknown field fails). What the manifests say is then checked against
/// signet itself: the config is one `config check` accepts with the environment the Deployment
/// gives it, the probes ask the metrics port the config names, the PrometheusRule is
/// deploy/prometheus/rules.yml and passes promtool.
#[test]
fn the_helm_chart_lints_renders_and_parses_strictly() {
    let tools = format!("{ROOT}/.tools/bin");
    let kubecheck = format!("{tools}/kubecheck");
    if !std::path::Path::new(&kubecheck).exists() {
        assert!(std::env::var("CI").is_err(), "kubecheck is missing; scripts/test installs it");
        return eprintln!("kubecheck not installed; skipped");
    }
    let chart = format!("{ROOT}/deploy/helm/signet");
    let lint = Command::new(&kubecheck).args(["lint", &chart]).output().unwrap();
    assert!(lint.status.success(), "{}{}", String::from_utf8_lossy(&lint.stdout), String::from_utf8_lossy(&lint.stderr));
    // The linter fails a chart as helm's does: a version that is not SemVer.
    let broken = tempfile::tempdir().unwrap();
    let broken_chart = broken.path().join("signet");
    std::fs::create_dir(&broken_chart).unwrap();
    let manifest = std::fs::read_to_string(format!("{chart}/Chart.yaml")).unwrap();
    let version = manifest.lines().find(|l| l.starts_with("version:")).unwrap();
    std::fs::write(broken_chart.join("Chart.yaml"), manifest.replace(version, "version: not-semver")).unwrap();
    std::fs::copy(format!("{chart}/values.yaml"), broken_chart.join("values.yaml")).unwrap();
    let lint = Command::new(&kubecheck).args(["lint"]).arg(&broken_chart).output().unwrap();
    assert!(!lint.status.success() && String::from_utf8_lossy(&lint.stderr).contains("not-semver"), "{}", String::from_utf8_lossy(&lint.stderr));
    let render = |sets: &[&str]| -> Vec<serde_json::Value> {
        let mut cmd = Command::new(&kubecheck);
        cmd.args(["render", &chart, "--namespace", "sigstore"]);
        for s in sets {
            cmd.args(["--set", s]);
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{sets:?}: {}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let objects = render(&[]);
    let kinds: Vec<&str> = objects.iter().map(|o| o["kind"].as_str().unwrap()).collect();
    for kind in ["Deployment", "Service", "ConfigMap", "PodDisruptionBudget", "ServiceMonitor", "PrometheusRule", "NetworkPolicy", "Job", "Role"] {
        assert!(kinds.contains(&kind), "{kind} missing from {kinds:?}");
    }
    let one = |kind: &str| objects.iter().find(|o| o["kind"] == kind).unwrap();

    // The config, with the environment the Deployment gives it, is one signet accepts.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("signet.toml");
    let toml = one("ConfigMap")["data"]["signet.toml"].as_str().unwrap();
    std::fs::write(&config, toml).unwrap();
    let deployment = one("Deployment");
    let pod = &deployment["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    let env: Vec<&str> = container["env"].as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap()).collect();
    assert_eq!(env, ["SIGNET_STORAGE", "SIGNET_GUARD_REDIS_URL", "SIGNET_LOG_FORMAT"]);
    let out = Command::new(BIN)
        .args(["config", "check", "--config"])
        .arg(&config)
        .env("SIGNET_STORAGE", "postgres://signet@db.sigstore.svc:5432/signet?sslmode=verify-full")
        .env("SIGNET_GUARD_REDIS_URL", "rediss://:secret@redis.sigstore.svc:6380")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && !stderr.contains("warning"), "{toml}\n{stderr}");

    // The probes ask the metrics port, which is the one the config serves them on.
    let metrics_port = container["ports"].as_array().unwrap().iter().find(|p| p["name"] == "metrics").unwrap()["containerPort"].as_u64().unwrap();
    assert!(toml.contains(&format!("metrics_listen = \"0.0.0.0:{metrics_port}\"")), "{toml}");
    for (probe, path) in [("startupProbe", "/healthz"), ("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")] {
        assert_eq!(container[probe]["httpGet"]["path"], path, "{probe}");
        assert_eq!(container[probe]["httpGet"]["port"], "metrics", "{probe}");
    }
    // Every container runs as the image's user, with nothing to escalate to.
    let job = one("Job");
    for c in [&pod["initContainers"][0], container, &job["spec"]["template"]["spec"]["initContainers"][0], &job["spec"]["template"]["spec"]["containers"][0]] {
        let sc = &c["securityContext"];
        assert!(sc["runAsNonRoot"] == true && sc["readOnlyRootFilesystem"] == true && sc["allowPrivilegeEscalation"] == false, "{}", c["name"]);
        assert_eq!(sc["capabilities"]["drop"], serde_json::json!(["ALL"]), "{}", c["name"]);
    }
    // The metrics Service is what the ServiceMonitor selects, and no Service exposes the admin port.
    let services: Vec<&serde_json::Value> = objects.iter().filter(|o| o["kind"] == "Service").collect();
    assert!(services.iter().all(|s| s["spec"]["ports"].as_array().unwrap().iter().all(|p| p["targetPort"] != "admin")));
    let selected = &one("ServiceMonitor")["spec"]["selector"]["matchLabels"];
    assert!(services.iter().any(|s| s["metadata"]["labels"]["app.kubernetes.io/component"] == selected["app.kubernetes.io/component"]));

    // The PrometheusRule is the rules file, whole, and passes promtool as such.
    let rules = std::fs::read_to_string(format!("{ROOT}/deploy/prometheus/rules.yml")).unwrap();
    let groups = &one("PrometheusRule")["spec"];
    let alerts = groups["groups"][0]["rules"].as_array().unwrap().len();
    assert_eq!(alerts, rules.matches("- alert: ").count());
    if let Some(promtool) = Some(format!("{tools}/promtool")).filter(|p| std::path::Path::new(p).exists()) {
        let file = dir.path().join("rules.json");
        std::fs::write(&file, groups.to_string()).unwrap();
        let out = Command::new(promtool).args(["check", "rules"]).arg(&file).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    }

    // Pinned by digest when one is given; and the optional parts off still render strictly.
    let digest = "sha256:".to_string() + &"ab".repeat(32);
    let pinned = render(&[&format!("image.digest={digest}"), "networkPolicy.enabled=false", "serviceMonitor.enabled=false", "prometheusRules.enabled=false", "init.enabled=false", "redis.enabled=false", "replicas=5"]);
    let deployment = pinned.iter().find(|o| o["kind"] == "Deployment").unwrap();
    assert_eq!(deployment["spec"]["template"]["spec"]["containers"][0]["image"], format!("registry.example.com/signet@{digest}"));
    assert_eq!(deployment["spec"]["replicas"], 5);
    assert!(!pinned.iter().any(|o| ["NetworkPolicy", "ServiceMonitor", "PrometheusRule", "Job"].contains(&o["kind"].as_str().unwrap())));

    // kubecheck refuses what the API server would: a misspelled field.
    let mut check = Command::new(&kubecheck).stdin(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).stdout(std::process::Stdio::null()).spawn().unwrap();
    std::io::Write::write_all(&mut check.stdin.take().unwrap(), b"apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {prots: []}\n").unwrap();
    let out = check.wait_with_output().unwrap();
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("unknown field \"prots\""), "{}", String::from_utf8_lossy(&out.stderr));
}

/// Issue 44: the runtime image is debian:bookworm-slim with libssl3 and ca-certificates
/// (deploy/Dockerfile). The binary needs nothing more: every library it loads belongs to one of
/// those packages (or libc6 and libgcc-s1, which the slim image has), and it serves in a root file
/// system holding only those packages' files and itself (chroot, as root).
#[test]
fn the_binary_runs_on_a_root_file_system_of_the_runtime_image_packages() {
    const PACKAGES: [&str; 4] = ["libc6", "libgcc-s1", "libssl3", "ca-certificates"];
    let dockerfile = read("deploy/Dockerfile");
    assert!(dockerfile.contains("FROM debian:bookworm-slim") && dockerfile.contains("libssl3 ca-certificates"), "the runtime image changed");
    let listed = Command::new("dpkg").arg("-L").args(PACKAGES).output().ok().filter(|o| o.status.success());
    let Some(listed) = listed else {
        assert!(std::env::var("CI").is_err(), "dpkg cannot list the runtime packages");
        return eprintln!("no dpkg here; skipped");
    };
    let files: std::collections::BTreeSet<std::path::PathBuf> = String::from_utf8(listed.stdout)
        .unwrap()
        .lines()
        .map(std::path::PathBuf::from)
        // Files and links to files; directories (and links to them) are made as needed.
        .filter(|p| p.metadata().is_ok_and(|m| !m.is_dir()))
        .collect();
    // Every library the loader resolves is one of those packages' files.
    let ldd = String::from_utf8(Command::new("ldd").arg(BIN).output().unwrap().stdout).unwrap();
    let loaded: Vec<&str> = ldd.lines().filter_map(|l| l.split("=> ").nth(1).or(Some(l.trim())).and_then(|r| r.split_whitespace().next())).filter(|p| p.starts_with('/')).collect();
    assert!(loaded.len() >= 4, "{ldd}");
    for lib in &loaded {
        let real = std::fs::canonicalize(lib).unwrap();
        assert!(files.contains(std::path::Path::new(lib)) || files.iter().any(|f| std::fs::canonicalize(f).is_ok_and(|r| r == real)), "{lib} is in none of {PACKAGES:?}");
    }
    if !is_root() {
        assert!(std::env::var("CI").is_err(), "the chroot needs root");
        return eprintln!("not root: the chroot is skipped");
    }
    // A root of only those files, the binary, and a place for data.
    let root = tempfile::tempdir().unwrap();
    for f in &files {
        let to = root.path().join(f.strip_prefix("/").unwrap());
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        match std::fs::read_link(f) {
            Ok(target) => std::os::unix::fs::symlink(target, &to).unwrap(),
            Err(_) => drop(std::fs::copy(f, &to).unwrap()),
        }
    }
    std::fs::create_dir_all(root.path().join("usr/local/bin")).unwrap();
    std::fs::copy(BIN, root.path().join("usr/local/bin/signet")).unwrap();
    std::fs::create_dir_all(root.path().join("data")).unwrap();
    std::fs::create_dir_all(root.path().join("tmp")).unwrap();
    let mut serve = Command::new("chroot");
    serve.arg(root.path()).args(["/usr/local/bin/signet", "serve", "--dev", "--plain-http", "--data-dir", "/data", "--listen", "127.0.0.1:0"]);
    let server = crate::common::Server::spawn(serve, &root.path().join("data"));
    let out = Command::new(BIN).args(["probe", "--ready", "--url", &server.url]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

fn is_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// Issue 44: the README's production quick-start ("Running it for real"), run as written, line
/// by line, by `sh` with `signet` on the PATH: only its directories are moved into a temporary
/// one, and the port comes from SIGNET_LISTEN. The instance it starts answers ready.
#[test]
fn the_readme_production_quick_start_runs_as_written() {
    let readme = read("README.md");
    let section = readme.split("\n## Running it for real\n").nth(1).expect("the README's production section");
    let block = section.split("```sh\n").nth(1).and_then(|b| b.split("```").next()).expect("its first sh block");
    // Continued lines joined; comments left out.
    let commands: Vec<String> = block
        .replace("\\\n", " ")
        .lines()
        .map(|l| l.split(" #").next().unwrap().trim().to_string())
        .filter(|l| !l.is_empty())
        .collect();
    assert!(commands.len() >= 2 && commands[0].starts_with("signet init") && commands.last().unwrap().starts_with("signet serve"), "{commands:?}");
    let dir = tempfile::tempdir().unwrap();
    let bin_dir = dir.path().join("bin");
    std::fs::create_dir_all(&bin_dir).unwrap();
    std::os::unix::fs::symlink(BIN, bin_dir.join("signet")).unwrap();
    let moved = |c: &str| {
        let mut c = c.to_string();
        for abs in ["/var/lib/signet", "/media/offline", "/etc/signet"] {
            c = c.replace(abs, &format!("{}{abs}", dir.path().display()));
        }
        c
    };
    for d in ["media/offline", "etc/signet"] {
        std::fs::create_dir_all(dir.path().join(d)).unwrap();
    }
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default());
    let listen = format!("127.0.0.1:{}", std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port());
    let (last, first) = commands.split_last().unwrap();
    for command in first {
        let out = Command::new("sh").args(["-ec", &moved(command)]).env("PATH", &path).output().unwrap();
        assert!(out.status.success(), "{command}\n{}", String::from_utf8_lossy(&out.stderr));
    }
    let mut serve = Command::new("sh");
    serve.args(["-ec", &format!("exec {}", moved(last))]).env("PATH", &path).env("SIGNET_LISTEN", &listen);
    let _server = crate::common::Server::spawn(serve, &dir.path().join("var/lib/signet"));
    let out = Command::new(BIN).args(["probe", "--ready", "--url", &format!("http://{listen}")]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}
