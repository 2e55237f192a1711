"""Real clients bootstrap trust from signet's TUF repository (`/tuf/`), with no trust flags:
sigstore-python (`--instance URL trust-instance root.json`), cosign (`initialize --mirror URL
--root root.json`) and sigstore-go's TUF client (`sgverify tuf`). Each signs and verifies from
what TUF gave it; after a shard rotation, which publishes new targets, each follows them,
bundles signed before it still verify, and new ones verify too."""

import json
import os
import subprocess
import sys
import urllib.request

import pytest

from conftest import serve
from test_cosign import COSIGN
from test_shards import rotate_online, token
from test_sigstore_go import SGVERIFY


def run(*args, env=None):
    return subprocess.run(list(args), capture_output=True, text=True, env=env)


def fetch(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read()


@pytest.fixture()
def client_env(tmp_path):
    """Each client's TUF cache in the test's own directories, never the user's."""
    env = dict(os.environ)
    env.update({
        "XDG_DATA_HOME": str(tmp_path / "xdg-data"),
        "XDG_CACHE_HOME": str(tmp_path / "xdg-cache"),
        "TUF_ROOT": str(tmp_path / "cosign-tuf"),
        "NO_PROXY": "127.0.0.1,localhost",
    })
    return env


class Clients:
    """The three clients, each bootstrapped from one root.json."""

    def __init__(self, signet_bin, server, root, env, tmp_path):
        self.signet_bin, self.server, self.root, self.env, self.tmp = signet_bin, server, root, env, tmp_path
        self.instance = server["url"] + "/tuf"
        self.issuer = server["url"] + "/oidc"
        self.sg_fetches = 0

    def sigstore(self, *args):
        return run(sys.executable, "-m", "sigstore", "--instance", self.instance, *args, env=self.env)

    def bootstrap(self):
        r = self.sigstore("trust-instance", str(self.root))
        assert r.returncode == 0, r.stderr
        r = run(COSIGN, "initialize", "--mirror", self.instance, "--root", str(self.root), env=self.env)
        # cosign exits 0 even when it could not fetch the targets; it warns instead.
        assert r.returncode == 0 and "WARNING" not in r.stderr, r.stderr

    def sigstore_go_trusted_root(self):
        """trusted_root.json as sigstore-go's TUF client fetched and verified it, now."""
        self.sg_fetches += 1
        out = self.tmp / f"sg-{self.sg_fetches}"
        out.mkdir()
        r = run(SGVERIFY, "tuf", "--url", self.instance, "--root", str(self.root), "--cache", str(self.tmp / "sg-cache"),
                "--out", str(out), "trusted_root.json", "signing_config.v0.2.json", env=self.env)
        assert r.returncode == 0, r.stderr
        return out / "trusted_root.json"

    def sign_both(self, tag, rekor_version="1"):
        """One bundle from sigstore-python, one from cosign, each with what TUF gave it."""
        email = f"{tag}@example.com"
        py_artifact = self.tmp / f"{tag}-py.txt"
        py_artifact.write_text(f"{tag}: sigstore-python\n")
        r = self.sigstore("sign", "--identity-token", token(self.signet_bin, self.server["data_dir"], email), "--rekor-version",
                          rekor_version, str(py_artifact))
        assert r.returncode == 0, r.stderr
        co_artifact = self.tmp / f"{tag}-cosign.txt"
        co_artifact.write_text(f"{tag}: cosign\n")
        token_file = self.tmp / f"{tag}-token"
        token_file.write_text(token(self.signet_bin, self.server["data_dir"], email))
        co_bundle = self.tmp / f"{tag}-cosign.sigstore.json"
        r = run(COSIGN, "sign-blob", "--yes", "--bundle", str(co_bundle), "--identity-token", str(token_file), str(co_artifact),
                env=self.env)
        assert r.returncode == 0, r.stderr
        return [(py_artifact, self.tmp / f"{tag}-py.txt.sigstore.json", email), (co_artifact, co_bundle, email)]

    def verify_all(self, signed, sg_root):
        for artifact, bundle, email in signed:
            results = {
                "sigstore-python": self.sigstore("verify", "identity", "--bundle", str(bundle), "--cert-identity", email,
                                                 "--cert-oidc-issuer", self.issuer, str(artifact)),
                "cosign": run(COSIGN, "verify-blob", "--bundle", str(bundle), "--certificate-identity", email,
                              "--certificate-oidc-issuer", self.issuer, str(artifact), env=self.env),
                "sigstore-go": run(SGVERIFY, "verify", "--trusted-root", str(sg_root), "--bundle", str(bundle), "--identity", email,
                                   "--issuer", self.issuer, str(artifact)),
            }
            for client, r in results.items():
                assert r.returncode == 0, f"{client}, {bundle.name}: {r.stderr}"
            # And each refuses the bundle for another artifact.
            other = self.tmp / "other.txt"
            other.write_text("never signed\n")
            bad = self.sigstore("verify", "identity", "--bundle", str(bundle), "--cert-identity", email, "--cert-oidc-issuer",
                                self.issuer, str(other))
            assert bad.returncode != 0
            bad = run(COSIGN, "verify-blob", "--bundle", str(bundle), "--certificate-identity", email, "--certificate-oidc-issuer",
                      self.issuer, str(other), env=self.env)
            assert bad.returncode != 0


def unix(rfc3339):
    import datetime
    return int(datetime.datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).timestamp())


