//! Helpers of the monitor's tests: the signet binary, a `serve --dev` instance, the monitor
//! run once, and a small loopback HTTP server for test doubles and webhooks.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;

use serde_json::Value;

/// target/<profile>/signet, built beside these tests (`cargo build --release -p signet`), or $SIGNET_BIN.
pub fn signet_bin() -> PathBuf {
    if let Ok(p) = std::env::var("SIGNET_BIN") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().unwrap();
    let bin = exe.parent().unwrap().parent().unwrap().join("signet");
    assert!(bin.exists(), "{} is missing: build it first (cargo build --release -p signet) or set SIGNET_BIN", bin.display());
    bin
}

pub fn signet(args: &[&str]) -> String {
    let out = Command::new(signet_bin()).args(args).output().unwrap();
    assert!(out.status.success(), "signet {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

pub struct Server {
    child: Child,
    pub url: String,
    pub data_dir: PathBuf,
}

impl Server {
    pub fn start(data_dir: &Path) -> Server {
        let mut child = Command::new(signet_bin())
            .args(["serve", "--dev", "--plain-http", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(data_dir)
            .env("SIGNET_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let line = lines.next().unwrap().unwrap();
        let url = line.strip_prefix("signet listening on ").unwrap_or_else(|| panic!("{line}")).to_string();
        std::thread::spawn(move || for _ in lines {});
        Server { child, url, data_dir: data_dir.to_path_buf() }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `signet trust export` of `server` into `dir/trust`; the trusted root's path.
pub fn trust(server: &Server, dir: &Path) -> PathBuf {
    let out = dir.join("trust");
    signet(&["trust", "export", "--data-dir", server.data_dir.to_str().unwrap(), "--out", out.to_str().unwrap(), "--url", &server.url]);
    out
}

/// Signs `artifact` as `email` (a dev token) into the log the signing config picks (Rekor v2),
/// or Rekor v1 when `v1`.
pub fn sign(server: &Server, dir: &Path, email: &str, artifact: &[u8], v1: bool) {
    let trust = trust(server, dir);
    let mut config: Value = serde_json::from_slice(&std::fs::read(trust.join("signing_config.json")).unwrap()).unwrap();
    if v1 {
        let only: Vec<Value> = config["rekorTlogUrls"].as_array().unwrap().iter().filter(|s| s["majorApiVersion"] == 1).cloned().collect();
        config["rekorTlogUrls"] = Value::Array(only);
    }
    let signing_config = dir.join("signing_config.json");
    std::fs::write(&signing_config, config.to_string()).unwrap();
    let token = signet(&["dev-token", "--data-dir", server.data_dir.to_str().unwrap(), "--subject", email]).trim().to_string();
    let (file, bundle) = (dir.join("artifact.txt"), dir.join("artifact.sigstore.json"));
    std::fs::write(&file, artifact).unwrap();
    signet(&[
        "sign-bundle", "--identity-token", &token, "--bundle", bundle.to_str().unwrap(),
        "--signing-config", signing_config.to_str().unwrap(), "--trusted-root", trust.join("trusted_root.json").to_str().unwrap(),
        file.to_str().unwrap(),
    ]);
}

pub struct Run {
    pub code: i32,
    pub alerts: Vec<Value>,
    pub stderr: String,
}

/// `signet monitor --once` with `args`.
pub fn monitor(args: &[&str]) -> Run {
    let out = Command::new(signet_bin()).arg("monitor").arg("--once").args(args).env("SIGNET_LOG", "warn").output().unwrap();
    let alerts = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {l}")))
        .collect();
    Run { code: out.status.code().unwrap_or(-1), alerts, stderr: String::from_utf8_lossy(&out.stderr).into_owned() }
}

pub type Handler = dyn Fn(&str, &str, &[u8]) -> (u16, Vec<u8>) + Send + Sync;

/// A loopback HTTP/1.1 server answering each request with `handler(method, path, body)`,
/// one request per connection. Its base URL.
pub fn http_server(handler: Arc<Handler>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let handler = handler.clone();
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 8192];
                let head_end = loop {
                    if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        break i + 4;
                    }
                    match stream.read(&mut chunk) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                };
                let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
                let mut parts = head.split_whitespace();
                let (method, path) = (parts.next().unwrap_or("").to_string(), parts.next().unwrap_or("").to_string());
                let length = head
                    .lines()
                    .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse::<usize>().unwrap_or(0)))
                    .unwrap_or(0);
                while buf.len() < head_end + length {
                    match stream.read(&mut chunk) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let (status, body) = handler(&method, &path, &buf[head_end..head_end + length]);
                let _ = write!(stream, "HTTP/1.1 {status} X\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len());
                let _ = stream.write_all(&body);
            });
        }
    });
    url
}
