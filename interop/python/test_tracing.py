"""OTLP trace export: signet sends its spans to a collector (here a small OTLP/HTTP receiver
decoding the protobuf with opentelemetry-proto), a caller's traceparent is followed, the
steps of a signing are children of their request, and a collector that is down costs no
request."""

import http.server
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

SERVER_KIND = 2  # opentelemetry.proto.trace.v1.Span.SpanKind.SPAN_KIND_SERVER
ERROR_STATUS = 2  # Status.StatusCode.STATUS_CODE_ERROR


class Receiver:
    """An OTLP/HTTP endpoint on loopback that keeps every span it is sent."""

    def __init__(self):
        self.requests = []
        self.paths = []
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                receiver.paths.append((self.path, self.headers.get("Content-Type")))
                request = trace_service_pb2.ExportTraceServiceRequest()
                request.ParseFromString(body)
                receiver.requests.append(request)
                answer = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def spans(self):
        """(resource attributes, span) for every span received."""
        out = []
        for request in self.requests:
            for rs in request.resource_spans:
                resource = attributes(rs.resource.attributes)
                for ss in rs.scope_spans:
                    out.extend((resource, span) for span in ss.spans)
        return out

    def close(self):
        self.httpd.shutdown()


def attributes(kvs):
    out = {}
    for kv in kvs:
        value = kv.value
        out[kv.key] = getattr(value, value.WhichOneof("value")) if value.WhichOneof("value") else None
    return out


def start(signet_bin, data_dir, tracing):
    config = data_dir.rstrip("/") + ".toml"
    with open(config, "w") as f:
        f.write("[tracing]\n" + tracing)
    proc = subprocess.Popen([signet_bin, "serve", "--dev", "--plain-http", "--data-dir", data_dir, "--listen", "127.0.0.1:0", "--config", config],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    match = re.match(r"signet listening on (\S+)", line)
    assert match, f"unexpected first line from signet: {line!r} {proc.stderr.read() if proc.poll() is not None else ''}"
    return proc, match.group(1)


def stop(proc, within=20):
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=within)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError(f"signet did not stop within {within} s of SIGTERM")
    return proc.stderr.read()


def sigstore(*args):
    return subprocess.run([sys.executable, "-m", "sigstore", *args], capture_output=True, text=True)


def sign(signet_bin, url, data_dir, tmp_path, rekor_version):
    out = tmp_path / f"trust-{rekor_version}"
    subprocess.run([signet_bin, "trust", "export", "--data-dir", data_dir, "--out", str(out)], check=True, capture_output=True)
    token = subprocess.run([signet_bin, "dev-token", "--data-dir", data_dir, "--subject", "tess@example.com"],
                           check=True, capture_output=True, text=True).stdout.strip()
    artifact = tmp_path / f"artifact-{rekor_version}.txt"
    artifact.write_text(f"traced over rekor v{rekor_version}\n")
    signed = sigstore("--trust-config", str(out / "client_trust_config.json"), "sign", "--identity-token", token,
                      "--rekor-version", rekor_version, str(artifact))
    assert signed.returncode == 0, signed.stderr
    return token


