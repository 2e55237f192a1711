"""sigstore-rs 0.15.0 (the `sigstore` crate), unchanged and pinned (interop/rust: a Cargo project of
its own whose one program, sgrs, drives sigstore-rs's Fulcio and Rekor clients and its bundle
verifier), against signet.

- sigstore-rs verifies sigstore-python's Rekor v1 bundles offline with the trusted_root.json that
  `signet trust export` writes (by file and by digest), and refuses a changed artifact, another
  identity and another issuer.
- sigstore-rs 0.15 verifies no Rekor v2 bundle: it wants the entry's body to be the hashedrekord
  0.0.1 it rebuilds from the bundle (sigstore-0.15.0 src/bundle/verify/models.rs:531-571) and the
  time of signing from the entry's integratedTime (src/bundle/verify/verifier.rs:244-257), and
  reads no RFC 3161 timestamp. It refuses sigstore-python's v2 bundles.
- sigstore-rs checks none of the log's proofs (no SET, checkpoint signature or inclusion proof:
  src/bundle/verify/verifier.rs:234-240): a bundle with any one of them forged still verifies,
  where sigstore-python refuses it.
- sigstore-rs signs with signet: a certificate from signet's CA over Fulcio's REST v2 API (a CSR,
  as its own SigningSession asks) or over the legacy v1 API, then a hashedrekord 0.0.1 entry in
  signet's Rekor v1 log; plain HTTP, or HTTPS trusting tls_ca.pem. sigstore-rs's SigningContext
  itself only reaches the public-good instance from outside the crate (its constructor for other
  services takes a crate-private Keyring: src/bundle/sign.rs:275, src/crypto/mod.rs:174), so sgrs
  runs SigningSession's steps with the crate's public clients. sigstore-rs and sigstore-python
  both verify the bundle, and both refuse another identity.

  sigstore-rs's Rekor client reads the answer to `POST /api/v1/log/entries` by byte offsets that
  assume Go's JSON encoder, which ends the body with a newline
  (src/rekor/apis/entries_api.rs:63-68 keeps `content[85..len-2]`). signet's entry answers end
  with one too (before, the parse lost the closing brace, after signet had logged the entry)."""

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT

RUST_DIR = os.path.join(ROOT, "interop", "rust")
EMAIL = "rs@example.com"


def newest_source(root):
    stamps = [os.path.getmtime(os.path.join(root, f)) for f in ("Cargo.toml", "Cargo.lock")]
    for folder, _, files in os.walk(os.path.join(root, "src")):
        stamps += [os.path.getmtime(os.path.join(folder, f)) for f in files]
    return max(stamps)


@pytest.fixture(scope="session")
def sgrs():
    """The program's path: SIGSTORE_RS_BIN, or interop/rust built once (release, --locked) when
    its binary is missing or older than its sources, in CARGO_TARGET_DIR or interop/rust/target."""
    prebuilt = os.environ.get("SIGSTORE_RS_BIN")
    if prebuilt:
        if not os.access(prebuilt, os.X_OK):
            pytest.fail(f"SIGSTORE_RS_BIN={prebuilt} is not an executable")
        return prebuilt
    target = os.environ.get("CARGO_TARGET_DIR") or os.path.join(RUST_DIR, "target")
    binary = os.path.join(target, "release", "sgrs")
    if not os.path.exists(binary) or os.path.getmtime(binary) < newest_source(RUST_DIR):
        cargo = shutil.which("cargo") or shutil.which(os.path.expanduser("~/.cargo/bin/cargo"))
        if cargo is None:
            pytest.fail("cargo not found on PATH: sigstore-rs's interop tests build interop/rust with it "
                        "(or set SIGSTORE_RS_BIN to a built sgrs)")
        build = subprocess.run([cargo, "build", "--release", "--locked", "--manifest-path", os.path.join(RUST_DIR, "Cargo.toml")],
                               capture_output=True, text=True, env=dict(os.environ, CARGO_TARGET_DIR=target))
        if build.returncode != 0:
            pytest.fail(f"building {RUST_DIR} with cargo failed:\n{build.stderr[-6000:]}")
    return binary


