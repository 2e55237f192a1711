"""Issue 15's TLS interop matrix: both server backends against independent TLS clients.

Server backends: rustls (aws-lc-rs) and OpenSSL, chosen with `--tls-backend`. Clients: Python's
`ssl` (OpenSSL underneath, driven byte by byte), curl, `openssl s_client`, `gnutls-cli` (GnuTLS,
a TLS stack that shares no code with either backend) and signet's own rustls client (`signet
bench load`). For each pair: the handshake (TLS 1.3 and 1.2; ECDSA P-256 and RSA-2048
certificates), a 1 B and a 64 KiB request body and a 69 KB response, resumption, mTLS where
the listener asks for it, and a clean close (close_notify) in both directions, including the
closes signet makes on its own: Connection: close, the idle timeout, a client that never
sends a request, and SIGTERM. Report 003 lost a whole backend combination to a shutdown bug.
"""

import contextlib
import hashlib
import json
import os
import re
import signal
import socket
import ssl
import subprocess
import tempfile
import time

import pytest

BACKENDS = ["rustls", "openssl"]
# Short, so that the idle and silent-client closes happen within the test.
CONFIG = "[http]\nidle_timeout_secs = 2\nheader_read_timeout_secs = 2\n"
BIG = 64 * 1024


def run(cmd, stdin=b"", timeout=20):
    return subprocess.run(cmd, input=stdin, capture_output=True, timeout=timeout)


@pytest.fixture(scope="module")
def pki():
    """A server CA with an ECDSA and an RSA server certificate, and a client CA with one client."""
    d = tempfile.mkdtemp(prefix="signet-tls-interop-")

    def openssl(*args):
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=d)

    def key(name, kind):
        if kind == "rsa":
            openssl("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", f"{name}.key")
        else:
            openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", f"{name}.key")

    def issue(name, ca, ext):
        with open(os.path.join(d, f"{name}.ext"), "w") as f:
            f.write(ext)
        openssl("req", "-new", "-key", f"{name}.key", "-subj", f"/CN={name}", "-out", f"{name}.csr")
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key", "-CAcreateserial",
                "-days", "2", "-out", f"{name}.pem", "-extfile", f"{name}.ext")

    for ca in ("ca", "clientca"):
        key(ca, "ec")
        openssl("req", "-x509", "-new", "-key", f"{ca}.key", "-subj", f"/CN=signet test {ca}", "-days", "2", "-out", f"{ca}.pem")
    server_ext = "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n"
    for kind in ("ec", "rsa"):
        key(f"server-{kind}", kind)
        issue(f"server-{kind}", "ca", server_ext)
    key("client", "ec")
    issue("client", "clientca", "subjectAltName=URI:spiffe://example.test/ci\nbasicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n")
    return d


@contextlib.contextmanager
def tls_server(signet_bin, pki, backend, kind="ec", mtls=False):
    with tempfile.TemporaryDirectory() as data_dir:
        config = os.path.join(data_dir, "signet.toml")
        with open(config, "w") as f:
            f.write(CONFIG)
        cmd = [signet_bin, "serve", "--dev", "--data-dir", os.path.join(data_dir, "data"), "--listen", "127.0.0.1:0",
               "--config", config, "--tls-backend", backend,
               "--tls-cert", os.path.join(pki, f"server-{kind}.pem"), "--tls-key", os.path.join(pki, f"server-{kind}.key")]
        if mtls:
            cmd += ["--tls-client-ca", os.path.join(pki, "clientca.pem"), "--tls-client-auth", "required"]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        line = proc.stdout.readline()
        match = re.match(r"signet listening on https://127\.0\.0\.1:(\d+)", line)
        assert match, f"unexpected first line from signet: {line!r}"
        try:
            yield {"port": int(match.group(1)), "proc": proc, "ca": os.path.join(pki, "ca.pem"), "pki": pki}
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()


@pytest.fixture(scope="module", params=BACKENDS)
def server(request, signet_bin, pki):
    with tls_server(signet_bin, pki, request.param) as s:
        s["backend"] = request.param
        yield s


def request_bytes(method, path, body=b"", close=True):
    head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    if body:
        head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
    if close:
        head += "Connection: close\r\n"
    return head.encode() + b"\r\n" + body


def split_response(raw):
    """(status, body) of one HTTP/1.1 response read to the connection's end."""
    head, _, body = raw.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    headers = {k.strip().lower(): v.strip() for k, _, v in (l.partition(b":") for l in head.split(b"\r\n")[1:])}
    if headers.get(b"transfer-encoding") == b"chunked":
        out, rest = b"", body
        while True:
            size, _, rest = rest.partition(b"\r\n")
            n = int(size, 16)
            if n == 0:
                break
            out, rest = out + rest[:n], rest[n + 2:]
        body = out
    return status, body


