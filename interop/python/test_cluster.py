"""The production cluster of deploy/compose, run as processes (no container engine runs here):
three signet instances made by one `signet init` whose root CA key is kept apart, on a PostgreSQL
reached over verified TLS, sharing limits through a Redis that asks for a password, behind haproxy
with deploy/haproxy.cfg. cosign signs through haproxy; the instance that sequences is killed; cosign
signs again, and both bundles verify."""

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import ROOT, free_port, run

COSIGN = os.environ.get("COSIGN_BIN", os.path.join(ROOT, ".tools", "bin", "cosign"))




def wait_for(what, ready, seconds=30):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if ready():
            return
        time.sleep(0.1)
    pytest.fail(f"{what} did not happen within {seconds} s")


def get_json(url):
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return json.loads(r.read())
    except Exception:
        return None


def make_ca_and_server_cert(d):
    """A CA, and a certificate it signs for `localhost`: the name the storage URL uses."""
    run("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
        "-subj", "/CN=cluster test CA", "-keyout", d / "ca.key", "-out", d / "ca.pem")
    run("openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", "/CN=localhost",
        "-keyout", d / "server.key", "-out", d / "server.csr")
    (d / "san.cnf").write_text("subjectAltName=DNS:localhost\n")
    run("openssl", "x509", "-req", "-in", d / "server.csr", "-CA", d / "ca.pem", "-CAkey", d / "ca.key", "-CAcreateserial",
        "-days", "2", "-extfile", d / "san.cnf", "-out", d / "server.pem")


@pytest.fixture()
def postgres_tls(tmp_path):
    """A PostgreSQL of its own that speaks TLS, with the CA that verifies it."""
    pg_bin = os.environ.get("SIGNET_TEST_POSTGRES_BIN")
    if not pg_bin:
        if os.environ.get("CI"):
            pytest.fail("SIGNET_TEST_POSTGRES_BIN is not set; scripts/test starts PostgreSQL")
        pytest.skip("no PostgreSQL (scripts/services)")
    # Outside pytest's own 0700 tree: the cluster belongs to the postgres user (root cannot own one).
    d = Path(tempfile.mkdtemp(prefix="signet-pg-tls-"))
    make_ca_and_server_cert(d)
    as_owner = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    if as_owner:
        for f in [d, *d.iterdir()]:
            shutil.chown(f, "postgres")
    os.chmod(d / "server.key", 0o600)
    data = d / "data"
    run(*as_owner, f"{pg_bin}/initdb", "-D", data, "-U", "signet", "--auth=trust", "-E", "UTF8", "--no-locale")
    port = free_port()
    opts = (f"-c listen_addresses=127.0.0.1 -c port={port} -c unix_socket_directories={data} -c ssl=on "
            f"-c ssl_cert_file={d / 'server.pem'} -c ssl_key_file={d / 'server.key'}")
    run(*as_owner, f"{pg_bin}/pg_ctl", "-D", data, "-l", d / "log", "-w", "-t", "60", "-o", opts, "start")
    # Plain connections are refused: only TLS reaches the database.
    (data / "pg_hba.conf").write_text("hostssl all all 127.0.0.1/32 trust\n")
    run(*as_owner, f"{pg_bin}/pg_ctl", "-D", data, "reload")
    try:
        yield {"url": f"postgres://signet@localhost:{port}/postgres?sslmode=verify-full&sslrootcert={d / 'ca.pem'}",
               "plain": f"postgres://signet@127.0.0.1:{port}/postgres"}
    finally:
        run(*as_owner, f"{pg_bin}/pg_ctl", "-D", data, "-m", "immediate", "stop", check=False)
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture()
def redis_auth(tmp_path):
    if not shutil.which("redis-server"):
        if os.environ.get("CI"):
            pytest.fail("redis-server is missing; scripts/install-deps installs it")
        pytest.skip("no redis-server")
    port, password = free_port(), os.urandom(12).hex()
    d = tmp_path / "redis"
    d.mkdir()
    proc = subprocess.Popen(["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--requirepass", password,
                             "--save", "", "--appendonly", "no", "--dir", str(d)], stdout=subprocess.DEVNULL)
    wait_for("redis", lambda: run("redis-cli", "-p", port, "-a", password, "--no-auth-warning", "ping", check=False).stdout.strip() == "PONG")
    try:
        yield {"url": f"redis://:{password}@127.0.0.1:{port}", "port": port}
    finally:
        proc.kill()
        proc.wait()


