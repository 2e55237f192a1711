//! The configuration's tests: loading, the environment's overlay, each table's checks.

use super::*;

#[test]
fn unknown_keys_are_named() {
    let err = toml::from_str::<Config>("listen = \"127.0.0.1:1\"\nlsiten = 1\n").unwrap_err();
    assert!(err.message().contains("lsiten"), "{}", err.message());
    let err = toml::from_str::<Config>("[log]\nbatch_size = 3\n").unwrap_err();
    assert!(err.message().contains("batch_size"), "{}", err.message());
}

#[test]
fn metrics_and_admin_are_on_the_public_port_only_under_dev() {
    use Surface::*;
    let mut h = HttpSettings::default();
    assert_eq!(h.surfaces(true), vec![(None, vec![Public, Metrics, Admin])]);
    assert_eq!(h.surfaces(false), vec![(None, vec![Public])], "production: nowhere until given a port");
    let (m, a): (SocketAddr, SocketAddr) = ("127.0.0.1:9464".parse().unwrap(), "127.0.0.1:9465".parse().unwrap());
    h.metrics_listen = Some(m);
    assert_eq!(h.surfaces(true), vec![(None, vec![Public, Admin]), (Some(m), vec![Metrics])]);
    h.admin_listen = Some(a);
    assert_eq!(h.surfaces(false), vec![(None, vec![Public]), (Some(m), vec![Metrics]), (Some(a), vec![Admin])]);
    h.admin_listen = Some(m);
    assert_eq!(h.surfaces(false), vec![(None, vec![Public]), (Some(m), vec![Metrics, Admin])], "one port for both");
    let c = Config::with_env("", &[("SIGNET_HTTP_ADMIN_LISTEN", "127.0.0.1:9465")]).unwrap();
    assert_eq!(c.http.admin_listen, Some(a));
    assert_eq!(Surface::of("/api/admin/log/rotate"), Admin);
    assert_eq!(Surface::of("/metrics"), Metrics);
    assert_eq!(Surface::of("/api/v1/log"), Public);
}

#[test]
fn env_overrides_and_errors() {
    let c = Config::with_env("", &[("SIGNET_LOG_BATCH_MAX_ENTRIES", "64")]).unwrap();
    assert_eq!(c.log.batch_max_entries, 64);
    let err = Config::with_env("", &[("SIGNET_LISTEN", "nope")]).unwrap_err();
    assert!(err.to_string().contains("SIGNET_LISTEN"));
}

#[test]
fn the_log_caches_are_bounded_and_the_entry_cache_can_be_off() {
    assert_eq!(Config::default().log.entry_cache_mb, 64);
    let c = Config::with_env("dev = true\n", &[("SIGNET_LOG_ENTRY_CACHE_MB", "0")]).unwrap();
    assert_eq!(c.log.entry_cache_mb, 0);
    c.validate().unwrap();
    for key in ["tile_cache_mb", "entry_cache_mb"] {
        let c = Config::with_env(&format!("dev = true\n[log]\n{key} = 2000000\n"), &[]).unwrap();
        let err = c.validate().unwrap_err().to_string();
        assert!(err.contains(&format!("log.{key} must be at most 1048576")) && err.contains("2000000"), "{err}");
    }
}

#[test]
fn ca_intermediate_key_parses_strictly() {
    let c: Config = toml::from_str("[ca]\nintermediate_key = \"p384\"\n").unwrap();
    assert_eq!(c.ca.intermediate_curve().unwrap(), Some(signet_ca::x509::CaCurve::P384));
    assert_eq!(Config::default().ca.intermediate_curve().unwrap(), None);
    let c = Config::with_env("dev = true\n", &[("SIGNET_CA_INTERMEDIATE_KEY", "rsa")]).unwrap();
    let err = c.validate().unwrap_err().to_string();
    assert!(err.contains("ca.intermediate_key") && err.contains("expected p256 or p384"), "{err}");
}

#[test]
fn hosts() {
    assert_eq!(host_of("https://Log.Example:8443/api").unwrap(), "log.example");
    assert_eq!(host_of("http://127.0.0.1:8080").unwrap(), "127.0.0.1");
    assert_eq!(host_of("http://[::1]:80/").unwrap(), "::1");
    assert!(host_of("ftp://x").is_err());
    assert!(host_of("http://").is_err());
    assert!(host_of("http://u@h/").is_err());
}

