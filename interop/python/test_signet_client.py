"""signet's own client: `signet sign-bundle` bundles verify in sigstore-python, cosign, sigstore-go and
`signet verify-bundle`; the real clients' bundles verify in `signet verify-bundle`; and every tampered
byte of a signet bundle is refused, naming the check that caught it."""

import base64
import hashlib
import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT, start_signet

COSIGN = os.environ.get("COSIGN_BIN", os.path.join(ROOT, ".tools", "bin", "cosign"))
SGVERIFY = os.environ.get("SGVERIFY_BIN", os.path.join(ROOT, ".tools", "bin", "sgverify"))
EMAIL = "ivy@example.com"


def run(*args):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True)


def export_trust(signet_bin, data_dir, out):
    subprocess.run([signet_bin, "trust", "export", "--data-dir", data_dir, "--out", str(out)], check=True, capture_output=True)
    return out


def only_rekor(trust, tmp_path, major):
    """A signing config that offers only the Rekor log of API version `major`."""
    config = json.loads((trust / "signing_config.json").read_text())
    config["rekorTlogUrls"] = [s for s in config["rekorTlogUrls"] if s["majorApiVersion"] == major]
    path = tmp_path / f"signing_config_v{major}.json"
    path.write_text(json.dumps(config))
    return path


def sign_bundle(signet_bin, token, signing_config, artifact, bundle):
    signed = run(signet_bin, "sign-bundle", "--identity-token", token, "--bundle", bundle,
                 "--signing-config", signing_config, artifact)
    assert signed.returncode == 0, signed.stderr
    return json.loads(bundle.read_text())


def verify_bundle(signet_bin, trust, bundle, artifact, identity=EMAIL, issuer=None, server=None):
    return run(signet_bin, "verify-bundle", "--bundle", bundle, "--certificate-identity", identity,
               "--certificate-oidc-issuer", issuer or server["url"] + "/oidc", "--trusted-root", trust / "trusted_root.json", artifact)


def assert_verifies_in_signet_python_and_go(signet_bin, trust, server, bundle, artifact):
    """`signet verify-bundle` (by file and by digest), sigstore-python and sigstore-go accept the bundle; returns the issuer."""
    issuer = server["url"] + "/oidc"
    ours = verify_bundle(signet_bin, trust, bundle, artifact, server=server)
    assert ours.returncode == 0, ours.stderr
    digest = "sha256:" + hashlib.sha256(artifact.read_bytes()).hexdigest()
    assert verify_bundle(signet_bin, trust, bundle, digest, server=server).returncode == 0
    py = run(sys.executable, "-m", "sigstore", "--trust-config", trust / "client_trust_config.json", "verify", "identity",
             "--offline", "--bundle", bundle, "--cert-identity", EMAIL, "--cert-oidc-issuer", issuer, artifact)
    assert py.returncode == 0, py.stderr
    go = run(SGVERIFY, "verify", "--trusted-root", trust / "trusted_root.json", "--bundle", bundle,
             "--identity", EMAIL, "--issuer", issuer, artifact)
    assert go.returncode == 0, go.stderr
    return issuer


@pytest.fixture()
def signed(server, dev_token, trust, signet_bin, tmp_path):
    """Signs one artifact with `signet sign-bundle` over Rekor v1 and over Rekor v2."""
    artifact = tmp_path / "artifact.txt"
    artifact.write_text("signed by signet sign-bundle\n")
    token = dev_token(EMAIL)
    bundles = {}
    for major in (1, 2):
        path = tmp_path / f"v{major}.sigstore.json"
        bundles[major] = (path, sign_bundle(signet_bin, token, only_rekor(trust, tmp_path, major), artifact, path))
    return artifact, bundles


def test_sign_bundle_shape_and_default_log(server, dev_token, trust, signet_bin, tmp_path, signed):
    artifact, bundles = signed
    for major, (_, b) in bundles.items():
        assert b["mediaType"] == "application/vnd.dev.sigstore.bundle.v0.3+json"
        entry = b["verificationMaterial"]["tlogEntries"][0]
        assert entry["kindVersion"] == {"kind": "hashedrekord", "version": f"0.0.{major}"}
        assert ("inclusionPromise" in entry) == (major == 1)  # only Rekor v1 gives a SET
        assert len(b["verificationMaterial"]["timestampVerificationData"]["rfc3161Timestamps"]) == 1
        digest = base64.b64decode(b["messageSignature"]["messageDigest"]["digest"])
        assert digest == hashlib.sha256(artifact.read_bytes()).digest()
    # With the full signing config, the highest API version wins, as in cosign v3.
    default = sign_bundle(signet_bin, dev_token(EMAIL), trust / "signing_config.json", artifact, tmp_path / "d.json")
    assert default["verificationMaterial"]["tlogEntries"][0]["kindVersion"]["version"] == "0.0.2"


