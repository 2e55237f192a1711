"""sigstore-go v1.3.0, the third real client: bundles that sigstore-python (Rekor v1 and v2) and
cosign make against signet verify with sigstore-go (interop/go, built as `sgverify`) under a strict
policy: transparency log entry, embedded SCT and an observer timestamp all required, identity
matched exactly. The observer timestamp of a Rekor v1 bundle is the SET's integrated time; a
Rekor v2 entry has none, so its timestamp must come from signet's TSA."""

import hashlib
import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT

SGVERIFY = os.environ.get("SGVERIFY_BIN", os.path.join(ROOT, ".tools", "bin", "sgverify"))
COSIGN = os.environ.get("COSIGN_BIN", os.path.join(ROOT, ".tools", "bin", "cosign"))
CLIENTS = ["sigstore-python-rekor1", "sigstore-python-rekor2", "cosign"]


def run(*args):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True)


@pytest.fixture(autouse=True)
def sgverify_installed():
    if not os.path.exists(SGVERIFY):
        pytest.fail(f"sgverify not found at {SGVERIFY}; scripts/test builds it from interop/go")


def sign(client, server, dev_token, trust, tmp_path, email):
    """Signs a fresh artifact with a real client against the running signet; returns (artifact, bundle)."""
    artifact = tmp_path / f"{client}.txt"
    artifact.write_text(f"signed by {client} for sigstore-go\n")
    if client == "cosign":
        if not os.path.exists(COSIGN):
            pytest.fail(f"cosign not found at {COSIGN}; scripts/test installs it")
        bundle = tmp_path / f"{client}.sigstore.json"
        token_file = tmp_path / "token"
        token_file.write_text(dev_token(email))  # cosign sends the file's bytes as they are: no trailing newline
        signed = run(COSIGN, "sign-blob", "--yes", "--signing-config", trust / "signing_config.json",
                     "--trusted-root", trust / "trusted_root.json", "--bundle", bundle,
                     "--identity-token", token_file, artifact)
    else:
        rekor_version = client[-1]
        bundle = tmp_path / f"{client}.txt.sigstore.json"
        signed = run(sys.executable, "-m", "sigstore", "--trust-config", trust / "client_trust_config.json", "sign",
                     "--identity-token", dev_token(email), "--rekor-version", rekor_version, artifact)
    assert signed.returncode == 0, signed.stderr
    assert bundle.exists(), f"{client} wrote no bundle"
    return artifact, bundle


def sgverify(trust, bundle, identity, issuer, artifact):
    return run(SGVERIFY, "verify", "--trusted-root", trust / "trusted_root.json", "--bundle", bundle,
               "--identity", identity, "--issuer", issuer, artifact)


def timestamp_types(result):
    assert result.returncode == 0, result.stderr
    return sorted(ts["type"] for ts in json.loads(result.stdout)["timestamps"])


@pytest.mark.parametrize("client", CLIENTS)
def test_sigstore_go_verifies_signet_bundles(server, dev_token, trust, tmp_path, client):
    email = "heidi@example.com"
    issuer = server["url"] + "/oidc"
    artifact, bundle = sign(client, server, dev_token, trust, tmp_path, email)

    ok = sgverify(trust, bundle, email, issuer, artifact)
    assert ok.returncode == 0, ok.stderr
    result = json.loads(ok.stdout)
    assert result["verified"] is True
    assert result["certificate_san"] == email
    assert result["certificate_issuer"] == issuer
    # The same bundle against the artifact's digest instead of its bytes.
    digest = "sha256:" + hashlib.sha256(artifact.read_bytes()).hexdigest()
    assert sgverify(trust, bundle, email, issuer, digest).returncode == 0

    tampered = tmp_path / "tampered.txt"
    tampered.write_text("not what was signed\n")
    bad = sgverify(trust, bundle, email, issuer, tampered)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "signature" in bad.stderr
    wrong_san = sgverify(trust, bundle, "mallory@example.com", issuer, artifact)
    assert wrong_san.returncode == 1, wrong_san.stdout + wrong_san.stderr
    assert "mallory@example.com" in wrong_san.stderr
    wrong_issuer = sgverify(trust, bundle, email, "https://issuer.invalid", artifact)
    assert wrong_issuer.returncode == 1, wrong_issuer.stdout + wrong_issuer.stderr