def python_context(s, version=None, client_cert=False):
    ctx = ssl.create_default_context(cafile=s["ca"])
    if version:
        ctx.minimum_version = ctx.maximum_version = version
    if client_cert:
        ctx.load_cert_chain(os.path.join(s["pki"], "client.pem"), os.path.join(s["pki"], "client.key"))
    return ctx


def python_exchange(s, raw, ctx=None, session=None):
    """One request over Python's ssl, read to a close that must carry close_notify."""
    ctx = ctx or python_context(s)
    sock = ctx.wrap_socket(socket.create_connection(("127.0.0.1", s["port"]), timeout=10),
                           server_hostname="127.0.0.1", suppress_ragged_eofs=False, session=session)
    with sock:
        sock.sendall(raw)
        data = b""
        while True:
            chunk = sock.recv(65536)  # an EOF without close_notify raises SSLEOFError here
            if not chunk:
                break
            data += chunk
        return data, sock.version(), sock.session, sock.session_reused


# The reference answer for the 69 KB response, read over Python's ssl.
@pytest.fixture(scope="module")
def openapi_digest(server):
    data, _, _, _ = python_exchange(server, request_bytes("GET", "/api/openapi.json"))
    status, body = split_response(data)
    assert status == 200 and len(body) > BIG
    return hashlib.sha256(body).hexdigest()


PAYLOADS = [b"x", b"[" + b"1," * (BIG // 2 - 2) + b"10]"]  # 1 B and 64 KiB, both refused as not an entry
assert len(PAYLOADS[1]) == BIG


# --- Python ssl ----------------------------------------------------------------------------------

@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1_3, ssl.TLSVersion.TLSv1_2])
def test_python_ssl_handshakes_round_trips_and_closes_cleanly(server, version, openapi_digest):
    ctx = python_context(server, version)
    data, got, _, _ = python_exchange(server, request_bytes("GET", "/healthz"), ctx)
    assert got == {ssl.TLSVersion.TLSv1_3: "TLSv1.3", ssl.TLSVersion.TLSv1_2: "TLSv1.2"}[version]
    assert split_response(data)[0] == 200
    for body in PAYLOADS:
        status, answer = split_response(python_exchange(server, request_bytes("POST", "/api/v1/log/entries", body), ctx)[0])
        assert status == 400 and json.loads(answer)["code"] == 400, (len(body), answer[:200])
    status, big = split_response(python_exchange(server, request_bytes("GET", "/api/openapi.json"), ctx)[0])
    assert status == 200 and hashlib.sha256(big).hexdigest() == openapi_digest


@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1_3, ssl.TLSVersion.TLSv1_2])
def test_python_ssl_resumes(server, version):
    ctx = python_context(server, version)
    # A TLS 1.3 ticket arrives after the handshake: the first exchange reads the whole answer.
    _, _, session, reused = python_exchange(server, request_bytes("GET", "/healthz"), ctx)
    assert session is not None and not reused
    _, _, _, reused = python_exchange(server, request_bytes("GET", "/healthz"), ctx, session=session)
    assert reused, f"{server['backend']} did not resume a {version.name} session"


def test_a_client_close_notify_is_answered(server):
    ctx = python_context(server)
    sock = ctx.wrap_socket(socket.create_connection(("127.0.0.1", server["port"]), timeout=10), server_hostname="127.0.0.1")
    sock.sendall(request_bytes("GET", "/healthz", close=False))
    assert b"200 OK" in sock.recv(65536)
    sock.unwrap().close()  # sends close_notify and waits for the server's


@pytest.mark.parametrize("what", ["idle keep-alive connection", "client that never sends a request"])
def test_connections_signet_times_out_end_with_close_notify(server, what):
    ctx = python_context(server)
    sock = ctx.wrap_socket(socket.create_connection(("127.0.0.1", server["port"]), timeout=15),
                           server_hostname="127.0.0.1", suppress_ragged_eofs=False)
    with sock:
        if what.startswith("idle"):
            sock.sendall(request_bytes("GET", "/healthz", close=False))
            assert b"200 OK" in sock.recv(65536)
        started = time.monotonic()
        assert sock.recv(65536) == b"", f"{what}: data instead of a close"  # SSLEOFError if truncated
        assert time.monotonic() - started < 10