@pytest.mark.parametrize("major", [1, 2])
def test_sign_bundle_verifies_in_every_client(server, trust, signet_bin, signed, major):
    artifact, bundles = signed
    bundle, _ = bundles[major]
    issuer = assert_verifies_in_signet_python_and_go(signet_bin, trust, server, bundle, artifact)
    cosign = run(COSIGN, "verify-blob", "--trusted-root", trust / "trusted_root.json", "--bundle", bundle,
                 "--certificate-identity", EMAIL, "--certificate-oidc-issuer", issuer, artifact)
    assert cosign.returncode == 0, cosign.stderr

    wrong = verify_bundle(signet_bin, trust, bundle, artifact, identity="mallory@example.com", server=server)
    assert wrong.returncode == 1 and "identity" in wrong.stderr, wrong.stderr
    other = artifact.with_name("other.txt")
    other.write_text("not what was signed\n")
    changed = verify_bundle(signet_bin, trust, bundle, other, server=server)
    assert changed.returncode == 1 and "signature" in changed.stderr, changed.stderr


@pytest.mark.parametrize("client", ["sigstore-python-1", "sigstore-python-2", "cosign"])
def test_real_client_bundles_verify_in_signet(server, dev_token, trust, signet_bin, tmp_path, client):
    artifact = tmp_path / "real.txt"
    artifact.write_text(f"signed by {client}\n")
    bundle = tmp_path / "real.sigstore.json"
    if client == "cosign":
        token_file = tmp_path / "token"
        token_file.write_text(dev_token(EMAIL))  # no trailing newline: cosign sends the file as it is
        made = run(COSIGN, "sign-blob", "--yes", "--signing-config", trust / "signing_config.json",
                   "--trusted-root", trust / "trusted_root.json", "--bundle", bundle, "--identity-token", token_file, artifact)
    else:
        made = run(sys.executable, "-m", "sigstore", "--trust-config", trust / "client_trust_config.json", "sign",
                   "--identity-token", dev_token(EMAIL), "--rekor-version", client[-1], "--bundle", bundle, artifact)
    assert made.returncode == 0, made.stderr
    ok = verify_bundle(signet_bin, trust, bundle, artifact, server=server)
    assert ok.returncode == 0, ok.stderr
    bad = verify_bundle(signet_bin, trust, bundle, artifact, issuer="https://other.example/oidc")
    assert bad.returncode == 1, bad.stderr


def flip_b64(value, at=-1):
    raw = bytearray(base64.b64decode(value))
    raw[at] ^= 0x01
    return base64.b64encode(bytes(raw)).decode()


def flip_sct(cert_b64):
    """Flips a byte inside the embedded SCT list (extension 1.3.6.1.4.1.11129.2.4.2)."""
    der = bytearray(base64.b64decode(cert_b64))
    oid = bytes.fromhex("060a2b06010401d679020402")
    at = der.index(oid) + len(oid) + 40  # past the OID and the list's length prefixes, inside the SCT
    der[at] ^= 0x01
    return base64.b64encode(bytes(der)).decode()


def tamper_checkpoint_size(envelope):
    origin, size, rest = envelope.split("\n", 2)
    return "\n".join([origin, str(int(size) + 1), rest])


def tamper_checkpoint_sig(envelope):
    body, sig_line = envelope.rstrip("\n").rsplit("\n", 1)
    dash, name, sig = sig_line.split(" ")
    return f"{body}\n{dash} {name} {flip_b64(sig)}\n"


