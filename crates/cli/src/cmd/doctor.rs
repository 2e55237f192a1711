//! `signet doctor`: checks a config, its data dir, its storage and its running instance, and
//! prints one line per check: `ok`, `warn` or `FAIL`, with what is wrong and what to do. Exit 0
//! when nothing failed (warnings allowed), 1 when something did, 2 when the config itself is
//! bad. It changes nothing: no key is made, no migration applied.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use der::Decode;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    instance: super::Instance,
    /// The running instance's base URL (default: the public URL it last started with).
    #[arg(long)]
    url: Option<String>,
    /// Check only the files and the storage, not a running instance.
    #[arg(long)]
    offline: bool,
}

/// Certificates and TUF roots this close to expiry are a warning.
const SOON: i64 = 30 * 86_400;
/// The most the local clock may differ from the TSA's.
const CLOCK_SKEW_SECS: i64 = 60;

#[cfg(test)]
mod tests {
    #[test]
    fn loopback_hosts_are_told_apart() {
        for url in ["redis://127.0.0.1:6379", "rediss://:pw@localhost:6380/0", "postgres://u:p@[::1]:5432/db", "postgres://u@127.0.0.2/db?sslmode=disable"] {
            assert!(super::on_loopback(url), "{url}");
        }
        for url in ["redis://redis.internal:6379", "postgres://u:p@10.0.0.5:5432/db", "redis://:pw@[2001:db8::1]:6379", "postgres://u@127.evil.example/db"] {
            assert!(!super::on_loopback(url), "{url}");
        }
    }
}

#[derive(Default)]
struct Report {
    failed: usize,
    warned: usize,
}

impl Report {
    fn ok(&mut self, what: &str) {
        outln!("ok    {what}");
    }
    fn warn(&mut self, what: &str) {
        self.warned += 1;
        outln!("warn  {what}");
    }
    fn fail(&mut self, what: &str) {
        self.failed += 1;
        outln!("FAIL  {what}");
    }
}

fn now() -> i64 {
    jiff::Timestamp::now().as_second()
}

pub fn run(args: Args) -> ExitCode {
    let cfg = match args.instance.config(None) {
        Ok(cfg) => cfg,
        Err(code) => return code,
    };
    let mut report = Report::default();
    // Outside --dev a config must name its public URL; doctor checks the rest either way.
    let valid = cfg.tuf.validate().map_err(|e| e.to_string()).and_then(|()| cfg.guard.validate().map_err(|e| e.to_string()));
    match valid {
        Ok(()) => report.ok(&format!("config {}", args.instance.config.as_ref().map_or("(defaults)".into(), |p| p.display().to_string()))),
        Err(e) => {
            errln!("signet doctor: {e}");
            return ExitCode::from(2);
        }
    }
    let data = cfg.data_dir.clone();
    if !data.is_dir() {
        report.fail(&format!("data dir {} does not exist; create it with `signet init` (or `serve --dev`)", data.display()));
        return finish(report);
    }
    keys(&data, &mut report);
    production(&cfg, &mut report);
    certificates(&cfg, &mut report);
    scheduled_rotations(&data, &mut report);
    storage(&cfg, &mut report);
    restored(&cfg, &mut report);
    tuf(&data, &mut report);
    if !args.offline {
        let url = args.url.or_else(|| std::fs::read_to_string(signet_server::trust::public_url_file(&data)).ok()).map(|u| u.trim().trim_end_matches('/').to_string());
        match url {
            Some(url) => instance(&data, &url, &mut report),
            None => report.fail("no instance URL: give --url, or start the instance once (it records its public URL), or --offline"),
        }
    }
    finish(report)
}

