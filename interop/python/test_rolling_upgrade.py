"""A rolling upgrade, as CHANGELOG.md's versioning section promises it for a release without a new
migration: the previous release (scripts/previous-release) and this tree serve one PostgreSQL together,
both taking appends; the old instance is stopped and a new one takes its place; every acknowledged entry
is still there, each proves into the final tree, and every checkpoint either version signed is a prefix
of it (one history)."""

import base64
import json
import os
import signal
import subprocess
import time

import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from conftest import free_port, run
from test_log_proofs import http, leaf_hash, root_from_inclusion, signed_entry, verify_consistency

PREVIOUS = os.environ.get("SIGNET_PREVIOUS_BIN")




def fresh_database():
    server = os.environ["SIGNET_TEST_POSTGRES"]
    db = f"signet_upgrade_{os.getpid()}_{free_port()}"
    run(os.path.join(os.environ["SIGNET_TEST_POSTGRES_BIN"], "psql"), server, "-qc", f"CREATE DATABASE {db}")
    return server.rsplit("/", 1)[0] + "/" + db


class Instance:
    def __init__(self, binary, data, storage):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen([binary, "serve", "--dev", "--plain-http", "--data-dir", str(data), "--storage", storage,
                                      "--listen", f"127.0.0.1:{self.port}"], stdout=subprocess.PIPE, text=True,
                                     env=dict(os.environ, SIGNET_LOG="warn"))
        line = self.proc.stdout.readline()
        assert line.startswith("signet listening on "), line
        deadline = time.monotonic() + 30
        while http("GET", self.url + "/readyz")[0] != 200:
            assert time.monotonic() < deadline, "not ready"
            time.sleep(0.1)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=30)


@pytest.fixture()
def previous():
    if os.environ.get("SIGNET_PREVIOUS_MISSING"):
        pytest.skip(os.environ["SIGNET_PREVIOUS_MISSING"])
    if not PREVIOUS or not os.environ.get("SIGNET_TEST_POSTGRES"):
        if os.environ.get("CI"):
            pytest.fail("SIGNET_PREVIOUS_BIN or SIGNET_TEST_POSTGRES is not set; scripts/test builds and starts them")
        pytest.skip("no previous release (scripts/previous-release) or no PostgreSQL")
    return PREVIOUS


def test_the_previous_release_and_this_one_serve_together_and_hand_over(previous, signet_bin, tmp_path):
    assert not os.path.samefile(previous, signet_bin)
    storage = fresh_database()
    # The cluster as the previous release made it and first served it.
    old_dir, new_dir, next_dir = tmp_path / "old", tmp_path / "new", tmp_path / "next"
    old = Instance(previous, old_dir, storage)
    for d in (new_dir, next_dir):
        run(previous, "backup", "--data-dir", old_dir, "--out", d)
    signer = ec.generate_private_key(ec.SECP256R1())
    acknowledged, checkpoints = [], []

    def append(instance, n):
        for i in range(n):
            artifact = f"rolling upgrade {len(acknowledged)} via {instance.port} ({i})".encode()
            status, _, body = http("POST", instance.url + "/api/v1/log/entries", signed_entry(signer, artifact))
            assert status == 201, body
            (uuid, entry), = json.loads(body).items()
            acknowledged.append((uuid, entry["logIndex"], leaf_hash(base64.b64decode(entry["body"]))))
        status, _, body = http("GET", instance.url + "/api/v1/log")
        info = json.loads(body)
        checkpoints.append((info["treeSize"], bytes.fromhex(info["rootHash"])))

    append(old, 10)
    # This tree joins on the same database (no new migration since the previous release) and
    # both take appends, whichever of them sequences.
    new = Instance(signet_bin, new_dir, storage)
    for _ in range(3):
        append(old, 5)
        append(new, 5)
    # The old one goes; another of this tree's takes its place, and writes go on.
    old.stop()
    successor = Instance(signet_bin, next_dir, storage)
    append(new, 5)
    append(successor, 5)

    # Nothing acknowledged is lost, and there is one history: every entry proves into the final
    # tree, and every checkpoint either version served is a prefix of it.
    # (The log's genesis entry is index 0. A follower's view catches up within moments.)
    want = max(index for _, index, _ in acknowledged) + 1
    for instance in (new, successor):
        deadline = time.monotonic() + 10
        while True:
            status, _, body = http("GET", instance.url + "/api/v1/log")
            info = json.loads(body)
            size, root = info["treeSize"], bytes.fromhex(info["rootHash"])
            if size >= want or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert size == want == len(acknowledged) + 1, (size, want, len(acknowledged))
        for uuid, index, leaf in acknowledged:
            status, _, body = http("GET", f"{instance.url}/api/v1/log/entries?logIndex={index}")
            assert status == 200, body
            (got, entry), = json.loads(body).items()
            assert got == uuid
            proof = entry["verification"]["inclusionProof"]
            assert proof["treeSize"] == size, "no appends after the head was read"
            assert root_from_inclusion(index, size, leaf, [bytes.fromhex(h) for h in proof["hashes"]]) == root
        for first, first_root in checkpoints:
            assert first <= size
            status, _, body = http("GET", f"{instance.url}/api/v1/log/proof?firstSize={first}&lastSize={size}")
            assert status == 200, body
            verify_consistency(first, size, first_root, root, [bytes.fromhex(h) for h in json.loads(body)["hashes"]])
    new.stop()
    successor.stop()