class Instance:
    def __init__(self, signet_bin, data, config, env, port):
        self.port, self.metrics = port, free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.proc = subprocess.Popen([signet_bin, "serve", "--config", str(config), "--data-dir", str(data)],
                                     env=env | {"SIGNET_LISTEN": f"127.0.0.1:{port}", "SIGNET_HTTP_METRICS_LISTEN": f"127.0.0.1:{self.metrics}"},
                                     stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        assert line.startswith("signet listening on "), line

    def role(self):
        ready = get_json(self.url + "/readyz")
        return ready and ready.get("role")

    def metric(self, name):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics}/metrics", timeout=2) as r:
            return sum(float(l.rsplit(" ", 1)[1]) for l in r.read().decode().splitlines() if l.startswith(name + " "))

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()


def test_cosign_signs_through_haproxy_and_again_after_the_sequencer_dies(signet_bin, server, dev_token, postgres_tls,
                                                                         redis_auth, tmp_path):
    if not shutil.which("haproxy"):
        pytest.fail("haproxy is missing; scripts/install-deps installs it")
    # Plain text is refused by the database: the instances reach it over verified TLS or not at all.
    assert run(os.path.join(os.environ["SIGNET_TEST_POSTGRES_BIN"], "psql"), postgres_tls["plain"] + "?sslmode=disable",
               "-c", "select 1", check=False).returncode != 0

    front, stats = free_port(), free_port()
    public_url = f"http://127.0.0.1:{front}"
    # One init; the root CA key goes apart (compose keeps it in a volume no instance mounts).
    data0 = tmp_path / "signet-0"
    run(signet_bin, "init", "--data-dir", data0, "--public-url", public_url, "--root-key-out", tmp_path / "offline-ca-root.pem")
    jwks = tmp_path / "jwks.json"
    with urllib.request.urlopen(server["url"] + "/oidc/jwks") as r:
        jwks.write_bytes(r.read())
    issuer = server["url"] + "/oidc"
    config = tmp_path / "signet.toml"
    config.write_text(f'public_url = "{public_url}"\n[guard.rate_limit]\nenabled = true\n'
                      f'[[oidc.issuers]]\nurl = "{issuer}"\ntype = "email"\njwks_file = "{jwks}"\n')
    env = dict(os.environ, SIGNET_STORAGE=postgres_tls["url"], SIGNET_GUARD_REDIS_URL=redis_auth["url"], SIGNET_LOG="warn")
    dirs = [data0] + [tmp_path / f"signet-{i}" for i in (1, 2)]
    for d in dirs[1:]:
        shutil.copytree(data0, d)
    instances = [Instance(signet_bin, d, config, env, free_port()) for d in dirs]
    try:
        wait_for("a sequencer", lambda: any(i.role() == "sequencer" for i in instances))
        haproxy = subprocess.Popen(["haproxy", "-db", "-f", os.path.join(ROOT, "deploy", "haproxy.cfg")],
                                   env=dict(os.environ, SIGNET_FRONTEND=f"127.0.0.1:{front}", SIGNET_HAPROXY_STATS=f"127.0.0.1:{stats}",
                                            **{f"SIGNET_BACKEND_{n + 1}": f"127.0.0.1:{i.port}" for n, i in enumerate(instances)}),
                                   stdout=subprocess.DEVNULL)
        try:
            wait_for("haproxy's checks", lambda: (get_json(public_url + "/readyz") or {}).get("status") == "ready")
            trust = tmp_path / "trust"
            run(signet_bin, "trust", "export", "--data-dir", data0, "--out", trust)
            assert public_url in (trust / "signing_config.json").read_text()

            def sign_and_verify(name):
                artifact = tmp_path / f"{name}.txt"
                artifact.write_text(f"{name}, signed through haproxy\n")
                token = tmp_path / f"{name}.token"
                token.write_text(dev_token("release@example.com"))
                bundle = tmp_path / f"{name}.sigstore.json"
                signed = run(COSIGN, "sign-blob", "--yes", "--signing-config", trust / "signing_config.json",
                             "--trusted-root", trust / "trusted_root.json", "--bundle", bundle, "--identity-token", token,
                             artifact, check=False)
                assert signed.returncode == 0, signed.stderr
                run(COSIGN, "verify-blob", "--trusted-root", trust / "trusted_root.json", "--bundle", bundle,
                    "--certificate-identity", "release@example.com", "--certificate-oidc-issuer", issuer, artifact)
                return json.loads(bundle.read_text())

            first = sign_and_verify("before")
            sequencer = next(i for i in instances if i.role() == "sequencer")
            sequencer.kill()
            rest = [i for i in instances if i is not sequencer]
            wait_for("a new sequencer", lambda: any(i.role() == "sequencer" for i in rest), seconds=60)
            second = sign_and_verify("after")
            # The same log, grown: the second entry comes after the first.
            index = lambda b: int(b["verificationMaterial"]["tlogEntries"][0]["logIndex"])
            assert index(second) > index(first)
            # The limits were Redis's, reached with its password: checked, and never failed open.
            assert sum(i.metric("signet_guard_redis_checks_total") for i in rest) > 0
            assert sum(i.metric("signet_guard_redis_failures_total") for i in rest) == 0
        finally:
            haproxy.kill()
            haproxy.wait()
    finally:
        for i in instances:
            if i.proc.poll() is None:
                i.kill()


