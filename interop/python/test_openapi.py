"""signet's OpenAPI description (`GET /api/openapi.json`) against the running server, by
schemathesis: requests generated from the description, valid and invalid, for a bounded
number of examples per route, and every answer checked against it. 0 server errors, 0 schema
violations, and every invalid request refused with a 4xx."""

import json
import os
import subprocess
import sys
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCHEMATHESIS = os.path.join(os.path.dirname(sys.executable), "schemathesis")
CHECKS = ",".join([
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_schema_conformance",
    "response_headers_conformance",
    "negative_data_rejection",
])
EXAMPLES_PER_ROUTE = 50


def get(url, token=None):
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    with urllib.request.urlopen(request, timeout=10) as r:
        return r.status, r.headers.get("content-type"), r.read()


def admin_token(signet_bin, server):
    token = subprocess.run([signet_bin, "admin", "token", "create", "--data-dir", server["data_dir"], "--role", "admin", "--name", "schemathesis"],
                           check=True, capture_output=True, text=True).stdout.strip()
    # The server reads new tokens from the store within a moment.
    deadline = time.time() + 15
    while True:
        try:
            if get(server["url"] + "/api/admin/roles", token)[0] == 200:
                return token
        except urllib.error.HTTPError:
            pass
        assert time.time() < deadline, "a new admin token was not accepted within 15 s"
        time.sleep(0.3)


def test_the_description_is_openapi_3_1_and_names_the_routes(server):
    status, kind, body = get(server["url"] + "/api/openapi.json")
    assert status == 200 and kind == "application/json"
    doc = json.loads(body)
    assert doc["openapi"] == "3.1.0"
    # A few routes of each service, with the methods the router answers.
    for path, method in [("/api/v1/log/entries", "post"), ("/api/v1/log/entries", "get"), ("/api/v2/log/entries", "post"),
                         ("/api/v2/signingCert", "post"), ("/api/v1/timestamp", "post"), ("/tuf/{file}", "get"),
                         ("/api/admin/tokens", "get"), ("/ui", "get"), ("/api/openapi.json", "get")]:
        assert method in doc["paths"][path], f"{method.upper()} {path} is not described"
    # Request bodies are the schemas derived from the types the handlers read.
    entry = doc["components"]["schemas"]["ProposedEntry"]
    assert entry["additionalProperties"] is False and set(entry["required"]) == {"apiVersion", "kind", "spec"}


def test_schemathesis_finds_no_server_error_and_no_schema_violation(server, signet_bin):
    token = admin_token(signet_bin, server)
    report = os.path.join(ROOT, "target", "schemathesis")
    os.makedirs(report, exist_ok=True)
    cmd = [SCHEMATHESIS, "run", server["url"] + "/api/openapi.json",
           "--checks", CHECKS,
           "--max-examples", str(EXAMPLES_PER_ROUTE), "--seed", "1",
           "--phases", "coverage,fuzzing",
           "--generation-database", "none",
           "--request-timeout", "10",
           # The admin routes are tested too, with a token of the admin role.
           "--header", f"Authorization: Bearer {token}",
           "--report", "junit", "--report-dir", report,
           "--no-color", "--output-sanitize", "true"]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=400)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-6000:]
    # Every operation the description names was exercised, but the description itself
    # (schemathesis leaves out the document it loaded).
    doc = json.loads(get(server["url"] + "/api/openapi.json")[2])
    operations = sum(len(item) for item in doc["paths"].values())
    assert f"Tested: {operations - 1}" in out, out[-3000:]
    summary = [line for line in out.splitlines() if "generated" in line and "passed" in line]
    assert summary and "failed" not in summary[-1], out[-3000:]
    print(summary[-1])
