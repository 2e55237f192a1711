"""The web log explorer at /ui, driven in Debian's headless Chromium through Playwright: searches by
digest, identity, index and UUID find an entry signed here; "Verify in browser" verifies it with
WebCrypto and fails on tampered entries, proofs and checkpoints; bad queries get a clear message;
the log, shards, TUF targets and lab reports are shown; and the page runs under its CSP without a
console error."""

import base64
import hashlib
import json
import os
import re
import subprocess
import time
import urllib.request

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519

from conftest import ROOT, start_signet

try:
    from playwright.sync_api import expect, sync_playwright
except ImportError:  # reported by the browser fixture, as a failure rather than a skip
    expect = sync_playwright = None

CHROMIUM = os.environ.get("CHROMIUM_BIN", "/usr/bin/chromium")
# Never a downloaded browser: Debian's, headless, with nothing that reaches beyond loopback.
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
ARTIFACTS = os.path.join(ROOT, "target", "ui")
EMAIL = "uma@example.com"
REPORT = "lab-smoke.html"
ENTRY_ROUTE = re.compile(r"/api/v1/log/entries(\?|/)")


def http_get(url):
    with urllib.request.urlopen(url) as r:
        return r.status, dict(r.headers), r.read()


def sign_v1(signet_bin, server, tmp, name, email=EMAIL):
    """Signs a new artifact as `email` with `signet sign-bundle` over Rekor v1 (a hashedrekord with a
    certificate from the dev CA); returns what the explorer should show for it."""
    data_dir = server["data_dir"]
    trust = tmp / f"{name}-trust"
    subprocess.run([signet_bin, "trust", "export", "--data-dir", data_dir, "--out", str(trust)], check=True, capture_output=True)
    config = json.loads((trust / "signing_config.json").read_text())
    config["rekorTlogUrls"] = [s for s in config["rekorTlogUrls"] if s["majorApiVersion"] == 1]
    signing_config = tmp / f"{name}-signing_config_v1.json"
    signing_config.write_text(json.dumps(config))
    token = subprocess.run([signet_bin, "dev-token", "--data-dir", data_dir, "--subject", email],
                           check=True, capture_output=True, text=True).stdout.strip()
    artifact = tmp / f"{name}.txt"
    artifact.write_text(f"{name}: shown by the web log explorer\n")
    bundle_path = tmp / f"{name}.sigstore.json"
    signed = subprocess.run([signet_bin, "sign-bundle", "--identity-token", token, "--bundle", str(bundle_path),
                             "--signing-config", str(signing_config), str(artifact)], capture_output=True, text=True)
    assert signed.returncode == 0, signed.stderr
    tlog = json.loads(bundle_path.read_text())["verificationMaterial"]["tlogEntries"][0]
    body = base64.b64decode(tlog["canonicalizedBody"])
    return {
        "issuer": server["url"] + "/oidc",
        "digest": hashlib.sha256(artifact.read_bytes()).hexdigest(),
        "index": int(tlog["logIndex"]),
        "proof_index": int(tlog["inclusionProof"]["logIndex"]),
        # RFC 6962 leaf hash: the last 64 hex of the entry UUID.
        "leaf": hashlib.sha256(b"\x00" + body).hexdigest(),
    }


@pytest.fixture(scope="module")
def logged(signet_bin, tmp_path_factory):
    """A `signet serve --dev` with one entry signed by EMAIL on its Rekor v1 log, and one lab
    report in its data dir."""
    tmp = tmp_path_factory.mktemp("ui")
    with start_signet(signet_bin) as server:
        entry = sign_v1(signet_bin, server, tmp, "artifact")
        os.makedirs(os.path.join(server["data_dir"], "reports"), exist_ok=True)
        with open(os.path.join(server["data_dir"], "reports", REPORT), "w") as f:
            f.write("<!DOCTYPE html><title>lab smoke</title><p>lab smoke report</p>\n")
        yield {"url": server["url"], **entry}