def test_the_compose_file_is_this_topology(tmp_path):
    """deploy/compose/compose.yaml describes the cluster the test above runs: three instances on their
    own data volumes behind haproxy, secrets only as files, the root keys in a volume no instance mounts,
    Prometheus scraping each instance's metrics port with the alert rules, Grafana with the dashboard."""
    import yaml

    d = os.path.join(ROOT, "deploy", "compose")
    compose = yaml.safe_load(open(os.path.join(d, "compose.yaml")))
    services = compose["services"]
    instances = [f"signet{n}" for n in (1, 2, 3)]
    assert set(instances + ["postgres", "redis", "init", "haproxy", "prometheus", "grafana"]) <= set(services)
    # Each instance: the same command, its own data volume, the keys read-only, never the offline volume.
    for name in instances:
        s = services[name]
        mounts = s["volumes"]
        assert f"{name}:/var/lib/signet" in mounts and "keys:/keys:ro" in mounts
        assert not any(m.startswith("offline:") for m in mounts)
        assert "sslmode=verify-full" in s["command"][0] and "redis://:$$(cat /run/secrets/redis_password)@" in s["command"][0]
    assert [s for s, v in services.items() if any(str(m).startswith("offline:") for m in v.get("volumes", []))] == ["init"]
    # Secrets are files: no password in any environment, and every secret file is one make-secrets makes.
    for name, s in services.items():
        for key, value in (s.get("environment") or {}).items():
            assert "PASSWORD" not in key or key.endswith("_FILE") or key.endswith("__FILE"), f"{name}: {key}"
    secret_files = {v["file"] for v in compose["secrets"].values()}
    work = tmp_path / "compose"
    shutil.copytree(d, work, ignore=shutil.ignore_patterns("secrets"))
    run(work / "make-secrets")
    for f in secret_files:
        path = work / f
        assert path.exists() and (path.stat().st_mode & 0o077) == 0, f
    # PostgreSQL's certificate is for the name the instances connect to, under the CA they are given.
    run("openssl", "verify", "-CAfile", work / "secrets" / "postgres-ca.pem", "-verify_hostname", "postgres",
        work / "secrets" / "postgres.pem")
    # Only loopback publishes; haproxy fronts the three; Prometheus scrapes each one's metrics port.
    published = [p for s in services.values() for p in s.get("ports", [])]
    assert published and all(p.startswith("127.0.0.1:") for p in published)
    env = services["haproxy"]["environment"]
    assert sorted(v for k, v in env.items() if k.startswith("SIGNET_BACKEND_")) == [f"{n}:8080" for n in instances]
    prometheus = yaml.safe_load(open(os.path.join(d, "prometheus.yml")))
    job = prometheus["scrape_configs"][0]
    assert job["job_name"] == "signet", "the alerts' SignetInstanceDown reads up{job=\"signet\"}"
    assert job["static_configs"][0]["targets"] == [f"{n}:9464" for n in instances]
    assert 'metrics_listen = "0.0.0.0:9464"' in open(os.path.join(d, "signet.toml")).read()
    assert "../prometheus/rules.yml:/etc/prometheus/rules.yml:ro" in services["prometheus"]["volumes"]
    assert "../grafana/signet.json:/var/lib/grafana/dashboards/signet.json:ro" in services["grafana"]["volumes"]
    promtool = os.path.join(ROOT, ".tools", "bin", "promtool")
    if os.path.exists(promtool):
        # Checked where the rule file sits beside it, as Prometheus will see them.
        shutil.copy(os.path.join(ROOT, "deploy", "prometheus", "rules.yml"), work / "rules.yml")
        text = (work / "prometheus.yml").read_text().replace("/etc/prometheus/rules.yml", str(work / "rules.yml"))
        (work / "prometheus.yml").write_text(text)
        run(promtool, "check", "config", work / "prometheus.yml")
