"""The CT log's key or the Rekor v2 log's rotated into a new log (`signet admin log rotate
--log ct|rekor-v2`, offline): sigstore-python and cosign sign over Rekor v2 before and after it,
and sigstore-python, cosign and sigstore-go, with the trusted root TUF gives them after it,
verify both. The bundles from after carry the new key's log ID (in the SCT, or in the v2
entry); the trusted root of before the rotation does not know it and refuses them."""

import json

import pytest
from cryptography import x509

from conftest import serve
from test_sigstore_go import SGVERIFY
from test_tuf import client_env, run, sign_and_stop  # noqa: F401 (client_env is a fixture)


def entry(bundle):
    return json.loads(bundle.read_text())["verificationMaterial"]["tlogEntries"][0]


def sct_log_id(bundle):
    """The base64 log ID of the SCT embedded in the bundle's certificate."""
    import base64
    der = base64.b64decode(json.loads(bundle.read_text())["verificationMaterial"]["certificate"]["rawBytes"])
    scts = x509.load_der_x509_certificate(der).extensions.get_extension_for_class(x509.PrecertificateSignedCertificateTimestamps).value
    assert len(scts) == 1
    return base64.b64encode(scts[0].log_id).decode()


def log_id(bundle, log):
    return sct_log_id(bundle) if log == "ct" else entry(bundle)["logId"]["keyId"]


@pytest.mark.parametrize("log,listed", [("ct", "ctlogs"), ("rekor-v2", "tlogs")])
def test_bundles_signed_before_a_log_key_rotation_verify_after_it(signet_bin, tmp_path, client_env, log, listed):  # noqa: F811
    data_dir = str(tmp_path / "data")
    listen, clients, before = sign_and_stop(signet_bin, data_dir, tmp_path, client_env, rekor_version="2")
    for _, bundle, _ in before:
        assert entry(bundle)["kindVersion"]["version"] == "0.0.2", f"{bundle.name} was not signed over Rekor v2"
    old_ids = {log_id(b, log) for _, b, _ in before}
    assert len(old_ids) == 1

    rotated = run(signet_bin, "admin", "log", "rotate", "--log", log, "--data-dir", data_dir)
    assert rotated.returncode == 0, rotated.stderr
    new_id = json.loads(rotated.stdout)["active"]["logID"]
    assert new_id not in old_ids

    # The same address: the dev issuer's URL, in every certificate, is unchanged.
    with serve(signet_bin, data_dir, listen) as server:
        clients.server = server
        sg_root = clients.sigstore_go_trusted_root()
        keys = {k["logId"]["keyId"]: k["publicKey"]["validFor"] for k in json.loads(sg_root.read_text())[listed]}
        (old_id,) = old_ids
        assert set(keys) >= {old_id, new_id}, f"both {log} keys came through TUF"
        assert "end" in keys[old_id] and "end" not in keys[new_id]
        after = clients.sign_both("after", rekor_version="2")
        for _, bundle, _ in after:
            assert log_id(bundle, log) == new_id, f"{bundle.name} was not signed under the new {log} key"
        clients.verify_all(before + after, sg_root)

    # The trusted root of before the rotation has no key for the new log.
    first_root = tmp_path / "sg-1" / "trusted_root.json"
    for artifact, bundle, email in after:
        r = run(SGVERIFY, "verify", "--trusted-root", str(first_root), "--bundle", str(bundle), "--identity", email,
                "--issuer", clients.issuer, str(artifact))
        assert r.returncode != 0, f"sigstore-go verified {bundle.name} without the new {log} key"
