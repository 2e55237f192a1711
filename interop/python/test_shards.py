"""A Rekor v1 log rotated into a new shard (`signet admin log rotate`, offline and online):
cosign, sigstore-python and sigstore-go, unchanged, and signet's own verifier still verify
bundles signed before the rotation, and verify new ones signed after it, with the trust root
exported after it. The trust root of before the rotation does not know the new shard's key,
and refuses the new bundles."""

import json
import subprocess
import sys
import time

import pytest

from conftest import serve
from test_cosign import COSIGN
from test_sigstore_go import SGVERIFY


def run(*args):
    return subprocess.run(list(args), capture_output=True, text=True)


def export(signet_bin, data_dir, out):
    subprocess.run([signet_bin, "trust", "export", "--data-dir", data_dir, "--out", str(out)], check=True, capture_output=True)
    return out


def token(signet_bin, data_dir, email):
    out = subprocess.run([signet_bin, "dev-token", "--data-dir", data_dir, "--subject", email], check=True, capture_output=True, text=True)
    return out.stdout.strip()


def v1_only(trust, out):
    """The signing config with Rekor v1 alone, so that cosign logs to the sharded log."""
    config = json.loads((trust / "signing_config.json").read_text())
    config["rekorTlogUrls"] = [u for u in config["rekorTlogUrls"] if u["majorApiVersion"] == 1]
    out.write_text(json.dumps(config))
    return out


def sign_both(signet_bin, server, trust, tmp_path, tag):
    """Signs one artifact with sigstore-python and one with cosign, over Rekor v1."""
    email = f"{tag}@example.com"
    signed = []
    py_artifact = tmp_path / f"{tag}-py.txt"
    py_artifact.write_text(f"{tag}: sigstore-python\n")
    r = run(sys.executable, "-m", "sigstore", "--trust-config", str(trust / "client_trust_config.json"), "sign",
            "--identity-token", token(signet_bin, server["data_dir"], email), "--rekor-version", "1", str(py_artifact))
    assert r.returncode == 0, r.stderr
    signed.append((py_artifact, tmp_path / f"{tag}-py.txt.sigstore.json", email))

    co_artifact = tmp_path / f"{tag}-cosign.txt"
    co_artifact.write_text(f"{tag}: cosign\n")
    token_file = tmp_path / f"{tag}-token"
    token_file.write_text(token(signet_bin, server["data_dir"], email))
    bundle = tmp_path / f"{tag}-cosign.sigstore.json"
    r = run(COSIGN, "sign-blob", "--yes", "--signing-config", str(v1_only(trust, tmp_path / f"{tag}-sc.json")),
            "--trusted-root", str(trust / "trusted_root.json"), "--bundle", str(bundle), "--identity-token", str(token_file), str(co_artifact))
    assert r.returncode == 0, r.stderr
    signed.append((co_artifact, bundle, email))
    for _, b, _ in signed:
        entry = json.loads(b.read_text())["verificationMaterial"]["tlogEntries"][0]
        assert entry["kindVersion"]["version"] == "0.0.1", "signed over Rekor v1"
    return signed


def verify_with_all(signet_bin, trust, issuer, artifact, bundle, email):
    """{verifier: result} for sigstore-python, cosign, sigstore-go and signet verify-bundle."""
    root = str(trust / "trusted_root.json")
    return {
        "sigstore-python": run(sys.executable, "-m", "sigstore", "--trust-config", str(trust / "client_trust_config.json"), "verify",
                               "identity", "--offline", "--bundle", str(bundle), "--cert-identity", email, "--cert-oidc-issuer", issuer,
                               str(artifact)),
        "cosign": run(COSIGN, "verify-blob", "--trusted-root", root, "--bundle", str(bundle),
                      "--certificate-identity", email, "--certificate-oidc-issuer", issuer, str(artifact)),
        "sigstore-go": run(SGVERIFY, "verify", "--trusted-root", root, "--bundle", str(bundle), "--identity", email, "--issuer", issuer,
                           str(artifact)),
        "signet": run(signet_bin, "verify-bundle", "--bundle", str(bundle), "--certificate-identity", email,
                      "--certificate-oidc-issuer", issuer, "--trusted-root", root, str(artifact)),
    }


def rotate_online(signet_bin, server):
    """Rotates through the running instance, with a fresh admin token."""
    token = subprocess.run([signet_bin, "admin", "token", "create", "--role", "admin", "--data-dir", server["data_dir"]],
                           check=True, capture_output=True, text=True).stdout.strip()
    for _ in range(20):  # the instance sees a new token within moments
        r = run(signet_bin, "admin", "log", "rotate", "--log", "rekor-v1", "--url", server["url"], "--token", token)
        if "HTTP 401" not in r.stderr:
            return r
        time.sleep(0.2)
    return r


@pytest.mark.parametrize("mode", ["offline", "online"])
def test_bundles_from_before_a_rotation_verify_after_it(signet_bin, tmp_path, mode):
    data_dir = str(tmp_path / "data")
    with serve(signet_bin, data_dir) as server:
        listen = server["url"].removeprefix("http://")
        issuer = server["url"] + "/oidc"
        before_trust = export(signet_bin, data_dir, tmp_path / "trust-before")
        before = sign_both(signet_bin, server, before_trust, tmp_path, "before")
        if mode == "online":
            rotated = rotate_online(signet_bin, server)
            assert rotated.returncode == 0, rotated.stderr
            after_trust = export(signet_bin, data_dir, tmp_path / "trust-after")
            after = sign_both(signet_bin, server, after_trust, tmp_path, "after")

    if mode == "offline":
        rotated = run(signet_bin, "admin", "log", "rotate", "--log", "rekor-v1", "--data-dir", data_dir)
        assert rotated.returncode == 0, rotated.stderr
        # The same address, so the dev issuer's URL (in every certificate) is unchanged.
        with serve(signet_bin, data_dir, listen) as server:
            after_trust = export(signet_bin, data_dir, tmp_path / "trust-after")
            after = sign_both(signet_bin, server, after_trust, tmp_path, "after")
    start = json.loads(rotated.stdout)["active"]["startIndex"]
    tlogs = json.loads((after_trust / "trusted_root.json").read_text())["tlogs"]
    assert len(tlogs) == 3 and "end" in tlogs[0]["publicKey"]["validFor"]

    for artifact, bundle, email in before + after:
        for verifier, r in verify_with_all(signet_bin, after_trust, issuer, artifact, bundle, email).items():
            assert r.returncode == 0, f"{verifier}, {bundle.name}: {r.stderr}"

    for artifact, bundle, email in after:
        entry = json.loads(bundle.read_text())["verificationMaterial"]["tlogEntries"][0]
        # Log-wide index past the frozen shard; the proof's index is the new shard's own.
        assert int(entry["logIndex"]) > start
        assert int(entry["inclusionProof"]["logIndex"]) == int(entry["logIndex"]) - start
        # The trust root of before the rotation has no key for the new shard.
        for verifier, r in verify_with_all(signet_bin, before_trust, issuer, artifact, bundle, email).items():
            assert r.returncode != 0, f"{verifier} verified {bundle.name} without the new shard's key"