TLOG = ("verificationMaterial", "tlogEntries", 0)
TAMPERS = {
    # name: (rekor major, path to the field, change, a word the error must contain)
    "proof hash": (2, TLOG + ("inclusionProof", "hashes", 0), flip_b64, "inclusion proof"),
    "proof root hash": (1, TLOG + ("inclusionProof", "rootHash"), flip_b64, "inclusion proof"),
    "checkpoint size": (2, TLOG + ("inclusionProof", "checkpoint", "envelope"), tamper_checkpoint_size, "checkpoint"),
    "checkpoint signature": (1, TLOG + ("inclusionProof", "checkpoint", "envelope"), tamper_checkpoint_sig, "checkpoint"),
    "SET": (1, TLOG + ("inclusionPromise", "signedEntryTimestamp"), flip_b64, "signed entry timestamp"),
    "log body": (2, TLOG + ("canonicalizedBody",), lambda v: flip_b64(v, 40), ""),
    "log index": (1, TLOG + ("logIndex",), lambda v: str(int(v) + 1), ""),
    "SCT": (2, ("verificationMaterial", "certificate", "rawBytes"), flip_sct, ""),
    "certificate": (2, ("verificationMaterial", "certificate", "rawBytes"), lambda v: flip_b64(v, 200), ""),
    "signature": (2, ("messageSignature", "signature"), flip_b64, "signature"),
    "digest": (1, ("messageSignature", "messageDigest", "digest"), flip_b64, "digest"),
    "timestamp": (2, ("verificationMaterial", "timestampVerificationData", "rfc3161Timestamps", 0, "signedTimestamp"),
                  flip_b64, "timestamp"),
}


@pytest.mark.parametrize("name", sorted(TAMPERS))
def test_tampered_signet_bundles_are_refused(server, trust, signet_bin, tmp_path, signed, name):
    artifact, bundles = signed
    major, path, change, word = TAMPERS[name]
    bundle = json.loads(json.dumps(bundles[major][1]))
    node = bundle
    for key in path[:-1]:
        node = node[key]
    before = node[path[-1]]
    node[path[-1]] = change(before)
    assert node[path[-1]] != before
    tampered = tmp_path / "tampered.json"
    tampered.write_text(json.dumps(bundle))
    result = verify_bundle(signet_bin, trust, tampered, artifact, server=server)
    assert result.returncode == 1, f"{name}: tampered bundle was not refused: {result.stdout}{result.stderr}"
    assert word.lower() in result.stderr.lower(), f"{name}: {result.stderr}"
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    print(f"{name}: {result.stderr.strip()}")


def test_bundle_from_another_instance_is_refused(server, trust, signet_bin, tmp_path, signed):
    artifact, bundles = signed
    with start_signet(signet_bin) as other:
        other_trust = export_trust(signet_bin, other["data_dir"], tmp_path / "other-trust")
        for major, (bundle, _) in bundles.items():
            result = verify_bundle(signet_bin, other_trust, bundle, artifact, server=server)
            assert result.returncode == 1, f"v{major}: {result.stderr}"


def in_toto_statement(tmp_path):
    """A small in-toto statement whose one subject is an artifact file."""
    artifact = tmp_path / "subject.bin"
    artifact.write_text("the attested artifact\n")
    statement = {
        "_type": "https://in-toto.io/Statement/v1",
        "subject": [{"name": artifact.name, "digest": {"sha256": hashlib.sha256(artifact.read_bytes()).hexdigest()}}],
        "predicateType": "https://slsa.dev/provenance/v1",
        "predicate": {"buildDefinition": {"buildType": "https://signet.dev/test"}, "runDetails": {"builder": {"id": "signet-test"}}},
    }
    path = tmp_path / "statement.json"
    path.write_text(json.dumps(statement))
    return artifact, path


def sign_in_toto(signet_bin, token, signing_config, statement, bundle):
    signed = run(signet_bin, "sign-bundle", "--in-toto", "--identity-token", token, "--bundle", bundle,
                 "--signing-config", signing_config, statement)
    assert signed.returncode == 0, signed.stderr
    return json.loads(bundle.read_text())


