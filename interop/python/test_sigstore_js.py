"""sigstore-js, unchanged and pinned (interop/js: @sigstore/cli 0.8.1, and the sigstore package
4.1.1 for its `verify`), against signet. Each verification trusts only what sigstore-js fetches
from signet's own TUF repository, starting from the root that `signet trust export` writes.

- `sigstore attest` gets a certificate from signet's CA and an RFC 3161 timestamp from its TSA;
  `sigstore verify` accepts the bundle, and refuses another identity.
- The sigstore package verifies sigstore-python's bundles over Rekor v1 and over Rekor v2.
- `sigstore attest` with a transparency log entry logs an `intoto` 0.0.2 entry in signet's Rekor v1
  log, and `sigstore verify` checks that entry (its SET and inclusion proof) against signet's keys."""

import base64
import hashlib
import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT

JS = os.environ.get("SIGSTORE_JS_DIR", os.path.join(ROOT, "interop", "js"))
CLI = os.path.join(JS, "node_modules", ".bin", "sigstore")


@pytest.fixture(autouse=True)
def sigstore_js_installed():
    if not os.path.exists(CLI):
        pytest.fail(f"sigstore-js not found under {JS}; scripts/test installs it (npm ci)")


@pytest.fixture()
def tuf(server, trust, tmp_path):
    """The options that make sigstore-js trust signet's TUF repository and nothing else."""
    return {"mirror": server["url"] + "/tuf", "root": str(trust / "tuf_root.json"), "cache": str(tmp_path / "tuf-cache")}


@pytest.fixture()
def statement(tmp_path):
    path = tmp_path / "statement.json"
    path.write_text(json.dumps({"_type": "https://in-toto.io/Statement/v1",
                                "subject": [{"name": "app.tar.gz", "digest": {"sha256": "ab" * 32}}],
                                "predicateType": "https://example.com/predicate/v1", "predicate": {}}))
    return path


def attest(server, token, statement, out, *extra):
    # With CI set, @sigstore/cli takes the identity token from SIGSTORE_ID_TOKEN.
    env = dict(os.environ, CI="true", SIGSTORE_ID_TOKEN=token)
    return subprocess.run([CLI, "attest", str(statement), "--fulcio-url", server["url"], "--tsa-server-url", server["url"],
                           "-o", str(out), *extra], capture_output=True, text=True, env=env)


def cli_verify(tuf, bundle, email, issuer):
    return subprocess.run([CLI, "verify", str(bundle), "--tuf-mirror-url", tuf["mirror"], "--tuf-root-path", tuf["root"],
                           "--tuf-cache-path", tuf["cache"], "--tlog-threshold", "0",
                           "--certificate-identity-email", email, "--certificate-issuer", issuer], capture_output=True, text=True)


def test_sigstore_js_attests_with_signets_ca_and_tsa_and_verifies_through_its_tuf(server, dev_token, tuf, statement, tmp_path):
    email, issuer = "js@example.com", server["url"] + "/oidc"
    bundle = tmp_path / "statement.sigstore.json"
    made = attest(server, dev_token(email), statement, bundle, "--no-tlog-upload")
    assert made.returncode == 0, made.stderr
    material = json.loads(bundle.read_text())["verificationMaterial"]
    assert material["timestampVerificationData"]["rfc3161Timestamps"], material
    ok = cli_verify(tuf, bundle, email, issuer)
    assert ok.returncode == 0 and "Verification succeeded" in ok.stdout + ok.stderr, ok.stdout + ok.stderr
    wrong = cli_verify(tuf, bundle, "mallory@example.com", issuer)
    assert wrong.returncode != 0 and "mallory@example.com" in wrong.stderr, wrong.stderr


def test_sigstore_js_attests_to_signets_log_with_intoto_and_verifies_the_entry(server, dev_token, tuf, statement, tmp_path):
    email, issuer = "js@example.com", server["url"] + "/oidc"
    bundle = tmp_path / "logged.sigstore.json"
    made = attest(server, dev_token(email), statement, bundle, "--rekor-url", server["url"])
    assert made.returncode == 0, made.stderr
    entries = json.loads(bundle.read_text())["verificationMaterial"]["tlogEntries"]
    assert [e["kindVersion"] for e in entries] == [{"kind": "intoto", "version": "0.0.2"}], entries
    assert entries[0]["inclusionPromise"]["signedEntryTimestamp"] and entries[0]["inclusionProof"]["hashes"] is not None, entries

    def verify(who):
        return subprocess.run([CLI, "verify", str(bundle), "--tuf-mirror-url", tuf["mirror"], "--tuf-root-path", tuf["root"],
                               "--tuf-cache-path", tuf["cache"], "--tlog-threshold", "1",
                               "--certificate-identity-email", who, "--certificate-issuer", issuer], capture_output=True, text=True)

    ok = verify(email)
    assert ok.returncode == 0 and "Verification succeeded" in ok.stdout + ok.stderr, ok.stdout + ok.stderr
    assert verify("mallory@example.com").returncode != 0
    # The entry is in signet's log, found by the statement's subject digest under its leaf hash.
    search = subprocess.run(["curl", "-sf", "-X", "POST", "-H", "Content-Type: application/json", "--data",
                             json.dumps({"hash": "sha256:" + "ab" * 32}), server["url"] + "/api/v1/index/retrieve"],
                            capture_output=True, text=True, check=True)
    leaf = hashlib.sha256(b"\x00" + base64.b64decode(entries[0]["canonicalizedBody"])).hexdigest()
    assert [uuid[16:] for uuid in json.loads(search.stdout)] == [leaf], search.stdout
    # A changed statement in the bundle no longer matches the logged entry.
    doc = json.loads(bundle.read_text())
    changed = json.loads(base64.b64decode(doc["dsseEnvelope"]["payload"]))
    changed["predicate"] = {"changed": True}
    doc["dsseEnvelope"]["payload"] = base64.b64encode(json.dumps(changed).encode()).decode()
    bundle.write_text(json.dumps(doc))
    assert verify(email).returncode != 0


@pytest.mark.parametrize("rekor_version", ["1", "2"])
def test_sigstore_js_verifies_sigstore_python_bundles(server, dev_token, trust, tuf, tmp_path, rekor_version):
    email, issuer = "py@example.com", server["url"] + "/oidc"
    artifact = tmp_path / "artifact.txt"
    artifact.write_text(f"signed by sigstore-python over rekor v{rekor_version}\n")
    signed = subprocess.run([sys.executable, "-m", "sigstore", "--trust-config", str(trust / "client_trust_config.json"), "sign",
                             "--identity-token", dev_token(email), "--rekor-version", rekor_version, str(artifact)],
                            capture_output=True, text=True)
    assert signed.returncode == 0, signed.stderr
    bundle = str(artifact) + ".sigstore.json"

    def verify(path, who):
        return subprocess.run(["node", os.path.join(JS, "verify.mjs"), bundle, str(path), tuf["mirror"], tuf["root"], tuf["cache"],
                               who, issuer], capture_output=True, text=True)

    ok = verify(artifact, email)
    assert ok.returncode == 0 and ok.stdout.strip() == "verified", ok.stdout + ok.stderr
    tampered = tmp_path / "tampered.txt"
    tampered.write_text("not what was signed\n")
    assert verify(tampered, email).returncode != 0
    assert verify(artifact, "mallory@example.com").returncode != 0
