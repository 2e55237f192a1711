//! Keys in AWS KMS, or anything that speaks its API (local-kms in the tests). The private key
//! never leaves KMS: a signature sends the digest, computed here (`MessageType=DIGEST`), and
//! gets back ASN.1 DER, as X.509 and Sigstore carry it.
//!
//! The SDK is async and signet's signing is not (a signer waits, off the runtime's workers).
//! So one thread per process runs a small runtime of its own for every KMS key; a signature
//! is a task sent to it and a bounded wait for its answer.
//!
//! Endpoint, region and credentials come the SDK's usual way (`AWS_REGION`,
//! `AWS_ENDPOINT_URL_KMS`, the credential chain: environment, profile, web identity, IMDS),
//! unless the URI names a host (`awskms://HOST:PORT/KEY`, reached over https).

use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use aws_sdk_kms::primitives::Blob;
use aws_sdk_kms::types::{KeySpec, KeyUsageType, MessageType, SigningAlgorithmSpec};

use crate::source::AwsKmsUri;
use crate::{Algorithm, HsmError, KeyError};

mod error;
pub use error::KmsError;

/// A KMS call that takes longer than this is answered 503: a request does not wait on KMS.
const CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// A signing key in KMS.
pub struct Key {
    uri: AwsKmsUri,
    client: aws_sdk_kms::Client,
}

/// The thread that runs every KMS call of this process.
fn runtime() -> Result<&'static tokio::runtime::Runtime, KmsError> {
    // The error is kept, shared, for every later call: the thread is started once.
    static RUNTIME: OnceLock<Result<tokio::runtime::Runtime, Arc<std::io::Error>>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread().worker_threads(1).thread_name("signet-kms").enable_all().build().map_err(Arc::new)
        })
        .as_ref()
        .map_err(|e| KmsError::Thread(e.clone()))
}

/// Runs `call` on the KMS thread and waits for it, at most twice the SDK's own timeout.
fn run<T: Send + 'static>(call: impl Future<Output = T> + Send + 'static) -> Result<T, KmsError> {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    runtime()?.spawn(async move {
        let _ = tx.send(call.await);
    });
    rx.recv_timeout(2 * CALL_TIMEOUT).map_err(|_| KmsError::Timeout(2 * CALL_TIMEOUT))
}

/// The SDK's error with its service code and message, not only "service error".
fn why<E: std::error::Error + 'static>(e: aws_sdk_kms::error::SdkError<E>) -> KmsError {
    match &e {
        aws_sdk_kms::error::SdkError::ServiceError(s) => KmsError::Refused { message: s.err().to_string() },
        other => KmsError::Unreachable { message: aws_sdk_kms::error::DisplayErrorContext(other).to_string() },
    }
}

async fn client(uri: &AwsKmsUri) -> aws_sdk_kms::Client {
    let timeouts = aws_config::timeout::TimeoutConfig::builder().operation_timeout(CALL_TIMEOUT).build();
    let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest()).timeout_config(timeouts);
    if let Some(host) = &uri.endpoint {
        loader = loader.endpoint_url(format!("https://{host}"));
    }
    aws_sdk_kms::Client::new(&loader.load().await)
}

fn algorithm_of(spec: &KeySpec) -> Option<Algorithm> {
    match spec {
        KeySpec::EccNistP256 => Some(Algorithm::EcdsaP256Sha256),
        KeySpec::EccNistP384 => Some(Algorithm::EcdsaP384Sha384),
        _ => None,
    }
}

fn signing_algorithm(algorithm: Algorithm) -> Option<SigningAlgorithmSpec> {
    match algorithm {
        Algorithm::EcdsaP256Sha256 => Some(SigningAlgorithmSpec::EcdsaSha256),
        Algorithm::EcdsaP384Sha384 => Some(SigningAlgorithmSpec::EcdsaSha384),
        Algorithm::Ed25519 => None,
    }
}