#[test]
fn oidc_issuers_parse_strictly() {
    let c: Config = toml::from_str(
        "[[oidc.issuers]]\nurl = \"https://token.actions.githubusercontent.com\"\nsubject = \"github-workflow\"\njwks_file = \"/x\"\n",
    )
    .unwrap();
    assert_eq!(c.oidc.issuers[0].audience, "sigstore");
    let err = toml::from_str::<Config>("[[oidc.issuers]]\nurl = \"u\"\nsubject = \"uri\"\njwks_file = \"/x\"\njwks = 1\n").unwrap_err();
    assert!(err.message().contains("jwks"), "{}", err.message());
    let mut c = c;
    c.dev = true;
    assert!(c.validate().unwrap_err().to_string().contains("jwks_file"));
    c.oidc.issuers[0].kind = "name".into();
    assert!(c.validate().unwrap_err().to_string().contains("is not an issuer type"));
}

#[test]
fn oidc_discovery_issuers() {
    let parse = |extra: &str| {
        let mut c: Config = toml::from_str(&format!("dev = true\n[[oidc.issuers]]\nsubject = \"email\"\n{extra}")).unwrap();
        c.dev = true;
        c
    };
    let c = parse("url = \"https://accounts.example\"\n");
    let i = &c.oidc.issuers[0];
    assert_eq!((i.jwks_file.as_ref(), i.ca_file.as_ref(), i.min_refresh_interval_secs), (None, None, 10));
    c.validate().unwrap();

    let err = parse("url = \"http://accounts.example\"\n").validate().unwrap_err().to_string();
    assert!(err.contains("http://accounts.example") && err.contains("plain http"), "{err}");
    for loopback in ["http://127.0.0.1:8080", "http://localhost:1/x", "http://[::1]:9"] {
        parse(&format!("url = \"{loopback}\"\n")).validate().unwrap();
    }
    let err = parse("url = \"idp.example\"\n").validate().unwrap_err().to_string();
    assert!(err.contains("https://HOST"), "{err}");

    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, "").unwrap();
    parse(&format!("url = \"https://a.example\"\nca_file = \"{}\"\n", ca.display())).validate().unwrap();
    let err = parse("url = \"https://a.example\"\nca_file = \"/nonexistent/ca.pem\"\n").validate().unwrap_err().to_string();
    assert!(err.contains("ca_file /nonexistent/ca.pem does not exist"), "{err}");
    let err = parse(&format!("url = \"https://a.example\"\nca_file = \"{0}\"\njwks_file = \"{0}\"\n", ca.display()))
        .validate()
        .unwrap_err()
        .to_string();
    assert!(err.contains("ca_file applies only to OIDC discovery"), "{err}");
    let err = parse("url = \"https://a.example\"\nmin_refresh_interval_secs = 0\n").validate().unwrap_err().to_string();
    assert!(err.contains("min_refresh_interval_secs"), "{err}");
    // A JWKS file issuer never fetches, so its URL is only the `iss` to match.
    parse(&format!("url = \"http://ci.example\"\njwks_file = \"{}\"\n", ca.display())).validate().unwrap();

    let err = toml::from_str::<Config>("[[oidc.issuers]]\nurl = \"u\"\nsubject = \"uri\"\nca_fil = \"x\"\n").unwrap_err();
    assert!(err.message().contains("ca_fil"), "{}", err.message());
}

#[test]
fn tls_settings() {
    let mut c: Config = toml::from_str("dev = true\n[tls]\ncert = \"/c.pem\"\nkey = \"/k.pem\"\nbackend = \"openssl\"\n").unwrap();
    c.validate().unwrap();
    assert_eq!(c.tls.backend().unwrap(), signet_tls::Backend::Openssl);
    assert_eq!((c.scheme(), c.tls.reload_interval_secs), ("https", 5));
    c.tls.backend = Some("gnutls".into());
    assert!(c.validate().unwrap_err().to_string().contains("expected rustls or openssl"));
    c.tls.backend = None;
    c.tls.key = None;
    assert!(c.validate().unwrap_err().to_string().contains("go together"));
    c.tls.cert = None;
    c.tls.backend = Some("rustls".into());
    // Under --dev a backend without files is the issued certificate's; outside it, an error.
    c.validate().unwrap();
    assert_eq!((c.tls.mode(true), c.scheme()), (TlsMode::Issued, "https"));
    (c.dev, c.public_url) = (false, Some("https://signet.test".into()));
    let err = c.validate().unwrap_err().to_string();
    assert!(err.contains("needs HTTPS"), "{err}");
    c.tls.backend = None;
    assert_eq!((c.tls.mode(false), c.scheme()), (TlsMode::Plain, "http"));
    c.tls.source = Some("issued".into());
    c.validate().unwrap();
    assert_eq!((c.tls.mode(false), c.scheme()), (TlsMode::Issued, "https"), "issued outside --dev, when asked for");
    c.dev = true;
    c.tls.source = None;
    c.tls.plain_http = true;
    c.validate().unwrap();
    assert_eq!((c.tls.mode(true), c.scheme()), (TlsMode::Plain, "http"));
    c.tls.issued_lifetime_secs = Some(60);
    assert!(c.validate().unwrap_err().to_string().contains("tls.issued_lifetime_secs is not used"));
    c.tls.plain_http = false;
    c.validate().unwrap();
    assert_eq!(c.tls.issued_lifetime(), std::time::Duration::from_secs(60));
    let err = toml::from_str::<Config>("[tls]\ncertificate = \"x\"\n").unwrap_err();
    assert!(err.message().contains("certificate"), "{}", err.message());
    let c = Config::with_env("", &[("SIGNET_TLS_CERT", "/c"), ("SIGNET_TLS_KEY", "/k"), ("SIGNET_TLS_BACKEND", "openssl")]).unwrap();
    assert_eq!((c.tls.cert.unwrap(), c.tls.backend.unwrap()), (PathBuf::from("/c"), "openssl".to_string()));
}

