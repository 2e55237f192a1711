"""Starts a real `signet serve --dev` for the interop tests."""

import contextlib
import os
import re
import shlex
import socket
import subprocess
import tempfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run(*args, check=True, **kw):
    """A command, its output captured; with `check`, a failure shows the command and what it said."""
    out = subprocess.run([str(a) for a in args], capture_output=True, text=True, **kw)
    if check:
        assert out.returncode == 0, f"{shlex.join(str(a) for a in args)}\n{out.stdout}\n{out.stderr}"
    return out


def free_port():
    """A free loopback TCP port."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def signet_bin():
    path = os.environ.get("SIGNET_BIN", os.path.join(ROOT, "target", "release", "signet"))
    if not os.path.exists(path):
        pytest.fail(f"signet binary not found at {path}; build it with cargo build --release")
    return path


@contextlib.contextmanager
def serve(signet_bin, data_dir, listen="127.0.0.1:0", https=False, extra=()):
    """`signet serve --dev` on `data_dir`, until the block ends: plain HTTP, or with `https`
    the certificate the instance issues itself (its CA is `tls_ca.pem` in `signet trust export`)."""
    proc = subprocess.Popen(
        [signet_bin, "serve", "--dev", "--data-dir", data_dir, "--listen", listen] + ([] if https else ["--plain-http"]) + list(extra),
        stdout=subprocess.PIPE,
        text=True,
    )
    line = proc.stdout.readline()
    match = re.match(r"signet listening on (\S+)", line)
    assert match, f"unexpected first line from signet: {line!r}"
    try:
        yield {"url": match.group(1), "data_dir": data_dir}
    finally:
        proc.kill()
        proc.wait()


@contextlib.contextmanager
def start_signet(signet_bin):
    """A fresh `signet serve --dev` on a free loopback port, with its own data dir."""
    with tempfile.TemporaryDirectory() as data_dir:
        with serve(signet_bin, data_dir) as s:
            yield s


@pytest.fixture()
def server(signet_bin):
    with start_signet(signet_bin) as s:
        yield s


@pytest.fixture()
def dev_token(server, signet_bin):
    """Mints a token from the running instance's dev issuer: dev_token(email) -> str."""

    def mint(email):
        out = subprocess.run([signet_bin, "dev-token", "--data-dir", server["data_dir"], "--subject", email],
                             check=True, capture_output=True, text=True)
        return out.stdout.strip()

    return mint


@pytest.fixture()
def trust(server, signet_bin, tmp_path):
    """`signet trust export` for the running instance; returns the output directory."""
    out = tmp_path / "trust"
    subprocess.run([signet_bin, "trust", "export", "--data-dir", server["data_dir"], "--out", str(out)], check=True, capture_output=True)
    return out


@pytest.fixture()
def https_server(signet_bin, tmp_path):
    """A `--dev` instance on HTTPS (the certificate it issues itself), with its exported trust
    (`trust`, its `tls_ca.pem` among it) and a token minter (`token(email)`): for clients that
    speak to Fulcio over TLS only (sigstore-java's gRPC) or are tested over HTTPS."""
    with tempfile.TemporaryDirectory() as data_dir, serve(signet_bin, data_dir, https=True) as s:
        trust = tmp_path / "https-trust"
        subprocess.run([signet_bin, "trust", "export", "--data-dir", data_dir, "--out", str(trust)], check=True, capture_output=True)
        s["trust"] = trust

        def token(email):
            out = subprocess.run([signet_bin, "dev-token", "--data-dir", data_dir, "--subject", email],
                                 check=True, capture_output=True, text=True)
            return out.stdout.strip()

        s["token"] = token
        yield s