def timestamp_of(url):
    return json.loads(fetch(url + "/tuf/timestamp.json"))["signed"]


def test_clients_bootstrap_from_the_tuf_root_and_follow_a_rotation(signet_bin, tmp_path, client_env):
    with serve(signet_bin, str(tmp_path / "data")) as server:
        root = tmp_path / "root.json"
        root.write_bytes(fetch(server["url"] + "/tuf/1.root.json"))
        clients = Clients(signet_bin, server, root, client_env, tmp_path)
        clients.bootstrap()
        before = clients.sign_both("before")
        clients.verify_all(before, clients.sigstore_go_trusted_root())
        snapshot_before = timestamp_of(server["url"])["meta"]["snapshot.json"]["version"]

        rotated = rotate_online(signet_bin, server)
        assert rotated.returncode == 0, rotated.stderr
        # The rotation published new targets: a new snapshot, named by a new timestamp.
        assert timestamp_of(server["url"])["meta"]["snapshot.json"]["version"] > snapshot_before
        sg_root = clients.sigstore_go_trusted_root()
        tlogs = json.loads(sg_root.read_text())["tlogs"]
        assert len(tlogs) == 3 and "end" in tlogs[0]["publicKey"]["validFor"], "the new shard's key came through TUF"

        after = clients.sign_both("after")
        clients.verify_all(before + after, sg_root)


def sign_and_stop(signet_bin, data_dir, tmp_path, client_env, rekor_version="1"):
    """Serves `data_dir`, bootstraps the three clients from its 1.root.json, signs with two and
    verifies with all three, then stops the server: (its address, the clients, the bundles)."""
    with serve(signet_bin, data_dir) as server:
        root = tmp_path / "root.json"
        root.write_bytes(fetch(server["url"] + "/tuf/1.root.json"))
        clients = Clients(signet_bin, server, root, client_env, tmp_path)
        clients.bootstrap()
        before = clients.sign_both("before", rekor_version=rekor_version)
        clients.verify_all(before, clients.sigstore_go_trusted_root())
        return server["url"].removeprefix("http://"), clients, before


@pytest.mark.parametrize("authority,listed", [("tsa", "timestampAuthorities"), ("intermediate", "certificateAuthorities")])
def test_bundles_signed_before_an_authority_rotation_verify_after_it(signet_bin, tmp_path, client_env, authority, listed):
    """`trust rotate --tsa` or `--intermediate`: bundles signed (and timestamped) before verify
    after it, with every client, from the trusted root TUF gives them."""
    data_dir = str(tmp_path / "data")
    # Over Rekor v2, whose bundles carry an RFC 3161 timestamp from signet's TSA.
    listen, clients, before = sign_and_stop(signet_bin, data_dir, tmp_path, client_env, rekor_version="2")
    stamped = json.loads(before[0][1].read_text())["verificationMaterial"]["timestampVerificationData"]["rfc3161Timestamps"]
    assert len(stamped) == 1

    rotated = run(signet_bin, "trust", "rotate", f"--{authority}", "--data-dir", data_dir)
    assert rotated.returncode == 0, rotated.stderr
    window = json.loads(rotated.stdout)["retired_window"]

    # The same address: the dev issuer's URL, in every certificate, is unchanged.
    with serve(signet_bin, data_dir, listen) as server:
        clients.server = server
        sg_root = clients.sigstore_go_trusted_root()
        authorities = json.loads(sg_root.read_text())[listed]
        assert len(authorities) == 2, f"the new {authority} came through TUF beside the retired one"
        assert authorities[0]["validFor"]["end"] == window[1]
        # A TSA's window ends at the rotation; an intermediate's a leaf's lifetime (10 minutes) later.
        overlap = 600 if authority == "intermediate" else 0
        assert unix(window[1]) - unix(authorities[1]["validFor"]["start"]) == overlap
        assert authorities[0]["certChain"] != authorities[1]["certChain"]
        after = clients.sign_both("after", rekor_version="2")
        clients.verify_all(before + after, sg_root)