fn finish(report: Report) -> ExitCode {
    if report.failed > 0 {
        errln!("signet doctor: {} problem(s), {} warning(s)", report.failed, report.warned);
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// The public key of a PKCS#8 key of any kind signet keeps (P-256, P-384, Ed25519).
/// The public point of an SPKI, as [`public_key`] gives it.
fn spki_point(spki_der: &[u8]) -> Option<Vec<u8>> {
    use der::Decode;
    x509_cert::spki::SubjectPublicKeyInfoRef::from_der(spki_der).ok().map(|s| s.subject_public_key.raw_bytes().to_vec())
}

fn public_key(pkcs8: &[u8]) -> Option<Vec<u8>> {
    let key = signet_keys::Signer::from_pkcs8(pkcs8, "", &signet_keys::Algorithm::ALL).ok()?;
    spki_point(key.spki_der())
}

/// What a production instance should have and not have: OIDC issuers (without one the CA
/// certifies no one), and its root keys offline. A `--dev` instance has neither, by design.
fn production(cfg: &signet_server::config::Config, report: &mut Report) {
    let data = &cfg.data_dir;
    if cfg.dev || signet_ca::oidc::dev::issuer_file(data).exists() {
        return report.ok("a --dev instance: its own OIDC issuer, and its root keys in the data dir, are expected");
    }
    let issuers = cfg.oidc.issuers.len();
    match (issuers, &cfg.oidc.fulcio_config) {
        (0, None) => report.warn("no OIDC issuer is configured: the CA can certify no one; add [[oidc.issuers]] or [oidc] fulcio_config (docs/ca.md)"),
        (n, None) => report.ok(&format!("{n} OIDC issuer(s) configured")),
        (n, Some(file)) => report.ok(&format!("{n} OIDC issuer(s) configured, and those of {}", file.display())),
    }
    for (key, how) in [
        ("ca-root.pem", "make the CA with `signet init --root-key-out` and keep that file offline"),
        ("tuf-root.pem", "keep it offline and bring it back only to sign a new root (`signet tuf`, operations.md)"),
    ] {
        let path = data.join("keys").join(key);
        if path.exists() {
            report.warn(&format!("{} is online: a root key in the data dir is taken with it by anyone who takes the machine; {how}", path.display()));
        }
    }
    // The database and Redis off this machine in plain text: their passwords and contents
    // cross the network readable.
    if let Ok(signet_log::storage::StorageUrl::Postgres(url)) = cfg.storage_url() {
        let tls = signet_db::pg::Target::parse(&url).is_ok_and(|t| t.tls());
        if !tls && !on_loopback(&url) {
            report.warn("storage: PostgreSQL off this machine in plain text; add sslmode=require (and sslrootcert=… for a private CA) to the URL");
        }
    }
    let redis = &cfg.guard.redis.url;
    if redis.starts_with("redis://") && !on_loopback(redis) {
        report.warn("guard.redis.url: Redis off this machine in plain text; use rediss:// (and guard.redis.ca_file for a private CA)");
    }
    // The ports of their own: metrics answer whoever reaches them, and the admin API is a
    // target worth keeping off the network even behind its tokens.
    for (setting, addr, what) in [("http.metrics_listen", cfg.http.metrics_listen, "/metrics"), ("http.admin_listen", cfg.http.admin_listen, "the admin API")] {
        match addr {
            Some(a) if !a.ip().is_loopback() => report.warn(&format!(
                "{setting} = {a}: {what} is reachable off this machine; keep that address on an internal network or behind access control"
            )),
            Some(a) => report.ok(&format!("{what} on {a}, on loopback")),
            None => report.ok(&format!("{what} is not served ({setting} is not set)")),
        }
    }
}

/// Whether a `scheme://[user[:password]@]host[:port]/…` URL names this machine.
fn on_loopback(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?']).next().unwrap_or("");
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(h, _)| h),
    };
    host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Every key file: private, and a key signet can use.
fn keys(data: &Path, report: &mut Report) {
    let dir = data.join("keys");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return report.fail(&format!("{} cannot be read; create the keys with `signet init`", dir.display()));
    };
    let mut names: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    names.sort();
    let mut good = 0;
    for path in names {
        let mode = std::fs::metadata(&path).map(|m| m.permissions().mode() & 0o777).unwrap_or(0);
        if mode & 0o077 != 0 {
            report.fail(&format!("{} has mode {mode:o}: others can read it; chmod 600 it and rotate the key if it left the machine", path.display()));
            continue;
        }
        // Symmetric keys (the shard seal key) are only checked for their mode.
        if path.extension().is_none_or(|x| x != "pem") {
            continue;
        }
        let block = std::fs::read(&path).ok().and_then(|b| signet_core::pem::decode_first(&b).ok());
        // A key kept elsewhere (a token) leaves its public half here, for the trust documents.
        if block.as_ref().is_some_and(|b| b.label == "PUBLIC KEY") {
            continue;
        }
        let parsed = block.and_then(|b| public_key(&b.der));
        match parsed {
            Some(_) => good += 1,
            None => report.fail(&format!("{} is not a readable PKCS#8 key (P-256, P-384 or Ed25519)", path.display())),
        }
    }
    if good > 0 {
        report.ok(&format!("{good} keys in {} are private (0600) and readable", dir.display()));
    }
}

