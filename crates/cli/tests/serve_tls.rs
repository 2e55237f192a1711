//! `signet serve --tls-cert … --tls-key …` end to end, for both backends: the ready line
//! names an https URL, /healthz answers over HTTPS to a client that trusts the CA file, over
//! HTTP/1.1 and over HTTP/2 (ALPN h2); bad TLS settings exit 2 with one clear line; client
//! certificates (mTLS) become principals; `--dev` without a certificate serves one that its
//! own CA issues.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::Server;
use serde_json::Value;
use signet_tls::testing::TestPki;
use signet_tls::{Fetcher, Trust};

fn signet(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_signet")).args(args).output().expect("run signet")
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn healthz_over_https_with_either_backend_by_http1_and_http2() {
    let dir = tempfile::tempdir().unwrap();
    let pki = TestPki::new();
    let server_pem = pki.server_pem();
    let (cert, key) = (write(dir.path(), "cert.pem", &server_pem.chain), write(dir.path(), "key.pem", &server_pem.key));
    let ca = write(dir.path(), "ca.pem", &pki.ca_pem);
    let fetcher = Fetcher::new(signet_tls::client_config(&Trust::PemFile(ca.clone().into())).unwrap());

    for backend in ["rustls", "openssl"] {
        let data = dir.path().join(format!("data-{backend}"));
        let server = Server::start(&data, &["--tls-cert", &cert, "--tls-key", &key, "--tls-backend", backend]);
        assert!(server.url.starts_with("https://127.0.0.1:"), "{backend}: {}", server.url);

        let health = fetcher.get_json(&format!("{}/healthz", server.url)).expect("GET /healthz over HTTPS");
        assert!(health.is_object(), "{backend}: {health}");

        // HTTP/2 by ALPN, through the lab's client (rustls, trusting --ca-file).
        let json = dir.path().join(format!("{backend}.json"));
        let out = signet(&[
            "bench", "load", "--target", &format!("{}/healthz", server.url), "--workload", "custom", "--http", "2",
            "--ca-file", &ca, "--connections", "1", "--rate", "20", "--duration", "1", "--json", json.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{backend}: {}", String::from_utf8_lossy(&out.stderr));
        let r: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        assert_eq!((r["ok"].as_u64(), &r["errors"]), (Some(20), &serde_json::json!({})), "{backend}");
        assert_eq!((r["tls"]["alpn"].as_str(), r["tls"]["version"].as_str()), (Some("h2"), Some("TLSv1.3")), "{backend}");

        // Plain HTTP is not served on the HTTPS port.
        assert!(fetcher.get_json(&format!("{}/healthz", server.url.replacen("https", "http", 1))).is_err(), "{backend}");

        // The handshakes are counted by outcome and timed, and the served certificate's expiry is exported.
        let (status, metrics) = curl(&format!("{}/metrics", server.url), &ca, None);
        assert_eq!(status, 200, "{backend}");
        let value = |series: &str| {
            metrics.lines().find_map(|l| l.strip_prefix(series)).and_then(|v| v.trim().parse::<f64>().ok()).unwrap_or_else(|| panic!("{backend}: no {series}"))
        };
        assert!(value("signet_tls_handshakes_total{outcome=\"tls1.3\"} ") >= 3.0, "{backend}");
        assert!(value("signet_tls_handshakes_total{outcome=\"failed\"} ") >= 1.0, "{backend}: the plain-HTTP request");
        assert_eq!(value("signet_tls_handshakes_total{outcome=\"tls1.2\"} "), 0.0, "{backend}");
        assert!(value("signet_tls_handshake_duration_seconds_count ") >= 3.0, "{backend}");
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as f64;
        assert!(value("signet_certificate_expiry_timestamp_seconds{certificate=\"tls\"} ") > now, "{backend}");
    }
}

#[test]
fn bad_tls_settings_exit_2_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let pki = TestPki::new();
    let (good, other) = (pki.server_pem(), pki.issue_server());
    let cert = write(dir.path(), "cert.pem", &good.chain);
    let wrong_key = write(dir.path(), "wrong.pem", &other.key);
    let data = dir.path().join("data");
    let data = data.to_str().unwrap();
    let serve = |extra: &[&str]| {
        let mut args = vec!["serve", "--dev", "--data-dir", data, "--listen", "127.0.0.1:0"];
        args.extend_from_slice(extra);
        let out = signet(&args);
        let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
        (out.status.code(), stderr)
    };

    let (code, err) = serve(&["--tls-cert", &cert, "--tls-key", &wrong_key]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.starts_with("signet: TLS: key ") && err.contains("does not match certificate"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");

    let (code, err) = serve(&["--tls-cert", &cert, "--tls-key", "/nonexistent/key.pem"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("cannot read key /nonexistent/key.pem"), "{err}");

    let (code, err) = serve(&["--tls-cert", &cert]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("go together"), "{err}");

    let (code, err) = serve(&["--tls-cert", &cert, "--tls-key", &wrong_key, "--tls-backend", "gnutls"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("expected rustls or openssl"), "{err}");

    let (code, err) = serve(&["--tls-cert", &cert, "--tls-key", &wrong_key, "--plain-http"]);
    assert_eq!(code, Some(2), "clap refuses the contradiction: {err}");
    // The issued source has no files; its lifetime is its own.
    let (code, err) = serve(&["--tls-cert", &cert, "--tls-key", &wrong_key, "--tls-source", "issued"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("tls.source = \"issued\"") && err.contains("takes no tls.cert"), "{err}");
    let lifetime = write(dir.path(), "lifetime.toml", "[tls]\nissued_lifetime_secs = 1\n");
    let (code, err) = serve(&["--config", &lifetime]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("tls.issued_lifetime_secs must be 2..=604800"), "{err}");
    let plain = write(dir.path(), "plain.toml", "[tls]\nplain_http = true\nissued_lifetime_secs = 60\n");
    let (code, err) = serve(&["--config", &plain]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("tls.plain_http") && err.contains("tls.issued_lifetime_secs is not used"), "{err}");

    // mTLS settings: each mistake named.
    let key = write(dir.path(), "key.pem", &good.key);
    let (code, err) = serve(&["--tls-cert", &cert, "--tls-key", &key, "--tls-client-auth", "required"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("needs tls.client_ca"), "{err}");
    let (code, err) = serve(&["--tls-cert", &cert, "--tls-key", &key, "--tls-client-ca", "/nonexistent/ca.pem"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("cannot read client CA bundle /nonexistent/ca.pem"), "{err}");
    let (code, err) = serve(&["--tls-cert", &cert, "--tls-key", &key, "--tls-client-ca", &cert, "--tls-client-auth", "sometimes"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("expected optional or required"), "{err}");
    // Certificate sources: each mistake names the key.
    let (code, err) = serve(&["--tls-cert", &cert, "--tls-key", &key, "--tls-source", "uncached"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("tls.source") && err.contains("expected file, watch, reload, cached or issued"), "{err}");
    // DESIGN.md's spelling of the flag is the same flag.
    let (code, err) = serve(&["--tls-cert", &cert, "--tls-key", &key, "--tls-cert-source", "uncached"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("tls.source"), "{err}");
    let (code, err) = serve(&["--tls-cert", &cert, "--tls-key", &key, "--tls-cache-ttl", "5"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("tls.cache_ttl_secs") && err.contains("cached"), "the TTL without the cached source: {err}");
    for ttl in ["0", "86400"] {
        let (code, err) = serve(&["--tls-cert", &cert, "--tls-key", &key, "--tls-source", "cached", "--tls-cache-ttl", ttl]);
        assert_eq!(code, Some(2), "{err}");
        assert!(err.contains("tls.cache_ttl_secs") && err.contains("1..=3600"), "{ttl}: {err}");
    }
    let (code, err) = serve(&["--tls-cert", &cert, "--tls-key", &wrong_key, "--tls-source", "reload"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("does not match certificate"), "reload starts only with a good pair: {err}");

    let config = write(dir.path(), "mtls.toml", "[guard.mtls]\nroles = { \"spiffe://x/ci\" = \"publisher\" }\n");
    let (code, err) = serve(&["--tls-cert", &cert, "--tls-key", &key, "--config", &config]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("guard.mtls.roles") && err.contains("publisher") && err.contains("not defined"), "{err}");
}

/// curl over HTTPS, trusting `ca`, presenting `client` (chain, key) when given: the status
/// (0 when the handshake failed) and the body.
fn curl(url: &str, ca: &str, client: Option<(&str, &str)>) -> (u16, String) {
    let mut cmd = Command::new("curl");
    cmd.args(["-sS", "--max-time", "10", "-w", "\n%{http_code}", "--cacert", ca, url]);
    if let Some((cert, key)) = client {
        cmd.args(["--cert", cert, "--key", key]);
    }
    let out = cmd.output().expect("run curl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (code.trim().parse().unwrap_or(0), body.to_string())
}

fn pair(files: &(String, String)) -> Option<(&str, &str)> {
    Some((files.0.as_str(), files.1.as_str()))
}

/// mTLS end to end on both backends: `[guard.mtls] roles` makes a verified client
/// certificate's SAN a principal with its role's permissions, as a token would be; an
/// unmapped one is anonymous; each is named in the audit log. `required` refuses the
/// handshake of a client without a certificate.
#[test]
fn client_certificates_are_principals_on_both_backends() {
    let dir = tempfile::tempdir().unwrap();
    let (pki, clients) = (TestPki::new(), TestPki::new());
    let server_pem = pki.server_pem();
    let (cert, key) = (write(dir.path(), "cert.pem", &server_pem.chain), write(dir.path(), "key.pem", &server_pem.key));
    let ca = write(dir.path(), "ca.pem", &pki.ca_pem);
    let client_ca = write(dir.path(), "clients.pem", &clients.ca_pem);
    let issue = |name: &str, san: &str| {
        let pem = clients.issue_client(san);
        (write(dir.path(), &format!("{name}.crt"), &pem.chain), write(dir.path(), &format!("{name}.key"), &pem.key))
    };
    let (ci, ops, stranger) = (issue("ci", "spiffe://example.org/ci"), issue("ops", "ops@example.org"), issue("x", "spiffe://example.org/x"));
    let config = write(
        dir.path(),
        "signet.toml",
        "[guard.auth]\nrequire = \"all\"\n[guard.audit]\nenabled = true\nanchor_interval_secs = 0\n\
         [guard.mtls]\nroles = { \"spiffe://example.org/ci\" = \"signer\", \"ops@example.org\" = \"admin\" }\n",
    );
    for backend in ["rustls", "openssl"] {
        let data = dir.path().join(format!("data-{backend}"));
        let mut server = Server::start(
            &data,
            &["--tls-cert", &cert, "--tls-key", &key, "--tls-backend", backend, "--tls-client-ca", &client_ca, "--config", &config],
        );
        let url = |path: &str| format!("{}{path}", server.url);

        assert_eq!(curl(&url("/api/v2/checkpoint"), &ca, None).0, 401, "{backend}: anonymous, tokens or certificates required");
        assert_eq!(curl(&url("/api/v2/checkpoint"), &ca, pair(&ci)).0, 200, "{backend}: signer reads");
        let (status, body) = curl(&url("/api/admin/tokens"), &ca, pair(&ci));
        assert_eq!(status, 403, "{backend}: {body}");
        assert!(body.contains("client certificate spiffe://example.org/ci") && body.contains("role signer"), "{backend}: {body}");
        let (status, body) = curl(&url("/api/admin/tokens"), &ca, pair(&ops));
        assert_eq!(status, 200, "{backend}: the admin certificate: {body}");
        assert_eq!(curl(&url("/api/v2/checkpoint"), &ca, pair(&stranger)).0, 401, "{backend}: a verified but unmapped SAN is anonymous");

        // The audit log names each: the principal's key and role, and the certificate's SAN.
        assert!(Command::new("kill").args(["-TERM", &server.child.id().to_string()]).status().unwrap().success());
        let _ = server.child.wait();
        let tail = signet(&["audit", "tail", "-n", "10", "--data-dir", data.to_str().unwrap()]);
        let records: Vec<Value> = String::from_utf8_lossy(&tail.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        let by = |path: &str, status: u64, san: &str| {
            records.iter().find(|r| r["path"] == path && r["status"] == status && r["cert"] == san).unwrap_or_else(|| panic!("{backend}: no record of {path} {status} by {san}: {records:?}"))
        };
        let ci_read = by("/api/v2/checkpoint", 200, "spiffe://example.org/ci");
        assert!(ci_read["client"].as_str().unwrap().starts_with("cert:") && ci_read["role"] == "signer", "{backend}: {ci_read}");
        assert_eq!(by("/api/admin/tokens", 200, "ops@example.org")["role"], "admin", "{backend}");
        let unmapped = by("/api/v2/checkpoint", 401, "spiffe://example.org/x");
        assert!(unmapped["client"].as_str().unwrap().starts_with("ip:") && unmapped.get("role").is_none(), "{backend}: {unmapped}");

        // Required: no certificate, no handshake.
        let server = Server::start(
            &data,
            &["--tls-cert", &cert, "--tls-key", &key, "--tls-backend", backend, "--tls-client-ca", &client_ca, "--tls-client-auth", "required", "--config", &config],
        );
        assert_eq!(curl(&format!("{}/healthz", server.url), &ca, None).0, 0, "{backend}: required, and none presented");
        assert_eq!(curl(&format!("{}/healthz", server.url), &ca, pair(&ci)).0, 200, "{backend}");
    }
}

/// Two unrelated CAs, a server pair from each, and each CA's PEM file in `dir`.
fn two_pkis(dir: &std::path::Path) -> (signet_tls::testing::ServerPem, signet_tls::testing::ServerPem, String, String) {
    let (pki_a, pki_b) = (TestPki::new(), TestPki::new());
    let ca_a = write(dir, "ca-a.pem", &pki_a.ca_pem);
    let ca_b = write(dir, "ca-b.pem", &pki_b.ca_pem);
    (pki_a.server_pem(), pki_b.server_pem(), ca_a, ca_b)
}

/// Whether `url` answers over a certificate that `ca` verifies. A new client config for every
/// check: a resumed TLS session would skip the certificate.
fn serves(url: &str, ca: &str) -> bool {
    Fetcher::new(signet_tls::client_config(&Trust::PemFile(ca.into())).unwrap())
        .with_timeout(std::time::Duration::from_secs(5))
        .get_json(url)
        .is_ok()
}

/// `--tls-source watch`: with the timer at an hour, only inotify can explain a new certificate
/// being served within seconds. A Kubernetes `..data` symlink swap and an in-place rewrite are
/// each picked up; a pair whose key does not match is refused, and the previous certificate
/// keeps serving. Both backends; the reloads are counted on /metrics.
#[test]
fn the_watch_source_serves_a_swapped_or_rewritten_certificate_at_once() {
    use std::os::unix::fs::symlink;
    let dir = tempfile::tempdir().unwrap();
    let (a, b, ca_a, ca_b) = two_pkis(dir.path());
    let config = write(dir.path(), "hourly.toml", "[tls]\nreload_interval_secs = 3600\n");

    for backend in ["rustls", "openssl"] {
        // A secret mount as the kubelet makes it: files are symlinks through `..data`.
        let mount = dir.path().join(format!("mount-{backend}"));
        let version = |name: &str, pem: &signet_tls::testing::ServerPem| {
            let v = mount.join(name);
            std::fs::create_dir_all(&v).unwrap();
            std::fs::write(v.join("tls.crt"), &pem.chain).unwrap();
            std::fs::write(v.join("tls.key"), &pem.key).unwrap();
        };
        version("..v1", &a);
        symlink("..v1", mount.join("..data")).unwrap();
        symlink("..data/tls.crt", mount.join("tls.crt")).unwrap();
        symlink("..data/tls.key", mount.join("tls.key")).unwrap();
        let (cert, key) = (mount.join("tls.crt"), mount.join("tls.key"));
        let data = dir.path().join(format!("data-watch-{backend}"));
        let server = Server::start(
            &data,
            &["--config", &config, "--tls-cert", cert.to_str().unwrap(), "--tls-key", key.to_str().unwrap(), "--tls-backend", backend, "--tls-source", "watch"],
        );
        let health = format!("{}/healthz", server.url);
        assert!(serves(&health, &ca_a) && !serves(&health, &ca_b), "{backend}: A is served at the start");
        let served_within = |ca: &str, what: &str| {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
            while !serves(&health, ca) {
                assert!(std::time::Instant::now() < deadline, "{backend}: {what} was not served within 5 s (the timer is at an hour)");
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        };

        // The kubelet's swap: a new directory, a new link, renamed over `..data`.
        version("..v2", &b);
        symlink("..v2", mount.join("..data_tmp")).unwrap();
        std::fs::rename(mount.join("..data_tmp"), mount.join("..data")).unwrap();
        served_within(&ca_b, "the swapped-in certificate B");
        // Let the reads the swap caused finish: the next change must be seen on its own.
        std::thread::sleep(std::time::Duration::from_millis(300));

        // In place: the files ..v2 now points at are rewritten (key first, then certificate).
        std::fs::write(mount.join("..v2/tls.key"), &a.key).unwrap();
        std::fs::write(mount.join("..v2/tls.crt"), &a.chain).unwrap();
        served_within(&ca_a, "the rewritten certificate A");
        std::thread::sleep(std::time::Duration::from_millis(300));

        // A certificate whose key is not there yet: refused, A keeps serving.
        std::fs::write(mount.join("..v2/tls.crt"), &b.chain).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(500));
        assert!(serves(&health, &ca_a), "{backend}: the previous certificate keeps serving");
        assert!(!serves(&health, &ca_b), "{backend}: the mismatched pair is not installed");

        let (status, metrics) = curl(&format!("{}/metrics", server.url), &ca_a, None);
        assert_eq!(status, 200, "{backend}");
        let value = |series: &str| metrics.lines().find_map(|l| l.strip_prefix(series)).and_then(|v| v.trim().parse::<f64>().ok());
        assert_eq!(value("signet_tls_certificate_reloads_total{outcome=\"installed\"} "), Some(2.0), "{backend}: {metrics}");
        assert!(value("signet_tls_certificate_reloads_total{outcome=\"invalid\"} ") >= Some(1.0), "{backend}: {metrics}");
        let lag = value("signet_tls_certificate_reload_lag_seconds ").unwrap_or_else(|| panic!("{backend}: no reload lag"));
        assert!((0.0..5.0).contains(&lag), "{backend}: lag {lag}");
    }
}

/// `--tls-source reload` and `cached` (report 000's modes), on both backends: reload presents a
/// rewritten certificate at the very next handshake; cached presents its copy within the TTL
/// and the new certificate after it; a corrupt file keeps the last good certificate and is
/// counted; /metrics names the backend, its version and the source, and the time to expiry.
#[test]
fn the_reload_and_cached_sources_read_at_handshakes() {
    use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
    let dir = tempfile::tempdir().unwrap();
    let (a, b, ca_a, ca_b) = two_pkis(dir.path());
    // One handshake, and which of the two CAs' certificates it was shown.
    let shown = |url: &str| match (serves(url, &ca_a), serves(url, &ca_b)) {
        (true, false) => "A",
        (false, true) => "B",
        other => panic!("{url}: served {other:?}"),
    };
    let metrics = |url: &str, ca: &str| {
        let (status, text) = curl(&format!("{url}/metrics"), ca, None);
        assert_eq!(status, 200, "{text}");
        text
    };
    let value = |text: &str, series: &str| text.lines().find_map(|l| l.strip_prefix(series)).and_then(|v| v.trim().parse::<f64>().ok());
    let put = |cert: &str, key: &str, pem: &signet_tls::testing::ServerPem| {
        std::fs::write(key, &pem.key).unwrap();
        std::fs::write(cert, &pem.chain).unwrap();
    };
    let ttl = Duration::from_secs(2);

    for backend in ["rustls", "openssl"] {
        let (cert, key) = (write(dir.path(), &format!("{backend}.crt"), &a.chain), write(dir.path(), &format!("{backend}.key"), &a.key));
        let data = dir.path().join(format!("data-reload-{backend}"));
        let server = Server::start(&data, &["--tls-cert", &cert, "--tls-key", &key, "--tls-backend", backend, "--tls-source", "reload"]);
        let health = format!("{}/healthz", server.url);
        assert_eq!(shown(&health), "A", "{backend}");
        // Checked once, at once: no timer and no event is waited for.
        put(&cert, &key, &b);
        assert_eq!(shown(&health), "B", "{backend}: reload, the very next handshake");
        let errors_before = value(&metrics(&server.url, &ca_b), "signet_tls_certificate_validation_errors_total ").unwrap();
        std::fs::write(&cert, &a.chain[..a.chain.len() / 2]).unwrap();
        assert_eq!(shown(&health), "B", "{backend}: a half-written certificate keeps the last good one");
        let text = metrics(&server.url, &ca_b);
        assert!(value(&text, "signet_tls_certificate_validation_errors_total ").unwrap() > errors_before, "{backend}: {text}");
        assert!(value(&text, "signet_tls_certificate_loads_total ").unwrap() >= 5.0, "{backend}: a read per handshake: {text}");
        let info = text.lines().find(|l| l.starts_with("signet_tls_info{")).unwrap_or_else(|| panic!("{backend}: no signet_tls_info: {text}"));
        let version = if backend == "rustls" { "version=\"0." } else { "version=\"OpenSSL 3" };
        assert!(info.starts_with(&format!("signet_tls_info{{backend=\"{backend}\",")) && info.contains(version) && info.ends_with(",source=\"reload\"} 1"), "{info}");
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() as f64;
        let expiry = value(&text, "signet_certificate_expiry_timestamp_seconds{certificate=\"tls\"} ").unwrap();
        let left = value(&text, "signet_tls_certificate_expiry_seconds ").unwrap_or_else(|| panic!("{backend}: no expiry seconds: {text}"));
        assert!(left > 0.0 && (left - (expiry - now)).abs() < 60.0, "{backend}: {left} s left, expiry at {expiry}");
        drop(server);

        put(&cert, &key, &a);
        let data = dir.path().join(format!("data-cached-{backend}"));
        let server = Server::start(
            &data,
            &["--tls-cert", &cert, "--tls-key", &key, "--tls-backend", backend, "--tls-source", "cached", "--tls-cache-ttl", &ttl.as_secs().to_string()],
        );
        let health = format!("{}/healthz", server.url);
        // The copy read at startup has expired: this handshake reads A again, and starts a TTL.
        std::thread::sleep(ttl + Duration::from_millis(100));
        let read = Instant::now();
        assert_eq!(shown(&health), "A", "{backend}");
        put(&cert, &key, &b);
        assert_eq!(shown(&health), "A", "{backend}: cached, within the TTL");
        assert!(read.elapsed() < ttl, "{backend}: the within-TTL check ran late ({:?}); the result says nothing", read.elapsed());
        std::thread::sleep((read + ttl + Duration::from_millis(200)).saturating_duration_since(Instant::now()));
        assert_eq!(shown(&health), "B", "{backend}: cached, after the TTL");
        // Corrupt at the next expiry: B stays.
        std::fs::write(&key, "not a key\n").unwrap();
        std::thread::sleep(ttl + Duration::from_millis(200));
        assert_eq!(shown(&health), "B", "{backend}: a corrupt key keeps the last good pair");
        let text = metrics(&server.url, &ca_b);
        assert!(value(&text, "signet_tls_certificate_cache_lookups_total{result=\"miss\"} ").unwrap() >= 3.0, "{backend}: {text}");
        assert!(value(&text, "signet_tls_certificate_cache_lookups_total{result=\"hit\"} ").unwrap() >= 1.0, "{backend}: {text}");
        assert!(value(&text, "signet_tls_certificate_validation_errors_total ").unwrap() >= 1.0, "{backend}: {text}");
        assert!(text.contains(",source=\"cached\"} 1\n"), "{backend}: {text}");
    }
}

/// One TLS connection kept open: requests /healthz on it, and tells the certificate it got.
struct KeptConnection {
    tls: rustls::StreamOwned<rustls::ClientConnection, std::net::TcpStream>,
}

impl KeptConnection {
    fn open(url: &str, ca: &str) -> KeptConnection {
        let addr = url.trim_start_matches("https://");
        let config = signet_tls::client_config(&Trust::PemFile(ca.into())).unwrap();
        let name = rustls::pki_types::ServerName::try_from(addr.split(':').next().unwrap().to_string()).unwrap();
        let conn = rustls::ClientConnection::new(config, name).unwrap();
        let tcp = std::net::TcpStream::connect(addr).unwrap();
        tcp.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
        let mut kept = KeptConnection { tls: rustls::StreamOwned::new(conn, tcp) };
        assert_eq!(kept.healthz(), 200, "{url}");
        kept
    }

    /// The status of `GET /healthz` on this connection (keep-alive).
    fn healthz(&mut self) -> u16 {
        use std::io::{Read, Write};
        self.tls.write_all(b"GET /healthz HTTP/1.1\r\nHost: signet\r\n\r\n").unwrap();
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            self.tls.read_exact(&mut byte).unwrap();
            head.push(byte[0]);
        }
        let head = String::from_utf8(head).unwrap();
        let length: usize = head
            .lines()
            .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse().unwrap()))
            .expect("a content-length");
        let mut body = vec![0u8; length];
        self.tls.read_exact(&mut body).unwrap();
        head[9..12].parse().unwrap()
    }

    /// The DER of the certificate the server presented on this connection.
    fn certificate(&self) -> Vec<u8> {
        self.tls.conn.peer_certificates().unwrap()[0].to_vec()
    }
}

/// `serve --dev` without a certificate: HTTPS, with a certificate the instance's own TLS CA
/// issues in memory (`tls_ca.pem` in `trust export`) for `localhost` and the listen address,
/// renewed at half its lifetime. With a 4 s lifetime, a connection opened after 3 s gets a new
/// certificate, and a connection opened before the renewal keeps working on the old one.
/// Both backends; the CA is made once per data dir, and kept across restarts.
#[test]
fn the_dev_instance_serves_https_with_an_issued_certificate_renewed_in_memory() {
    use std::os::unix::fs::PermissionsExt;
    use x509_cert::der::Decode;
    let dir = tempfile::tempdir().unwrap();
    let config = write(dir.path(), "short.toml", "[tls]\nissued_lifetime_secs = 4\n");
    for backend in ["rustls", "openssl"] {
        let data = dir.path().join(format!("data-{backend}"));
        let server = Server::start(&data, &["--tls-backend", backend, "--config", &config]);
        assert!(server.url.starts_with("https://127.0.0.1:"), "{backend}: {}", server.url);
        let trust = dir.path().join(format!("trust-{backend}"));
        let out = signet(&["trust", "export", "--data-dir", data.to_str().unwrap(), "--out", trust.to_str().unwrap()]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let ca = trust.join("tls_ca.pem").to_str().unwrap().to_string();
        assert_eq!(std::fs::metadata(data.join("keys/tls-ca.pem")).unwrap().permissions().mode() & 0o777, 0o600);
        let signing_config: Value = serde_json::from_slice(&std::fs::read(trust.join("signing_config.json")).unwrap()).unwrap();
        assert!(signing_config.to_string().contains(&format!("\"{}\"", server.url)), "the trust documents name the https URL");

        // Not trusted without the CA; trusted with it, by name and by address.
        assert!(!serves(&format!("{}/healthz", server.url), &write(dir.path(), "other-ca.pem", &TestPki::new().ca_pem)), "{backend}");
        assert!(serves(&format!("{}/healthz", server.url), &ca), "{backend}");
        let port = server.url.rsplit(':').next().unwrap();
        let (status, _) = curl(&format!("https://localhost:{port}/healthz"), &ca, None);
        assert_eq!(status, 200, "{backend}: by the name localhost");

        let mut before = KeptConnection::open(&server.url, &ca);
        let first = before.certificate();
        let leaf = x509_cert::Certificate::from_der(&first).unwrap();
        let validity = &leaf.tbs_certificate.validity;
        let lifetime = validity.not_after.to_unix_duration() - validity.not_before.to_unix_duration();
        assert_eq!(lifetime.as_secs(), 64, "{backend}: 4 s, from a minute back for clock skew");
        std::thread::sleep(std::time::Duration::from_secs(3));
        let after = KeptConnection::open(&server.url, &ca);
        assert_ne!(after.certificate(), first, "{backend}: renewed at half its lifetime");
        assert_eq!(before.healthz(), 200, "{backend}: the connection opened before the renewal is not dropped");
        assert_eq!(before.certificate(), first);

        let (status, metrics) = curl(&format!("{}/metrics", server.url), &ca, None);
        assert_eq!(status, 200);
        let loads = metrics.lines().find_map(|l| l.strip_prefix("signet_tls_certificate_loads_total ")).unwrap();
        assert!(loads.trim().parse::<f64>().unwrap() >= 2.0, "{backend}: issued at start and renewed: {loads}");
        assert!(metrics.contains("source=\"issued\""), "{backend}: signet_tls_info names the source");
        drop(server);

        // A restart keeps the CA, so clients configured once keep working.
        let server = Server::start(&data, &["--tls-backend", backend]);
        assert!(serves(&format!("{}/healthz", server.url), &ca), "{backend}: after a restart");
    }
}