def test_a_rotation_scheduled_on_the_running_instance_is_followed_by_every_client(signet_bin, tmp_path, client_env):
    """`trust rotate --tsa --at` and `--intermediate --at` on a running instance: TUF publishes
    both new authorities before they sign; bundles (timestamped, over Rekor v2) signed before,
    around and after the hand-over verify with every client, from what TUF gives it, with no
    restart."""
    import time
    data_dir = str(tmp_path / "data")
    with serve(signet_bin, data_dir) as server:
        root = tmp_path / "root.json"
        root.write_bytes(fetch(server["url"] + "/tuf/1.root.json"))
        clients = Clients(signet_bin, server, root, client_env, tmp_path)
        clients.bootstrap()
        before = clients.sign_both("before", rekor_version="2")
        reports = {}
        for authority in ("tsa", "intermediate"):
            at = reports["tsa"]["new_from"] if reports else "+20s"
            r = run(signet_bin, "trust", "rotate", f"--{authority}", "--data-dir", data_dir, "--at", at, "--wait", "10")
            assert r.returncode == 0, r.stderr
            reports[authority] = json.loads(r.stdout)
        sg_root = clients.sigstore_go_trusted_root()
        published = json.loads(sg_root.read_text())
        for authority, listed in (("tsa", "timestampAuthorities"), ("intermediate", "certificateAuthorities")):
            assert len(published[listed]) == 2, f"TUF published the new {authority} before its hand-over"
            assert published[listed][0]["validFor"]["end"] == reports[authority]["retired_window"][1]
            assert published[listed][1]["validFor"]["start"] == reports[authority]["new_from"]
        around = clients.sign_both("around", rekor_version="2")
        hand_over = int(subprocess.run(["date", "-d", reports["tsa"]["new_from"], "+%s"], capture_output=True, text=True).stdout)
        while time.time() < hand_over + 1:
            time.sleep(0.2)
        after = clients.sign_both("after", rekor_version="2")
        chain = fetch(server["url"] + "/api/v1/timestamp/certchain").decode()
        served = "".join(chain.split("-----END CERTIFICATE-----")[0].replace("-----BEGIN CERTIFICATE-----", "").split())
        assert served == published["timestampAuthorities"][1]["certChain"]["certificates"][0]["rawBytes"], "the new TSA serves"
        clients.verify_all(before + around + after, clients.sigstore_go_trusted_root())
        stamps = [json.loads(b.read_text())["verificationMaterial"]["timestampVerificationData"]["rfc3161Timestamps"]
                  for _, b, _ in before + after]
        assert all(len(s) == 1 for s in stamps), "every Rekor v2 bundle carries signet's timestamp"


def test_clients_holding_the_first_root_follow_root_and_timestamp_key_rotations(signet_bin, tmp_path, client_env):
    """`signet tuf rotate --role root`, then `--role timestamp`, the server stopped: each
    client, bootstrapped from 1.root.json before, walks to the new roots by itself, signs and
    verifies; bundles from before still verify. A root that was never signed by the old root
    key would be refused (the tough unit tests and the foreign-root test below check that)."""
    data_dir = str(tmp_path / "data")
    listen, clients, before = sign_and_stop(signet_bin, data_dir, tmp_path, client_env)

    root_key = tmp_path / "offline-tuf-root.pem"
    os.rename(os.path.join(data_dir, "keys", "tuf-root.pem"), root_key)
    for role in ["root", "timestamp"]:
        r = run(signet_bin, "tuf", "rotate", "--data-dir", data_dir, "--role", role, "--root-key", str(root_key))
        assert r.returncode == 0, r.stderr
    assert not os.path.exists(os.path.join(data_dir, "keys", "tuf-root.pem")), "the root key stays where it was kept"

    with serve(signet_bin, data_dir, listen) as server:
        clients.server = server
        roots = [json.loads(fetch(f"{server['url']}/tuf/{n}.root.json"))["signed"] for n in (1, 2, 3)]
        assert roots[1]["roles"]["root"]["keyids"] != roots[0]["roles"]["root"]["keyids"]
        assert roots[2]["roles"]["timestamp"]["keyids"] != roots[1]["roles"]["timestamp"]["keyids"]
        status = run(signet_bin, "tuf", "status", "--data-dir", data_dir)
        assert status.returncode == 0 and "version 3" in status.stdout, status.stdout
        after = clients.sign_both("after")
        clients.verify_all(before + after, clients.sigstore_go_trusted_root())