impl Key {
    /// The key `uri` names: its algorithm and SubjectPublicKeyInfo DER, read from KMS.
    pub fn open(uri: &AwsKmsUri) -> Result<(Key, Algorithm, Vec<u8>), KeyError> {
        let fail = |why: KmsError| KeyError::Hsm { key: format!("awskms://{}/{}", uri.endpoint.as_deref().unwrap_or(""), uri.key), why: HsmError::Kms(why) };
        let (owned, key_id) = (uri.clone(), uri.key.clone());
        let (client, public) = run(async move {
            let client = client(&owned).await;
            let public = client.get_public_key().key_id(key_id).send().await.map_err(why);
            (client, public)
        })
        .map_err(fail)?;
        let public = public.map_err(fail)?;
        if public.key_usage() != Some(&KeyUsageType::SignVerify) {
            return Err(fail(KmsError::KeyUsage(public.key_usage().cloned())));
        }
        let spec = public.key_spec().ok_or_else(|| fail(KmsError::NoKeySpec))?;
        let algorithm = algorithm_of(spec).ok_or_else(|| fail(KmsError::KeySpec(spec.clone())))?;
        let spki = public.public_key().ok_or_else(|| fail(KmsError::NoPublicKey))?.as_ref().to_vec();
        Ok((Key { uri: uri.clone(), client }, algorithm, spki))
    }

    /// Makes an `algorithm` key for `uri`, which must be `alias/NAME`, unless the alias names
    /// a key already. Returns whether it made one.
    pub fn ensure(uri: &AwsKmsUri, algorithm: Algorithm) -> Result<bool, KeyError> {
        let shown = format!("awskms://{}/{}", uri.endpoint.as_deref().unwrap_or(""), uri.key);
        let fail = |why: KmsError| KeyError::Hsm { key: shown.clone(), why: HsmError::Kms(why) };
        let alias = uri.key.strip_prefix("alias/").ok_or_else(|| fail(KmsError::NoAlias))?.to_string();
        let spec = match algorithm {
            Algorithm::EcdsaP256Sha256 => KeySpec::EccNistP256,
            Algorithm::EcdsaP384Sha384 => KeySpec::EccNistP384,
            Algorithm::Ed25519 => return Err(fail(KmsError::Ed25519)),
        };
        let owned = uri.clone();
        run(async move {
            let client = client(&owned).await;
            let alias_name = format!("alias/{alias}");
            match client.describe_key().key_id(&alias_name).send().await {
                Ok(_) => return Ok(false),
                Err(e) if e.as_service_error().is_some_and(|s| s.is_not_found_exception()) => {}
                Err(e) => return Err(why(e)),
            }
            let made = client
                .create_key()
                .key_usage(KeyUsageType::SignVerify)
                .key_spec(spec)
                .description(format!("signet: {alias}"))
                .send()
                .await
                .map_err(why)?;
            let key_id = made.key_metadata().map(|m| m.key_id().to_string()).ok_or(KmsError::NoKeyId)?;
            client.create_alias().alias_name(alias_name).target_key_id(key_id).send().await.map_err(why)?;
            Ok(true)
        })
        .map_err(fail)?
        .map_err(fail)
    }

    /// An ASN.1 DER signature over `message` by this `algorithm` key, made in KMS.
    pub fn sign(&self, algorithm: Algorithm, message: &[u8]) -> Result<Vec<u8>, KeyError> {
        let unavailable =
            |why: KmsError| KeyError::Unavailable { key: format!("awskms://{}/{}", self.uri.endpoint.as_deref().unwrap_or(""), self.uri.key), why: HsmError::Kms(why) };
        let spec = signing_algorithm(algorithm).ok_or(KeyError::Sign)?;
        let request = self
            .client
            .sign()
            .key_id(&self.uri.key)
            .message(Blob::new(algorithm.to_be_signed(message)))
            .message_type(MessageType::Digest)
            .signing_algorithm(spec);
        let signed = run(async move { request.send().await.map_err(why) }).map_err(unavailable)?.map_err(unavailable)?;
        signed.signature().map(|s| s.as_ref().to_vec()).ok_or(KeyError::Sign)
    }
}