#[test]
fn tls_sources_and_the_cache_ttl() {
    let tls = |extra: &str| toml::from_str::<Config>(&format!("dev = true\n[tls]\ncert = \"/c.pem\"\nkey = \"/k.pem\"\n{extra}")).unwrap();
    let c = tls("");
    assert_eq!(c.tls.source().unwrap(), signet_tls::SourceKind::File);
    for kind in signet_tls::SourceKind::ALL.into_iter().filter(|k| *k != signet_tls::SourceKind::Issued) {
        let c = tls(&format!("source = \"{kind}\"\n"));
        c.validate().unwrap();
        assert_eq!(c.tls.source().unwrap(), kind);
    }
    let c = tls("source = \"cached\"\n");
    assert_eq!(c.tls.cache_ttl(), std::time::Duration::from_secs(5), "report 000's default");
    let c = tls("source = \"cached\"\ncache_ttl_secs = 60\n");
    c.validate().unwrap();
    assert_eq!(c.tls.cache_ttl(), std::time::Duration::from_secs(60));

    let err = tls("source = \"uncached\"\n").validate().unwrap_err().to_string();
    assert!(err.contains("tls.source") && err.contains("expected file, watch, reload, cached or issued"), "{err}");
    let err = tls("source = \"issued\"\n").validate().unwrap_err().to_string();
    assert!(err.contains("takes no tls.cert"), "{err}");
    let err = tls("cache_ttl_secs = 5\n").validate().unwrap_err().to_string();
    assert!(err.contains("tls.cache_ttl_secs") && err.contains("the source is file"), "{err}");
    let err = tls("source = \"reload\"\ncache_ttl_secs = 5\n").validate().unwrap_err().to_string();
    assert!(err.contains("tls.cache_ttl_secs") && err.contains("the source is reload"), "{err}");
    for bad in [0, 3601, i64::MAX as u64] {
        let err = tls(&format!("source = \"cached\"\ncache_ttl_secs = {bad}\n")).validate().unwrap_err().to_string();
        assert!(err.contains("tls.cache_ttl_secs") && err.contains("1..=3600"), "{bad}: {err}");
    }

    let cached = "dev = true\n[tls]\ncert = \"/c.pem\"\nkey = \"/k.pem\"\nsource = \"cached\"\n";
    let c = Config::with_env(cached, &[("SIGNET_TLS_CACHE_TTL_SECS", "30")]).unwrap();
    assert_eq!(c.tls.cache_ttl_secs, Some(30));
    let err = Config::with_env(cached, &[("SIGNET_TLS_CACHE_TTL_SECS", "soon")]).unwrap_err().to_string();
    assert!(err.contains("SIGNET_TLS_CACHE_TTL_SECS"), "{err}");
}

#[test]
fn type_errors_name_the_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.toml");
    std::fs::write(&path, "listen = \"127.0.0.1:1\"\n[log]\nbatch_max_entries = \"many\"\n").unwrap();
    let err = Config::load(Some(&path)).unwrap_err().to_string();
    assert!(err.contains("line 3") && err.contains("batch_max_entries"), "{err}");
    std::fs::write(&path, "[http]\nmax_conections = 5\n").unwrap();
    let err = Config::load(Some(&path)).unwrap_err().to_string();
    assert!(err.contains("line 2") && err.contains("max_conections"), "{err}");
}