def run(cmd, *args, env=None):
    return subprocess.run([cmd, *[str(a) for a in args]], capture_output=True, text=True, timeout=300, env=env)


def sigstore_python(*args):
    # Wide enough that its console does not wrap a message.
    return subprocess.run([sys.executable, "-m", "sigstore", *[str(a) for a in args]], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, COLUMNS="1000"))


def rs_verify(sgrs, trust, bundle, artifact, identity, issuer):
    return run(sgrs, "verify", "--trusted-root", trust / "trusted_root.json", "--bundle", bundle, "--artifact", artifact,
               "--identity", identity, "--issuer", issuer)


def py_verify(trust, bundle, artifact, identity, issuer):
    return sigstore_python("--trust-config", trust / "client_trust_config.json", "verify", "identity", "--offline",
                           "--bundle", bundle, "--cert-identity", identity, "--cert-oidc-issuer", issuer, artifact)


def py_sign(trust, token, artifact, rekor_version):
    signed = sigstore_python("--trust-config", trust / "client_trust_config.json", "sign", "--identity-token", token,
                             "--rekor-version", rekor_version, artifact)
    assert signed.returncode == 0, signed.stderr
    return artifact.parent / (artifact.name + ".sigstore.json")


def responses(url, route, status, ca=None):
    """How many answers signet's /metrics counts for `route` with `status`."""
    metrics = subprocess.run(["curl", "-sf", *(["--cacert", str(ca)] if ca else []), url + "/metrics"], capture_output=True, text=True)
    assert metrics.returncode == 0, metrics.stderr
    prefix = f'signet_http_responses_total{{route="{route}",status="{status}"}} '
    return sum(int(line[len(prefix):]) for line in metrics.stdout.splitlines() if line.startswith(prefix))


def check_signed(signed, url, fulcio_route, fulcio_status, ca=None):
    """sgrs signed: one certificate issued, one entry logged."""
    assert signed.returncode == 0, signed.stdout + signed.stderr
    issued = responses(url, fulcio_route, fulcio_status, ca)
    logged = responses(url, "/api/v1/log/entries", 201, ca)
    assert (issued, logged) == (1, 1), (issued, logged)


def test_sgrs_usage(sgrs):
    assert run(sgrs).returncode == 2
    assert run(sgrs, "sign", "--artifact").returncode == 2
    assert run(sgrs, "verify", "--bundle", "b.json").returncode == 2  # the other options are required
    assert run(sgrs, "frobnicate").returncode == 2


def test_sigstore_rs_verifies_sigstore_python_rekor_v1_bundles(sgrs, server, dev_token, trust, tmp_path):
    email, issuer = "py@example.com", server["url"] + "/oidc"
    artifact = tmp_path / "artifact.txt"
    artifact.write_text("signed by sigstore-python over rekor v1\n")
    bundle = py_sign(trust, dev_token(email), artifact, "1")

    ok = rs_verify(sgrs, trust, bundle, artifact, email, issuer)
    assert ok.returncode == 0 and ok.stdout.strip() == "verified", ok.stdout + ok.stderr
    digest = "sha256:" + hashlib.sha256(artifact.read_bytes()).hexdigest()
    by_digest = rs_verify(sgrs, trust, bundle, digest, email, issuer)
    assert by_digest.returncode == 0 and by_digest.stdout.strip() == "verified", by_digest.stdout + by_digest.stderr

    tampered = tmp_path / "tampered.txt"
    tampered.write_text("not what was signed\n")
    bad = rs_verify(sgrs, trust, bundle, tampered, email, issuer)
    assert bad.returncode == 1 and "signature verification failed" in bad.stderr, bad.stderr
    wrong = rs_verify(sgrs, trust, bundle, artifact, "mallory@example.com", issuer)
    assert wrong.returncode == 1 and "mallory@example.com" in wrong.stderr, wrong.stderr
    wrong_issuer = rs_verify(sgrs, trust, bundle, artifact, email, "https://accounts.example.com")
    assert wrong_issuer.returncode == 1 and "https://accounts.example.com" in wrong_issuer.stderr, wrong_issuer.stderr