fn cert_der(path: &Path) -> Option<Vec<u8>> {
    std::fs::read(path).ok().and_then(|b| signet_core::pem::decode_first(&b).ok()).map(|b| b.der)
}

/// Each certificate matches its key (when the key is here) and is not near its end.
fn certificates(cfg: &signet_server::config::Config, report: &mut Report) {
    let data = &cfg.data_dir;
    for (cert, key) in [("root.pem", "ca-root.pem"), ("intermediate.pem", "ca-intermediate.pem"), ("tsa.pem", "tsa.pem")] {
        let cert_path = data.join("ca").join(cert);
        let Some(der) = cert_der(&cert_path) else {
            report.fail(&format!("{} is missing or not a PEM certificate", cert_path.display()));
            continue;
        };
        let Ok(parsed) = x509_cert::Certificate::from_der(&der) else {
            report.fail(&format!("{} does not parse as X.509", cert_path.display()));
            continue;
        };
        let mut key_path = data.join("keys").join(key);
        let mut key_public = std::fs::read(&key_path).ok().and_then(|b| signet_core::pem::decode_first(&b).ok()).and_then(|b| public_key(&b.der));
        // The key as configured: a file elsewhere, or a token's (opened, as `serve` would); a
        // key a rotation recorded wins over the config's, as it does for `serve`.
        let mut rotations = signet_server::rotate::read(data).unwrap_or_default();
        let recorded = match key {
            "tsa.pem" => signet_server::rotate::Authority::Tsa.record(&mut rotations).clone(),
            "ca-intermediate.pem" => signet_server::rotate::Authority::Intermediate.record(&mut rotations).clone(),
            _ => None,
        }
        .and_then(|r| r.key_source(data).ok().flatten());
        let configured = match key {
            "tsa.pem" => &cfg.keys.tsa,
            "ca-intermediate.pem" => &cfg.keys.ca_intermediate,
            _ => &cfg.keys.ca_root,
        };
        if let Some(source) = recorded.as_ref().or(configured.as_ref()) {
            key_path = PathBuf::from(source.to_string());
            match signet_keys::Signer::open(source, &cfg.keys.pkcs11(), &signet_keys::Algorithm::ALL, false) {
                Ok(k) => key_public = spki_point(k.spki_der()),
                Err(e) => {
                    report.fail(&format!("the key {source}: {e}"));
                    continue;
                }
            }
        }
        let cert_public = parsed.tbs_certificate.subject_public_key_info.subject_public_key.raw_bytes().to_vec();
        match key_public {
            Some(k) if k == cert_public => {}
            Some(_) => report.fail(&format!("{} does not match its certificate {}", key_path.display(), cert_path.display())),
            // The root key is kept offline after `signet init`.
            None if key == "ca-root.pem" => {}
            None => report.fail(&format!("{} is missing: {} cannot sign", key_path.display(), cert_path.display())),
        }
        let left = parsed.tbs_certificate.validity.not_after.to_unix_duration().as_secs() as i64 - now();
        if left <= 0 {
            report.fail(&format!("{} has expired", cert_path.display()));
        } else if left < SOON {
            report.warn(&format!("{} expires in {} days", cert_path.display(), left / 86_400));
        } else {
            report.ok(&format!("{} matches its key, valid for {} more days", cert_path.display(), left / 86_400));
        }
    }
}

/// TSA and intermediate rotations scheduled with `trust rotate --at`: when each signs, and
/// whether a running instance has published it yet.
fn scheduled_rotations(data: &Path, report: &mut Report) {
    let mut rotations = match signet_server::rotate::read(data) {
        Ok(r) => r,
        Err(e) => return report.fail(&e.to_string()),
    };
    for authority in signet_server::rotate::Authority::ALL {
        let Some(next) = authority.record(&mut rotations).as_ref().and_then(|r| r.next.clone()) else { continue };
        match &next.published {
            Some(at) => report.ok(&format!("the {}'s rotation to {} signs from {}; published at {at}", authority.title(), next.key, next.from)),
            None => report.warn(&format!(
                "the {}'s rotation to {} signs from {}, and no running instance has published it yet: start one on this data dir before then",
                authority.title(),
                next.key,
                next.from
            )),
        }
    }
}