def test_a_root_from_another_instance_is_refused(signet_bin, tmp_path, client_env):
    with serve(signet_bin, str(tmp_path / "a")) as a, serve(signet_bin, str(tmp_path / "b")) as b:
        foreign = tmp_path / "foreign-root.json"
        foreign.write_bytes(fetch(b["url"] + "/tuf/1.root.json"))
        instance = a["url"] + "/tuf"
        r = run(sys.executable, "-m", "sigstore", "--instance", instance, "trust-instance", str(foreign), env=client_env)
        assert r.returncode != 0
        out = tmp_path / "sg"
        out.mkdir()
        r = run(SGVERIFY, "tuf", "--url", instance, "--root", str(foreign), "--cache", str(tmp_path / "sg-cache"), "--out", str(out),
                "trusted_root.json", env=client_env)
        assert r.returncode != 0 and not (out / "trusted_root.json").exists()
        # A root whose signed part was edited is refused as well.
        edited = json.loads(fetch(a["url"] + "/tuf/1.root.json"))
        edited["signed"]["expires"] = "2099-01-01T00:00:00Z"
        tampered = tmp_path / "tampered-root.json"
        tampered.write_text(json.dumps(edited))
        r = run(COSIGN, "initialize", "--mirror", instance, "--root", str(tampered), env=client_env)
        cached = os.path.join(client_env["TUF_ROOT"])
        assert r.returncode != 0 or "WARNING" in r.stderr, "cosign took a tampered root"
        assert not any("trusted_root.json" in f for _, _, files in os.walk(cached) for f in files)


def test_bundles_of_an_earlier_deployment_verify_once_its_trusted_root_is_included(signet_bin, tmp_path, client_env):
    """A team moving from an earlier deployment (here another signet; RHTAS's trusted root is
    included the same way) keeps its old bundles verifying: `signet trust include` adds the old
    trusted root's logs and authorities to the new instance's, which TUF publishes. Clients of
    the new instance refuse the old bundles before, and verify them after, with no trust flag."""
    (tmp_path / "old").mkdir()
    old_dir = str(tmp_path / "old-data")
    _, old_clients, old_bundles = sign_and_stop(signet_bin, old_dir, tmp_path / "old", client_env)
    old_trust = tmp_path / "old-trust"
    r = run(signet_bin, "trust", "export", "--data-dir", old_dir, "--out", str(old_trust))
    assert r.returncode == 0, r.stderr

    (tmp_path / "new").mkdir()
    new_dir = str(tmp_path / "new-data")
    with serve(signet_bin, new_dir) as server:
        listen = server["url"].removeprefix("http://")
        root = tmp_path / "new" / "root.json"
        root.write_bytes(fetch(server["url"] + "/tuf/1.root.json"))
        clients = Clients(signet_bin, server, root, client_env, tmp_path / "new")
        clients.bootstrap()
        artifact, bundle, email = old_bundles[0]
        refused = clients.sigstore("verify", "identity", "--bundle", str(bundle), "--cert-identity", email, "--cert-oidc-issuer",
                                   old_clients.issuer, str(artifact))
        assert refused.returncode != 0, "the new instance's trust does not cover the old bundles yet"

    r = run(signet_bin, "trust", "include", "--data-dir", new_dir, "--name", "earlier", str(old_trust / "trusted_root.json"))
    assert r.returncode == 0, r.stderr
    r = run(signet_bin, "trust", "include", "--data-dir", new_dir, "--list")
    assert r.returncode == 0 and "earlier.json: 2 tlogs, 1 ctlogs" in r.stdout, r.stdout
    bad = tmp_path / "not-a-root.json"
    bad.write_text('{"mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json"}')
    r = run(signet_bin, "trust", "include", "--data-dir", new_dir, str(bad))
    assert r.returncode == 2 and "trusted root" in r.stderr, r.stderr

    with serve(signet_bin, new_dir, listen) as server:
        clients.server = server
        sg_root = clients.sigstore_go_trusted_root()
        assert len(json.loads(sg_root.read_text())["tlogs"]) == 4, "the new instance's two logs and the old one's two"
        # The old bundles verify through the new instance's TUF, in every client...
        clients.issuer = old_clients.issuer
        clients.verify_all(old_bundles, sg_root)
        # ...and the new instance's own still do.
        clients.issuer = server["url"] + "/oidc"
        new_bundles = clients.sign_both("new")
        clients.verify_all(new_bundles, sg_root)
