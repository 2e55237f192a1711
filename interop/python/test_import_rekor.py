"""`signet import rekor` against a real Rekor: sigstore/rekor v1.5.4 on Trillian v1.7.3 on
MariaDB, built and run by scripts/rekor-peer. Bundles that cosign signed with that Rekor before
the import verify with the trust root signet exports after it; every copied entry answers from
signet by index and by UUID as the Rekor answers it (body, time, log ID, SET, inclusion proof,
the tree head it signed); rekor-cli verifies one online against signet; searches find copied
entries; and signet's own entries follow the copy's indices. On SQLite, and on PostgreSQL when
the suite has one. Refused: a key that did not sign the tree head, a tree the Rekor does not
have, and a store whose log has entries of its own."""

import base64
import hashlib
import json
import os
import re
import sqlite3
import subprocess
import time
import urllib.request

import pytest

from conftest import ROOT, serve
from test_cosign import COSIGN
from test_rekor_cli import REKOR_CLI

REKOR_PEER = os.path.join(ROOT, "scripts", "rekor-peer")


def run(*args, env=None):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, env=env)


def get(url):
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.load(r)


def post(url, doc):
    req = urllib.request.Request(url, data=json.dumps(doc).encode(), headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.load(r)


@pytest.fixture(scope="module")
def rekor(tmp_path_factory):
    """A real Rekor with entries in it: 1,500 by scripts/rekor-peer's filler, and between them
    two blobs that cosign signed with a key of its own (their bundles kept), and one artifact
    rekor-cli uploaded."""
    d = tmp_path_factory.mktemp("rekor-peer")
    started = run(REKOR_PEER, "start", d)
    assert started.returncode == 0, started.stderr
    peer = dict(re.findall(r"export (REKOR_PEER_\w+)=(\S+)", started.stdout))
    try:
        work = tmp_path_factory.mktemp("signed")
        spki = base64.b64decode("".join(l for l in open(peer["REKOR_PEER_PUBKEY"]).read().splitlines() if not l.startswith("-----")))
        url = peer["REKOR_PEER_URL"]
        # cosign signs against this Rekor alone: a signing config naming it, a trust root with its key.
        (work / "rekor_root.json").write_text(json.dumps({
            "mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1",
            "tlogs": [{"baseUrl": url, "hashAlgorithm": "SHA2_256", "logId": {"keyId": base64.b64encode(hashlib.sha256(spki).digest()).decode()},
                       "publicKey": {"rawBytes": base64.b64encode(spki).decode(), "keyDetails": "PKIX_ECDSA_P256_SHA_256",
                                     "validFor": {"start": "2020-01-01T00:00:00Z"}}}],
            "certificateAuthorities": [], "ctlogs": [], "timestampAuthorities": []}))
        (work / "signing_config.json").write_text(json.dumps({
            "mediaType": "application/vnd.dev.sigstore.signingconfig.v0.2+json", "caUrls": [], "oidcUrls": [], "tsaUrls": [],
            "rekorTlogUrls": [{"url": url, "majorApiVersion": 1, "validFor": {"start": "2020-01-01T00:00:00Z"}, "operator": "peer"}],
            "rekorTlogConfig": {"selector": "ANY"}, "tsaConfig": {"selector": "ANY"}}))
        env = dict(os.environ, COSIGN_PASSWORD="")
        r = run(COSIGN, "generate-key-pair", "--output-key-prefix", work / "cosign", env=env)
        assert r.returncode == 0, r.stderr
        bundles = []
        for n in range(2):
            if n == 1:
                filled = run(REKOR_PEER, "fill", d, "1500")
                assert filled.returncode == 0, filled.stderr
            artifact, bundle = work / f"blob-{n}.txt", work / f"blob-{n}.sigstore.json"
            artifact.write_text(f"signed with the Rekor before the import: {n}\n")
            r = run(COSIGN, "sign-blob", "--yes", "--key", work / "cosign.key", "--signing-config", work / "signing_config.json",
                    "--trusted-root", work / "rekor_root.json", "--bundle", bundle, artifact, env=env)
            assert r.returncode == 0, r.stderr
            bundles.append((artifact, bundle))
        # rekor-cli's own upload: an x509 key and a detached signature.
        key_pem, sig = work / "rc.key", work / "rc.sig"
        subprocess.run(["openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", key_pem], check=True)
        subprocess.run(["openssl", "ec", "-in", key_pem, "-pubout", "-out", work / "rc.pub"], check=True, capture_output=True)
        (work / "rc.txt").write_text("uploaded by rekor-cli before the import\n")
        subprocess.run(["openssl", "dgst", "-sha256", "-sign", key_pem, "-out", sig, work / "rc.txt"], check=True)
        home = work / "home"
        home.mkdir()
        up = run(REKOR_CLI, "upload", "--rekor_server", url, "--artifact", work / "rc.txt", "--signature", sig, "--public-key", work / "rc.pub",
                 "--pki-format", "x509", "--type", "hashedrekord", env=dict(os.environ, HOME=str(home)))
        assert up.returncode == 0, up.stderr
        yield {"url": url, "tree_id": peer["REKOR_PEER_TREE_ID"], "pubkey": peer["REKOR_PEER_PUBKEY"], "bundles": bundles, "work": work,
               "cosign_pub": work / "cosign.pub", "size": get(f"{url}/api/v1/log")["treeSize"]}
    finally:
        run(REKOR_PEER, "stop", d)


def stores():
    out = [pytest.param(None, id="sqlite")]
    if os.environ.get("SIGNET_TEST_POSTGRES"):
        out.append(pytest.param("postgres", id="postgres"))
    return out


def fresh_database(name):
    server = os.environ["SIGNET_TEST_POSTGRES"]
    db = f"signet_import_{os.getpid()}_{name}"
    r = run(os.path.join(os.environ["SIGNET_TEST_POSTGRES_BIN"], "psql"), server, "-qc", f"CREATE DATABASE {db}")
    assert r.returncode == 0, r.stderr
    return server.rsplit("/", 1)[0] + "/" + db


def import_into(signet_bin, data_dir, store, rekor, *extra):
    return run(signet_bin, "import", "rekor", "--data-dir", data_dir, *(["--storage", store] if store else []), "--url", rekor["url"],
               "--tree-id", rekor["tree_id"], "--public-key", rekor["pubkey"], *extra)


def served_entry(answer):
    """The one (uuid, entry) of a Rekor entry answer."""
    assert len(answer) == 1, answer
    return next(iter(answer.items()))


def set_verifies(entry, pubkey_pem):
    """Whether an entry's SET is the Rekor key's signature over its body, time, log ID and index."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    payload = json.dumps({k: entry[k] for k in ("body", "integratedTime", "logID", "logIndex")}, sort_keys=True, separators=(",", ":"))
    key = serialization.load_pem_public_key(open(pubkey_pem, "rb").read())
    try:
        key.verify(base64.b64decode(entry["verification"]["signedEntryTimestamp"]), payload.encode(), ec.ECDSA(hashes.SHA256()))
        return True
    except InvalidSignature:
        return False


def same_entry(mine, theirs, pubkey_pem):
    (uuid, a), (uuid2, b) = mine, theirs
    assert uuid == uuid2
    for field in ("body", "integratedTime", "logID", "logIndex"):
        assert a[field] == b[field], field
    # Rekor signs a fresh SET each time it serves an entry; signet serves the one it copied.
    assert set_verifies(a, pubkey_pem) and set_verifies(b, pubkey_pem)
    pa, pb = a["verification"]["inclusionProof"], b["verification"]["inclusionProof"]
    for field in ("hashes", "logIndex", "rootHash", "treeSize"):
        assert pa[field] == pb[field], field
    # The same signed tree head (a fresh ECDSA signature of it each time it is served).
    assert pa["checkpoint"].split("\n\n")[0] == pb["checkpoint"].split("\n\n")[0]


@pytest.mark.parametrize("store", stores())
def test_an_imported_rekor_log_answers_as_the_rekor_did(signet_bin, rekor, tmp_path, store):
    if store == "postgres":
        store = fresh_database(tmp_path.name[-12:].lower().replace("-", "_"))
    data_dir = str(tmp_path / "data")
    r = import_into(signet_bin, data_dir, store, rekor)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    n = rekor["size"]
    assert report["imported"]["treeSize"] == n and report["copied"] == n and report["next"]["startIndex"] == n, report
    # Again: nothing left to copy, nothing changes.
    again = import_into(signet_bin, data_dir, store, rekor)
    assert again.returncode == 0 and json.loads(again.stdout)["copied"] == 0, again.stderr

    with serve(signet_bin, data_dir, extra=["--storage", store] if store else []) as s:
        for i in [0, 1, 999, 1000, n - 1]:
            mine = served_entry(get(f"{s['url']}/api/v1/log/entries?logIndex={i}"))
            same_entry(mine, served_entry(get(f"{rekor['url']}/api/v1/log/entries?logIndex={i}")), rekor["pubkey"])
            same_entry(served_entry(get(f"{s['url']}/api/v1/log/entries/{mine[0]}")), mine, rekor["pubkey"])

        # Old bundles verify, offline, with the trust root exported now: it lists the Rekor's key.
        trust = tmp_path / "trust"
        subprocess.run([signet_bin, "trust", "export", "--data-dir", data_dir, "--out", str(trust)], check=True, capture_output=True)
        for artifact, bundle in rekor["bundles"]:
            v = run(COSIGN, "verify-blob", "--key", rekor["cosign_pub"], "--bundle", bundle, "--trusted-root", trust / "trusted_root.json", artifact)
            assert v.returncode == 0, v.stderr
            # And their entries are found by the artifact's digest.
            digest = hashlib.sha256(artifact.read_bytes()).hexdigest()
            found = post(f"{s['url']}/api/v1/index/retrieve", {"hash": f"sha256:{digest}"})
            body = base64.b64decode(json.loads(bundle.read_text())["verificationMaterial"]["tlogEntries"][0]["canonicalizedBody"])
            assert len(found) == 1 and found[0].endswith(hashlib.sha256(b"\x00" + body).hexdigest()), found

        # rekor-cli, online, against signet: the entry it uploaded to the Rekor, with its SET,
        # inclusion proof and signed tree head, under the key signet serves for that tree.
        work, home = rekor["work"], tmp_path / "home"
        home.mkdir()
        v = run(REKOR_CLI, "verify", "--rekor_server", s["url"], "--artifact", work / "rc.txt", "--signature", work / "rc.sig",
                "--public-key", work / "rc.pub", "--pki-format", "x509", "--type", "hashedrekord", env=dict(os.environ, HOME=str(home)))
        assert v.returncode == 0, v.stderr + v.stdout

        # signet's own entries follow: its genesis entry at index n, the first new one after it.
        artifact = tmp_path / "new.txt"
        artifact.write_text("signed after the import\n")
        subprocess.run(["openssl", "dgst", "-sha256", "-sign", work / "rc.key", "-out", tmp_path / "new.sig", artifact], check=True)
        up = run(REKOR_CLI, "upload", "--rekor_server", s["url"], "--artifact", artifact, "--signature", tmp_path / "new.sig",
                 "--public-key", work / "rc.pub", "--pki-format", "x509", "--type", "hashedrekord", env=dict(os.environ, HOME=str(home)))
        assert up.returncode == 0, up.stderr
        assert f"Created entry at index {n + 1}," in up.stdout, up.stdout
        info = get(f"{s['url']}/api/v1/log")
        assert [(x["treeID"], x["treeSize"]) for x in info["inactiveShards"]] == [(rekor["tree_id"], n)], info


def test_an_import_is_refused_where_it_would_mislead(signet_bin, rekor, tmp_path):
    # A key that did not sign the tree head: nothing is written.
    other = tmp_path / "other.pub"
    subprocess.run(["openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", tmp_path / "other.key"], check=True)
    subprocess.run(["openssl", "ec", "-in", tmp_path / "other.key", "-pubout", "-out", other], check=True, capture_output=True)
    r = import_into(signet_bin, str(tmp_path / "a"), None, dict(rekor, pubkey=str(other)))
    assert r.returncode != 0 and "not signed by the key" in r.stderr, r.stderr
    assert not (tmp_path / "a" / "signet.sqlite").exists()

    # A tree the Rekor does not have: its trees are named.
    r = import_into(signet_bin, str(tmp_path / "b"), None, dict(rekor, tree_id="12345"))
    assert r.returncode != 0 and rekor["tree_id"] in r.stderr, r.stderr

    # A store whose Rekor v1 log has entries of its own: indices are handed out once.
    data_dir = str(tmp_path / "c")
    with serve(signet_bin, data_dir):
        pass
    r = import_into(signet_bin, data_dir, None, rekor)
    assert r.returncode != 0 and "has been created" in r.stderr, r.stderr


def test_an_import_cut_short_resumes_and_no_server_starts_before(signet_bin, rekor, tmp_path):
    data_dir = tmp_path / "data"
    args = [signet_bin, "import", "rekor", "--data-dir", str(data_dir), "--url", rekor["url"], "--tree-id", rekor["tree_id"],
            "--public-key", rekor["pubkey"], "--concurrency", "1"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    # Killed once its first batch is committed (the copy's rows are log 4's: ids from 4 << 48).
    deadline = time.monotonic() + 60
    copied = 0
    while copied == 0 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
        try:
            with sqlite3.connect(f"file:{data_dir / 'signet.sqlite'}?mode=ro", uri=True, timeout=1) as db:
                copied = db.execute("SELECT count(*) FROM entry_keys WHERE id >= ?1 AND id < ?2", (4 << 48, 5 << 48)).fetchone()[0]
        except sqlite3.Error:
            pass
    proc.kill()
    proc.wait()
    assert 0 < copied < rekor["size"], copied

    # No server starts on the half copy: it says why, and which command finishes it.
    r = subprocess.run([signet_bin, "serve", "--dev", "--data-dir", str(data_dir), "--plain-http", "--listen", "127.0.0.1:0"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "has not finished" in r.stderr and "signet import rekor" in r.stderr, r.stderr

    # The same command goes on after what is stored, and then the server starts.
    done = run(*args)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["imported"]["treeSize"] == rekor["size"] and 0 < report["copied"] <= rekor["size"] - copied, report
    with serve(signet_bin, str(data_dir)) as s:
        assert get(f"{s['url']}/api/v1/log")["inactiveShards"][0]["treeSize"] == rekor["size"]


def test_signet_stores_each_kind_as_the_rekor_does(signet_bin, rekor, tmp_path):
    # The same proposed entries, each as a client sends it, to the real Rekor and to signet:
    # the stored bodies (the leaves) are the same bytes. Last in this module: it adds entries
    # to the Rekor that the imports above do not expect.
    key, pub = tmp_path / "key.pem", tmp_path / "pub.pem"
    subprocess.run(["openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", key], check=True)
    subprocess.run(["openssl", "ec", "-in", key, "-pubout", "-out", pub], check=True, capture_output=True)
    pem_b64 = base64.b64encode(pub.read_bytes()).decode()
    statement = json.dumps({"_type": "https://in-toto.io/Statement/v1", "subject": [{"name": "a<b>&c", "digest": {"sha256": "ab" * 32}}],
                            "predicateType": "https://slsa.dev/provenance/v1", "predicate": {}}).encode()
    payload_type = "application/vnd.in-toto+json"
    pae = b"DSSEv1 %d %s %d " % (len(payload_type), payload_type.encode(), len(statement)) + statement

    def sign(data):
        return subprocess.run(["openssl", "dgst", "-sha256", "-sign", key], input=data, check=True, capture_output=True).stdout

    sig = sign(pae)
    envelope = json.dumps({"payloadType": payload_type, "payload": base64.b64encode(statement).decode(),
                           "signatures": [{"keyid": "", "sig": base64.b64encode(sig).decode()}]})
    artifact = os.urandom(32)
    entries = {
        "intoto 0.0.1 (cosign before v3)": {"apiVersion": "0.0.1", "kind": "intoto", "spec": {"content": {"envelope": envelope}, "publicKey": pem_b64}},
        "intoto 0.0.2 (sigstore-js)": {"apiVersion": "0.0.2", "kind": "intoto", "spec": {"content": {
            "envelope": {"payloadType": payload_type, "payload": base64.b64encode(base64.b64encode(statement)).decode(),
                         "signatures": [{"keyid": "k<1>", "sig": base64.b64encode(base64.b64encode(sig)).decode(), "publicKey": pem_b64}]},
            "hash": {"algorithm": "sha256", "value": hashlib.sha256(envelope.encode()).hexdigest()},
            "payloadHash": {"algorithm": "sha256", "value": hashlib.sha256(statement).hexdigest()}}}},
        "dsse 0.0.1": {"apiVersion": "0.0.1", "kind": "dsse", "spec": {"proposedContent": {"envelope": envelope, "verifiers": [pem_b64]}}},
        "hashedrekord 0.0.1": {"apiVersion": "0.0.1", "kind": "hashedrekord", "spec": {
            "data": {"hash": {"algorithm": "sha256", "value": hashlib.sha256(artifact).hexdigest()}},
            "signature": {"content": base64.b64encode(sign(artifact)).decode(), "publicKey": {"content": pem_b64}}}},
    }
    with serve(signet_bin, str(tmp_path / "data")) as s:
        for name, entry in entries.items():
            theirs = served_entry(post(f"{rekor['url']}/api/v1/log/entries", entry))
            mine = served_entry(post(f"{s['url']}/api/v1/log/entries", entry))
            assert base64.b64decode(mine[1]["body"]) == base64.b64decode(theirs[1]["body"]), name
            assert mine[0][-64:] == theirs[0][-64:], name
