"""HTTPS by default: `signet serve --dev` without a certificate serves one that its own TLS CA
issues, and `signet trust export` writes that CA as `tls_ca.pem`. Each client is given it the
way it documents: curl `--cacert`, sigstore-python (`requests`) `REQUESTS_CA_BUNDLE`, cosign and
sigstore-go (Go's crypto/x509) `SSL_CERT_FILE`, and signet's own client (rustls-native-certs)
`SSL_CERT_FILE`. The README tour runs over it, and the three Sigstore clients sign and verify,
bootstrapping from the instance's TUF repository over HTTPS."""

import json
import os
import ssl
import subprocess
import sys
import tempfile
import urllib.request

import pytest

from conftest import serve
from test_cosign import COSIGN
from test_tuf import Clients, client_env  # noqa: F401 (a fixture)

EMAIL = "https-tour@example.com"


def run(*args, env=None):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, env=env)


@pytest.fixture()
def https_dev(signet_bin, tmp_path):
    """A `--dev` instance on HTTPS, and its exported trust (with tls_ca.pem)."""
    with tempfile.TemporaryDirectory() as data_dir, serve(signet_bin, data_dir, https=True) as server:
        trust = tmp_path / "trust"
        r = run(signet_bin, "trust", "export", "--data-dir", data_dir, "--out", trust)
        assert r.returncode == 0, r.stderr
        server["trust"] = trust
        server["ca"] = trust / "tls_ca.pem"
        yield server


def curl(server, *args):
    r = run("curl", "-sS", "--max-time", "10", "--cacert", server["ca"], "-w", "\n%{http_code}", *args)
    body, _, code = r.stdout.rpartition("\n")
    return int(code or 0), body, r


