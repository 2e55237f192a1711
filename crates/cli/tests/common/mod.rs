//! Test harness: a real `signet serve --dev` child process on a loopback port.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use aws_lc_rs::encoding::AsDer;
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_ASN1_SIGNING};
use serde_json::{json, Value};
use signet_core::{b64, hash, pem};

pub struct Server {
    pub child: Child,
    pub url: String,
    pub data_dir: PathBuf,
}

impl Server {
    /// Starts `signet serve --dev` on a free loopback port and waits for its ready line. Plain
    /// HTTP (`--plain-http`) unless `extra` holds a `--tls…` flag: the tests of HTTPS say so.
    pub fn start(data_dir: &Path, extra: &[&str]) -> Server {
        Self::start_on(data_dir, "127.0.0.1:0", extra)
    }

    pub fn start_on(data_dir: &Path, listen: &str, extra: &[&str]) -> Server {
        let mut command = Command::new(env!("CARGO_BIN_EXE_signet"));
        command
            .args(["serve", "--dev", "--data-dir"])
            .arg(data_dir)
            .args(["--listen", listen])
            .args((!extra.iter().any(|a| a.starts_with("--tls"))).then_some("--plain-http"))
            .args(extra);
        Self::spawn(command, data_dir)
    }

    /// Runs `command` (a `signet serve` however wrapped) and waits for its ready line.
    pub fn spawn(mut command: Command, data_dir: &Path) -> Server {
        let mut child = command
            // Warnings and errors only, unless the caller asks for more: a test run starts
            // dozens of servers, and their info lines would bury the results.
            .env("SIGNET_LOG", std::env::var("SIGNET_LOG").unwrap_or_else(|_| "warn".into()))
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn signet");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout).lines();
        let line = lines.next().expect("signet printed nothing").expect("read stdout");
        let url = line
            .strip_prefix("signet listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .to_string();
        // Keep draining stdout so the child never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        Server { child, url, data_dir: data_dir.to_path_buf() }
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

pub fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .into()
}

pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The status and message a refusal means: a gRPC answer's (`grpc-status`, `grpc-message`)
    /// as the HTTP status signet refused with inside (its gRPC layer maps 401 to 16, 403 to 7,
    /// 400 to 3 …), else the HTTP ones.
    pub fn refusal(&self) -> (u16, String) {
        let Some(code) = self.header("grpc-status").and_then(|c| c.parse::<u32>().ok()) else { return (self.status, self.text()) };
        let status = match code {
            0 => 200,
            16 => 401,
            7 => 403,
            3 => 400,
            8 => 429,
            14 => 503,
            12 => 404,
            _ => 500,
        };
        (status, percent_decoded(self.header("grpc-message").unwrap_or_default()))
    }
}

/// `grpc-message`'s percent-encoding undone.
fn percent_decoded(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match (bytes[i], bytes.get(i + 1..i + 3).and_then(|h| u8::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok())) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A request body and content type for a route: gRPC's empty message on a gRPC method, else `json`.
pub fn body_for<'a>(template: &str, json: &'a [u8]) -> (&'static str, &'a [u8]) {
    if template.starts_with("/dev.sigstore.") { ("application/grpc", &[0, 0, 0, 0, 0]) } else { ("application/json", json) }
}

pub fn reply(r: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> Result<Reply, ureq::Error> {
    let mut r = r?;
    let headers = r
        .headers()
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").to_string()))
        .collect();
    let status = r.status().as_u16();
    let body = r.body_mut().with_config().limit(64 << 20).read_to_vec()?;
    Ok(Reply { status, headers, body })
}

pub fn get(agent: &ureq::Agent, url: &str) -> Result<Reply, ureq::Error> {
    reply(agent.get(url).call())
}

pub fn get_bearer(agent: &ureq::Agent, url: &str, token: &str) -> Result<Reply, ureq::Error> {
    reply(agent.get(url).header("authorization", &format!("Bearer {token}")).call())
}

pub fn post_json(agent: &ureq::Agent, url: &str, body: &Value) -> Result<Reply, ureq::Error> {
    reply(agent.post(url).header("content-type", "application/json").send(serde_json::to_vec(body).unwrap()))
}

pub fn post_raw(agent: &ureq::Agent, url: &str, content_type: &str, body: Vec<u8>) -> Result<Reply, ureq::Error> {
    reply(agent.post(url).header("content-type", content_type).send(body))
}

/// An ECDSA P-256 signer of artifacts.
pub struct Signer {
    pair: EcdsaKeyPair,
    pub spki: Vec<u8>,
    rng: SystemRandom,
}

impl Signer {
    pub fn new() -> Signer {
        let pair = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_ASN1_SIGNING).unwrap();
        let spki = pair.public_key().as_der().unwrap().as_ref().to_vec();
        Signer { pair, spki, rng: SystemRandom::new() }
    }

    /// A hashedrekord v0.0.1 proposed entry for `artifact`.
    pub fn v1_entry(&self, artifact: &[u8]) -> Value {
        let sig = self.pair.sign(&self.rng, artifact).unwrap();
        json!({"apiVersion": "0.0.1", "kind": "hashedrekord", "spec": {
            "signature": {"content": b64::encode(sig.as_ref()),
                          "publicKey": {"content": b64::encode(pem::encode("PUBLIC KEY", &self.spki))}},
            "data": {"hash": {"algorithm": "sha256", "value": hex::encode(hash::sha256(artifact))}}}})
    }

    /// An intoto 0.0.1 proposed entry (cosign's `intotoEntry`) for `statement`: a DSSE
    /// envelope of it as JSON text, and this key.
    pub fn v1_intoto_entry(&self, statement: &[u8]) -> Value {
        let payload_type = "application/vnd.in-toto+json";
        let pae = format!("DSSEv1 {} {payload_type} {} ", payload_type.len(), statement.len());
        let sig = self.pair.sign(&self.rng, &[pae.as_bytes(), statement].concat()).unwrap();
        let envelope = json!({"payloadType": payload_type, "payload": b64::encode(statement),
            "signatures": [{"keyid": "", "sig": b64::encode(sig.as_ref())}]});
        json!({"apiVersion": "0.0.1", "kind": "intoto", "spec": {"content": {"envelope": envelope.to_string()},
            "publicKey": b64::encode(pem::encode("PUBLIC KEY", &self.spki))}})
    }

    /// A hashedRekordRequestV002 for `artifact`.
    pub fn v2_entry(&self, artifact: &[u8]) -> Value {
        let sig = self.pair.sign(&self.rng, artifact).unwrap();
        json!({"hashedRekordRequestV002": {
            "digest": b64::encode(hash::sha256(artifact)),
            "signature": {"content": b64::encode(sig.as_ref()), "verifier": {
                "publicKey": {"rawBytes": b64::encode(&self.spki)}, "keyDetails": "PKIX_ECDSA_P256_SHA_256"}}}})
    }
}

/// A new, empty PostgreSQL database on the test server (`SIGNET_TEST_POSTGRES`, started by
/// `scripts/test`), as a storage URL; `None` when no server is configured, unless
/// `SIGNET_TEST_REQUIRE_POSTGRES=1` makes that a failure.
pub fn postgres_database() -> Option<String> {
    let server = match std::env::var("SIGNET_TEST_POSTGRES") {
        Ok(u) if !u.is_empty() => u,
        _ => {
            assert!(
                std::env::var("SIGNET_TEST_REQUIRE_POSTGRES").as_deref() != Ok("1"),
                "SIGNET_TEST_REQUIRE_POSTGRES=1 but SIGNET_TEST_POSTGRES is not set: start PostgreSQL with scripts/services"
            );
            eprintln!("SIGNET_TEST_POSTGRES is not set: PostgreSQL case skipped (scripts/test runs it)");
            return None;
        }
    };
    let name = format!("signet_cli_{}_{}", std::process::id(), rand::random::<u32>());
    psql(&server, &format!("CREATE DATABASE {name}"));
    let slash = server.rfind('/').expect("SIGNET_TEST_POSTGRES ends in /DATABASE");
    Some(format!("{}/{name}", &server[..slash]))
}

/// Runs SQL on the PostgreSQL at `url`, from a thread of its own (callers may be inside a runtime).
pub fn psql(url: &str, sql: &str) {
    let (url, sql) = (url.to_string(), sql.to_string());
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async move {
            let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.expect("connect to the test PostgreSQL");
            tokio::spawn(conn);
            client.batch_execute(&sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
        });
    })
    .join()
    .unwrap();
}