def strip(bundle, out, tsa=False, set_=False):
    """Writes a copy of the bundle without its RFC 3161 timestamps and/or its tlog entries' SETs."""
    doc = json.loads(bundle.read_text())
    material = doc["verificationMaterial"]
    if tsa:
        material.pop("timestampVerificationData", None)
    if set_:
        for entry in material["tlogEntries"]:
            entry.pop("inclusionPromise", None)
    out.write_text(json.dumps(doc))
    return out


def test_rekor_v1_observer_timestamp_is_the_set_integrated_time(server, dev_token, trust, tmp_path):
    email = "ivan@example.com"
    issuer = server["url"] + "/oidc"
    artifact, bundle = sign("sigstore-python-rekor1", server, dev_token, trust, tmp_path, email)
    entry = json.loads(bundle.read_text())["verificationMaterial"]["tlogEntries"][0]
    assert entry["kindVersion"]["version"] == "0.0.1"
    assert "inclusionPromise" in entry and int(entry["integratedTime"]) > 0

    # Without the TSA's timestamp the SET's integrated time is enough on its own.
    no_tsa = strip(bundle, tmp_path / "no-tsa.json", tsa=True)
    assert timestamp_types(sgverify(trust, no_tsa, email, issuer, artifact)) == ["Tlog"]
    # Without the SET too, the integrated time is unsigned (an inclusion proof does not cover it),
    # so nothing vouches for when the short-lived certificate was used.
    neither = sgverify(trust, strip(bundle, tmp_path / "neither.json", tsa=True, set_=True), email, issuer, artifact)
    assert neither.returncode == 1, neither.stdout + neither.stderr
    assert "timestamp" in neither.stderr


@pytest.mark.parametrize("client", ["sigstore-python-rekor2", "cosign"])
def test_rekor_v2_observer_timestamp_comes_from_the_tsa(server, dev_token, trust, tmp_path, client):
    email = "judy@example.com"
    issuer = server["url"] + "/oidc"
    artifact, bundle = sign(client, server, dev_token, trust, tmp_path, email)
    material = json.loads(bundle.read_text())["verificationMaterial"]
    entry = material["tlogEntries"][0]
    assert entry["kindVersion"]["version"] == "0.0.2", "expected a Rekor v2 entry"
    assert "inclusionPromise" not in entry
    assert len(material["timestampVerificationData"]["rfc3161Timestamps"]) == 1

    assert timestamp_types(sgverify(trust, bundle, email, issuer, artifact)) == ["TimestampAuthority"]
    no_tsa = sgverify(trust, strip(bundle, tmp_path / "no-tsa.json", tsa=True), email, issuer, artifact)
    assert no_tsa.returncode == 1, no_tsa.stdout + no_tsa.stderr
    assert "timestamp" in no_tsa.stderr


def test_sigstore_go_rejects_a_bundle_from_another_instance(server, dev_token, trust, tmp_path, signet_bin):
    """A bundle verifies only against the trusted root of the instance that made it."""
    email = "ken@example.com"
    artifact, bundle = sign("sigstore-python-rekor2", server, dev_token, trust, tmp_path, email)
    other_data = tmp_path / "other-data"
    other_trust = tmp_path / "other-trust"
    # Starting a second instance only to generate its keys; its trust export needs no server running.
    proc = subprocess.Popen([signet_bin, "serve", "--dev", "--plain-http", "--data-dir", str(other_data), "--listen", "127.0.0.1:0"],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().startswith("signet listening on")
        subprocess.run([signet_bin, "trust", "export", "--data-dir", str(other_data), "--out", str(other_trust)],
                       check=True, capture_output=True)
    finally:
        proc.kill()
        proc.wait()
    foreign = sgverify(other_trust, bundle, email, server["url"] + "/oidc", artifact)
    assert foreign.returncode == 1, foreign.stdout + foreign.stderr


def test_sgverify_usage_errors_exit_2(trust, tmp_path):
    assert run(SGVERIFY).returncode == 2
    missing_identity = run(SGVERIFY, "verify", "--trusted-root", trust / "trusted_root.json", "--bundle", tmp_path / "b.json",
                           tmp_path / "a.txt")
    assert missing_identity.returncode == 2
