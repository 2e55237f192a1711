"""Issue 43: an instance whose every key is on a PKCS#11 token (SoftHSM2 tokens made here, in
a temporary directory): the log, CT, TSA and CA intermediate keys on one, the CA root on
another that the instance never opens. cosign signs over Rekor v1 (its SET by the Rekor v1
key, the certificate by the intermediate, its SCT by the CT key) and sigstore-python over
Rekor v2 (the checkpoint by the v2 key, the RFC 3161 timestamp by the TSA key); each bundle
verifies with the instance's trusted root, in both clients."""

import json
import os
import re
import socket
import subprocess
import sys
import urllib.request

import pytest

from conftest import ROOT

COSIGN = os.environ.get("COSIGN_BIN", os.path.join(ROOT, ".tools", "bin", "cosign"))
MODULES = ["/usr/lib/softhsm/libsofthsm2.so", "/usr/lib/x86_64-linux-gnu/softhsm/libsofthsm2.so"]
PIN = "135790"


def run(*args, env=None):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, env=env)


@pytest.fixture()
def token_instance(signet_bin, tmp_path):
    module = next((m for m in MODULES if os.path.exists(m)), None)
    if module is None:
        pytest.fail("SoftHSM2 is not installed: scripts/install-deps installs Debian's softhsm2")
    (tmp_path / "tokens").mkdir()
    conf = tmp_path / "softhsm2.conf"
    conf.write_text(f"directories.tokendir = {tmp_path / 'tokens'}\nobjectstore.backend = file\nlog.level = ERROR\n")
    env = dict(os.environ, SOFTHSM2_CONF=str(conf), SIGNET_KEYS_PKCS11_MODULE=module, SIGNET_KEYS_PKCS11_PIN=PIN)
    for label in ["signet", "offline-root"]:
        made = run("softhsm2-util", "--init-token", "--free", "--label", label, "--pin", PIN, "--so-pin", "97531", env=env)
        assert made.returncode == 0, made.stderr

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    data = tmp_path / "data"
    init = run(signet_bin, "init", "--data-dir", data, "--public-url", f"http://127.0.0.1:{port}", "--keys", "pkcs11:token=signet",
               "--root-key", "pkcs11:token=offline-root", env=env)
    assert init.returncode == 0, init.stderr
    for key in ["rekor-v1", "rekor-v2", "ct", "tsa", "ca-intermediate", "ca-root"]:
        assert not (data / "keys" / f"{key}.pem").exists(), f"the {key} key was written to the data dir"

    # --dev for its OIDC issuer; the keys are the config's, on the token.
    proc = subprocess.Popen([signet_bin, "serve", "--dev", "--config", str(data / "signet.toml"), "--listen", f"127.0.0.1:{port}",
                             "--plain-http"], stdout=subprocess.PIPE, text=True, env=env)
    line = proc.stdout.readline()
    match = re.match(r"signet listening on (\S+)", line)
    assert match, f"unexpected first line from signet: {line!r}"
    try:
        trust = tmp_path / "trust"
        exported = run(signet_bin, "trust", "export", "--data-dir", data, "--out", trust)
        assert exported.returncode == 0, exported.stderr
        token = run(signet_bin, "dev-token", "--data-dir", data, "--subject", "hsm@example.com").stdout.strip()
        yield {"url": match.group(1), "trust": trust, "token": token, "data": data, "env": env, "signet": signet_bin}
    finally:
        proc.kill()
        proc.wait()


def test_clients_sign_and_verify_with_keys_on_a_token(token_instance, tmp_path):
    if not os.path.exists(COSIGN):
        pytest.fail(f"cosign not found at {COSIGN}; scripts/test installs it")
    trust, issuer = token_instance["trust"], token_instance["url"] + "/oidc"
    artifact = tmp_path / "artifact.txt"
    artifact.write_text("signed with keys on a token\n")

    # cosign over Rekor v1: the SET and the SCT come from the token.
    token_file = tmp_path / "token"
    token_file.write_text(token_instance["token"])
    bundle = tmp_path / "cosign.sigstore.json"
    signed = run(COSIGN, "sign-blob", "--yes", "--signing-config", trust / "signing_config.json", "--trusted-root",
                 trust / "trusted_root.json", "--bundle", bundle, "--identity-token", token_file, artifact)
    assert signed.returncode == 0, signed.stderr
    verify = [COSIGN, "verify-blob", "--trusted-root", trust / "trusted_root.json", "--certificate-identity", "hsm@example.com",
              "--certificate-oidc-issuer", issuer]
    ok = run(*verify, "--bundle", bundle, artifact)
    assert ok.returncode == 0, ok.stderr

    # sigstore-python over Rekor v2: the checkpoint and the RFC 3161 timestamp come from the token.
    py_bundle = tmp_path / "python.sigstore.json"
    signed = run(sys.executable, "-m", "sigstore", "--trust-config", trust / "client_trust_config.json", "sign", "--identity-token",
                 token_instance["token"], "--rekor-version", "2", "--bundle", py_bundle, artifact)
    assert signed.returncode == 0, signed.stderr
    for b in [bundle, py_bundle]:
        py = run(sys.executable, "-m", "sigstore", "--trust-config", trust / "client_trust_config.json", "verify", "identity", "--offline",
                 "--bundle", b, "--cert-identity", "hsm@example.com", "--cert-oidc-issuer", issuer, artifact)
        assert py.returncode == 0, f"{b.name}: {py.stderr}"
    ok = run(*verify, "--bundle", py_bundle, artifact)
    assert ok.returncode == 0, ok.stderr

    # Another artifact fails with the same bundles.
    other = tmp_path / "other.txt"
    other.write_text("not signed\n")
    assert run(*verify, "--bundle", bundle, other).returncode != 0