@pytest.fixture(scope="module")
def browser():
    if sync_playwright is None:
        pytest.fail("playwright is not installed: pip install -r interop/python/requirements.txt")
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} not found: the explorer's tests drive Debian's Chromium; scripts/install-deps installs it (apt-get install chromium)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


class Explorer:
    """A fresh browser page on /ui that records console errors and uncaught exceptions (a CSP
    violation is reported as a console error)."""

    def __init__(self, browser, url):
        self.context = browser.new_context(viewport={"width": 1280, "height": 900})
        self.page = self.context.new_page()
        self.problems = []
        self.page.on("console", lambda m: self.problems.append(f"console.{m.type}: {m.text}") if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.problems.append(f"uncaught: {e}"))
        self.url = url

    def open(self):
        response = self.page.goto(self.url + "/ui")
        assert response.status == 200, f"GET /ui answered {response.status}: the server does not serve the explorer"
        return response

    def search(self, query):
        self.page.fill("#q", query)
        self.page.click("#search")

    def verify(self):
        self.page.click("#verify")
        result = self.page.locator("#verify-result")
        expect(result).to_have_text(re.compile(r"verified|FAILED"))
        return result.inner_text()


@pytest.fixture()
def explorer(browser, logged):
    e = Explorer(browser, logged["url"])
    e.open()
    yield e
    e.context.close()


def expect_entry(explorer, logged):
    """The entry signed in `logged` is on show, with its certificate and proof."""
    page = explorer.page
    expect(page.locator("#entry")).to_contain_text(logged["leaf"])
    expect(page.locator("#error")).to_be_hidden()
    entry = page.locator("#entry").inner_text()
    assert re.search(rf"Log index\s+{logged['index']}\b", entry), entry
    assert f"sha256:{logged['digest']}" in entry and "hashedrekord" in entry
    cert = page.locator("#certificate").inner_text()
    assert f"email: {EMAIL}" in cert, cert
    assert "1.3.6.1.4.1.57264.1.8" in cert and logged["issuer"] in cert, cert
    assert "Not before" in cert and "Not after" in cert and "codeSigning" in cert, cert
    proof = page.locator("#proof").inner_text()
    assert re.search(r"Tree size\s+\d+", proof) and "Checkpoint" in proof, proof


@pytest.mark.parametrize("how", ["digest", "bare digest", "identity", "index", "uuid", "leaf hash"])
def test_search_finds_the_entry(explorer, logged, how):
    if how == "uuid":
        # The 80-hex UUID (tree ID + leaf hash) as the log hands it out.
        explorer.search(str(logged["index"]))
        expect(explorer.page.locator("#entry")).to_contain_text(logged["leaf"])
        uuid = re.search(r"UUID\s+([0-9a-f]{80})", explorer.page.locator("#entry").inner_text()).group(1)
        explorer.open()
        query = uuid
    else:
        # 64 hex is a digest or a 64-hex UUID (the leaf hash alone): the digest finds nothing, the UUID does.
        query = {"digest": f"sha256:{logged['digest']}", "bare digest": logged["digest"], "identity": EMAIL,
                 "index": str(logged["index"]), "leaf hash": logged["leaf"]}[how]
    explorer.search(query)
    expect_entry(explorer, logged)
    if how in ("digest", "identity"):
        expect(explorer.page.locator("#results")).to_contain_text(logged["leaf"])


def test_verify_in_browser(explorer, logged):
    explorer.search(f"sha256:{logged['digest']}")
    expect_entry(explorer, logged)
    result = explorer.verify()
    assert "verified" in result and "FAILED" not in result, result
    checks = explorer.page.locator("#verify-checks li")
    assert explorer.page.locator("#verify-checks li.bad").count() == 0
    text = "\n".join(checks.all_inner_texts())
    for needle in ["matches the entry UUID", "equals the proof's root hash", "equals the checkpoint's root hash",
                   "signature by", "verifies with the log's ECDSA P-256 key"]:
        assert needle in text, text


def flip_hex(h):
    return ("0" if h[0] != "0" else "1") + h[1:]


