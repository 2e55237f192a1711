"""sigstore-java 2.0.0, unchanged and pinned (interop/java: a Maven project whose one program drives
sigstore-java's KeylessSigner and KeylessVerifier), against signet.

- sigstore-java reads the trust material that `signet trust export` writes (trusted_root.json,
  signing_config.json), and the same trusted root through its own TUF client from signet's
  TUF repository, starting from tuf_root.json.
- sigstore-java verifies sigstore-python's bundles over Rekor v1 and over Rekor v2, offline with
  trusted_root.json and with the root from signet's TUF repository, and refuses a changed artifact
  and another identity.
- sigstore-java signs with signet: a certificate from signet's CA over the Fulcio gRPC API
  (sigstore-java 2.0.0 has no other: it always dials gRPC over TLS, with ALPN h2, so the instance
  serves HTTPS and the program trusts its tls_ca.pem), then a Rekor v1 entry, or a Rekor v2 entry
  and an RFC 3161 timestamp. sigstore-java and sigstore-python both verify the bundle, and both
  refuse another identity."""

import hashlib
import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT

JAVA_DIR = os.environ.get("SIGSTORE_JAVA_DIR", os.path.join(ROOT, "interop", "java"))
JAR = os.path.join(JAVA_DIR, "target", "signet-sigstore-java.jar")
EMAIL = "java@example.com"


def newest_source(root):
    stamps = [os.path.getmtime(os.path.join(root, "pom.xml"))]
    for folder, _, files in os.walk(os.path.join(root, "src")):
        stamps += [os.path.getmtime(os.path.join(folder, f)) for f in files]
    return max(stamps)


@pytest.fixture(scope="session")
def sigstore_java():
    """The program's command line; builds interop/java once when its jar is missing or older than
    its sources (offline from ~/.m2 when that has everything, else from Maven Central)."""
    for tool in ("java", "mvn"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} not found on PATH: sigstore-java's interop tests need Java 17+ and Maven; scripts/test installs them")
    if not os.path.exists(JAR) or os.path.getmtime(JAR) < newest_source(JAVA_DIR):
        build = None
        for offline in (["-o"], []):
            build = subprocess.run(["mvn", "-B", "-q", *offline, "package"], cwd=JAVA_DIR, capture_output=True, text=True)
            if build.returncode == 0:
                break
        if build.returncode != 0:
            pytest.fail(f"building {JAVA_DIR} with Maven failed:\n{build.stdout[-4000:]}\n{build.stderr[-4000:]}")
    return ["java", "-jar", JAR]


def java(cmd, *args):
    return subprocess.run([*cmd, *[str(a) for a in args]], capture_output=True, text=True, timeout=300)


def sigstore_python(*args, env=None):
    return subprocess.run([sys.executable, "-m", "sigstore", *[str(a) for a in args]], capture_output=True, text=True, env=env,
                          timeout=300)


def inspect_lines(result):
    assert result.returncode == 0, result.stderr
    lines = {}
    for line in result.stdout.splitlines():
        key, _, value = line.partition(": ")
        lines.setdefault(key, []).append(value)
    return lines


def test_sigstore_java_reads_signets_trusted_root_and_signing_config(sigstore_java, server, trust, tmp_path):
    url = server["url"]
    root = json.loads((trust / "trusted_root.json").read_text())
    got = inspect_lines(java(sigstore_java, "inspect", "--trusted-root", trust / "trusted_root.json",
                             "--signing-config", trust / "signing_config.json"))
    assert got["cas"] == [str(len(root["certificateAuthorities"]))] and root["certificateAuthorities"], got
    assert got["tlogs"] == [str(len(root["tlogs"]))] and len(root["tlogs"]) >= 2, got  # Rekor v1 and v2
    assert got["ctlogs"] == [str(len(root["ctlogs"]))] and root["ctlogs"], got
    assert got["tsas"] == [str(len(root["timestampAuthorities"]))] and root["timestampAuthorities"], got
    assert all(t.startswith(url + " logid=") for t in got["tlog"]), got
    # The services sigstore-java would pick from signet's signing config.
    assert got["ca-url"] == [url] and got["rekor-v1-url"] == [url] and got["rekor-v2-url"] == [url], got
    assert got["tsa-url"] == [url + "/api/v1/timestamp"], got

    # The same trusted root through sigstore-java's TUF client, from signet's TUF repository.
    via_tuf = inspect_lines(java(sigstore_java, "inspect", "--tuf-url", url + "/tuf", "--tuf-root", trust / "tuf_root.json",
                                 "--tuf-cache", tmp_path / "tuf-cache"))
    assert {k: via_tuf[k] for k in ("cas", "tlogs", "ctlogs", "tsas", "tlog")} == \
        {k: got[k] for k in ("cas", "tlogs", "ctlogs", "tsas", "tlog")}, (via_tuf, got)
    # A TUF root that signet did not sign is refused.
    other = json.loads((trust / "tuf_root.json").read_text())
    other["signed"]["expires"] = "2099-01-01T00:00:00Z"
    forged = tmp_path / "forged_root.json"
    forged.write_text(json.dumps(other))
    refused = java(sigstore_java, "inspect", "--tuf-url", url + "/tuf", "--tuf-root", forged, "--tuf-cache", tmp_path / "c2")
    assert refused.returncode == 1, refused.stdout + refused.stderr