def test_clients_follow_a_ceremony_that_moves_tuf_root_and_targets_to_three_of_five_tokens(token_instance, tmp_path):
    """The TUF root and targets move from one key (on the offline-root token) to 3 of 5 keys on
    five tokens, in the offline ceremony: `signet tuf pubkey --make` on each holder's token,
    `tuf propose`, `tuf sign --key` by the old root key and three holders, `tuf publish`.
    sigstore-python (`--instance`) and `cosign initialize`, each given the first root, walk to
    the new one by themselves, then sign and verify through TUF."""
    if not os.path.exists(COSIGN):
        pytest.fail(f"cosign not found at {COSIGN}; scripts/test installs it")
    url, data, env = token_instance["url"], token_instance["data"], dict(token_instance["env"])
    env.update({"XDG_DATA_HOME": str(tmp_path / "xdg-data"), "XDG_CACHE_HOME": str(tmp_path / "xdg-cache"),
                "TUF_ROOT": str(tmp_path / "cosign-tuf"), "NO_PROXY": "127.0.0.1,localhost"})
    instance, issuer = url + "/tuf", url + "/oidc"
    first_root = tmp_path / "1.root.json"
    with urllib.request.urlopen(instance + "/1.root.json", timeout=10) as r:
        first_root.write_bytes(r.read())
    r = run(sys.executable, "-m", "sigstore", "--instance", instance, "trust-instance", first_root, env=env)
    assert r.returncode == 0, r.stderr

    holders = [f"holder{i}" for i in range(1, 6)]
    pubs = {"root": [], "targets": []}
    for h in holders:
        made = run("softhsm2-util", "--init-token", "--free", "--label", h, "--pin", PIN, "--so-pin", "97531", env=env)
        assert made.returncode == 0, made.stderr
        for role in pubs:
            out = run(token_instance["signet"], "tuf", "pubkey", "--make", "--key", f"pkcs11:token={h};object=tuf-{role}", env=env)
            assert out.returncode == 0, out.stderr
            path = tmp_path / f"{h}-{role}.pub"
            path.write_text(out.stdout)
            pubs[role].append(path)

    ceremony, signet = tmp_path / "ceremony", token_instance["signet"]
    args = [signet, "tuf", "propose", "root", "--repo", data / "tuf", "--out", ceremony, "--root-threshold", "3", "--targets-threshold", "3"]
    for r_pub, t_pub in zip(pubs["root"], pubs["targets"]):
        args += ["--root-key", r_pub, "--targets-key", t_pub]
    r = run(*args, env=env)
    assert r.returncode == 0, r.stderr
    r = run(signet, "tuf", "propose", "targets", "--repo", data / "tuf", "--out", ceremony, "--trust", token_instance["trust"], env=env)
    assert r.returncode == 0, r.stderr
    root_file, targets_file = ceremony / "2.root.json", ceremony / "2.targets.json"
    for key in ["pkcs11:token=offline-root;object=signet-tuf-root"] + [f"pkcs11:token={h};object=tuf-root" for h in holders[2:]]:
        r = run(signet, "tuf", "sign", "--key", key, root_file, env=env)
        assert r.returncode == 0, r.stderr
    for h in holders[:3]:
        r = run(signet, "tuf", "sign", "--key", f"pkcs11:token={h};object=tuf-targets", targets_file, env=env)
        assert r.returncode == 0, r.stderr
    r = run(signet, "tuf", "publish", "--data-dir", data, "--wait", "30", root_file, targets_file, env=env)
    assert r.returncode == 0, r.stderr
    with urllib.request.urlopen(instance + "/2.root.json", timeout=10) as resp:
        served = json.loads(resp.read())["signed"]["roles"]
    assert served["root"]["threshold"] == 3 and len(served["root"]["keyids"]) == 5

    # cosign, given the first root, walks to the second and fetches the targets it signs.
    r = run(COSIGN, "initialize", "--mirror", instance, "--root", first_root, env=env)
    assert r.returncode == 0 and "WARNING" not in r.stderr, r.stderr
    artifact = tmp_path / "after-ceremony.txt"
    artifact.write_text("signed after the TUF ceremony\n")
    token_file = tmp_path / "token"
    token_file.write_text(token_instance["token"])
    bundle = tmp_path / "cosign-after.sigstore.json"
    r = run(COSIGN, "sign-blob", "--yes", "--bundle", bundle, "--identity-token", token_file, artifact, env=env)
    assert r.returncode == 0, r.stderr
    # sigstore-python, bootstrapped from the first root before the ceremony, follows too.
    r = run(sys.executable, "-m", "sigstore", "--instance", instance, "sign", "--identity-token", token_instance["token"],
            "--bundle", tmp_path / "py-after.sigstore.json", artifact, env=env)
    assert r.returncode == 0, r.stderr
    for b in [bundle, tmp_path / "py-after.sigstore.json"]:
        py = run(sys.executable, "-m", "sigstore", "--instance", instance, "verify", "identity", "--bundle", b, "--cert-identity",
                 "hsm@example.com", "--cert-oidc-issuer", issuer, artifact, env=env)
        assert py.returncode == 0, f"{b.name}: {py.stderr}"
        co = run(COSIGN, "verify-blob", "--bundle", b, "--certificate-identity", "hsm@example.com", "--certificate-oidc-issuer",
                 issuer, artifact, env=env)
        assert co.returncode == 0, f"{b.name}: {co.stderr}"