def tamper_hash(entry):
    proof = entry["verification"]["inclusionProof"]
    proof["hashes"][0] = flip_hex(proof["hashes"][0])


def tamper_body(entry):
    # Also a script-shaped string: it must show as text and never become markup.
    body = json.loads(base64.b64decode(entry["body"]))
    body["spec"]["data"]["hash"]["value"] = '<img id="injected" src="x">' + flip_hex(body["spec"]["data"]["hash"]["value"])
    entry["body"] = base64.b64encode(json.dumps(body).encode()).decode()


def tamper_root(entry):
    proof = entry["verification"]["inclusionProof"]
    proof["rootHash"] = flip_hex(proof["rootHash"])


def tamper_checkpoint(entry):
    # The origin line is signed but not otherwise checked: only the signature catches this.
    proof = entry["verification"]["inclusionProof"]
    origin, rest = proof["checkpoint"].split("\n", 1)
    proof["checkpoint"] = origin + "x\n" + rest


def tamper_tree_size(entry):
    entry["verification"]["inclusionProof"]["treeSize"] += 1


@pytest.mark.parametrize("tamper,reason", [
    (tamper_hash, "does not match the proof's root hash"),
    (tamper_body, "does not match the entry UUID"),
    (tamper_root, "does not match the proof's root hash"),
    (tamper_checkpoint, "does not verify"),
    (tamper_tree_size, "fewer hashes than a tree of this size needs"),
], ids=["proof-hash", "body", "root-hash", "checkpoint-text", "tree-size"])
def test_tampered_entry_fails_verification(explorer, logged, tamper, reason):
    def route(r):
        response = r.fetch()
        entries = response.json()
        for entry in entries.values():
            tamper(entry)
        r.fulfill(response=response, json=entries)

    explorer.page.route(ENTRY_ROUTE, route)
    explorer.search(str(logged["index"]))
    expect(explorer.page.locator("#entry")).to_contain_text(logged["leaf"])
    result = explorer.verify()
    assert result.startswith("FAILED: ") and reason in result, result
    assert "verified" not in result.lower(), result
    assert explorer.page.locator("#verify-result.bad").count() == 1
    assert explorer.page.locator("#injected").count() == 0


def resign_checkpoint(entry, key, hint):
    """Replaces the checkpoint's signature lines with one by `key` under the same name."""
    proof = entry["verification"]["inclusionProof"]
    text, sigs = proof["checkpoint"].rsplit("\n\n", 1)
    text += "\n"
    name = sigs[len("\u2014 "):].rsplit(" ", 1)[0]
    if isinstance(key, ed25519.Ed25519PrivateKey):
        sig = key.sign(text.encode())
    else:
        sig = key.sign(text.encode(), ec.ECDSA(hashes.SHA256()))
    proof["checkpoint"] = f"{text}\n\u2014 {name} {base64.b64encode(hint(name) + sig).decode()}\n"


@pytest.mark.parametrize("kind", ["ed25519-log-key", "other-ecdsa-key"])
def test_checkpoint_key_types(explorer, logged, kind):
    """A log whose key is Ed25519 verifies (C2SP key ID as the hint, WebCrypto Ed25519); a checkpoint
    signed by any key but the log's fails."""
    if kind == "ed25519-log-key":
        key = ed25519.Ed25519PrivateKey.generate()
        raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        hint = lambda name: hashlib.sha256(name.encode() + b"\n\x01" + raw).digest()[:4]
        pem = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        explorer.page.route(re.compile(r"/api/v1/log/publicKey"), lambda r: r.fulfill(body=pem, content_type="application/x-pem-file"))
    else:
        key = ec.generate_private_key(ec.SECP256R1())
        spki = key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
        hint = lambda name: hashlib.sha256(spki).digest()[:4]

    def route(r):
        response = r.fetch()
        entries = response.json()
        for entry in entries.values():
            resign_checkpoint(entry, key, hint)
        r.fulfill(response=response, json=entries)

    explorer.page.route(ENTRY_ROUTE, route)
    explorer.search(str(logged["index"]))
    expect(explorer.page.locator("#entry")).to_contain_text(logged["leaf"])
    result = explorer.verify()
    if kind == "ed25519-log-key":
        assert "verified" in result and "FAILED" not in result, result
        assert "verifies with the log's Ed25519 key" in explorer.page.locator("#verify-checks").inner_text()
    else:
        assert result == "FAILED: the checkpoint carries no signature by the log's ECDSA P-256 key", result