#[test]
fn guard_section_parses_strictly() {
    let c: Config = toml::from_str("[guard.rate_limit]\nenabled = true\nper_second = 5\nburst = 7\n[guard.auth]\nrequire = \"writes\"\n").unwrap();
    assert!(c.guard.active() && c.guard.rate_limit.burst == 7);
    let err = toml::from_str::<Config>("[guard.ban]\nmax_refusal = 3\n").unwrap_err();
    assert!(err.message().contains("max_refusal"), "{}", err.message());
    assert!(!Config::default().guard.active(), "off by default");
}

#[test]
fn validation() {
    let mut c = Config::default();
    assert!(c.validate().unwrap_err().to_string().contains("public_url"));
    c.dev = true;
    c.validate().unwrap();
    c.storage = Some("mysql://x".into());
    assert!(c.storage_url().is_err());
    assert!(c.validate().unwrap_err().to_string().contains("mysql://x\" is not supported"), "config check refuses it too");
    c.storage = Some("postgres://signet@127.0.0.1:5432/signet".into());
    assert!(matches!(c.storage_url(), Ok(signet_log::storage::StorageUrl::Postgres(_))));
    // An attestation arrives inside a request, so it cannot be larger than one.
    c.limits.max_attestation_bytes = c.limits.max_body_bytes + 1;
    assert!(c.validate().unwrap_err().to_string().contains("limits.max_attestation_bytes must be at most limits.max_body_bytes"));
    c.limits.max_attestation_bytes = 0;
    c.validate().unwrap();
}

/// The fields a table of the config accepts, as serde names them when it refuses an
/// unknown one.
fn fields_of(table: &str) -> Vec<String> {
    let toml = match table {
        "" => "zz_probe = 1\n".to_string(),
        "oidc.issuers" | "witness.logs" => format!("[[{table}]]\nzz_probe = 1\n"),
        t => format!("[{t}]\nzz_probe = 1\n"),
    };
    let err = toml::from_str::<Config>(&toml).unwrap_err().to_string();
    let list = err.split("expected").nth(1).unwrap_or_else(|| panic!("[{table}]: {err}"));
    list.split('`').skip(1).step_by(2).map(str::to_string).collect()
}

/// The tables of the config, each of which refuses unknown keys.
const TABLES: [&str; 21] = [
    "", "log", "ca", "keys", "limits", "http", "oidc", "oidc.issuers", "tls", "tuf", "tracing", "guard", "guard.rate_limit", "guard.ban", "guard.auth",
    "guard.audit", "guard.redis", "witness", "witness.logs", "log.witnesses", "monitor",
];

#[test]
fn the_example_names_every_key_and_parses() {
    let example = EXAMPLE;
    // Each table's keys appear in it, set or commented out, under that table's header.
    let mut missing = Vec::new();
    for table in TABLES {
        let header = match table {
            "" => None,
            "oidc.issuers" | "witness.logs" => Some(format!("[[{table}]]")),
            t => Some(format!("[{t}]")),
        };
        let section: String = match &header {
            None => example.lines().take_while(|l| !l.starts_with('[')).collect::<Vec<_>>().join("\n"),
            Some(h) => example
                .lines()
                // A table shown commented out (`# [[witness.logs]]`) counts.
                .skip_while(|l| !l.trim_start_matches(['#', ' ']).starts_with(h.as_str()))
                .skip(1)
                .take_while(|l| !l.starts_with('['))
                .collect::<Vec<_>>()
                .join("\n"),
        };
        for field in fields_of(table) {
            // A table of its own ([log], [guard.audit], [[oidc.issuers]], …).
            let path = if table.is_empty() { field.clone() } else { format!("{table}.{field}") };
            if example.contains(&format!("[{path}]")) || example.contains(&format!("[[{path}]]")) {
                continue;
            }
            let set = section.lines().any(|l| {
                let l = l.trim_start().trim_start_matches('#').trim_start();
                l.starts_with(&format!("{field} =")) || l.starts_with(&format!("{field}="))
            });
            if !set {
                missing.push(format!("[{table}] {field}"));
            }
        }
    }
    assert!(missing.is_empty(), "the example lacks: {missing:?}");
    let parsed: Config = toml::from_str(example).unwrap_or_else(|e| panic!("the example does not parse: {e}"));
    assert_eq!(parsed.tuf.timestamp_expiry_secs, TufSettings::default().timestamp_expiry_secs);
    // docs/configuration.md shows the same text.
    let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/configuration.md")).unwrap();
    assert!(docs.contains(&format!("```toml\n{example}```\n")), "docs/configuration.md's example differs from config_example.toml");
}
