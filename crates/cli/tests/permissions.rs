//! Permissions on a real server: every route of the router, with each built-in role, a custom
//! role, an OIDC identity token and no token, and with a client certificate mapped to each
//! built-in role (mTLS), gets exactly what the role table says (an OIDC identity: the signing
//! routes only), and each request is audited.
//! The route list is the router's own (`signet_server::api::route_list`), so a new route is
//! in this matrix from the moment it exists.

use crate::common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{agent, body_for, reply, Reply, Server};
use signet_guard::{Needs, Permission, Role, Roles};

fn admin(data: &Path, config: &Path, args: &[&str]) -> String {
    let mut all = vec!["admin", "token", "create", "--data-dir", data.to_str().unwrap(), "--config", config.to_str().unwrap()];
    all.extend_from_slice(args);
    let out = Command::new(env!("CARGO_BIN_EXE_signet")).args(&all).output().unwrap();
    assert!(out.status.success(), "signet {all:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// A concrete path for a route template.
fn concrete(template: &str) -> String {
    template.replace("{name}", "trusted_root.json").replace("{uuid}", &"0".repeat(64)).replace("{*path}", "0/000").replace("{*file}", "1.root.json")
}

fn send(a: &ureq::Agent, method: &http::Method, url: &str, token: Option<&str>) -> Reply {
    let with_token = |r: ureq::RequestBuilder<ureq::typestate::WithoutBody>| match token {
        Some(t) => r.header("authorization", &format!("Bearer {t}")),
        None => r,
    };
    let sent = match method.as_str() {
        "GET" => with_token(a.get(url)).call(),
        "POST" => {
            let path = url.splitn(4, '/').nth(3).map_or(String::new(), |p| format!("/{p}"));
            let (content_type, body) = body_for(&path, b"{}");
            let r = a.post(url).header("content-type", content_type);
            let r = match token {
                Some(t) => r.header("authorization", &format!("Bearer {t}")),
                None => r,
            };
            r.send(body)
        }
        other => panic!("a route with method {other}: add it to this test"),
    };
    reply(sent).unwrap()
}

/// Whether the guard refused: its 401 asks for a token, its 403 names the permission.
fn refused_by_guard(r: &Reply) -> bool {
    let (status, text) = r.refusal();
    (status == 401 && text.contains("needs an API token")) || (status == 403 && text.contains("needs permission"))
}

#[test]
fn every_route_allows_exactly_the_principals_whose_role_grants_its_permission() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config = dir.path().join("signet.toml");
    std::fs::write(
        &config,
        "[guard.auth]\nrequire = \"all\"\n[guard.audit]\nenabled = true\n[guard.roles]\nappender = [\"log.append\"]\n",
    )
    .unwrap();
    let server = Server::start(&data, &["--config", config.to_str().unwrap()]);
    let roles = Roles::with_custom(&[("appender".to_string(), vec!["log.append".to_string()])].into()).unwrap();
    let mut principals: Vec<(String, Option<String>, Option<Role>)> = vec![("anonymous".into(), None, None)];
    for role in ["admin", "signer", "reader", "auditor", "appender"] {
        let token = admin(&data, &config, &["--role", role, "--name", role]);
        principals.push((role.to_string(), Some(token), Some(role.parse().unwrap())));
    }
    // An OIDC identity token as the bearer: a principal on the signing routes, anonymous elsewhere.
    let out = Command::new(env!("CARGO_BIN_EXE_signet"))
        .args(["dev-token", "--data-dir", data.to_str().unwrap(), "--subject", "matrix@example.com"])
        .output()
        .unwrap();
    assert!(out.status.success(), "dev-token: {}", String::from_utf8_lossy(&out.stderr));
    let oidc = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let a = agent();
    // Tokens made while the server runs reach it on its next store poll: wait for the last.
    let deadline = Instant::now() + Duration::from_secs(5);
    while send(&a, &http::Method::GET, &format!("{}/api/v1/log", server.url), principals[5].1.as_deref()).status == 401 {
        assert!(Instant::now() < deadline, "the last token never became valid");
        std::thread::sleep(Duration::from_millis(50));
    }

    let routes = signet_server::api::route_list();
    assert!(routes.len() >= 28, "the router's list: {routes:?}");
    let mut sent = 0;
    for (method, template, needs) in &routes {
        let url = format!("{}{}", server.url, concrete(template));
        for (who, token, role) in &principals {
            let r = send(&a, method, &url, token.as_deref());
            sent += 1;
            let allowed = match (needs, role) {
                (Needs::Open, _) => true,
                (Needs::Permission(_), None) => false,
                (Needs::Permission(p), Some(role)) => roles.permissions(role).contains(*p),
            };
            assert_eq!(!refused_by_guard(&r), allowed, "{method} {template} as {who}: {} {}", r.status, r.text());
            assert!(r.status != 500, "{method} {template} as {who}: {}", r.text());
        }
        let r = send(&a, method, &url, Some(&oidc));
        sent += 1;
        let allowed = matches!(needs, Needs::Open | Needs::Permission(Permission::CertIssue));
        assert_eq!(!refused_by_guard(&r), allowed, "{method} {template} as an OIDC identity: {} {}", r.status, r.text());
        assert!(r.status != 500, "{method} {template} as an OIDC identity: {}", r.text());
    }
    // Spot checks of the table itself, against the issue's words.
    let needs = |m: &str, t: &str| routes.iter().find(|(rm, rt, _)| rm.as_str() == m && *rt == t).map(|r| r.2);
    assert_eq!(needs("POST", "/api/v1/log/entries"), Some(Needs::Permission(Permission::LogAppend)));
    assert_eq!(needs("POST", "/api/v1/index/retrieve"), Some(Needs::Permission(Permission::Read)), "a search writes nothing");
    assert_eq!(needs("POST", "/api/v2/signingCert"), Some(Needs::Permission(Permission::CertIssue)));
    assert_eq!(needs("POST", "/api/v1/timestamp"), Some(Needs::Permission(Permission::TsaStamp)));
    assert_eq!(needs("GET", "/healthz"), Some(Needs::Open));

    // Every request of the matrix is in the audit log, refusals included (written in batches
    // behind the answers).
    common::wait_for_audit_records(&data, sent);
    drop(server);
}

#[test]
fn a_changed_role_table_takes_effect_on_sighup_without_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config = dir.path().join("signet.toml");
    let write = |perms: &str| std::fs::write(&config, format!("[guard.auth]\nrequire = \"all\"\n[guard.roles]\nbot = [{perms}]\n")).unwrap();
    write("\"read\"");
    let server = Server::start(&data, &["--config", config.to_str().unwrap()]);
    let token = admin(&data, &config, &["--role", "bot"]);
    let a = agent();
    let (read, append) = (format!("{}/api/v1/log", server.url), format!("{}/api/v2/log/entries", server.url));
    let deadline = Instant::now() + Duration::from_secs(5);
    while send(&a, &http::Method::GET, &read, Some(&token)).status != 200 {
        assert!(Instant::now() < deadline, "the token never became valid");
        std::thread::sleep(Duration::from_millis(50));
    }
    let r = send(&a, &http::Method::POST, &append, Some(&token));
    assert_eq!(r.status, 403);
    assert!(r.text().contains("needs permission log.append") && r.text().contains("role bot grants: read"), "{}", r.text());

    // A table that does not parse changes nothing.
    write("\"log.write\"");
    let hup = |pid: u32| assert!(Command::new("kill").args(["-HUP", &pid.to_string()]).status().unwrap().success());
    hup(server.child.id());
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(send(&a, &http::Method::GET, &read, Some(&token)).status, 200, "still running, same table");
    assert_eq!(send(&a, &http::Method::POST, &append, Some(&token)).status, 403);

    write("\"read\", \"log.append\"");
    hup(server.child.id());
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let r = send(&a, &http::Method::POST, &append, Some(&token));
        if !refused_by_guard(&r) {
            // Past the guard, the handler judges the body (`{}` is no entry).
            assert_eq!(r.status, 400, "{}", r.text());
            break;
        }
        assert!(Instant::now() < deadline, "the new table never took effect: {}", r.text());
        std::thread::sleep(Duration::from_millis(50));
    }

    // Dropping the role: the token still authenticates, and grants nothing.
    std::fs::write(&config, "[guard.auth]\nrequire = \"all\"\n").unwrap();
    hup(server.child.id());
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let r = send(&a, &http::Method::GET, &read, Some(&token));
        if r.status == 403 {
            assert!(r.text().contains("role bot is not defined here"), "{}", r.text());
            break;
        }
        assert!(Instant::now() < deadline, "the role was never dropped");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn admin_roles_prints_the_table_and_token_create_refuses_undefined_roles() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let config = dir.path().join("signet.toml");
    std::fs::write(&config, "[guard.roles]\nrelease-bot = [\"read\", \"log.append\"]\n").unwrap();
    let run = |args: &[&str]| Command::new(env!("CARGO_BIN_EXE_signet")).args(args).output().unwrap();

    let out = run(&["admin", "roles", "--config", config.to_str().unwrap()]);
    assert!(out.status.success());
    let table = String::from_utf8(out.stdout).unwrap();
    for line in ["admin", "auditor               read audit.read", "release-bot           read log.append", "signer                read log.append cert.issue tsa.stamp"] {
        assert!(table.contains(line), "{line:?} in\n{table}");
    }
    let out = run(&["admin", "roles", "--json"]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["roles"].as_array().unwrap().len(), 4, "built-ins only without --config");

    let d = data.to_str().unwrap();
    let out = run(&["admin", "token", "create", "--data-dir", d, "--role", "release-bot"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("\"release-bot\" is not defined") && err.contains("--config"), "{err}");
    let out = run(&["admin", "token", "create", "--data-dir", d, "--role", "release-bot", "--config", config.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("role release-bot: read log.append"));
    let out = run(&["admin", "token", "create", "--data-dir", d, "--role", "Root!"]);
    assert_eq!(out.status.code(), Some(2), "a malformed role name is a usage error");

    std::fs::write(&config, "[guard.roles]\nadmin = [\"read\"]\n").unwrap();
    let out = run(&["admin", "roles", "--config", config.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("built-in role and cannot be redefined"));
}

#[test]
fn anonymous_callers_get_what_require_says_and_a_token_never_narrows_it() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config = dir.path().join("signet.toml");
    let a = agent();
    for (require, anonymous_may_append) in [("writes", false), ("none", true)] {
        std::fs::write(&config, format!("[guard.auth]\nrequire = \"{require}\"\n[guard.rate_limit]\nenabled = true\n")).unwrap();
        let server = Server::start(&data, &["--config", config.to_str().unwrap()]);
        let reader = admin(&data, &config, &["--role", "reader"]);
        let (read, search, append) = (
            format!("{}/api/v1/log", server.url),
            format!("{}/api/v1/index/retrieve", server.url),
            format!("{}/api/v2/log/entries", server.url),
        );
        let deadline = Instant::now() + Duration::from_secs(5);
        while send(&a, &http::Method::GET, &read, Some(&reader)).status == 401 {
            assert!(Instant::now() < deadline, "the token never became valid");
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(send(&a, &http::Method::GET, &read, None).status, 200, "{require}: anonymous reads");
        assert!(!refused_by_guard(&send(&a, &http::Method::POST, &search, None)), "{require}: a search is a read");
        let anonymous = send(&a, &http::Method::POST, &append, None);
        assert_eq!(!refused_by_guard(&anonymous), anonymous_may_append, "{require}: {}", anonymous.text());
        let with_reader = send(&a, &http::Method::POST, &append, Some(&reader));
        assert_eq!(!refused_by_guard(&with_reader), anonymous_may_append, "{require}, reader token: {}", with_reader.text());
        if !anonymous_may_append {
            assert_eq!(anonymous.status, 401);
            assert!(with_reader.text().contains("needs permission log.append; this token"), "{}", with_reader.text());
        }
        drop(server);
    }
}

/// The matrix's mTLS column: every route over HTTPS with a client certificate per built-in
/// role (its SAN mapped by `[guard.mtls] roles`), and one whose SAN is mapped to nothing, gets
/// exactly what the mapped role grants, as a token of that role would; every request audited.
#[test]
fn every_route_allows_a_client_certificate_exactly_what_its_mapped_role_grants() {
    let dir = tempfile::tempdir().unwrap();
    let (pki, clients) = (signet_tls::testing::TestPki::new(), signet_tls::testing::TestPki::new());
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_string()
    };
    let server_pem = pki.server_pem();
    let (cert, key, ca) = (write("cert.pem", &server_pem.chain), write("key.pem", &server_pem.key), write("ca.pem", &pki.ca_pem));
    let client_ca = write("clients.pem", &clients.ca_pem);
    let roles = ["admin", "signer", "reader", "auditor"];
    let mapping: Vec<String> = roles.iter().map(|r| format!("\"spiffe://matrix/{r}\" = \"{r}\"")).collect();
    let config = write(
        "signet.toml",
        &format!("[guard.auth]\nrequire = \"all\"\n[guard.audit]\nenabled = true\n[guard.mtls]\nroles = {{ {} }}\n", mapping.join(", ")),
    );
    let mut principals: Vec<(String, (String, String), Option<Role>)> = Vec::new();
    for who in roles.iter().copied().chain(["unmapped"]) {
        let pem = clients.issue_client(&format!("spiffe://matrix/{who}"));
        let files = (write(&format!("{who}.crt"), &pem.chain), write(&format!("{who}.key"), &pem.key));
        principals.push((who.to_string(), files, who.parse().ok().filter(|_| who != "unmapped")));
    }
    let data = dir.path().join("data");
    let server = Server::start(&data, &["--tls-cert", &cert, "--tls-key", &key, "--tls-client-ca", &client_ca, "--config", &config]);
    let table = Roles::with_custom(&Default::default()).unwrap();
    let mut sent = 0;
    for (method, template, needs) in &signet_server::api::route_list() {
        let url = format!("{}{}", server.url, concrete(template));
        for (who, (crt, key), role) in &principals {
            let mut curl = Command::new("curl");
            // The status last, after a gRPC answer's status and message (empty for the others).
            let write_out = "\n%header{grpc-status}\n%header{grpc-message}\n%{http_code}";
            curl.args(["-sS", "--max-time", "10", "-w", write_out, "--cacert", &ca, "--cert", crt, "--key", key, "-X", method.as_str()]);
            if method == http::Method::POST {
                let (content_type, body) = body_for(template, b"{}");
                let file = dir.path().join("body");
                std::fs::write(&file, body).unwrap();
                curl.args(["-H", &format!("content-type: {content_type}"), "--data-binary", &format!("@{}", file.display())]);
            }
            let out = curl.arg(&url).output().unwrap();
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            let mut parts = text.rsplitn(4, '\n');
            let (status, message, grpc, body) = (parts.next().unwrap(), parts.next().unwrap(), parts.next().unwrap(), parts.next().unwrap_or(""));
            let headers = match grpc {
                "" => Vec::new(),
                code => vec![("grpc-status".to_string(), code.to_string()), ("grpc-message".to_string(), message.to_string())],
            };
            let r = Reply { status: status.trim().parse().unwrap(), headers, body: body.as_bytes().to_vec() };
            sent += 1;
            let allowed = match (needs, role) {
                (Needs::Open, _) => true,
                (Needs::Permission(_), None) => false,
                (Needs::Permission(p), Some(role)) => table.permissions(role).contains(*p),
            };
            assert_eq!(!refused_by_guard(&r), allowed, "{method} {template} as the {who} certificate: {} {}", r.status, r.text());
            assert!(r.status != 500, "{method} {template} as the {who} certificate: {}", r.text());
        }
    }
    common::wait_for_audit_records(&data, sent);
    drop(server);
}
