"""Checks signet's certificates the way sigstore-python does, with `cryptography` alone:
the chain signatures, the leaf profile, and the embedded SCT over the precertificate TBS."""

import base64
import datetime
import hashlib
import json
import os
import urllib.request

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, ObjectIdentifier

FULCIO_ISSUER_V1 = ObjectIdentifier("1.3.6.1.4.1.57264.1.1")
FULCIO_ISSUER_V2 = ObjectIdentifier("1.3.6.1.4.1.57264.1.8")


def post(url, body, headers=None):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json", **(headers or {})})
    with urllib.request.urlopen(req) as resp:
        return json.loads(resp.read())


def sct_signed_data(sct, issuer_key_hash, tbs_precert):
    # RFC 6962 section 3.2: what a precert SCT signs.
    ts = int(sct.timestamp.replace(tzinfo=datetime.timezone.utc).timestamp() * 1000)
    return (b"\x00\x00" + ts.to_bytes(8, "big") + b"\x00\x01" + issuer_key_hash
            + len(tbs_precert).to_bytes(3, "big") + tbs_precert + b"\x00\x00")


def check_certificate(chain_pem, data_dir, email, issuer):
    leaf, inter, root = (x509.load_pem_x509_certificate(c.encode()) for c in chain_pem)
    # Chain signatures: root (P-384) self-signed, intermediate by root, leaf by intermediate,
    # which is P-256 with SHA-256 by default (docs/ca.md).
    assert root.public_key().curve.name == "secp384r1"
    assert inter.public_key().curve.name == "secp256r1" and isinstance(leaf.signature_hash_algorithm, hashes.SHA256)
    root.public_key().verify(root.signature, root.tbs_certificate_bytes, ec.ECDSA(hashes.SHA384()))
    root.public_key().verify(inter.signature, inter.tbs_certificate_bytes, ec.ECDSA(hashes.SHA384()))
    inter.public_key().verify(leaf.signature, leaf.tbs_certificate_bytes, ec.ECDSA(hashes.SHA256()))
    assert inter.extensions.get_extension_for_class(x509.BasicConstraints).critical

    # Fulcio's leaf profile.
    assert len(leaf.subject) == 0
    san = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    assert san.critical and san.value.get_values_for_type(x509.RFC822Name) == [email]
    ku = leaf.extensions.get_extension_for_class(x509.KeyUsage)
    assert ku.critical and ku.value.digital_signature and not ku.value.key_cert_sign
    assert leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value == x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CODE_SIGNING])
    assert leaf.extensions.get_extension_for_oid(FULCIO_ISSUER_V1).value.value == issuer.encode()
    assert leaf.extensions.get_extension_for_oid(FULCIO_ISSUER_V2).value.value[2:] == issuer.encode()
    validity = leaf.not_valid_after_utc - leaf.not_valid_before_utc
    assert validity == datetime.timedelta(minutes=10)
    assert leaf.extensions.get_extension_for_class(x509.AuthorityKeyIdentifier).value.key_identifier == \
        inter.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value.digest
    assert not any(e.critical for e in leaf.extensions if e.oid._name == "Unknown OID")

    # Exactly one SCT, from signet's CT log, over the precertificate TBS.
    scts = leaf.extensions.get_extension_for_class(x509.PrecertificateSignedCertificateTimestamps).value
    assert len(scts) == 1
    sct = scts[0]
    with open(os.path.join(data_dir, "keys", "ct.pem"), "rb") as f:
        ct_key = serialization.load_pem_private_key(f.read(), None).public_key()
    ct_spki = ct_key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    assert sct.log_id == hashlib.sha256(ct_spki).digest()
    ikh = hashlib.sha256(inter.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)).digest()
    ct_key.verify(sct.signature, sct_signed_data(sct, ikh, leaf.tbs_precertificate_bytes), ec.ECDSA(hashes.SHA256()))
    return leaf


def test_public_key_request_with_proof_of_possession(server, dev_token):
    email = "carol@example.com"
    token = dev_token(email)
    key = ec.generate_private_key(ec.SECP256R1())
    pem = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    pop = key.sign(email.encode(), ec.ECDSA(hashes.SHA256()))
    resp = post(server["url"] + "/api/v2/signingCert", {
        "credentials": {"oidcIdentityToken": token},
        "publicKeyRequest": {"publicKey": {"algorithm": "ECDSA", "content": pem}, "proofOfPossession": base64.b64encode(pop).decode()},
    })
    chain = resp["signedCertificateEmbeddedSct"]["chain"]["certificates"]
    leaf = check_certificate(chain, server["data_dir"], email, server["url"] + "/oidc")
    assert leaf.public_key().public_numbers() == key.public_key().public_numbers()


def test_csr_with_bearer_token_as_sigstore_python_sends_it(server, dev_token):
    email = "dave@example.com"
    token = dev_token(email)
    key = ec.generate_private_key(ec.SECP384R1())
    csr = x509.CertificateSigningRequestBuilder().subject_name(x509.Name([])).sign(key, hashes.SHA384())
    resp = post(server["url"] + "/api/v2/signingCert",
                {"certificateSigningRequest": base64.b64encode(csr.public_bytes(serialization.Encoding.PEM)).decode()},
                headers={"Authorization": f"Bearer {token}", "Accept": "application/pem-certificate-chain"})
    chain = resp["signedCertificateEmbeddedSct"]["chain"]["certificates"]
    check_certificate(chain, server["data_dir"], email, server["url"] + "/oidc")
