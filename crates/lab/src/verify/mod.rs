//! `signet bench verify`: in-process bundle verification, timed per bundle, optionally side by
//! side with a peer verifier (sigstore-go's `sgverify bench`) on the same manifest in the same run.
//!
//! The manifest is the one `sgverify manifest` writes: a JSON list of
//! `{name, bundle, artifact, trusted_root, identity, issuer, key}` with paths relative to it.
//! What is timed matches the peer: parsing the bundle JSON from memory and every check. The
//! trusted root, policy and artifact are loaded once, as a long-running verifier would.
//!
//! Beside each time is the bundle's crypto floor ([`floor`]): the signature checks its
//! verification made, each at the time one such check takes, measured in the same run.

pub mod floor;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use serde::Serialize;
use serde_json::Value;
use signet_core::pubkey::HashAlg;
use signet_core::verifications::Verifications;
use signet_verify::{Artifact, Policy, Verifier, VerifyError};

use floor::{CheckTimes, FloorError};

/// What to time.
#[derive(Debug, Clone)]
pub struct VerifySpec {
    /// JSON list of cases (see `sgverify manifest`).
    pub manifest: PathBuf,
    /// Verifications per bundle.
    pub iterations: usize,
    /// A peer's bench binary to run on the same manifest.
    pub peer: Option<PathBuf>,
    /// Time budget of each repeat (5) of each check the floor is made of.
    pub floor_budget: std::time::Duration,
}

