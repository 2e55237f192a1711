"""The Debian package (scripts/deb), installed on this machine as an operator would: `dpkg -i`,
`signet init` and `signet doctor` as the package's user, the server started with the installed
unit's own command line and user, cosign signing and verifying against it, then `dpkg --purge`.

It changes the machine (a package, a system user, /etc/signet and /var/lib/signet), so it runs
only as root and only where scripts/test gives it the package (SIGNET_DEB); it leaves the machine
as it found it."""

import json
import os
import pwd
import re
import shlex
import shutil
import stat
import subprocess
import urllib.request
from pathlib import Path

import pytest

from conftest import ROOT, free_port, run

DEB = os.environ.get("SIGNET_DEB")
COSIGN = os.environ.get("COSIGN_BIN", os.path.join(ROOT, ".tools", "bin", "cosign"))
UNIT = "/lib/systemd/system/signet.service"
CONFIG = "/etc/signet/signet.toml"
DATA = "/var/lib/signet"



def as_signet(*args, check=True):
    return run("runuser", "-u", "signet", "--", *args, check=check, cwd="/")



def purge():
    """The package gone, and what it deliberately keeps (the user, the data dir) removed too."""
    run("dpkg", "--purge", "signet", check=False)
    run("userdel", "signet", check=False)
    run("groupdel", "signet", check=False)
    shutil.rmtree(DATA, ignore_errors=True)


@pytest.fixture()
def package():
    if not DEB:
        if os.environ.get("CI"):
            pytest.fail("SIGNET_DEB is not set; scripts/test builds the package with scripts/deb")
        pytest.skip("no package given (SIGNET_DEB); scripts/test builds one")
    if os.geteuid() != 0:
        if os.environ.get("CI"):
            pytest.fail("installing a package needs root")
        pytest.skip("installing a package needs root")
    if run("dpkg-query", "-W", "signet", check=False).returncode == 0 or os.path.exists(DATA):
        pytest.fail("signet is already installed on this machine, or /var/lib/signet exists: not touching it")
    try:
        yield DEB
    finally:
        purge()


def test_the_package_installs_runs_signs_and_purges(package, server, dev_token, tmp_path):
    run("dpkg", "-i", package)

    # What the package made: its user, a data dir only that user can enter, the unit.
    user = pwd.getpwnam("signet")
    assert user.pw_shell == "/usr/sbin/nologin" and user.pw_dir == DATA and user.pw_uid < 1000
    st = os.stat(DATA)
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (user.pw_uid, 0o700)
    assert os.path.exists("/usr/bin/signet") and os.path.exists(UNIT)
    unit = open(UNIT).read()
    assert "\nUser=signet\n" in unit and "DynamicUser" not in unit and "ProtectSystem=strict" in unit
    if shutil.which("systemd-analyze"):
        run("systemd-analyze", "verify", UNIT)

    # init as the package's user, writing the config where the unit reads it; the root CA key
    # written apart, as an operator would before carrying it off the machine.
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    as_signet("signet", "init", "--data-dir", DATA, "--config-out", CONFIG, "--public-url", url,
              "--root-key-out", f"{DATA}/ca-root-offline.pem")
    assert stat.S_IMODE(os.stat(CONFIG).st_mode) == 0o600 and os.stat(CONFIG).st_uid == user.pw_uid
    # The operator's edits: the port, and an identity provider (here the dev instance's issuer,
    # its keys given as a file the service's user can read).
    jwks = f"{DATA}/idp-jwks.json"
    with urllib.request.urlopen(server["url"] + "/oidc/jwks") as r:
        open(jwks, "w").write(r.read().decode())
    os.chown(jwks, user.pw_uid, user.pw_gid)
    issuer = server["url"] + "/oidc"
    config = open(CONFIG).read().replace('listen = "127.0.0.1:8080"', f'listen = "127.0.0.1:{port}"')
    config += f'\n[[oidc.issuers]]\nurl = "{issuer}"\ntype = "email"\njwks_file = "{jwks}"\n'
    open(CONFIG, "w").write(config)
    doctor = as_signet("signet", "doctor", "--config", CONFIG, "--offline", check=False)
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr

    # The server as the unit starts it: its ExecStart, as its user.
    exec_start = re.search(r"^ExecStart=(.+)$", unit, re.M).group(1)
    proc = subprocess.Popen(["runuser", "-u", "signet", "--"] + shlex.split(exec_start), stdout=subprocess.PIPE,
                            text=True, cwd="/")
    try:
        line = proc.stdout.readline()
        assert line.startswith("signet listening on "), line
        probe = as_signet("signet", "probe", "--ready", "--config", CONFIG, "--data-dir", DATA)
        assert "ready" in probe.stdout

        # Exported as the service's user, who alone can read the data dir, into a dir of its own.
        trust = Path(DATA) / "exported-trust"
        as_signet("signet", "trust", "export", "--data-dir", DATA, "--out", str(trust))
        signing_config = json.load(open(trust / "signing_config.json"))
        assert url in json.dumps(signing_config)

        artifact = tmp_path / "release.tar"
        artifact.write_bytes(b"a release, signed against the packaged signet\n")
        token = tmp_path / "token"
        token.write_text(dev_token("ops@example.com"))
        bundle = tmp_path / "release.sigstore.json"
        signed = run(COSIGN, "sign-blob", "--yes", "--signing-config", str(trust / "signing_config.json"),
                     "--trusted-root", str(trust / "trusted_root.json"), "--bundle", str(bundle),
                     "--identity-token", str(token), str(artifact), check=False)
        assert signed.returncode == 0, signed.stderr
        run(COSIGN, "verify-blob", "--trusted-root", str(trust / "trusted_root.json"), "--bundle", str(bundle),
            "--certificate-identity", "ops@example.com", "--certificate-oidc-issuer", issuer, str(artifact))
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    # Purged: the binary, the unit and the config go; the keys and logs stay, for their owner
    # to decide about, and the package says so.
    purged = run("dpkg", "--purge", "signet")
    assert "keys and logs" in purged.stderr, purged.stderr
    assert not os.path.exists("/usr/bin/signet") and not os.path.exists(UNIT) and not os.path.exists("/etc/signet")
    assert os.path.exists(f"{DATA}/keys/rekor-v1.pem")
    assert run("dpkg-query", "-W", "signet", check=False).returncode != 0
