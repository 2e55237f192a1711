"""rekor-cli (Rekor's own Go client, unchanged) against signet's Rekor v1 API: upload, the
duplicate upload, both forms of `verify`, `get`, `search` by digest, by email and by public key or
certificate, and `loginfo`. Every check
is rekor-cli's own: the SET, the inclusion proof and the signed checkpoint, with the key it
fetches from the log, and the consistency of the log between its calls (its state file)."""

import base64
import hashlib
import json
import os
import re
import subprocess
import urllib.request

import pytest

from conftest import ROOT

REKOR_CLI = os.environ.get("REKOR_CLI_BIN", os.path.join(ROOT, ".tools", "bin", "rekor-cli"))


@pytest.fixture(autouse=True)
def rekor_cli_installed():
    if not os.path.exists(REKOR_CLI):
        pytest.fail(f"rekor-cli not found at {REKOR_CLI}; scripts/test installs it")


@pytest.fixture()
def rekor(server, tmp_path):
    """rekor-cli against the running instance, with a home of its own (it keeps the last
    checkpoint it saw in ~/.rekor, and proves each new one consistent with it)."""
    home = tmp_path / "home"
    home.mkdir()
    env = dict(os.environ, HOME=str(home))

    def run(*args):
        return subprocess.run([REKOR_CLI, *args, "--rekor_server", server["url"]], capture_output=True, text=True, env=env)

    return run


@pytest.fixture()
def signed(tmp_path):
    """An artifact, its detached ECDSA P-256 signature and the public key (openssl)."""
    key, pub = tmp_path / "key.pem", tmp_path / "pub.pem"
    artifact, sig = tmp_path / "artifact.txt", tmp_path / "artifact.sig"
    subprocess.run(["openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", str(key)], check=True)
    subprocess.run(["openssl", "ec", "-in", str(key), "-pubout", "-out", str(pub)], check=True, capture_output=True)
    artifact.write_bytes(os.urandom(16).hex().encode() + b" signed for rekor-cli\n")
    subprocess.run(["openssl", "dgst", "-sha256", "-sign", str(key), "-out", str(sig), str(artifact)], check=True)
    return {"artifact": artifact, "sig": sig, "pub": pub, "sha": hashlib.sha256(artifact.read_bytes()).hexdigest()}


def test_rekor_cli_uploads_verifies_gets_and_searches(rekor, signed, tmp_path):
    files = ["--artifact", str(signed["artifact"]), "--signature", str(signed["sig"]), "--public-key", str(signed["pub"])]
    up = rekor("upload", *files)
    assert up.returncode == 0, up.stderr
    created = re.search(r"Created entry at index (\d+), available at: \S+/api/v1/log/entries/([0-9a-f]+)", up.stdout)
    assert created, up.stdout
    index, uuid = created.group(1), created.group(2)

    # The same entry again: Rekor answers 409 with its location, and rekor-cli says so.
    again = rekor("upload", *files)
    assert again.returncode == 0, again.stderr
    assert "already exists" in again.stdout and uuid in again.stdout, again.stdout

    # Both forms of verify post to /api/v1/log/entries/retrieve with the lists they do not
    # use as null, and check the inclusion proof against a signed checkpoint.
    by_uuid = rekor("verify", "--uuid", uuid)
    assert by_uuid.returncode == 0, by_uuid.stderr
    by_artifact = rekor("verify", *files)
    assert by_artifact.returncode == 0, by_artifact.stderr
    for out in (by_uuid.stdout, by_artifact.stdout):
        assert f"Entry Index in Current Tree: {index}" in out, out
        computed = re.search(r"Computed Root Hash: ([0-9a-f]{64})", out)
        expected = re.search(r"Expected Root Hash: ([0-9a-f]{64})", out)
        assert computed and expected and computed.group(1) == expected.group(1), out

    # An artifact that was never logged is found nowhere, and verify fails.
    other, other_sig = tmp_path / "other.txt", tmp_path / "other.sig"
    other.write_text("never logged\n")
    subprocess.run(["openssl", "dgst", "-sha256", "-sign", str(tmp_path / "key.pem"), "-out", str(other_sig), str(other)], check=True)
    missing = rekor("verify", "--artifact", str(other), "--signature", str(other_sig), "--public-key", str(signed["pub"]))
    assert missing.returncode != 0, missing.stdout

    for how in (["--log-index", index], ["--uuid", uuid]):
        got = rekor("get", *how, "--format", "json")
        assert got.returncode == 0, got.stderr
        entry = json.loads(got.stdout)
        assert (entry["LogIndex"], entry["UUID"]) == (int(index), uuid), entry
        assert entry["Body"]["HashedRekordObj"]["data"]["hash"]["value"] == signed["sha"], entry

    for how in (["--sha", f"sha256:{signed['sha']}"], ["--artifact", str(signed["artifact"])],
                ["--public-key", str(signed["pub"]), "--pki-format", "x509"]):
        found = rekor("search", *how)
        assert found.returncode == 0, found.stderr
        assert uuid in found.stdout.split(), found.stdout
    # Another key signed nothing here.
    stranger = tmp_path / "stranger.pem"
    subprocess.run(["openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", str(tmp_path / "stranger.key")], check=True)
    subprocess.run(["openssl", "ec", "-in", str(tmp_path / "stranger.key"), "-pubout", "-out", str(stranger)], check=True, capture_output=True)
    nobody = rekor("search", "--public-key", str(stranger), "--pki-format", "x509")
    assert uuid not in nobody.stdout, nobody.stdout