def test_undecodable_certificate_is_reported(explorer, logged):
    def route(r):
        response = r.fetch()
        entries = response.json()
        for entry in entries.values():
            body = json.loads(base64.b64decode(entry["body"]))
            garbage = base64.b64encode(b"\x30\x82\xff\xff\x30\x03\x02\x01").decode()
            pem = f"-----BEGIN CERTIFICATE-----\n{garbage}\n-----END CERTIFICATE-----\n"
            body["spec"]["signature"]["publicKey"]["content"] = base64.b64encode(pem.encode()).decode()
            entry["body"] = base64.b64encode(json.dumps(body).encode()).decode()
        r.fulfill(response=response, json=entries)

    explorer.page.route(ENTRY_ROUTE, route)
    explorer.search(str(logged["index"]))
    expect(explorer.page.locator("#certificate")).to_contain_text("certificate could not be decoded")
    expect(explorer.page.locator("#proof")).to_contain_text("Checkpoint")
    assert not [p for p in explorer.problems if p.startswith("uncaught")], explorer.problems


@pytest.mark.parametrize("query,message", [
    ("nothex!!", r'"nothex!!" is not a search the explorer understands\. Expected an artifact digest'),
    ("abc123", r"is 6 hex characters: expected 64 .* or 80"),
    ("sha256:1234", r"is not a sha256 digest: expected \"sha256:\" followed by 64 hex characters, got 4"),
    ("md5:" + "0" * 32, r"Digest algorithm \"md5\" is not supported"),
    ("   ", r"Enter something to search for"),
    ("sha256:" + "0" * 64, r"no entries match digest sha256:0{64}"),
    ("99999999", r"no entry at logIndex 99999999"),
])
def test_bad_query_shows_a_clear_message(explorer, query, message):
    explorer.search(query)
    error = explorer.page.locator("#error")
    expect(error).to_be_visible()
    expect(error).to_have_attribute("role", "alert")
    assert re.search(message, error.inner_text()), error.inner_text()
    expect(explorer.page.locator("#entry-section")).to_be_hidden()


def test_log_shards_tuf_and_reports(explorer, logged):
    status, _, body = http_get(logged["url"] + "/api/v1/log")
    info = json.loads(body)
    page = explorer.page
    # Nothing in this module appends after the signing: the page shows the same head.
    expect(page.locator("#log-info")).to_contain_text(info["rootHash"])
    assert re.search(rf"Tree size\s+{info['treeSize']}\b", page.locator("#log-info").inner_text())
    expect(page.locator("#log-info")).to_contain_text(info["treeID"])
    expect(page.locator("#shards")).to_contain_text(info["treeID"])
    expect(page.locator("#shards")).to_contain_text("active")
    targets = page.locator("#tuf-targets")
    expect(targets).to_contain_text("trusted_root.json")
    expect(targets).to_contain_text(re.compile(r"[0-9a-f]{64}"))
    link = page.locator("#reports a")
    expect(link).to_have_text(REPORT)
    href = link.get_attribute("href")
    assert href == f"/ui/reports/{REPORT}"
    status, _, report = http_get(logged["url"] + href)
    assert status == 200 and b"lab smoke report" in report


def test_tuf_disabled_is_shown(browser, logged):
    e = Explorer(browser, logged["url"])
    try:
        e.page.route(re.compile(r"/tuf/timestamp\.json$"),
                     lambda r: r.fulfill(status=404, json={"code": 404, "message": "this instance serves no TUF repository"}))
        e.open()
        expect(e.page.locator("#tuf-targets")).to_have_text("TUF repository disabled")
    finally:
        e.context.close()