/// Not an unrestored backup, whose logs take no appends (signet_server::restore). On
/// PostgreSQL the mark means nothing: the logs are not in the data dir.
fn restored(cfg: &signet_server::Config, report: &mut Report) {
    if matches!(cfg.storage_url(), Ok(signet_log::storage::StorageUrl::Postgres(_))) {
        return;
    }
    match signet_server::restore::marker(&cfg.data_dir) {
        Ok(None) => {}
        Ok(Some(marker)) => report.fail(&marker.refusal(&cfg.data_dir)),
        Err(e) => report.fail(&e.to_string()),
    }
}

/// The storage answers and its schema is this build's.
fn storage(cfg: &signet_server::Config, report: &mut Report) {
    let url = match signet_log::storage::StorageUrl::parse(cfg.storage.as_deref(), &cfg.data_dir) {
        Ok(u) => u,
        Err(e) => return report.fail(&format!("storage: {e}")),
    };
    // Right after `signet init` there is no log file yet: the first `serve` makes it.
    if let signet_log::storage::StorageUrl::Sqlite(path) = &url {
        if !path.exists() {
            return report.warn(&format!("storage {}: not made yet; the first `signet serve` (or `signet migrate`) makes it", url.display()));
        }
    }
    // Unreachable: the checks below would only fail again on the same cause.
    match signet_log::storage::schema_version(&url) {
        Ok((have, known)) if have == known => report.ok(&format!("storage {} reachable, schema at version {have} (current)", url.display())),
        Ok((have, known)) if have < known => {
            report.fail(&format!("storage {}: schema at version {have}, this signet's is {known}; run `signet migrate`", url.display()))
        }
        Ok((have, known)) => report.fail(&format!("storage {}: schema at version {have} is newer than this signet's ({known}); run a newer signet", url.display())),
        Err(e) => return report.fail(&format!("storage {}: {e}", url.display())),
    }
    rotations(&url, report);
    if let signet_log::storage::StorageUrl::Postgres(u) = &url {
        seal_key(&cfg.data_dir, u, report);
    }
}

/// No log rotation was cut short (its log would take no appends until it is run again).
fn rotations(url: &signet_log::storage::StorageUrl, report: &mut Report) {
    match signet_log::storage::shard_records(url) {
        Ok(found) => match signet_server::shards::unfinished_rotations(&found).as_slice() {
            [] => report.ok("no log rotation left unfinished"),
            cut => cut.iter().for_each(|c| report.fail(c)),
        },
        Err(e) => report.fail(&format!("reading the logs' shard records: {e}")),
    }
}

/// On PostgreSQL: this data dir holds the seal key the database's instances share, which an
/// online rotation hands new shard keys through (`signet_server::shards::sealed`).
fn seal_key(data: &Path, url: &str, report: &mut Report) {
    use signet_server::shards::sealed;
    let shared = match signet_log::storage::read_shared_meta(url, sealed::SHARED_ID) {
        Ok(v) => v.map(|id| String::from_utf8_lossy(&id).into_owned()),
        Err(e) => return report.fail(&format!("reading the shared seal key's name: {e}")),
    };
    let ours = match sealed::SealKey::load(data) {
        Ok(k) => k.map(|k| k.id().to_string()),
        Err(e) => return report.fail(&e.to_string()),
    };
    let file = sealed::path(data);
    match (ours, shared) {
        (Some(ours), Some(shared)) if ours == shared => report.ok(&format!("{} is the seal key this database's instances share ({ours})", file.display())),
        (Some(ours), Some(shared)) => report.fail(&format!(
            "{} ({ours}) is not the seal key this database's instances share ({shared}): copy theirs here, or this instance can neither rotate the Rekor v1 log online nor follow another's rotation",
            file.display()
        )),
        (None, Some(shared)) => report.fail(&format!(
            "{} is missing; this database's instances share seal key {shared}: copy it from one of them, or this instance can neither rotate the Rekor v1 log online nor follow another's rotation",
            file.display()
        )),
        (_, None) => report.ok("no instance has served this database yet; the first to start records its seal key"),
    }
}