# --- curl ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", [["--tlsv1.3"], ["--tlsv1.2", "--tls-max", "1.2"]])
def test_curl(server, version, openapi_digest, tmp_path):
    base = ["curl", "-sS", "--cacert", server["ca"], *version]
    url = f"https://127.0.0.1:{server['port']}"
    out = run(base + ["-o", str(tmp_path / "big"), "-w", "%{http_code} %{ssl_verify_result}", f"{url}/api/openapi.json"])
    assert out.returncode == 0 and out.stdout == b"200 0", out.stderr
    assert hashlib.sha256((tmp_path / "big").read_bytes()).hexdigest() == openapi_digest
    for body in PAYLOADS:
        (tmp_path / "body").write_bytes(body)
        out = run(base + ["-o", "-", "-w", "\n%{http_code}", "-H", "Content-Type: application/json",
                          "--data-binary", f"@{tmp_path / 'body'}", f"{url}/api/v1/log/entries"])
        assert out.returncode == 0 and out.stdout.endswith(b"\n400"), (len(body), out.stdout[-300:], out.stderr)


# --- openssl s_client ----------------------------------------------------------------------------

def s_client(s, *args, stdin=b""):
    cmd = ["openssl", "s_client", "-connect", f"127.0.0.1:{s['port']}", "-servername", "localhost", "-CAfile", s["ca"],
           "-verify_return_error", "-ign_eof", *args]
    return run(cmd, stdin=stdin)


@pytest.mark.parametrize("version", ["-tls1_3", "-tls1_2"])
def test_openssl_s_client(server, version, openapi_digest, tmp_path):
    out = s_client(server, version, stdin=request_bytes("GET", "/api/openapi.json"))
    text = out.stdout
    assert out.returncode == 0, out.stderr[-500:]
    assert b"Verify return code: 0 (ok)" in text
    assert (b"TLSv1.3" if version == "-tls1_3" else b"TLSv1.2") in text
    start = text.index(b"HTTP/1.1 ")
    end = text.rindex(b"\n---\n") if b"\n---\n" in text[start:] else len(text)
    status, body = split_response(text[start:end])
    assert status == 200 and len(body) >= len(b"{}")
    for body in PAYLOADS:
        out = s_client(server, version, "-quiet", stdin=request_bytes("POST", "/api/v1/log/entries", body))
        assert out.stdout.startswith(b"HTTP/1.1 400"), (len(body), out.stdout[:200], out.stderr[-300:])
    sess = str(tmp_path / "session")
    first = s_client(server, version, "-sess_out", sess, stdin=request_bytes("GET", "/healthz"))
    assert b"\nNew, " in first.stdout
    again = s_client(server, version, "-sess_in", sess, stdin=request_bytes("GET", "/healthz"))
    assert b"\nReused, " in again.stdout, f"{server['backend']} did not resume with s_client {version}"


# --- gnutls-cli ----------------------------------------------------------------------------------

PRIORITY = {"1.3": "NORMAL:-VERS-ALL:+VERS-TLS1.3", "1.2": "NORMAL:-VERS-ALL:+VERS-TLS1.2"}


def gnutls(s, version, *args, stdin=b""):
    """gnutls-cli with `stdin` sent and its input left open: at the end of its input it sends
    close_notify at once, and an HTTP/1 server may take that for the client going away before
    the answer. Each request here says Connection: close, so signet ends the connection."""
    cmd = ["gnutls-cli", "--x509cafile", s["ca"], "--priority", PRIORITY[version], "-p", str(s["port"]), *args, "127.0.0.1"]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=out, stderr=err)
        try:
            proc.stdin.write(stdin)
            proc.stdin.flush()
            proc.wait(timeout=20)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            proc.stdin.close()
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(cmd, proc.returncode, out.read(), err.read())


@pytest.mark.parametrize("version", ["1.3", "1.2"])
def test_gnutls_cli(server, version):
    out = gnutls(server, version, stdin=request_bytes("GET", "/healthz"))
    assert out.returncode == 0, out.stderr[-500:]
    assert f"(TLS{version}-".encode() in out.stdout
    assert b"HTTP/1.1 200" in out.stdout
    # GnuTLS tells a close_notify from a cut connection.
    assert b"Peer has closed the GnuTLS connection" in out.stderr + out.stdout
    assert b"non-properly terminated" not in out.stderr + out.stdout
    for body in PAYLOADS:
        out = gnutls(server, version, stdin=request_bytes("POST", "/api/v1/log/entries", body))
        assert b"HTTP/1.1 400" in out.stdout, (len(body), out.stdout[-300:], out.stderr[-300:])
    out = gnutls(server, version, "--resume", stdin=request_bytes("GET", "/healthz"))
    assert b"This is a resumed session" in out.stdout, f"{server['backend']} did not resume with gnutls TLS{version}"


# --- signet's rustls client ----------------------------------------------------------------------