def test_rekor_cli_proves_the_log_consistent_between_its_calls(rekor, signed):
    # loginfo checks the checkpoint's signature with the log's key, keeps it, and at the next
    # call asks for a consistency proof from it and checks that.
    first = rekor("loginfo")
    assert first.returncode == 0 and "Verification Successful!" in first.stdout, first.stdout + first.stderr
    up = rekor("upload", "--artifact", str(signed["artifact"]), "--signature", str(signed["sig"]), "--public-key", str(signed["pub"]))
    assert up.returncode == 0, up.stderr
    second = rekor("loginfo")
    assert second.returncode == 0 and "Verification Successful!" in second.stdout, second.stdout + second.stderr
    assert "unable to prove consistency" not in second.stderr, second.stderr
    sizes = [int(re.search(r"Total Tree Size:\s+(\d+)", r.stdout).group(1)) for r in (first, second)]
    assert sizes[1] == sizes[0] + 1, sizes


def test_rekor_cli_finds_an_entry_by_its_signers_email(rekor, server, dev_token, tmp_path):
    # A certificate from signet's CA for the key that signs; rekor-cli uploads the certificate
    # as the entry's public key, and `search --email` finds it by the certificate's SAN.
    email = f"{os.urandom(4).hex()}@example.com"
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(["openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", str(key)], check=True)
    pub = subprocess.run(["openssl", "ec", "-in", str(key), "-pubout"], check=True, capture_output=True).stdout.decode()
    pop = subprocess.run(["openssl", "dgst", "-sha256", "-sign", str(key)], input=email.encode(), check=True, capture_output=True).stdout
    body = {"credentials": {"oidcIdentityToken": dev_token(email)},
            "publicKeyRequest": {"publicKey": {"algorithm": "ECDSA", "content": pub}, "proofOfPossession": base64.b64encode(pop).decode()}}
    req = urllib.request.Request(server["url"] + "/api/v2/signingCert", data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req) as resp:
        cert.write_text(json.loads(resp.read())["signedCertificateEmbeddedSct"]["chain"]["certificates"][0])
    artifact, sig = tmp_path / "by-email.txt", tmp_path / "by-email.sig"
    artifact.write_text(f"signed by {email}\n")
    subprocess.run(["openssl", "dgst", "-sha256", "-sign", str(key), "-out", str(sig), str(artifact)], check=True)
    up = rekor("upload", "--artifact", str(artifact), "--signature", str(sig), "--public-key", str(cert), "--pki-format", "x509")
    assert up.returncode == 0, up.stderr
    uuid = re.search(r"/api/v1/log/entries/([0-9a-f]+)", up.stdout).group(1)
    for address in (email, email.upper()):
        found = rekor("search", "--email", address)
        assert found.returncode == 0, found.stderr
        assert re.findall(r"\b[0-9a-f]{64,80}\b", found.stdout) == [uuid], found.stdout
    nobody = rekor("search", "--email", "nobody-" + email)
    assert uuid not in nobody.stdout, nobody.stdout
    # By the certificate, as gitsign looks a commit's entry up.
    by_cert = rekor("search", "--public-key", str(cert), "--pki-format", "x509")
    assert by_cert.returncode == 0, by_cert.stderr
    assert re.findall(r"\b[0-9a-f]{64,80}\b", by_cert.stdout) == [uuid], by_cert.stdout


