"""cosign v3, unchanged, signs blobs against signet and verifies them with signet's trusted
root; bundles cross-verify between cosign (sigstore-go inside) and sigstore-python."""

import os
import subprocess
import sys

import pytest

from conftest import ROOT

COSIGN = os.environ.get("COSIGN_BIN", os.path.join(ROOT, ".tools", "bin", "cosign"))


def run(*args):
    return subprocess.run(list(args), capture_output=True, text=True)


@pytest.fixture(autouse=True)
def cosign_installed():
    if not os.path.exists(COSIGN):
        pytest.fail(f"cosign not found at {COSIGN}; scripts/test installs it")


def test_cosign_sign_verify_and_cross_verify(server, dev_token, trust, tmp_path):
    email = "frank@example.com"
    issuer = server["url"] + "/oidc"
    artifact = tmp_path / "blob.txt"
    artifact.write_text("signed by cosign\n")
    bundle = tmp_path / "blob.sigstore.json"
    token_file = tmp_path / "token"
    token_file.write_text(dev_token(email))  # cosign sends the file's bytes as they are: no trailing newline
    signed = run(COSIGN, "sign-blob", "--yes", "--signing-config", str(trust / "signing_config.json"),
                 "--trusted-root", str(trust / "trusted_root.json"), "--bundle", str(bundle),
                 "--identity-token", str(token_file), str(artifact))
    assert signed.returncode == 0, signed.stderr

    verify = [COSIGN, "verify-blob", "--trusted-root", str(trust / "trusted_root.json"), "--bundle", str(bundle),
              "--certificate-identity", email, "--certificate-oidc-issuer", issuer]
    ok = run(*verify, str(artifact))
    assert ok.returncode == 0, ok.stderr
    tampered = tmp_path / "tampered.txt"
    tampered.write_text("not signed\n")
    assert run(*verify, str(tampered)).returncode != 0
    assert run(COSIGN, "verify-blob", "--trusted-root", str(trust / "trusted_root.json"), "--bundle", str(bundle),
               "--certificate-identity", "mallory@example.com", "--certificate-oidc-issuer", issuer, str(artifact)).returncode != 0

    # sigstore-python verifies cosign's bundle.
    py = run(sys.executable, "-m", "sigstore", "--trust-config", str(trust / "client_trust_config.json"), "verify", "identity",
             "--offline", "--bundle", str(bundle), "--cert-identity", email, "--cert-oidc-issuer", issuer, str(artifact))
    assert py.returncode == 0, py.stderr


@pytest.mark.parametrize("rekor_version", ["1", "2"])
def test_cosign_verifies_sigstore_python_bundles(server, dev_token, trust, tmp_path, rekor_version):
    email = "grace@example.com"
    token = dev_token(email)
    artifact = tmp_path / "py.txt"
    artifact.write_text(f"signed by sigstore-python over rekor v{rekor_version}\n")
    signed = run(sys.executable, "-m", "sigstore", "--trust-config", str(trust / "client_trust_config.json"), "sign",
                 "--identity-token", token, "--rekor-version", rekor_version, str(artifact))
    assert signed.returncode == 0, signed.stderr
    ok = run(COSIGN, "verify-blob", "--trusted-root", str(trust / "trusted_root.json"), "--bundle", str(artifact) + ".sigstore.json",
             "--certificate-identity", email, "--certificate-oidc-issuer", server["url"] + "/oidc", str(artifact))
    assert ok.returncode == 0, ok.stderr