def test_signet_client(server, signet_bin, tmp_path):
    url = f"https://127.0.0.1:{server['port']}"
    # 1 B and 64 KiB bodies, each on a new TLS connection. (The lab client sends its own
    # Content-Type; a second one is refused as a duplicate, and that refusal once came before
    # the body was read, resetting large uploads. validation.rs tests that case now.)
    for target, body in [("/healthz", ""), ("/api/v1/log/entries", "x"), ("/api/v1/log/entries", "x" * 65536)]:
        result = tmp_path / "result.json"
        method = ["--method", "POST", "--body", body] if body else []
        out = run([signet_bin, "bench", "load", "--target", url + target, "--workload", "custom", "--ca-file", server["ca"],
                   "--rate", "20", "--duration", "1", "--connections", "2", "--new-connection", *method, "--json", str(result)])
        assert out.returncode == 0, out.stderr[-500:]
        x = json.loads(result.read_text())
        if body:
            # Refused as entries, with a 400 each: answered, not failed at the TLS layer.
            assert x["ok"] == 0 and set(x["errors"]) == {"status_400"} and sum(x["errors"].values()) >= 10, x["errors"]
        else:
            assert x["ok"] >= 10 and not x["errors"], x["errors"]


# --- certificates, mTLS, shutdown (a server of their own each) ------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
def test_rsa_2048_certificates_on_both_versions(signet_bin, pki, backend):
    with tls_server(signet_bin, pki, backend, kind="rsa") as s:
        for version in (ssl.TLSVersion.TLSv1_3, ssl.TLSVersion.TLSv1_2):
            data, got, _, _ = python_exchange(s, request_bytes("GET", "/healthz"), python_context(s, version))
            assert split_response(data)[0] == 200 and got in ("TLSv1.3", "TLSv1.2")
        out = gnutls(s, "1.2", stdin=request_bytes("GET", "/healthz"))
        assert b"HTTP/1.1 200" in out.stdout and b"RSA" in out.stdout, out.stdout[-500:]


@pytest.mark.parametrize("backend", BACKENDS)
def test_mtls_required_on_every_client(signet_bin, pki, backend, tmp_path):
    with tls_server(signet_bin, pki, backend, mtls=True) as s:
        cert, key = os.path.join(pki, "client.pem"), os.path.join(pki, "client.key")
        # Python ssl
        ctx = python_context(s, client_cert=True)
        data, _, session, _ = python_exchange(s, request_bytes("GET", "/healthz"), ctx)
        assert split_response(data)[0] == 200
        data, _, _, reused = python_exchange(s, request_bytes("GET", "/healthz"), ctx, session=session)
        assert split_response(data)[0] == 200 and reused, "a client-certificate session was not resumed"
        with pytest.raises((ssl.SSLError, ConnectionError)):
            python_exchange(s, request_bytes("GET", "/healthz"), python_context(s))
        # curl
        url = f"https://127.0.0.1:{s['port']}/healthz"
        ok = run(["curl", "-sS", "--cacert", s["ca"], "--cert", cert, "--key", key, "-o", "/dev/null", "-w", "%{http_code}", url])
        assert ok.stdout == b"200", ok.stderr
        assert run(["curl", "-sS", "--cacert", s["ca"], "-o", "/dev/null", url]).returncode != 0
        # openssl s_client
        out = s_client(s, "-cert", cert, "-key", key, stdin=request_bytes("GET", "/healthz"))
        assert b"HTTP/1.1 200" in out.stdout, out.stderr[-300:]
        out = s_client(s, stdin=request_bytes("GET", "/healthz"))
        assert b"HTTP/1.1 200" not in out.stdout
        # gnutls-cli
        out = gnutls(s, "1.3", "--x509certfile", cert, "--x509keyfile", key, stdin=request_bytes("GET", "/healthz"))
        assert b"HTTP/1.1 200" in out.stdout, out.stderr[-300:]
        out = gnutls(s, "1.3", stdin=request_bytes("GET", "/healthz"))
        assert b"HTTP/1.1 200" not in out.stdout
        # signet's client holds no client certificate: refused at the handshake.
        result = tmp_path / "r.json"
        run([signet_bin, "bench", "load", "--target", url, "--workload", "custom", "--ca-file", s["ca"], "--rate", "5",
             "--duration", "1", "--connections", "1", "--json", str(result)])
        if result.exists():
            assert json.loads(result.read_text())["ok"] == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_sigterm_closes_open_connections_with_close_notify(signet_bin, pki, backend):
    with tls_server(signet_bin, pki, backend) as s:
        ctx = python_context(s)
        socks = []
        for _ in range(3):
            sock = ctx.wrap_socket(socket.create_connection(("127.0.0.1", s["port"]), timeout=15),
                                   server_hostname="127.0.0.1", suppress_ragged_eofs=False)
            sock.sendall(request_bytes("GET", "/healthz", close=False))
            assert b"200 OK" in sock.recv(65536)
            socks.append(sock)
        s["proc"].send_signal(signal.SIGTERM)
        for sock in socks:
            with sock:
                assert sock.recv(65536) == b""  # SSLEOFError if cut without close_notify
        assert s["proc"].wait(timeout=15) == 0