@pytest.mark.parametrize("kind", ["intoto:0.0.1", "intoto"])
def test_rekor_cli_logs_an_attestation_and_gets_it_back(rekor, tmp_path, kind):
    # A DSSE envelope over an in-toto statement, signed with openssl over the PAE. rekor-cli
    # makes the proposed entry itself: `intoto:0.0.1` as cosign before v3 does, and plain
    # `intoto` as 0.0.2 (its default), each in the Go client's own encoding.
    key, pub = tmp_path / "key.pem", tmp_path / "pub.pem"
    subprocess.run(["openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", str(key)], check=True)
    subprocess.run(["openssl", "ec", "-in", str(key), "-pubout", "-out", str(pub)], check=True, capture_output=True)
    subject = hashlib.sha256(os.urandom(16)).hexdigest()
    statement = json.dumps({"_type": "https://in-toto.io/Statement/v1", "subject": [{"name": "a", "digest": {"sha256": subject}}],
                            "predicateType": "https://slsa.dev/provenance/v1", "predicate": {"builder": {"id": "rekor-cli test"}}}).encode()
    payload_type = "application/vnd.in-toto+json"
    pae = b"DSSEv1 %d %s %d " % (len(payload_type), payload_type.encode(), len(statement)) + statement
    sig = subprocess.run(["openssl", "dgst", "-sha256", "-sign", str(key)], input=pae, check=True, capture_output=True).stdout
    envelope = tmp_path / "envelope.json"
    envelope.write_text(json.dumps({"payloadType": payload_type, "payload": base64.b64encode(statement).decode(),
                                    "signatures": [{"keyid": "", "sig": base64.b64encode(sig).decode()}]}))

    up = rekor("upload", "--type", kind, "--artifact", str(envelope), "--public-key", str(pub))
    assert up.returncode == 0, up.stdout + up.stderr
    uuid = re.search(r"/api/v1/log/entries/([0-9a-f]+)", up.stdout).group(1)
    got = rekor("get", "--uuid", uuid, "--format", "json")
    assert got.returncode == 0, got.stderr
    entry = json.loads(got.stdout)
    # rekor-cli prints the attestation it was served, decoded.
    assert entry["Attestation"] == statement.decode(), entry
    body = entry["Body"]["IntotoObj"]
    assert body["content"]["payloadHash"]["value"] == hashlib.sha256(statement).hexdigest(), body
    # 0.0.1 names the key beside the content; 0.0.2 keeps it in the envelope's signatures.
    assert ("publicKey" in body) == (kind == "intoto:0.0.1"), body
    found = rekor("search", "--sha", f"sha256:{subject}")
    assert found.returncode == 0, found.stderr
    assert uuid in found.stdout.split(), found.stdout
    verified = rekor("verify", "--uuid", uuid)
    assert verified.returncode == 0, verified.stdout + verified.stderr
