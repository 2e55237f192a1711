//! Keyless signing, end to end: an ephemeral key, a certificate for it, the signature (over
//! the artifact, or over the DSSE PAE of an in-toto statement), a timestamp over the
//! signature, a log entry, and the bundle that holds them all.

use std::time::{SystemTime, UNIX_EPOCH};

use aws_lc_rs::encoding::AsDer;
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_ASN1_SIGNING};
use serde_json::Value;
use signet_core::hash::sha256;

use crate::bundle::{Bundle, Content};
use crate::http::Http;
use crate::signing_config::{self, Services};
use crate::{dsse, fulcio, rekor, token, tsa, ClientError};

/// The services of one signing config, and a connection-reusing client to reach them.
pub struct Signer {
    pub services: Services,
    http: Http,
}

impl Signer {
    pub fn from_signing_config(bytes: &[u8]) -> Result<Self, ClientError> {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
        Ok(Signer { services: signing_config::parse(bytes, now)?, http: Http::default() })
    }

    /// Signs `artifact` under the identity of `identity_token` and returns the bundle.
    pub fn sign(&self, identity_token: &str, artifact: &[u8]) -> Result<Value, ClientError> {
        sign_artifact(&self.http, &self.services, identity_token, artifact)
    }

    /// On a Rekor v2 log that serves witnessed checkpoints, waits up to `wait` for the cosigned
    /// copy of the bundle's checkpoint and puts it in ([`crate::witnessed`]). True if it did.
    pub fn adopt_cosigned_checkpoint(&self, bundle: &mut Value, wait: std::time::Duration) -> Result<bool, ClientError> {
        if self.services.tlog.major < 2 {
            return Ok(false);
        }
        match bundle.pointer_mut("/verificationMaterial/tlogEntries/0") {
            Some(entry) => crate::witnessed::adopt_cosigned(&self.http, &self.services.tlog.url, entry, wait),
            None => Ok(false),
        }
    }

    /// Signs an in-toto `statement` as a DSSE envelope and returns the bundle.
    pub fn sign_in_toto(&self, identity_token: &str, statement: &[u8]) -> Result<Value, ClientError> {
        sign_payload(&self.http, &self.services, identity_token, Payload::InToto(statement))
    }
}

/// What to sign.
#[derive(Clone, Copy)]
pub enum Payload<'a> {
    /// An artifact, signed as it is: the bundle gets a `messageSignature`.
    Artifact(&'a [u8]),
    /// An in-toto statement, signed over its DSSE PAE: the bundle gets a `dsseEnvelope`.
    InToto(&'a [u8]),
}

pub fn sign_artifact(http: &Http, services: &Services, identity_token: &str, artifact: &[u8]) -> Result<Value, ClientError> {
    sign_payload(http, services, identity_token, Payload::Artifact(artifact))
}

pub fn sign_payload(http: &Http, services: &Services, identity_token: &str, payload: Payload<'_>) -> Result<Value, ClientError> {
    // The bytes the signature covers.
    let message = match payload {
        Payload::Artifact(artifact) => std::borrow::Cow::Borrowed(artifact),
        Payload::InToto(statement) => {
            dsse::check_statement(statement)?;
            std::borrow::Cow::Owned(dsse::pae(statement))
        }
    };
    let rng = SystemRandom::new();
    let key_err = |e: &dyn std::fmt::Display| ClientError::Key(e.to_string());
    let key = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_ASN1_SIGNING).map_err(|e| key_err(&e))?;
    let spki = key.public_key().as_der().map_err(|e| key_err(&e))?;

    let challenge = token::challenge(identity_token)?;
    let proof = key.sign(&rng, challenge.as_bytes()).map_err(|e| key_err(&e))?;
    let ca_url = format!("{}{}", services.ca, fulcio::PATH);
    let reply = http.post_json("CA", &ca_url, &fulcio::request(spki.as_ref(), proof.as_ref()), Some(identity_token))?;
    let chain = fulcio::chain(&reply)?;
    let leaf = &chain[0];

    // For an artifact, the SHA-256 of the artifact; for DSSE, of the PAE (what Rekor v2 records).
    let digest = sha256(&message);
    let signature = key.sign(&rng, &message).map_err(|e| key_err(&e))?;
    let signature = signature.as_ref();

    // The timestamp is over the signature bytes, for either kind of content.
    let mut timestamps = Vec::new();
    if let Some(tsa_url) = &services.tsa {
        let mut nonce = [0u8; 8];
        aws_lc_rs::rand::fill(&mut nonce).map_err(|e| key_err(&e))?;
        let query = tsa::request(&sha256(signature), &nonce)?;
        let reply = http.post("TSA", tsa_url, "application/timestamp-query", "application/timestamp-reply", query, None)?;
        tsa::check_response(tsa_url, &reply.body)?;
        timestamps.push(reply.body);
    }

    let tlog_entry = match services.tlog.major {
        1 => {
            let url = format!("{}{}", services.tlog.url, rekor::V1_PATH);
            let request = match payload {
                Payload::Artifact(_) => rekor::v1_request(&digest, signature, leaf),
                Payload::InToto(statement) => rekor::v1_dsse_request(&dsse::envelope(statement, signature).to_string(), leaf),
            };
            rekor::v1_to_bundle_entry(&http.post_json("Rekor", &url, &request, None)?)?
        }
        _ => {
            let url = format!("{}{}", services.tlog.url, rekor::V2_PATH);
            rekor::v2_to_bundle_entry(http.post_json("Rekor", &url, &rekor::v2_request(&digest, signature, leaf), None)?)?
        }
    };
    let content = match payload {
        Payload::Artifact(_) => Content::Message { digest: &digest, signature },
        Payload::InToto(statement) => Content::Dsse { payload: statement, signature },
    };
    Ok(Bundle { leaf_der: leaf, tlog_entry, timestamps, content }.to_json())
}
