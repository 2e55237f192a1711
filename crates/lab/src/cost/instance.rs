//! A dev instance to measure: `signet serve --dev --plain-http` of a given binary (this one,
//! by default) on a fresh data directory and a free loopback port, with an identity token
//! from its dev issuer. Plain HTTP: the TLS layer's own cost is `signet bench tls`'s subject.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use http::Uri;

/// How long the instance may take to print its address.
const START_TIMEOUT: Duration = Duration::from_secs(120);

pub struct Instance {
    child: Child,
    pub url: Uri,
    pub token: String,
    /// Kept for the instance's lifetime; removed with it.
    _dir: tempfile::TempDir,
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InstanceError {
    #[error("starting {binary}: {source}")]
    Spawn { binary: PathBuf, source: std::io::Error },
    #[error("{binary} serve --dev did not print its address within {} s; its stderr: {stderr}", START_TIMEOUT.as_secs())]
    NoAddress { binary: PathBuf, stderr: String },
    #[error("{binary} serve printed an address that is not a URL: {line:?}")]
    BadAddress { binary: PathBuf, line: String },
    #[error("{binary} dev-token failed: {why}")]
    Token { binary: PathBuf, why: String },
    #[error("a temporary directory: {0}")]
    TempDir(#[source] std::io::Error),
}

impl Instance {
    pub fn start(binary: &Path) -> Result<Instance, InstanceError> {
        let dir = tempfile::Builder::new().prefix("signet-bench-cost.").tempdir().map_err(InstanceError::TempDir)?;
        let data = dir.path().join("data");
        let stderr_path = dir.path().join("serve.err");
        let stderr = std::fs::File::create(&stderr_path).map_err(InstanceError::TempDir)?;
        let spawn = |source| InstanceError::Spawn { binary: binary.to_path_buf(), source };
        let mut child = Command::new(binary)
            .args(["serve", "--dev", "--plain-http", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(&data)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .map_err(spawn)?;
        let url = match child.stdout.take().map(|out| listening_line(out, START_TIMEOUT)) {
            Some(Some(line)) => line,
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
                return Err(InstanceError::NoAddress { binary: binary.to_path_buf(), stderr: tail(&stderr) });
            }
        };
        // From here the instance is owned, so any error below stops it (Drop).
        let mut instance = Instance { child, url: Uri::from_static("http://127.0.0.1/"), token: String::new(), _dir: dir };
        instance.url = url.parse().map_err(|_| InstanceError::BadAddress { binary: binary.to_path_buf(), line: url.clone() })?;
        let out = Command::new(binary)
            .args(["dev-token", "--subject", "bench@example.com", "--ttl", "3600", "--data-dir"])
            .arg(&data)
            .stdin(Stdio::null())
            .output()
            .map_err(spawn)?;
        let token = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if !out.status.success() || token.is_empty() {
            let why = format!("{}: {}", out.status, tail(&String::from_utf8_lossy(&out.stderr)));
            return Err(InstanceError::Token { binary: binary.to_path_buf(), why });
        }
        instance.token = token;
        Ok(instance)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The URL of the first `signet listening on URL` line, read on a thread so that a server
/// which prints nothing cannot hang the caller past `timeout`.
fn listening_line(out: std::process::ChildStdout, timeout: Duration) -> Option<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = std::io::BufReader::new(out).lines();
        let found = lines.by_ref().map_while(Result::ok).find_map(|l| l.strip_prefix("signet listening on ").map(str::to_string));
        let _ = tx.send(found);
        // Keep reading, so the server never blocks on a full pipe.
        for _ in lines {}
    });
    rx.recv_timeout(timeout).ok().flatten()
}

/// The last few lines of a process's output, for an error message.
fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(5)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_binary_that_is_not_there_is_named_in_the_error() {
        let e = Instance::start(Path::new("/nonexistent/signet")).err().unwrap();
        assert!(e.to_string().contains("/nonexistent/signet"), "{e}");
    }

    #[test]
    fn a_server_that_never_prints_its_address_is_given_up_on() {
        // `true` exits at once without printing: the reader sees the end of the output.
        let e = Instance::start(Path::new("/bin/true")).err().unwrap();
        assert!(matches!(e, InstanceError::NoAddress { .. }), "{e}");
    }

    #[test]
    fn tails_keep_the_last_lines() {
        assert_eq!(tail("a\nb\nc\nd\ne\nf\ng"), "c\nd\ne\nf\ng");
        assert_eq!(tail(""), "");
    }
}