def test_spans_reach_the_collector_with_their_parents(signet_bin, tmp_path):
    receiver = Receiver()
    data_dir = str(tmp_path / "data")
    proc, url = start(signet_bin, data_dir, f'otlp_endpoint = "{receiver.url}"\nexport_interval_ms = 200\n')
    try:
        tokens = [sign(signet_bin, url, data_dir, tmp_path, v) for v in ("1", "2")]
        trace_id, parent_id = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
        request = urllib.request.Request(url + "/api/v1/log", headers={"traceparent": f"00-{trace_id}-{parent_id}-01"})
        answer = urllib.request.urlopen(request, timeout=10)
        assert answer.status == 200
        request_id = answer.headers["x-request-id"]
        try:
            urllib.request.urlopen(url + "/api/v1/log/entries?logIndex=999999", timeout=10)
        except urllib.error.HTTPError as e:
            assert e.code == 404
        metrics = urllib.request.urlopen(url + "/metrics", timeout=10).read().decode()
        assert re.search(r'^signet_trace_exports_total\{outcome="ok"\} [1-9]', metrics, re.M), metrics
    finally:
        stderr = stop(proc)
    receiver.close()
    assert "trace export failed" not in stderr

    assert receiver.paths and all(p == ("/v1/traces", "application/x-protobuf") for p in receiver.paths), receiver.paths
    spans = receiver.spans()
    assert spans, f"no span reached the collector; signet's stderr:\n{stderr}"
    resource = spans[0][0]
    assert resource["service.name"] == "signet"
    assert re.fullmatch(r"\d+\.\d+\.\d+.*", resource["service.version"])

    by_name = {}
    for _, span in spans:
        by_name.setdefault(span.name, []).append(span)
    servers = [s for _, s in spans if s.kind == SERVER_KIND]

    def children(parent_name, child_name):
        parents = by_name.get(parent_name, [])
        assert parents, f"no {parent_name!r} span; got {sorted(by_name)}"
        kids = [c for c in by_name.get(child_name, []) for p in parents
                if c.trace_id == p.trace_id and c.parent_span_id == p.span_id]
        assert kids, f"no {child_name!r} span under {parent_name!r}; got {sorted(by_name)}"
        return parents[0]

    # Every step of a signing is a child of the request it serves.
    cert = children("POST /api/v2/signingCert", "oidc.verify")
    children("POST /api/v2/signingCert", "ca.issue")
    children("POST /api/v1/log/entries", "entry.verify")
    children("POST /api/v1/log/entries", "log.append")
    children("POST /api/v2/log/entries", "log.append")
    children("POST /api/v1/timestamp", "tsa.stamp")
    a = attributes(cert.attributes)
    assert (a["http.request.method"], a["http.route"], a["http.response.status_code"]) == ("POST", "/api/v2/signingCert", 200), a
    assert a["client.address"] == "127.0.0.1"

    # The caller's traceparent makes the request part of its trace.
    followed = [s for s in by_name.get("GET /api/v1/log", []) if s.trace_id.hex() == trace_id]
    assert followed, "the request with a traceparent is not in the caller's trace"
    assert followed[0].parent_span_id.hex() == parent_id
    # And the span names the request id the caller was answered with.
    assert attributes(followed[0].attributes)["signet.request_id"] == request_id

    # A path with an index that is not there is a 404 under its route template, not an error.
    missing = [s for s in servers if attributes(s.attributes).get("http.response.status_code") == 404]
    assert missing and all(s.status.code != ERROR_STATUS for s in missing)
    assert all(s.name.split(" ")[1].startswith("/") for s in servers)

    # No identity token in any span.
    for _, span in spans:
        for value in attributes(span.attributes).values():
            for token in tokens:
                assert token[:40] not in str(value), f"a token is in span {span.name}"


def test_a_collector_that_is_down_costs_no_request(signet_bin, tmp_path):
    # A port nothing listens on: each export fails, and requests go on as before.
    with tempfile.TemporaryDirectory() as d:
        import socket
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
        s.close()
        proc, url = start(signet_bin, d, f'otlp_endpoint = "http://127.0.0.1:{closed}/v1/traces"\nexport_interval_ms = 50\nexport_timeout_secs = 1\nmax_queue = 16\n')
        try:
            for _ in range(200):
                assert urllib.request.urlopen(url + "/api/v1/log", timeout=10).status == 200
            time.sleep(0.5)
            assert proc.poll() is None
            assert urllib.request.urlopen(url + "/readyz", timeout=10).status == 200
            metrics = urllib.request.urlopen(url + "/metrics", timeout=10).read().decode()
            failed = re.search(r'^signet_trace_exports_total\{outcome="failed"\} (\d+)$', metrics, re.M)
            assert failed and int(failed.group(1)) > 0, metrics
        finally:
            started = time.monotonic()
            stderr = stop(proc)
            assert time.monotonic() - started < 15
        # The operator is told, once, not once per batch.
        assert stderr.count("trace export failed") == 1, stderr


def test_an_endpoint_that_would_send_spans_in_the_clear_is_refused(signet_bin, tmp_path):
    config = tmp_path / "signet.toml"
    config.write_text('[tracing]\notlp_endpoint = "http://collector.example:4318"\n')
    checked = subprocess.run([signet_bin, "config", "check", "--config", str(config)], capture_output=True, text=True)
    assert checked.returncode == 2, checked
    assert "tracing.otlp_endpoint" in checked.stderr and "loopback" in checked.stderr, checked.stderr
    served = subprocess.run([signet_bin, "serve", "--dev", "--data-dir", str(tmp_path / "d"), "--listen", "127.0.0.1:0", "--config", str(config)],
                            capture_output=True, text=True, timeout=30)
    assert served.returncode == 2 and "tracing.otlp_endpoint" in served.stderr, served
    config.write_text('[tracing]\nsample_ratio = 1.5\n')
    checked = subprocess.run([signet_bin, "config", "check", "--config", str(config)], capture_output=True, text=True)
    assert checked.returncode == 2 and "tracing.sample_ratio" in checked.stderr, checked.stderr
