//! Keyless signing, end to end: an ephemeral key, a certificate for it, the signature, a
//! timestamp over the signature, a log entry, and the bundle that holds them all.

use std::time::{SystemTime, UNIX_EPOCH};

use aws_lc_rs::encoding::AsDer;
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_ASN1_SIGNING};
use serde_json::Value;
use signet_core::hash::sha256;

use crate::bundle::MessageBundle;
use crate::http::Http;
use crate::signing_config::{self, Services};
use crate::{fulcio, rekor, token, tsa, ClientError};

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
}

pub fn sign_artifact(http: &Http, services: &Services, identity_token: &str, artifact: &[u8]) -> Result<Value, ClientError> {
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

    let digest = sha256(artifact);
    let signature = key.sign(&rng, artifact).map_err(|e| key_err(&e))?;
    let signature = signature.as_ref();

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
            rekor::v1_to_bundle_entry(&http.post_json("Rekor", &url, &rekor::v1_request(&digest, signature, leaf), None)?)?
        }
        _ => {
            let url = format!("{}{}", services.tlog.url, rekor::V2_PATH);
            rekor::v2_to_bundle_entry(http.post_json("Rekor", &url, &rekor::v2_request(&digest, signature, leaf), None)?)?
        }
    };
    Ok(MessageBundle { leaf_der: leaf, tlog_entry, timestamps, digest: &digest, signature }.to_json())
}