@pytest.mark.parametrize("major", [1, 2])
def test_sign_bundle_in_toto_verifies_in_every_client(server, dev_token, trust, signet_bin, tmp_path, major):
    artifact, statement = in_toto_statement(tmp_path)
    bundle = tmp_path / f"dsse-v{major}.sigstore.json"
    b = sign_in_toto(signet_bin, dev_token(EMAIL), only_rekor(trust, tmp_path, major), statement, bundle)

    # The bundle shape: a DSSE envelope over the statement's exact bytes, and the log entry
    # Rekor keeps for it (dsse 0.0.1 on v1; on v2, which has no DSSE kind, a hashedrekord
    # over the SHA-256 of the envelope's PAE, as sigstore-python and sigstore-go rebuild it).
    assert "messageSignature" not in b
    env = b["dsseEnvelope"]
    assert env["payloadType"] == "application/vnd.in-toto+json"
    payload = base64.b64decode(env["payload"])
    assert payload == statement.read_bytes()
    assert len(env["signatures"]) == 1
    entry = b["verificationMaterial"]["tlogEntries"][0]
    body = json.loads(base64.b64decode(entry["canonicalizedBody"]))
    pae = b"DSSEv1 28 application/vnd.in-toto+json %d %s" % (len(payload), payload)
    if major == 1:
        assert entry["kindVersion"] == {"kind": "dsse", "version": "0.0.1"}
        assert body["spec"]["payloadHash"] == {"algorithm": "sha256", "value": hashlib.sha256(payload).hexdigest()}
        assert body["spec"]["signatures"][0]["signature"] == env["signatures"][0]["sig"]
        assert "inclusionPromise" in entry
    else:
        assert entry["kindVersion"] == {"kind": "hashedrekord", "version": "0.0.2"}
        data = body["spec"]["hashedRekordV002"]["data"]
        assert data == {"algorithm": "SHA2_256", "digest": base64.b64encode(hashlib.sha256(pae).digest()).decode()}
        assert body["spec"]["hashedRekordV002"]["signature"]["content"] == env["signatures"][0]["sig"]
    assert len(b["verificationMaterial"]["timestampVerificationData"]["rfc3161Timestamps"]) == 1

    # Every verifier checks a DSSE bundle against the artifact that is the statement's subject.
    issuer = assert_verifies_in_signet_python_and_go(signet_bin, trust, server, bundle, artifact)
    cosign = run(COSIGN, "verify-blob-attestation", "--trusted-root", trust / "trusted_root.json", "--bundle", bundle,
                 "--certificate-identity", EMAIL, "--certificate-oidc-issuer", issuer, "--type", "slsaprovenance1", artifact)
    assert cosign.returncode == 0, cosign.stderr

    # Every verifier refuses an artifact that is not a subject of the statement.
    other = tmp_path / "other.bin"
    other.write_text("not the subject\n")
    assert verify_bundle(signet_bin, trust, bundle, other, server=server).returncode == 1
    py_other = run(sys.executable, "-m", "sigstore", "--trust-config", trust / "client_trust_config.json", "verify", "identity",
                   "--offline", "--bundle", bundle, "--cert-identity", EMAIL, "--cert-oidc-issuer", issuer, other)
    assert py_other.returncode != 0, py_other.stdout
    go_other = run(SGVERIFY, "verify", "--trusted-root", trust / "trusted_root.json", "--bundle", bundle,
                   "--identity", EMAIL, "--issuer", issuer, other)
    assert go_other.returncode != 0, go_other.stdout
    cosign_other = run(COSIGN, "verify-blob-attestation", "--trusted-root", trust / "trusted_root.json", "--bundle", bundle,
                       "--certificate-identity", EMAIL, "--certificate-oidc-issuer", issuer, "--type", "slsaprovenance1", other)
    assert cosign_other.returncode != 0 and "digest" in cosign_other.stderr, cosign_other.stderr

    # A tampered payload (a different subject digest, re-encoded) is refused.
    tampered_statement = json.loads(payload)
    tampered_statement["subject"][0]["digest"]["sha256"] = hashlib.sha256(b"evil").hexdigest()
    tampered = json.loads(json.dumps(b))
    tampered["dsseEnvelope"]["payload"] = base64.b64encode(json.dumps(tampered_statement).encode()).decode()
    tampered_path = tmp_path / "tampered.json"
    tampered_path.write_text(json.dumps(tampered))
    for target in (artifact, tmp_path / "evil"):
        if not target.exists():
            target.write_bytes(b"evil")
        refused = verify_bundle(signet_bin, trust, tampered_path, target, server=server)
        assert refused.returncode == 1, refused.stdout + refused.stderr
        assert "signature" in refused.stderr.lower() or "envelope" in refused.stderr.lower(), refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr


def test_sign_bundle_in_toto_refuses_a_file_that_is_not_a_statement(server, dev_token, trust, signet_bin, tmp_path):
    blob = tmp_path / "blob.txt"
    blob.write_text("plain text, not an in-toto statement\n")
    bundle = tmp_path / "never.json"
    result = run(signet_bin, "sign-bundle", "--in-toto", "--identity-token", dev_token(EMAIL), "--bundle", bundle,
                 "--signing-config", trust / "signing_config.json", blob)
    assert result.returncode == 2, result.stderr
    assert "in-toto statement" in result.stderr and "not JSON" in result.stderr, result.stderr
    assert not bundle.exists()
