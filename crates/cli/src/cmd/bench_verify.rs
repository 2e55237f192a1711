//! `signet bench verify`: in-process bundle verification, timed per bundle, optionally side by
//! side with a peer verifier (sigstore-go's `sgverify bench`) on the same manifest in the same run.
//!
//! The manifest is the one `sgverify manifest` writes: a JSON list of
//! `{name, bundle, artifact, trusted_root, identity, issuer, key}` with paths relative to it.
//! What is timed matches the peer: parsing the bundle JSON from memory and every check. The
//! trusted root, policy and artifact are loaded once, as a long-running verifier would.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

use serde_json::{json, Value};
use signet_core::pubkey::HashAlg;
use signet_verify::{Artifact, Policy, Verifier};

#[derive(clap::Args)]
pub struct Args {
    /// JSON list of cases (see `sgverify manifest`).
    #[arg(long)]
    manifest: PathBuf,
    /// Verifications per bundle.
    #[arg(long, default_value_t = 200)]
    iterations: usize,
    /// A peer's bench binary to run on the same manifest (e.g. .tools/bin/sgverify).
    #[arg(long)]
    peer: Option<PathBuf>,
    /// Write the machine-readable result here.
    #[arg(long)]
    json: Option<PathBuf>,
}

struct Case {
    name: String,
    bundle: Vec<u8>,
    artifact: Vec<u8>,
    digest: Option<[u8; 32]>,
    root: String,
    policy: Policy,
    samples: Vec<u64>,
}

fn fail(why: impl std::fmt::Display) -> ExitCode {
    errln!("signet bench verify: {why}");
    ExitCode::from(2)
}

pub fn run(a: Args) -> ExitCode {
    let (mut cases, verifiers) = match load(&a.manifest) {
        Ok(x) => x,
        Err(e) => return fail(e),
    };
    // Every bundle must verify before anything is timed: a fast rejection is not a result.
    for c in &cases {
        if let Err(e) = verify(&verifiers[&c.root], c) {
            return fail(format!("{}: does not verify: {e}", c.name));
        }
    }
    for _ in 0..a.iterations.max(1) {
        for c in cases.iter_mut() {
            let start = Instant::now();
            let ok = verify(&verifiers[&c.root], c).is_ok();
            c.samples.push(start.elapsed().as_nanos() as u64);
            assert!(ok, "a bundle that verified once stopped verifying");
        }
    }
    let ours = report(&mut cases, a.iterations);
    let peer = match &a.peer {
        Some(p) => match run_peer(p, &a.manifest, a.iterations) {
            Ok(v) => Some(v),
            Err(e) => return fail(e),
        },
        None => None,
    };
    print_table(&ours, peer.as_ref());
    if let Some(path) = a.json {
        let out = json!({"signet": ours, "peer": peer});
        if let Err(e) = std::fs::write(&path, serde_json::to_string_pretty(&out).expect("serializes")) {
            return fail(format!("{}: {e}", path.display()));
        }
    }
    ExitCode::SUCCESS
}

fn verify(v: &Verifier, c: &Case) -> Result<(), signet_verify::VerifyError> {
    let artifact = match &c.digest {
        Some(d) => Artifact::Digest(HashAlg::Sha256, d),
        None => Artifact::Bytes(&c.artifact),
    };
    v.verify_json(&c.bundle, artifact, &c.policy).map(|_| ())
}