/// What `bench verify` fails with: a manifest it cannot use, a bundle that does not verify,
/// or a peer that fails.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VerifyBenchError {
    /// The manifest, or a file it names, could not be read.
    #[error("{}: {source}", .path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{}: not a JSON list: {source}", .path.display())]
    NotAList { path: PathBuf, source: serde_json::Error },
    #[error("{}: the manifest lists no cases", .path.display())]
    NoCases { path: PathBuf },
    /// A case lacks a field it needs (`field`: trusted_root, bundle, identity, issuer).
    #[error("{case}: {field} is missing")]
    Missing { case: String, field: &'static str },
    #[error("{}: {source}", .path.display())]
    TrustedRoot { path: PathBuf, source: VerifyError },
    #[error("{case}: {source}")]
    Key { case: String, source: VerifyError },
    #[error("{case}: artifact {artifact:?} is not sha256:<64 hex>")]
    Digest { case: String, artifact: String },
    /// A bundle that does not verify cannot be timed: a fast rejection is not a result.
    #[error("{case}: does not verify: {source}")]
    DoesNotVerify { case: String, source: VerifyError },
    #[error("{}: {source}", .bin.display())]
    PeerStart { bin: PathBuf, source: std::io::Error },
    /// The peer exited with an error; what it wrote on stderr, trimmed.
    #[error("{} failed: {stderr}", .bin.display())]
    PeerFailed { bin: PathBuf, stderr: String },
    #[error("{}: output is not JSON: {source}", .bin.display())]
    PeerOutput { bin: PathBuf, source: serde_json::Error },
    #[error("timing the crypto floor: {0}")]
    Floor(#[from] FloorError),
}

struct Case {
    name: String,
    bundle: Vec<u8>,
    artifact: Vec<u8>,
    digest: Option<[u8; 32]>,
    /// The key of its verifier: the trusted root's path.
    root: PathBuf,
    policy: Policy,
    /// The signature checks one verification of it makes.
    checks: Verifications,
    samples: Vec<u64>,
}

/// One bundle's times.
#[derive(Debug, Clone, Serialize)]
pub struct BundleTimes {
    pub name: String,
    pub median_ns: u64,
    pub min_ns: u64,
    pub max_ns: u64,
    pub checks: Verifications,
    /// The checks at this run's time for each ([`CheckTimes::floor_ns`]).
    pub floor_ns: u64,
}

/// Signet's times, in the shape `sgverify bench` writes, so the two compare field by field.
#[derive(Debug, Clone, Serialize)]
pub struct Times {
    pub client: &'static str,
    pub measures: &'static str,
    pub iterations: usize,
    pub bundles: Vec<BundleTimes>,
    pub median_ns: u64,
    pub median_of_bundle_median_ns: u64,
    pub median_of_bundle_floor_ns: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct VerifyReport {
    pub signet: Times,
    /// One check's time for each algorithm, measured in this run.
    pub checks: CheckTimes,
    /// What the peer printed, as it printed it.
    pub peer: Option<Value>,
}

/// Verifies every bundle of the manifest once, then times `iterations` rounds of them, then
/// runs the peer on the same manifest.
pub fn run(spec: &VerifySpec) -> Result<VerifyReport, VerifyBenchError> {
    let (mut cases, verifiers) = load(&spec.manifest)?;
    for c in cases.iter_mut() {
        Verifications::take();
        verify(&verifiers[&c.root], c).map_err(|source| VerifyBenchError::DoesNotVerify { case: c.name.clone(), source })?;
        c.checks = Verifications::take();
    }
    for _ in 0..spec.iterations.max(1) {
        for c in cases.iter_mut() {
            let start = Instant::now();
            let ok = verify(&verifiers[&c.root], c).is_ok();
            c.samples.push(start.elapsed().as_nanos() as u64);
            assert!(ok, "a bundle that verified once stopped verifying");
        }
    }
    let checks = CheckTimes::measure(spec.floor_budget, 5)?;
    let signet = times(&mut cases, spec.iterations, &checks);
    let peer = match &spec.peer {
        Some(p) => Some(run_peer(p, &spec.manifest, spec.iterations)?),
        None => None,
    };
    Ok(VerifyReport { signet, checks, peer })
}

fn verify(v: &Verifier, c: &Case) -> Result<(), VerifyError> {
    let artifact = match &c.digest {
        Some(d) => Artifact::Digest(HashAlg::Sha256, d),
        None => Artifact::Bytes(&c.artifact),
    };
    v.verify_json(&c.bundle, artifact, &c.policy).map(|_| ())
}

fn load(manifest: &Path) -> Result<(Vec<Case>, HashMap<PathBuf, Verifier>), VerifyBenchError> {
    let read = |p: &Path| std::fs::read(p).map_err(|source| VerifyBenchError::Read { path: p.to_path_buf(), source });
    let text = read(manifest)?;
    let list: Vec<Value> = serde_json::from_slice(&text).map_err(|source| VerifyBenchError::NotAList { path: manifest.to_path_buf(), source })?;
    let base = manifest.parent().unwrap_or(Path::new("."));
    let path = |v: &Value, k: &str| -> Option<PathBuf> { v.get(k).and_then(Value::as_str).filter(|s| !s.is_empty()).map(|s| base.join(s)) };
    let (mut cases, mut verifiers) = (Vec::new(), HashMap::new());
    for (i, v) in list.iter().enumerate() {
        let name = v.get("name").and_then(Value::as_str).map_or_else(|| format!("case {i}"), str::to_string);
        let missing = |field| VerifyBenchError::Missing { case: name.clone(), field };
        let root = path(v, "trusted_root").ok_or_else(|| missing("trusted_root"))?;
        if !verifiers.contains_key(&root) {
            let verifier = Verifier::new(&read(&root)?).map_err(|source| VerifyBenchError::TrustedRoot { path: root.clone(), source })?;
            verifiers.insert(root.clone(), verifier);
        }
        let policy = match path(v, "key") {
            Some(k) => Policy::key_from_pem(&read(&k)?).map_err(|source| VerifyBenchError::Key { case: name.clone(), source })?,
            None => {
                let s = |k: &'static str| v.get(k).and_then(Value::as_str).map(str::to_string).ok_or_else(|| missing(k));
                Policy::Identity { identity: s("identity")?, issuer: s("issuer")? }
            }
        };
        let artifact_arg = v.get("artifact").and_then(Value::as_str).unwrap_or_default();
        let artifact_path = base.join(artifact_arg);
        let (artifact, digest) = match artifact_arg.strip_prefix("sha256:").filter(|_| !artifact_path.exists()) {
            Some(h) => {
                let bad = || VerifyBenchError::Digest { case: name.clone(), artifact: artifact_arg.to_string() };
                (Vec::new(), Some(hex_digest(h).ok_or_else(bad)?))
            }
            None => (read(&artifact_path)?, None),
        };
        let bundle = read(&path(v, "bundle").ok_or_else(|| missing("bundle"))?)?;
        cases.push(Case { name, bundle, artifact, digest, root, policy, checks: Verifications::default(), samples: Vec::new() });
    }
    if cases.is_empty() {
        return Err(VerifyBenchError::NoCases { path: manifest.to_path_buf() });
    }
    Ok((cases, verifiers))
}

fn hex_digest(h: &str) -> Option<[u8; 32]> {
    hex::decode(h).ok()?.try_into().ok()
}

fn median(xs: &mut [u64]) -> u64 {
    xs.sort_unstable();
    xs[xs.len() / 2]
}

fn times(cases: &mut [Case], iterations: usize, checks: &CheckTimes) -> Times {
    let mut all: Vec<u64> = cases.iter().flat_map(|c| c.samples.iter().copied()).collect();
    let (mut medians, mut floors) = (Vec::new(), Vec::new());
    let bundles = cases
        .iter_mut()
        .map(|c| {
            let m = median(&mut c.samples);
            let floor_ns = checks.floor_ns(&c.checks);
            medians.push(m);
            floors.push(floor_ns);
            let (min_ns, max_ns) = (c.samples[0], c.samples[c.samples.len() - 1]);
            BundleTimes { name: c.name.clone(), median_ns: m, min_ns, max_ns, checks: c.checks, floor_ns }
        })
        .collect();
    Times {
        client: "signet-verify",
        measures: "parse bundle JSON + verify",
        iterations,
        bundles,
        median_ns: median(&mut all),
        median_of_bundle_median_ns: median(&mut medians),
        median_of_bundle_floor_ns: median(&mut floors),
    }
}

fn run_peer(bin: &Path, manifest: &Path, iterations: usize) -> Result<Value, VerifyBenchError> {
    let out = Command::new(bin)
        .args(["bench", "--manifest"])
        .arg(manifest)
        .args(["--iterations", &iterations.to_string()])
        .output()
        .map_err(|source| VerifyBenchError::PeerStart { bin: bin.to_path_buf(), source })?;
    if !out.status.success() {
        return Err(VerifyBenchError::PeerFailed { bin: bin.to_path_buf(), stderr: String::from_utf8_lossy(&out.stderr).trim().to_string() });
    }
    serde_json::from_slice(&out.stdout).map_err(|source| VerifyBenchError::PeerOutput { bin: bin.to_path_buf(), source })
}

impl VerifyReport {
    /// Per bundle, signet's median, its crypto floor and what is above it, beside the peer's
    /// median and the ratio, and the checks the floor counts; then the two medians, and each
    /// check's time in this run.
    pub fn table(&self) -> String {
        use std::fmt::Write as _;
        let ms = |ns: u64| ns as f64 / 1e6;
        let peer_ms = |v: &Value| v.as_u64().map_or(0.0, ms);
        let peer_of = |name: &str| -> Option<f64> {
            self.peer.as_ref()?["bundles"].as_array()?.iter().find(|b| b["name"].as_str() == Some(name)).map(|b| peer_ms(&b["median_ns"]))
        };
        let peer_cells = |p: Option<f64>, s: f64| match p {
            Some(p) => format!("{p:>10.3} {:>6.1}x", p / s),
            None => format!("{:>10} {:>7}", "-", "-"),
        };
        let mut out = String::new();
        let _ = writeln!(out, "{:<44} {:>10} {:>9} {:>8} {:>10} {:>7}  checks", "bundle", "signet ms", "floor ms", "over ms", "peer ms", "ratio");
        for b in &self.signet.bundles {
            let (s, f) = (ms(b.median_ns), ms(b.floor_ns));
            let peer = peer_cells(peer_of(&b.name), s);
            let _ = writeln!(out, "{:<44} {s:>10.3} {f:>9.3} {:>8.3} {peer}  {}", b.name, s - f, b.checks.describe());
        }
        let all = ms(self.signet.median_ns);
        let peer = peer_cells(self.peer.as_ref().map(|p| peer_ms(&p["median_ns"])), all);
        let _ = writeln!(out, "{:<44} {all:>10.3} {:>9} {:>8} {peer}", "median over all samples", "-", "-");
        let (m, f) = (ms(self.signet.median_of_bundle_median_ns), ms(self.signet.median_of_bundle_floor_ns));
        let peer = peer_cells(self.peer.as_ref().map(|p| peer_ms(&p["median_of_bundle_median_ns"])), m);
        let _ = writeln!(out, "{:<44} {m:>10.3} {f:>9.3} {:>8.3} {peer}", "median of bundle medians (and floors)", m - f);
        let _ = writeln!(out, "\nOne check, timed in this run (aws-lc-rs, key parsed once, median of 5): {}.", self.checks.describe());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn a_manifest_that_cannot_be_used_says_why() {
        let dir = tempfile::tempdir().unwrap();
        let err = |text: &str| load(&write(dir.path(), "m.json", text)).err().unwrap();
        assert!(matches!(err("{}"), VerifyBenchError::NotAList { .. }));
        assert!(err("[]").to_string().ends_with("m.json: the manifest lists no cases"));
        assert_eq!(err(r#"[{"name": "a"}]"#).to_string(), "a: trusted_root is missing");
        assert_eq!(err(r#"[{}]"#).to_string(), "case 0: trusted_root is missing");
        let missing = load(&dir.path().join("absent.json")).err().unwrap();
        assert!(matches!(&missing, VerifyBenchError::Read { path, .. } if path.ends_with("absent.json")), "{missing}");
    }

    #[test]
    fn the_table_puts_the_floor_and_the_peer_beside_signet() {
        let checks = Verifications { p256: 2, p384: 2, rsa: 0, ed25519: 1 };
        let signet = Times {
            client: "signet-verify",
            measures: "parse bundle JSON + verify",
            iterations: 1,
            bundles: vec![BundleTimes { name: "a".into(), median_ns: 2_000_000, min_ns: 1, max_ns: 3, checks, floor_ns: 540_000 }],
            median_ns: 2_000_000,
            median_of_bundle_median_ns: 2_000_000,
            median_of_bundle_floor_ns: 540_000,
        };
        let report = |peer| VerifyReport { signet: signet.clone(), checks: floor::tests::round(), peer };
        let alone = report(None).table();
        let row = alone.lines().nth(1).unwrap();
        assert!(row.starts_with(&format!("{:<44} {:>10.3} {:>9.3} {:>8.3} {:>10} {:>7}", "a", 2.0, 0.54, 1.46, "-", "-")), "{alone}");
        assert!(row.ends_with("  2 P-384 + 2 P-256 + 1 Ed25519"), "{alone}");
        let peer = serde_json::json!({"bundles": [{"name": "a", "median_ns": 6_000_000}], "median_ns": 6_000_000, "median_of_bundle_median_ns": 6_000_000});
        let beside = report(Some(peer)).table();
        assert!(beside.lines().nth(1).unwrap().contains("      6.000    3.0x  2 P-384"), "{beside}");
        assert!(beside.lines().nth(3).unwrap().contains("     2.000     0.540    1.460      6.000    3.0x"), "{beside}");
        assert!(beside.ends_with("P-256 50.0 µs, P-384 200.0 µs, RSA-2048 20.0 µs, Ed25519 40.0 µs.\n"), "{beside}");
    }

}