def test_the_readme_tour_over_https(https_dev, signet_bin, tmp_path):
    url = https_dev["url"]
    assert url.startswith("https://127.0.0.1:"), url
    assert (https_dev["trust"] / "tls_ca.pem").read_text().startswith("-----BEGIN CERTIFICATE-----")
    for doc in ("signing_config.json", "client_trust_config.json"):
        text = (https_dev["trust"] / doc).read_text()
        assert url in text and url.replace("https://", "http://") not in text, doc

    # Without the CA, curl refuses the certificate (exit 60: peer certificate cannot be authenticated).
    refused = run("curl", "-sS", "--max-time", "10", url + "/healthz")
    assert refused.returncode == 60, refused.stderr
    # And Python's ssl, given the CA, verifies it by address and by the name localhost.
    ctx = ssl.create_default_context(cafile=str(https_dev["ca"]))
    port = url.rsplit(":", 1)[1]
    for base in (url, f"https://localhost:{port}"):
        with urllib.request.urlopen(base + "/healthz", context=ctx, timeout=10) as r:
            assert r.status == 200

    # The tour: an OpenSSL signature into the Rekor v1 log, then a look around.
    key, pub, artifact, sig = (tmp_path / n for n in ("key.pem", "pub.pem", "artifact.txt", "artifact.sig"))
    assert run("openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", key).returncode == 0
    assert run("openssl", "ec", "-in", key, "-pubout", "-out", pub).returncode == 0
    artifact.write_text("hello\n")
    assert run("openssl", "dgst", "-sha256", "-sign", key, "-out", sig, artifact).returncode == 0
    import base64
    import hashlib
    entry = {"apiVersion": "0.0.1", "kind": "hashedrekord", "spec": {
        "signature": {"content": base64.b64encode(sig.read_bytes()).decode(),
                      "publicKey": {"content": base64.b64encode(pub.read_bytes()).decode()}},
        "data": {"hash": {"algorithm": "sha256", "value": hashlib.sha256(artifact.read_bytes()).hexdigest()}}}}
    entry_file = tmp_path / "entry.json"
    entry_file.write_text(json.dumps(entry))
    status, body, r = curl(https_dev, "-X", "POST", url + "/api/v1/log/entries", "-H", "content-type: application/json",
                           "-d", f"@{entry_file}")
    assert status == 201, (body, r.stderr)
    assert list(json.loads(body).values())[0]["logIndex"] == 1
    status, _, _ = curl(https_dev, "-X", "POST", url + "/api/v1/log/entries", "-H", "content-type: application/json",
                        "-d", f"@{entry_file}")
    assert status == 409
    for path in ("/api/v1/log", "/api/v1/log/entries?logIndex=0", "/api/v1/log/publicKey", "/api/v2/checkpoint", "/ui"):
        status, body, r = curl(https_dev, url + path)
        assert status == 200, (path, body, r.stderr)

    # signet's own client signs through the HTTPS signing config and verifies offline.
    token = run(signet_bin, "dev-token", "--data-dir", https_dev["data_dir"], "--subject", EMAIL).stdout.strip()
    env = dict(os.environ, SSL_CERT_FILE=str(https_dev["ca"]))
    bundle = tmp_path / "artifact.txt.sigstore.json"
    signed = run(signet_bin, "sign-bundle", "--identity-token", token, "--signing-config",
                 https_dev["trust"] / "signing_config.json", "--bundle", bundle, artifact, env=env)
    assert signed.returncode == 0, signed.stderr
    verified = run(signet_bin, "verify-bundle", "--bundle", bundle, "--trusted-root", https_dev["trust"] / "trusted_root.json",
                   "--certificate-identity", EMAIL, "--certificate-oidc-issuer", url + "/oidc", artifact)
    assert verified.returncode == 0, verified.stderr
    # sigstore-python and cosign, as the README runs them: trust from the exported files, the CA
    # in REQUESTS_CA_BUNDLE (requests) and SSL_CERT_FILE (Go).
    trust = https_dev["trust"]
    py_env = dict(os.environ, REQUESTS_CA_BUNDLE=str(https_dev["ca"]))
    signed = run(sys.executable, "-m", "sigstore", "--trust-config", trust / "client_trust_config.json", "sign",
                 "--identity-token", token, "--bundle", tmp_path / "py.sigstore.json", artifact, env=py_env)
    assert signed.returncode == 0, signed.stderr
    verified = run(sys.executable, "-m", "sigstore", "--trust-config", trust / "client_trust_config.json", "verify", "identity",
                   "--offline", "--bundle", tmp_path / "py.sigstore.json", "--cert-identity", EMAIL, "--cert-oidc-issuer",
                   url + "/oidc", artifact)
    assert verified.returncode == 0, verified.stderr
    token_file = tmp_path / "token.txt"
    token_file.write_text(token)
    signed = run(COSIGN, "sign-blob", "--yes", "--signing-config", trust / "signing_config.json", "--trusted-root",
                 trust / "trusted_root.json", "--identity-token", token_file, "--bundle", tmp_path / "co.json", artifact, env=env)
    assert signed.returncode == 0, signed.stderr
    verified = run(COSIGN, "verify-blob", "--trusted-root", trust / "trusted_root.json", "--bundle", tmp_path / "co.json",
                   "--certificate-identity", EMAIL, "--certificate-oidc-issuer", url + "/oidc", artifact)
    assert verified.returncode == 0, verified.stderr

    # Without the CA, signet's client refuses the server, and says why.
    refused = run(signet_bin, "sign-bundle", "--identity-token", token, "--signing-config",
                  https_dev["trust"] / "signing_config.json", "--bundle", tmp_path / "no.json", artifact)
    assert refused.returncode != 0 and "certificate" in refused.stderr.lower(), refused.stderr


def test_sigstore_python_cosign_and_sigstore_go_over_https(https_dev, signet_bin, tmp_path, client_env):
    """Each client bootstraps from `<url>/tuf` over HTTPS, signs through the signing config TUF
    gave it (whose URLs are https), and verifies; sigstore-go fetches its trusted root over HTTPS."""
    ca = str(https_dev["ca"])
    env = dict(client_env, SSL_CERT_FILE=ca, REQUESTS_CA_BUNDLE=ca)
    ctx = ssl.create_default_context(cafile=ca)
    root = tmp_path / "root.json"
    with urllib.request.urlopen(https_dev["url"] + "/tuf/1.root.json", context=ctx, timeout=10) as r:
        root.write_bytes(r.read())
    clients = Clients(signet_bin, https_dev, root, env, tmp_path)
    clients.bootstrap()
    sg_root = clients.sigstore_go_trusted_root()
    for rekor_version in ("1", "2"):
        clients.verify_all(clients.sign_both(f"https-v{rekor_version}", rekor_version), sg_root)

    # The same clients, not given the CA, refuse the server's certificate.
    bare = dict(client_env)
    r = run(sys.executable, "-m", "sigstore", "--instance", https_dev["url"] + "/tuf", "trust-instance", root, env=bare)
    assert r.returncode != 0 and "certificate" in (r.stderr + r.stdout).lower(), r.stderr