def test_sigstore_rs_verifies_no_rekor_v2_bundle(sgrs, server, dev_token, trust, tmp_path):
    """sigstore-rs 0.15 rebuilds a hashedrekord 0.0.1 body from the bundle and compares it with the
    entry's (src/bundle/verify/models.rs:531-571); a v2 entry's body is hashedrekord 0.0.2, so the
    bundle is refused as inconsistent. sigstore-python verifies the same bundle."""
    email, issuer = "py@example.com", server["url"] + "/oidc"
    artifact = tmp_path / "artifact.txt"
    artifact.write_text("signed by sigstore-python over rekor v2\n")
    bundle = py_sign(trust, dev_token(email), artifact, "2")
    doc = json.loads(bundle.read_text())
    assert [e["kindVersion"] for e in doc["verificationMaterial"]["tlogEntries"]] == [{"kind": "hashedrekord", "version": "0.0.2"}]

    refused = rs_verify(sgrs, trust, bundle, artifact, email, issuer)
    assert refused.returncode == 1 and "transparency materials are inconsistent" in refused.stderr, refused.stdout + refused.stderr
    py = py_verify(trust, bundle, artifact, email, issuer)
    assert py.returncode == 0, py.stdout + py.stderr


@pytest.mark.parametrize("forged", ["set", "checkpoint", "inclusion-proof"])
def test_sigstore_rs_checks_none_of_the_logs_proofs(sgrs, server, dev_token, trust, tmp_path, forged):
    """sigstore-rs 0.15 verifies neither the SET nor the checkpoint's signature nor the inclusion
    proof (src/bundle/verify/verifier.rs:234-240): a bundle with any one of them forged still
    verifies with it. sigstore-python refuses each."""
    email, issuer = "py@example.com", server["url"] + "/oidc"
    artifact = tmp_path / "artifact.txt"
    artifact.write_text(f"a bundle whose {forged} is forged\n")
    bundle = py_sign(trust, dev_token(email), artifact, "1")
    doc = json.loads(bundle.read_text())
    entry = doc["verificationMaterial"]["tlogEntries"][0]
    if forged == "set":  # a valid signature, but over other bytes and by another key
        entry["inclusionPromise"]["signedEntryTimestamp"] = doc["messageSignature"]["signature"]
    elif forged == "checkpoint":
        note, _, _ = entry["inclusionProof"]["checkpoint"]["envelope"].partition("\n\n")
        entry["inclusionProof"]["checkpoint"]["envelope"] = note + "\n\n\u2014 forged AAAAAAAAAAAAAAAA\n"
    else:  # a leaf of another tree
        entry["inclusionProof"]["hashes"] = [base64.b64encode(bytes(32)).decode()] * max(1, len(entry["inclusionProof"]["hashes"]))
    forged_bundle = tmp_path / "forged.sigstore.json"
    forged_bundle.write_text(json.dumps(doc))

    rs = rs_verify(sgrs, trust, forged_bundle, artifact, email, issuer)
    assert rs.returncode == 0 and rs.stdout.strip() == "verified", rs.stdout + rs.stderr
    py = py_verify(trust, forged_bundle, artifact, email, issuer)
    said = " ".join((py.stdout + py.stderr).split())
    why = {"set": "SET: invalid inclusion promise", "checkpoint": "checkpoint: Signature not found",
           "inclusion-proof": "inclusion proof contains invalid root hash"}[forged]
    assert py.returncode != 0 and why in said, said