/// The TUF repository's metadata is current.
fn tuf(data: &Path, report: &mut Report) {
    let repo = signet_trust::tuf::Repository::at(signet_server::tuf::repo_dir(data));
    if !repo.exists() {
        return report.warn(&format!("no TUF repository in {} yet; `signet serve` makes it (unless [tuf] enabled = false)", repo.dir().display()));
    }
    let status = match repo.status() {
        Ok(s) => s,
        Err(e) => return report.fail(&format!("TUF repository: {e}")),
    };
    let mut fine = true;
    for role in signet_trust::tuf::Role::ALL {
        let (version, expires) = status.of(role);
        let left = expires - now();
        if left <= 0 {
            fine = false;
            report.fail(&format!("TUF {} (version {version}) has expired: clients refuse the repository; see `signet tuf status`", role.name()));
        } else if matches!(role, signet_trust::tuf::Role::Root | signet_trust::tuf::Role::Targets) && left < SOON {
            fine = false;
            report.warn(&format!("TUF {} (version {version}) expires in {} days; sign it again with its key", role.name(), left / 86_400));
        }
    }
    // On PostgreSQL the directory is a copy of the shared repository: keys that differ from
    // its root's cannot sign it when this instance takes the sequencer lease.
    match signet_trust::tuf::RoleKeys::load(&data.join("keys")).and_then(|keys| repo.foreign_keys(&keys)) {
        Ok(foreign) if foreign.is_empty() => {}
        Ok(foreign) => {
            fine = false;
            for role in foreign {
                report.fail(&format!(
                    "keys/{} is not the key the TUF root names for {}: this instance cannot sign the repository (on a shared database, \
                     copy the keys of the instance that made it)",
                    role.file_name(),
                    role.name()
                ));
            }
        }
        Err(e) => {
            fine = false;
            report.fail(&format!("TUF keys: {e}"));
        }
    }
    // A ceremony's metadata the server refused, or has not taken up (a key it lacks).
    if let Ok(entries) = std::fs::read_dir(repo.dir().join("staged")) {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if let Some(refused) = name.strip_suffix(".refused.why") {
                fine = false;
                let why = std::fs::read_to_string(entry.path()).unwrap_or_default();
                report.warn(&format!("TUF {refused} staged by `signet tuf publish` was refused: {}", why.trim_end()));
            }
        }
    }
    for (name, _) in repo.staged_stamp() {
        fine = false;
        report.warn(&format!("TUF {name} is staged and not yet published: a running server takes it up within seconds, or logs why not"));
    }
    if fine {
        report.ok(&format!("TUF repository current (targets version {}, timestamp version {})", status.targets.0, status.timestamp.0));
    }
}

/// The running instance: ready, and its TSA's clock agrees with ours.
fn instance(data: &Path, url: &str, report: &mut Report) {
    if url.starts_with("https://") {
        return report.warn(&format!("{url}: HTTPS instances are not checked by doctor yet; check {url}/readyz by hand"));
    }
    let http = signet_client::http::Http::new(Duration::from_secs(10));
    match http.get("signet", &format!("{url}/readyz"), 64 << 10) {
        Ok(_) => report.ok(&format!("{url}/readyz: ready")),
        Err(e) => return report.fail(&format!("{url}/readyz: {e}")),
    }
    // The TSA's time, from a timestamp over random bytes, verified against the instance's
    // own trusted root.
    let mut challenge = [0u8; 32];
    let mut nonce = [0u8; 8];
    if aws_lc_rs::rand::fill(&mut challenge).and(aws_lc_rs::rand::fill(&mut nonce)).is_err() {
        return report.fail("no randomness for the clock check");
    }
    let request = match signet_client::tsa::request(&signet_core::hash::sha256(&challenge), &nonce) {
        Ok(r) => r,
        Err(e) => return report.fail(&format!("building a timestamp request: {e}")),
    };
    let asked = now();
    let reply = match http.post("tsa", &format!("{url}/api/v1/timestamp"), "application/timestamp-query", "application/timestamp-reply", request, None) {
        Ok(r) => r,
        Err(e) => return report.fail(&format!("the TSA did not stamp: {e}")),
    };
    let root = signet_server::trust::instance(data, None)
        .map_err(|e| e.to_string())
        .and_then(|i| signet_verify::trust_root::TrustedRoot::from_json(i.trusted_root().to_string().as_bytes()).map_err(|e| e.to_string()));
    let root = match root {
        Ok(r) => r,
        Err(e) => return report.fail(&format!("the instance's trusted root: {e}")),
    };
    match signet_verify::timestamp::verify(&root, &reply.body, &challenge) {
        Ok(v) => {
            let skew = v.time - asked;
            if skew.abs() > CLOCK_SKEW_SECS {
                report.fail(&format!("this machine's clock differs from the TSA's by {skew} s (at most {CLOCK_SKEW_SECS} expected); fix NTP"));
            } else {
                report.ok(&format!("clock agrees with the TSA's (within {} s); its timestamp verifies", skew.abs().max(1)));
            }
        }
        Err(e) => report.fail(&format!("the TSA's timestamp does not verify against the instance's trusted root: {e}")),
    }
}