fn load(manifest: &Path) -> Result<(Vec<Case>, HashMap<String, Verifier>), String> {
    let text = std::fs::read(manifest).map_err(|e| format!("{}: {e}", manifest.display()))?;
    let list: Vec<Value> = serde_json::from_slice(&text).map_err(|e| format!("{}: not a JSON list: {e}", manifest.display()))?;
    let base = manifest.parent().unwrap_or(Path::new("."));
    let path = |v: &Value, k: &str| -> Option<PathBuf> { v.get(k).and_then(Value::as_str).filter(|s| !s.is_empty()).map(|s| base.join(s)) };
    let read = |p: &Path| std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()));
    let (mut cases, mut verifiers) = (Vec::new(), HashMap::new());
    for (i, v) in list.iter().enumerate() {
        let name = v.get("name").and_then(Value::as_str).map_or_else(|| format!("case {i}"), str::to_string);
        let need = |k: &str| path(v, k).ok_or_else(|| format!("{name}: {k} is missing"));
        let root_path = need("trusted_root")?;
        let root = root_path.display().to_string();
        if !verifiers.contains_key(&root) {
            let verifier = Verifier::new(&read(&root_path)?).map_err(|e| format!("{root}: {e}"))?;
            verifiers.insert(root.clone(), verifier);
        }
        let policy = match path(v, "key") {
            Some(k) => Policy::key_from_pem(&read(&k)?).map_err(|e| format!("{name}: {e}"))?,
            None => {
                let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string).ok_or_else(|| format!("{name}: {k} is missing"));
                Policy::Identity { identity: s("identity")?, issuer: s("issuer")? }
            }
        };
        let artifact_arg = v.get("artifact").and_then(Value::as_str).unwrap_or_default();
        let artifact_path = base.join(artifact_arg);
        let (artifact, digest) = match artifact_arg.strip_prefix("sha256:").filter(|_| !artifact_path.exists()) {
            Some(h) => (Vec::new(), Some(hex_digest(h).ok_or_else(|| format!("{name}: artifact {artifact_arg:?} is not sha256:<64 hex>"))?)),
            None => (read(&artifact_path)?, None),
        };
        let bundle = read(&need("bundle")?)?;
        cases.push(Case { name, bundle, artifact, digest, root, policy, samples: Vec::new() });
    }
    if cases.is_empty() {
        return Err(format!("{}: the manifest lists no cases", manifest.display()));
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

/// The same shape as `sgverify bench` writes, so the two compare field by field.
fn report(cases: &mut [Case], iterations: usize) -> Value {
    let mut all: Vec<u64> = cases.iter().flat_map(|c| c.samples.iter().copied()).collect();
    let mut medians = Vec::new();
    let bundles: Vec<Value> = cases
        .iter_mut()
        .map(|c| {
            let m = median(&mut c.samples);
            medians.push(m);
            json!({"name": c.name, "median_ns": m, "min_ns": c.samples[0], "max_ns": c.samples[c.samples.len() - 1]})
        })
        .collect();
    json!({
        "client": "signet-verify",
        "measures": "parse bundle JSON + verify",
        "iterations": iterations,
        "bundles": bundles,
        "median_ns": median(&mut all),
        "median_of_bundle_median_ns": median(&mut medians),
    })
}

fn run_peer(bin: &Path, manifest: &Path, iterations: usize) -> Result<Value, String> {
    let out = Command::new(bin)
        .args(["bench", "--manifest"])
        .arg(manifest)
        .args(["--iterations", &iterations.to_string()])
        .output()
        .map_err(|e| format!("{}: {e}", bin.display()))?;
    if !out.status.success() {
        return Err(format!("{} failed: {}", bin.display(), String::from_utf8_lossy(&out.stderr).trim()));
    }
    serde_json::from_slice(&out.stdout).map_err(|e| format!("{}: output is not JSON: {e}", bin.display()))
}

fn print_table(ours: &Value, peer: Option<&Value>) {
    let ms = |v: &Value| v.as_u64().unwrap_or(0) as f64 / 1e6;
    let peer_of = |name: &Value| -> Option<f64> {
        peer?["bundles"].as_array()?.iter().find(|b| &b["name"] == name).map(|b| ms(&b["median_ns"]))
    };
    outln!("{:<52} {:>12} {:>12} {:>8}", "bundle", "signet ms", "peer ms", "ratio");
    for b in ours["bundles"].as_array().into_iter().flatten() {
        let (s, p) = (ms(&b["median_ns"]), peer_of(&b["name"]));
        let name = b["name"].as_str().unwrap_or("");
        match p {
            Some(p) => outln!("{name:<52} {s:>12.3} {p:>12.3} {:>7.1}x", p / s),
            None => outln!("{name:<52} {s:>12.3} {:>12} {:>8}", "-", "-"),
        }
    }
    for (label, key) in [("median over all samples", "median_ns"), ("median of bundle medians", "median_of_bundle_median_ns")] {
        let s = ms(&ours[key]);
        match peer.map(|p| ms(&p[key])) {
            Some(p) => outln!("{label:<52} {s:>12.3} {p:>12.3} {:>7.1}x", p / s),
            None => outln!("{label:<52} {s:>12.3}"),
        }
    }
}