@pytest.mark.parametrize("fulcio_api", ["v2", "v1"])
def test_sigstore_rs_signs_with_signet_and_both_clients_verify(sgrs, server, dev_token, trust, tmp_path, fulcio_api):
    url, issuer = server["url"], server["url"] + "/oidc"
    artifact = tmp_path / "artifact.txt"
    artifact.write_text(f"signed by sigstore-rs, certificate over fulcio {fulcio_api}\n")
    bundle = tmp_path / "artifact.rs.sigstore.json"
    signed = run(sgrs, "sign", "--fulcio-url", url, "--rekor-url", url, "--trusted-root", trust / "trusted_root.json",
                 "--token", dev_token(EMAIL), "--artifact", artifact, "--bundle", bundle, "--fulcio-api", fulcio_api)
    route, status = {"v2": ("/api/v2/signingCert", 200), "v1": ("/api/v1/signingCert", 201)}[fulcio_api]
    check_signed(signed, url, route, status)

    doc = json.loads(bundle.read_text())
    assert doc["mediaType"] == "application/vnd.dev.sigstore.bundle+json;version=0.2", doc["mediaType"]
    entries = doc["verificationMaterial"]["tlogEntries"]
    assert [e["kindVersion"] for e in entries] == [{"kind": "hashedrekord", "version": "0.0.1"}], entries
    assert entries[0]["inclusionPromise"]["signedEntryTimestamp"] and entries[0]["inclusionProof"]["checkpoint"]["envelope"], entries
    assert len(doc["verificationMaterial"]["x509CertificateChain"]["certificates"]) == 1

    ok = rs_verify(sgrs, trust, bundle, artifact, EMAIL, issuer)
    assert ok.returncode == 0 and ok.stdout.strip() == "verified", ok.stdout + ok.stderr
    wrong = rs_verify(sgrs, trust, bundle, artifact, "mallory@example.com", issuer)
    assert wrong.returncode == 1 and "mallory@example.com" in wrong.stderr, wrong.stderr
    tampered = tmp_path / "tampered.txt"
    tampered.write_text("not what was signed\n")
    assert rs_verify(sgrs, trust, bundle, tampered, EMAIL, issuer).returncode == 1

    py = py_verify(trust, bundle, artifact, EMAIL, issuer)
    assert py.returncode == 0 and "OK" in py.stdout + py.stderr, py.stdout + py.stderr
    assert py_verify(trust, bundle, artifact, "mallory@example.com", issuer).returncode != 0


def test_sigstore_rs_signs_with_signet_over_https(sgrs, https_server, tmp_path):
    url, trust, issuer = https_server["url"], https_server["trust"], https_server["url"] + "/oidc"
    artifact = tmp_path / "artifact.txt"
    artifact.write_text("signed by sigstore-rs over https\n")
    bundle = tmp_path / "artifact.rs.sigstore.json"

    def sign(*tls):
        return run(sgrs, "sign", "--fulcio-url", url, "--rekor-url", url, "--trusted-root", trust / "trusted_root.json",
                   "--token", https_server["token"](EMAIL), "--artifact", artifact, "--bundle", bundle, *tls)

    # Without signet's TLS CA, the Fulcio request fails on the certificate.
    untrusted = sign()
    assert untrusted.returncode == 1 and "Fulcio" in untrusted.stderr, untrusted.stderr
    assert responses(url, "/api/v2/signingCert", 200, trust / "tls_ca.pem") == 0

    signed = sign("--tls-ca", trust / "tls_ca.pem")
    check_signed(signed, url, "/api/v2/signingCert", 200, trust / "tls_ca.pem")
    ok = rs_verify(sgrs, trust, bundle, artifact, EMAIL, issuer)
    assert ok.returncode == 0 and ok.stdout.strip() == "verified", ok.stdout + ok.stderr
    py = py_verify(trust, bundle, artifact, EMAIL, issuer)
    assert py.returncode == 0, py.stdout + py.stderr