def test_screenshot(explorer, logged):
    explorer.search(f"sha256:{logged['digest']}")
    expect_entry(explorer, logged)
    assert "verified" in explorer.verify()
    expect(explorer.page.locator("#tuf-targets")).to_contain_text("trusted_root.json")
    # Readable at 1280px: nothing is wider than the window.
    for box in ["#entry-section", "#certificate-section", "#proof-section", "#log-info", "#tuf-targets"]:
        b = explorer.page.locator(box).bounding_box()
        assert b["x"] >= 0 and b["x"] + b["width"] <= 1280, (box, b)
    os.makedirs(ARTIFACTS, exist_ok=True)
    path = os.path.join(ARTIFACTS, "explorer.png")
    explorer.page.screenshot(path=path, full_page=True)
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_no_console_errors_or_csp_violations(browser, logged):
    e = Explorer(browser, logged["url"])
    try:
        response = e.open()
        policy = response.headers.get("content-security-policy", "")
        assert "script-src 'self'" in policy and "style-src 'self'" in policy and "unsafe" not in policy, policy
        page = e.page
        expect(page.locator("#log-info table")).to_be_visible()
        expect(page.locator("#tuf-targets table")).to_be_visible()
        expect(page.locator("#reports a")).to_be_visible()
        e.search(f"sha256:{logged['digest']}")
        expect_entry(e, logged)
        assert "verified" in e.verify()
        e.search("nothex!!")
        expect(page.locator("#error")).to_be_visible()
        # A shared link runs its search on load.
        page.goto(f"{logged['url']}/ui?q={logged['index']}")
        expect(page.locator("#entry")).to_contain_text(logged["leaf"])
        expect(page.locator("#q")).to_have_value(str(logged["index"]))
        assert e.problems == []
    finally:
        e.context.close()


def test_sharded_log(browser, signet_bin, tmp_path):
    """After a rotation, an entry of the frozen shard verifies against that shard's own key and
    checkpoint (the key comes from ?treeID=, named by the UUID), and one of the new shard shows
    its shard-local proof index next to the log-wide one."""
    with start_signet(signet_bin) as server:
        before = sign_v1(signet_bin, server, tmp_path, "before")
        token = subprocess.run([signet_bin, "admin", "token", "create", "--role", "admin", "--data-dir", server["data_dir"]],
                               check=True, capture_output=True, text=True).stdout.strip()
        for _ in range(20):  # the instance sees a new token within moments
            rotated = subprocess.run([signet_bin, "admin", "log", "rotate", "--log", "rekor-v1", "--url", server["url"], "--token", token],
                                     capture_output=True, text=True)
            if "HTTP 401" not in rotated.stderr:
                break
            time.sleep(0.2)
        assert rotated.returncode == 0, rotated.stderr
        shards = json.loads(rotated.stdout)
        after = sign_v1(signet_bin, server, tmp_path, "after")
        assert after["index"] != after["proof_index"]
        e = Explorer(browser, server["url"])
        try:
            e.open()
            rows = e.page.locator("#shards tbody tr")
            expect(rows).to_have_count(2)
            expect(rows.nth(0)).to_contain_text(shards["active"]["treeID"])
            expect(rows.nth(0)).to_contain_text("active")
            expect(rows.nth(1)).to_contain_text(shards["frozen"]["treeID"])
            expect(rows.nth(1)).to_contain_text("frozen")
            for signed, tree in [(before, shards["frozen"]["treeID"]), (after, shards["active"]["treeID"])]:
                e.search(f"sha256:{signed['digest']}")
                entry = e.page.locator("#entry")
                expect(entry).to_contain_text(signed["leaf"])
                assert re.search(rf"Tree ID\s+{tree}\b", entry.inner_text())
                assert re.search(rf"Log index\s+{signed['index']}\b", entry.inner_text())
                assert re.search(rf"Log index\s+{signed['proof_index']}\b", e.page.locator("#proof").inner_text())
                result = e.verify()
                assert "verified" in result and "FAILED" not in result, result
            assert e.problems == []
        finally:
            e.context.close()