@pytest.mark.parametrize("rekor_version", ["1", "2"])
def test_sigstore_java_verifies_sigstore_python_bundles(sigstore_java, server, dev_token, trust, tmp_path, rekor_version):
    email, issuer = "py@example.com", server["url"] + "/oidc"
    artifact = tmp_path / "artifact.txt"
    artifact.write_text(f"signed by sigstore-python over rekor v{rekor_version}\n")
    signed = sigstore_python("--trust-config", trust / "client_trust_config.json", "sign", "--identity-token", dev_token(email),
                             "--rekor-version", rekor_version, artifact)
    assert signed.returncode == 0, signed.stderr
    bundle = tmp_path / "artifact.txt.sigstore.json"

    def verify(path, who, *root):
        root = root or ("--trusted-root", trust / "trusted_root.json")
        return java(sigstore_java, "verify", *root, "--bundle", bundle, "--artifact", path, "--identity", who, "--issuer", issuer)

    ok = verify(artifact, email)
    assert ok.returncode == 0 and ok.stdout.strip() == "verified", ok.stdout + ok.stderr
    # By digest too, and with the trusted root that sigstore-java fetches from signet's TUF repository.
    digest = "sha256:" + hashlib.sha256(artifact.read_bytes()).hexdigest()
    assert verify(digest, email).returncode == 0
    online = verify(artifact, email, "--tuf-url", server["url"] + "/tuf", "--tuf-root", trust / "tuf_root.json",
                    "--tuf-cache", tmp_path / "tuf-cache")
    assert online.returncode == 0 and online.stdout.strip() == "verified", online.stdout + online.stderr

    tampered = tmp_path / "tampered.txt"
    tampered.write_text("not what was signed\n")
    bad = verify(tampered, email)
    assert bad.returncode == 1 and "digest" in bad.stderr, bad.stderr
    wrong = verify(artifact, "mallory@example.com")
    assert wrong.returncode == 1 and "mallory@example.com" in wrong.stderr, wrong.stderr
    wrong_issuer = java(sigstore_java, "verify", "--trusted-root", trust / "trusted_root.json", "--bundle", bundle,
                        "--artifact", artifact, "--identity", email, "--issuer", "https://accounts.example.com")
    assert wrong_issuer.returncode == 1, wrong_issuer.stderr


@pytest.mark.parametrize("rekor_version,services", [("1", "signing_config.json"), ("2", "signing_config.json"), ("2", "urls")])
def test_sigstore_java_signs_with_signet_and_both_clients_verify(sigstore_java, https_server, tmp_path, rekor_version, services):
    url, trust, issuer = https_server["url"], https_server["trust"], https_server["url"] + "/oidc"
    artifact = tmp_path / "artifact.txt"
    artifact.write_text(f"signed by sigstore-java over rekor v{rekor_version}\n")
    bundle = tmp_path / "artifact.java.sigstore.json"
    if services == "urls":  # a signing config that names only these, as a deployment without one would
        services = ["--fulcio-url", url, "--rekor-url", url, "--tsa-url", url + "/api/v1/timestamp"]
    else:  # signet's own, which lists Rekor v1 and v2: sigstore-java takes v2 only when allowed to
        services = ["--signing-config", trust / "signing_config.json"]
    signed = java(sigstore_java, "sign", "--trusted-root", trust / "trusted_root.json", *services, "--rekor-version", rekor_version,
                  "--token", https_server["token"](EMAIL), "--artifact", artifact, "--bundle", bundle, "--tls-ca", trust / "tls_ca.pem")
    assert signed.returncode == 0, signed.stdout + signed.stderr

    # The certificate came through the gRPC API (signet counts answers by route).
    metrics = subprocess.run(["curl", "-sf", "--cacert", str(trust / "tls_ca.pem"), url + "/metrics"], capture_output=True, text=True)
    assert 'signet_http_responses_total{route="/dev.sigstore.fulcio.v2.CA/CreateSigningCertificate",status="200"} 1' in metrics.stdout, \
        metrics.stdout[-2000:] + metrics.stderr

    doc = json.loads(bundle.read_text())
    entries = doc["verificationMaterial"]["tlogEntries"]
    assert [e["kindVersion"] for e in entries] == [{"kind": "hashedrekord", "version": "0.0.1" if rekor_version == "1" else "0.0.2"}]
    if rekor_version == "2":
        assert doc["verificationMaterial"]["timestampVerificationData"]["rfc3161Timestamps"], doc["verificationMaterial"]
    else:
        assert entries[0]["inclusionPromise"]["signedEntryTimestamp"], entries

    def java_verify(who):
        return java(sigstore_java, "verify", "--trusted-root", trust / "trusted_root.json", "--bundle", bundle, "--artifact", artifact,
                    "--identity", who, "--issuer", issuer)

    ok = java_verify(EMAIL)
    assert ok.returncode == 0 and ok.stdout.strip() == "verified", ok.stdout + ok.stderr
    wrong = java_verify("mallory@example.com")
    assert wrong.returncode == 1 and "mallory@example.com" in wrong.stderr, wrong.stderr

    def py_verify(who):
        return sigstore_python("--trust-config", trust / "client_trust_config.json", "verify", "identity", "--offline",
                               "--bundle", bundle, "--cert-identity", who, "--cert-oidc-issuer", issuer, artifact)

    py = py_verify(EMAIL)
    assert py.returncode == 0 and "OK" in py.stdout + py.stderr, py.stdout + py.stderr
    assert py_verify("mallory@example.com").returncode != 0
