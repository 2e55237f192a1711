"""Checks signet's Rekor logs with an implementation that shares no code with signet:
hashlib for the RFC 9162 Merkle verification and `cryptography` (OpenSSL) for signatures."""

import base64
import hashlib
import json
import urllib.request

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec


# ---- RFC 9162 section 2.1.3.2 / 2.1.4.2, written from the RFC text ----------------------
def leaf_hash(data: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def root_from_inclusion(index: int, size: int, leaf: bytes, proof: list) -> bytes:
    assert index < size
    fn, sn, r = index, size - 1, leaf
    for p in proof:
        assert sn != 0, "proof too long"
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            while not fn & 1 and fn != 0:
                fn, sn = fn >> 1, sn >> 1
        else:
            r = node_hash(r, p)
        fn, sn = fn >> 1, sn >> 1
    assert sn == 0, "proof too short"
    return r


def verify_consistency(first: int, second: int, first_root: bytes, second_root: bytes, proof: list):
    if first == second:
        assert not proof and first_root == second_root
        return
    path = ([first_root] if first & (first - 1) == 0 else []) + proof
    fn, sn = first - 1, second - 1
    while fn & 1:
        fn, sn = fn >> 1, sn >> 1
    fr = sr = path[0]
    for c in path[1:]:
        assert sn != 0
        if fn & 1 or fn == sn:
            fr, sr = node_hash(c, fr), node_hash(c, sr)
            while not fn & 1 and fn != 0:
                fn, sn = fn >> 1, sn >> 1
        else:
            sr = node_hash(sr, c)
        fn, sn = fn >> 1, sn >> 1
    assert sn == 0 and fr == first_root and sr == second_root


# ---- helpers -----------------------------------------------------------------------------
def http(method, url, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req) as resp:
            return resp.status, resp.headers, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def signed_entry(key, artifact: bytes):
    sig = key.sign(artifact, ec.ECDSA(hashes.SHA256()))
    pem = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    return {
        "apiVersion": "0.0.1",
        "kind": "hashedrekord",
        "spec": {
            "signature": {"content": base64.b64encode(sig).decode(), "publicKey": {"content": base64.b64encode(pem).decode()}},
            "data": {"hash": {"algorithm": "sha256", "value": hashlib.sha256(artifact).hexdigest()}},
        },
    }


def verify_note(note: str, log_key, name: str):
    """C2SP signed note: body, blank line, '— name base64(hint || sig)' lines."""
    body, sigs = note.split("\n\n", 1)
    body += "\n"
    spki = log_key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    hint = hashlib.sha256(spki).digest()[:4]
    for line in sigs.splitlines():
        assert line.startswith("\u2014 ")
        signer, blob = line[2:].rsplit(" ", 1)
        raw = base64.b64decode(blob)
        if signer == name and raw[:4] == hint:
            log_key.verify(raw[4:], body.encode(), ec.ECDSA(hashes.SHA256()))
            origin, size, root = body.splitlines()[:3]
            return origin, int(size), base64.b64decode(root)
    raise AssertionError("no signature by the log key")


def canonical(obj) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


# ---- the test ----------------------------------------------------------------------------
def test_v1_proofs_signatures_and_sets_verify_independently(server):
    url = server["url"]
    _, _, pem = http("GET", url + "/api/v1/log/publicKey")
    log_key = serialization.load_pem_public_key(pem)
    log_id = hashlib.sha256(
        log_key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    ).hexdigest()

    signer = ec.generate_private_key(ec.SECP256R1())
    checkpoints = []
    entries = []
    for i in range(23):
        status, headers, body = http("POST", url + "/api/v1/log/entries", signed_entry(signer, f"artifact {i}".encode()))
        assert status == 201, body
        (uuid, entry), = json.loads(body).items()
        assert headers["ETag"].strip('"') == uuid
        leaf = leaf_hash(base64.b64decode(entry["body"]))
        assert uuid.endswith(leaf.hex())
        assert entry["logID"] == log_id

        proof = entry["verification"]["inclusionProof"]
        origin, size, root = verify_note(proof["checkpoint"], log_key, "127.0.0.1")
        assert origin.startswith("127.0.0.1 - ")
        assert size == proof["treeSize"] and root.hex() == proof["rootHash"]
        computed = root_from_inclusion(entry["logIndex"], size, leaf, [bytes.fromhex(h) for h in proof["hashes"]])
        assert computed == root

        payload = canonical({k: entry[k] for k in ("body", "integratedTime", "logID", "logIndex")})
        log_key.verify(base64.b64decode(entry["verification"]["signedEntryTimestamp"]), payload, ec.ECDSA(hashes.SHA256()))
        checkpoints.append((size, root))
        entries.append((entry["logIndex"], leaf))

    _, _, info = http("GET", url + "/api/v1/log")
    info = json.loads(info)
    head_size, head_root = info["treeSize"], bytes.fromhex(info["rootHash"])
    assert head_size == 24  # the log's genesis entry and ours
    # Every entry is provable against the final head, and every checkpoint is a prefix of it.
    for index, leaf in entries:
        _, _, body = http("GET", f"{url}/api/v1/log/entries?logIndex={index}")
        (_, entry), = json.loads(body).items()
        proof = entry["verification"]["inclusionProof"]
        assert root_from_inclusion(index, head_size, leaf, [bytes.fromhex(h) for h in proof["hashes"]]) == head_root
    for size, root in checkpoints:
        _, _, body = http("GET", f"{url}/api/v1/log/proof?firstSize={size}&lastSize={head_size}")
        proof = json.loads(body)
        verify_consistency(size, head_size, root, head_root, [bytes.fromhex(h) for h in proof["hashes"]])


def test_tampered_proofs_are_rejected_by_the_independent_verifier(server):
    url = server["url"]
    signer = ec.generate_private_key(ec.SECP256R1())
    for i in range(5):
        http("POST", url + "/api/v1/log/entries", signed_entry(signer, f"x{i}".encode()))
    _, _, body = http("GET", f"{url}/api/v1/log/entries?logIndex=2")
    (_, entry), = json.loads(body).items()
    proof = entry["verification"]["inclusionProof"]
    leaf = leaf_hash(base64.b64decode(entry["body"]))
    hashes_ = [bytes.fromhex(h) for h in proof["hashes"]]
    root = bytes.fromhex(proof["rootHash"])
    assert root_from_inclusion(2, proof["treeSize"], leaf, hashes_) == root
    bad = [bytes([hashes_[0][0] ^ 1]) + hashes_[0][1:]] + hashes_[1:]
    assert root_from_inclusion(2, proof["treeSize"], leaf, bad) != root