pub fn hex32(s: &str) -> [u8; 32] {
    hex::decode(s).unwrap().try_into().unwrap()
}

/// Waits up to 10 s until `<data>/audit.sqlite` holds at least `at_least` records (they are
/// written in batches behind the answers).
pub fn wait_for_audit_records(data: &Path, at_least: usize) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let conn = rusqlite::Connection::open(data.join("audit.sqlite")).unwrap();
        let recorded: i64 = conn.query_row("SELECT COALESCE(SUM(last_seq - first_seq + 1), 0) FROM audit", [], |r| r.get(0)).unwrap();
        if recorded as usize >= at_least {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "{recorded} audit records for at least {at_least} requests");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A Fulcio `signingCert` request for `email` with a fresh P-256 key: the OIDC token in the
/// body, and the proof of possession over the email.
pub fn cert_request(oidc: &str, email: &str) -> Vec<u8> {
    let pair = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_ASN1_SIGNING).unwrap();
    let key = pem::encode("PUBLIC KEY", pair.public_key().as_der().unwrap().as_ref());
    let pop = pair.sign(&SystemRandom::new(), email.as_bytes()).unwrap();
    let body = json!({"credentials": {"oidcIdentityToken": oidc},
        "publicKeyRequest": {"publicKey": {"algorithm": "ECDSA", "content": key}, "proofOfPossession": b64::encode(pop.as_ref())}});
    serde_json::to_vec(&body).unwrap()
}

/// Copies a directory tree (a data dir) file by file.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}
