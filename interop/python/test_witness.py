"""Witnessing with independent implementations (c2sp.org/tlog-witness, tlog-cosignature):

- litewitness (filippo.io/torchwood), run on loopback, cosigns signet's Rekor v2 checkpoints,
  and Go's x/mod note + torchwood verify what signet then serves;
- signet, as a witness, cosigns for a log driven from Go (x/mod tlog trees and notes), and
  torchwood's cosignature verifier checks signet's cosignatures.
"""

import base64
import hashlib
import json
import os
import re
import socket
import sqlite3
import subprocess
import time
import urllib.request

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from conftest import ROOT, serve

SGVERIFY = os.environ.get("SGVERIFY_BIN", os.path.join(ROOT, ".tools", "bin", "sgverify"))
LITEWITNESS = os.environ.get("LITEWITNESS_BIN", os.path.join(ROOT, ".tools", "bin", "litewitness"))


def run(*cmd, env=None):
    out = subprocess.run(list(cmd), capture_output=True, text=True, env=env)
    assert out.returncode == 0, f"{cmd[0]} {cmd[1] if len(cmd) > 1 else ''} failed ({out.returncode}):\n{out.stdout}\n{out.stderr}"
    return out.stdout


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read().decode()


def append_v2(url, key, artifact: bytes):
    """A hashedRekordRequestV002, signed with `key` (`cryptography`, not signet's code)."""
    sig = key.sign(artifact, ec.ECDSA(hashes.SHA256()))
    spki = key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    body = {"hashedRekordRequestV002": {
        "digest": base64.b64encode(hashlib.sha256(artifact).digest()).decode(),
        "signature": {"content": base64.b64encode(sig).decode(), "verifier": {
            "publicKey": {"rawBytes": base64.b64encode(spki).decode()}, "keyDetails": "PKIX_ECDSA_P256_SHA_256"}}}}
    req = urllib.request.Request(url + "/api/v2/log/entries", data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        assert r.status == 201


def tools_installed():
    for path in (SGVERIFY, LITEWITNESS):
        if not os.path.exists(path):
            pytest.fail(f"{path} not found; scripts/test builds it")


def test_litewitness_cosigns_signet_checkpoints(signet_bin, tmp_path):
    tools_installed()
    lw_name = "witness.interop.test/litewitness"
    # litewitness keeps its key in an ssh-agent of its own.
    key = tmp_path / "lw.key"
    run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key))
    sock = str(tmp_path / "lw.sock")
    agent = subprocess.Popen(["ssh-agent", "-D", "-a", sock], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    data_dir = str(tmp_path / "signet")
    lw = None
    try:
        for _ in range(100):
            if os.path.exists(sock):
                break
            time.sleep(0.05)
        run("ssh-add", "-q", str(key), env={**os.environ, "SSH_AUTH_SOCK": sock})
        fingerprint = run("ssh-keygen", "-l", "-E", "sha256", "-f", str(key) + ".pub").split()[1]

        # signet's Rekor v2 log: origin is the host of a dev instance's URL; its Ed25519 key.
        log_vkey = run(signet_bin, "witness", "vkey", "--log", "--name", "127.0.0.1",
                       "--key", os.path.join(data_dir, "keys", "rekor-v2-note.pem")).strip()
        # What witnessctl add-log / add-key write: the log at size 0 and its key.
        db = str(tmp_path / "litewitness.db")
        with sqlite3.connect(db) as c:
            c.executescript("CREATE TABLE log (origin TEXT PRIMARY KEY, tree_size INTEGER NOT NULL, tree_hash TEXT NOT NULL);"
                            "CREATE TABLE key (origin TEXT NOT NULL, key TEXT NOT NULL, FOREIGN KEY(origin) REFERENCES log(origin));")
            c.execute("INSERT INTO log VALUES (?, 0, ?)", ("127.0.0.1", base64.b64encode(hashlib.sha256(b"").digest()).decode()))
            c.execute("INSERT INTO key VALUES (?, ?)", ("127.0.0.1", log_vkey))

        port = free_port()
        lw_log = open(tmp_path / "litewitness.log", "w")
        lw = subprocess.Popen([LITEWITNESS, "-db", db, "-name", lw_name, "-key", fingerprint, "-ssh-agent", sock,
                               "-listen", f"127.0.0.1:{port}"], stdout=lw_log, stderr=subprocess.STDOUT)
        # litewitness logs its verifier key at start.
        lw_vkey = None
        for _ in range(200):
            m = re.search(r"vkey=(\S+)", (tmp_path / "litewitness.log").read_text())
            if m:
                lw_vkey = m.group(1).strip('"')
                break
            assert lw.poll() is None, (tmp_path / "litewitness.log").read_text()
            time.sleep(0.05)
        assert lw_vkey and lw_vkey.startswith(lw_name + "+"), (tmp_path / "litewitness.log").read_text()

        config = tmp_path / "signet.toml"
        config.write_text(f'[log.witnesses]\nquorum = 1\nmembers = [{{ url = "http://127.0.0.1:{port}", vkey = "{lw_vkey}" }}]\n')
        with serve(signet_bin, data_dir, extra=["--config", str(config)]) as s:
            signer = ec.generate_private_key(ec.SECP256R1())
            for i in range(4):
                append_v2(s["url"], signer, f"witnessed {i}".encode())
            # Wait for a cosigned checkpoint that covers the entries: the witness was asked
            # with a consistency proof from the size it held (the genesis checkpoint's, or 0).
            deadline = time.time() + 30
            while True:
                note = get(s["url"] + "/api/v2/checkpoint")
                size = int(note.split("\n")[1])
                if size >= 5 and f"\u2014 {lw_name} " in note:
                    break
                assert time.time() < deadline, f"no checkpoint of size >= 5 cosigned by litewitness:\n{note}\n" + \
                    (tmp_path / "litewitness.log").read_text()[-3000:]
                time.sleep(0.1)
        path = tmp_path / "checkpoint.note"
        path.write_text(note)
        out = run(SGVERIFY, "cosig-verify", "--note", str(path), "--log-vkey", log_vkey,
                  "--witness-ssh-key", str(key), "--witness-name", lw_name)
        assert "cosigned by " + lw_name in out
        # litewitness's own record agrees on the size it cosigned last.
        with sqlite3.connect(db) as c:
            held = c.execute("SELECT tree_size FROM log WHERE origin = '127.0.0.1'").fetchone()[0]
        assert held >= size
    finally:
        if lw:
            lw.kill()
            lw.wait()
        agent.kill()
        agent.wait()


def test_signet_cosigns_for_a_log_driven_from_go(signet_bin, tmp_path):
    tools_installed()
    skey, vkey = run(SGVERIFY, "note-keygen", "go-log.interop.test").split()
    data_dir = str(tmp_path / "signet")
    witness_key = os.path.join(data_dir, "keys", "witness.pem")
    name = "witness.interop.test/signet"
    signet_vkey = run(signet_bin, "witness", "vkey", "--name", name, "--key", witness_key).strip()
    config = tmp_path / "signet.toml"
    config.write_text(f'[witness]\nname = "{name}"\n[[witness.logs]]\norigin = "go-log.interop.test"\nvkeys = ["{vkey}"]\n')
    with serve(signet_bin, data_dir, extra=["--config", str(config)]) as s:
        assert open(os.path.join(data_dir, "witness.vkey")).read().strip() == signet_vkey
        out = run(SGVERIFY, "witness-drive", "--skey", skey, "--witness", s["url"], "--witness-key", witness_key,
                  "--witness-name", name, "--sizes", "1,5,17,256,300")
    result = json.loads(out)
    # Every size cosigned, each cosignature checked by torchwood; the stale old size and the
    # second root at the size held were both refused with the size held.
    assert result == {"witness_vkey": signet_vkey, "cosigned": [1, 5, 17, 256, 300],
                      "stale_409_body": "300\n", "fork_409_body": "300\n"}, result
