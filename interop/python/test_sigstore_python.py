"""sigstore-python, unchanged, signs against signet and verifies offline with signet's trust
config, over Rekor v1 (with SET) and Rekor v2 (with an RFC 3161 timestamp)."""

import subprocess
import sys

import pytest


def sigstore(*args):
    return subprocess.run([sys.executable, "-m", "sigstore", *args], capture_output=True, text=True)


@pytest.mark.parametrize("rekor_version", ["1", "2"])
def test_sign_and_verify_offline(server, dev_token, trust, tmp_path, rekor_version):
    trust = str(trust / "client_trust_config.json")
    email = "erin@example.com"
    token = dev_token(email)
    artifact = tmp_path / "artifact.txt"
    artifact.write_text(f"signed over rekor v{rekor_version}\n")
    signed = sigstore("--trust-config", trust, "sign", "--identity-token", token, "--rekor-version", rekor_version, str(artifact))
    assert signed.returncode == 0, signed.stderr
    bundle = tmp_path / "artifact.txt.sigstore.json"
    assert bundle.exists()

    issuer = server["url"] + "/oidc"
    verify = ["--trust-config", trust, "verify", "identity", "--offline", "--cert-identity", email, "--cert-oidc-issuer", issuer]
    ok = sigstore(*verify, str(artifact))
    assert ok.returncode == 0, ok.stderr
    assert "OK" in ok.stderr + ok.stdout

    # A different artifact with the same bundle fails; so does another identity.
    tampered = tmp_path / "tampered.txt"
    tampered.write_text("not what was signed\n")
    bad = sigstore(*verify, "--bundle", str(bundle), str(tampered))
    assert bad.returncode != 0
    wrong_identity = sigstore("--trust-config", trust, "verify", "identity", "--offline", "--cert-identity", "mallory@example.com",
                              "--cert-oidc-issuer", issuer, str(artifact))
    assert wrong_identity.returncode != 0
