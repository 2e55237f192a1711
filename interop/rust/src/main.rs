//! sgrs: sigstore-rs (the `sigstore` crate, 0.15.0, unchanged) signing and verifying against
//! signet, for the interop tests in `interop/python/test_sigstore_rs.py`.
//!
//! ```text
//! sgrs sign --fulcio-url U --rekor-url U --trusted-root F --token JWT --artifact F --bundle OUT
//!           [--fulcio-api v2|v1] [--tls-ca PEM]
//! sgrs verify --trusted-root F --bundle F --artifact F|sha256:HEX --identity E --issuer U
//! ```
//!
//! Exit status: 0 done (`verify` prints `verified`), 1 failed (the error and its causes on
//! stderr), 2 usage.
//!
//! Signing. sigstore-rs's own keyless signer, `bundle::sign::SigningContext`, cannot be pointed
//! at an instance other than the public-good one from outside the crate: its only constructor
//! for other services, `SigningContext::new(FulcioClient, rekor Configuration, Keyring)`, takes
//! a `Keyring` of CT log keys, and `Keyring` lives in the crate-private `crypto::keyring`
//! module with no public way to make one (sigstore-0.15.0 src/bundle/sign.rs:275,
//! src/crypto/mod.rs:174). So this program runs the same steps as `SigningSession`
//! (src/bundle/sign.rs:90-196) with the crate's public clients:
//!
//! - an ephemeral P-256 key and a CSR carrying the token's email, sent by sigstore-rs's
//!   `FulcioClient::request_cert_v2` (REST `POST /api/v2/signingCert`, token as
//!   `Authorization: Bearer`); or, with `--fulcio-api v1`, its `FulcioClient::request_cert`
//!   (Fulcio's legacy `POST /api/v1/signingCert`: a public key and the signed email);
//! - the artifact's SHA-256 signed as a prehash;
//! - a hashedrekord 0.0.1 entry through sigstore-rs's Rekor client
//!   (`rekor::apis::entries_api::create_log_entry`, `POST /api/v1/log/entries`), converted to the
//!   bundle's `TransparencyLogEntry` by the crate's own `TryFrom<LogEntry>`;
//! - a bundle shaped as `SigningArtifact::to_bundle` shapes it (media type 0.2, the leaf
//!   certificate alone as the chain).
//!
//! The CT key check that `SigningSession` makes before signing is crate-private
//! (`crypto::transparency::verify_sct`); `verify` makes it on the result instead.
//!
//! Verifying: `bundle::verify::blocking::Verifier` with the trusted root read by
//! `trust::sigstore::SigstoreTrustRoot::from_trusted_root_json_unchecked`, the policy
//! `policy::Identity`, offline.
//!
//! TLS (`--tls-ca`): sigstore-rs's Fulcio client makes its own `reqwest::Client::new()`
//! (src/fulcio/mod.rs:210), whose rustls platform verifier reads the roots from `SSL_CERT_FILE`
//! on Linux; the program sets that before anything runs. The Rekor client is the
//! `Configuration.client` the caller provides, given the CA explicitly.

use std::error::Error;
use std::fs;
use std::path::PathBuf;
use std::process::ExitCode;
use std::str::FromStr;

use base64::{Engine as _, engine::general_purpose::STANDARD as BASE64};
use p256::ecdsa::signature::hazmat::PrehashSigner;
use p256::elliptic_curve::Generate;
use sha2::{Digest, Sha256};
use sigstore::bundle::Bundle;
use sigstore::bundle::verify::blocking::Verifier;
use sigstore::bundle::verify::policy::Identity;
use sigstore::bundle::verify::ArtifactDigest;
use sigstore::crypto::SigningScheme;
use sigstore::fulcio::oauth::OauthTokenProvider;
use sigstore::fulcio::{FulcioClient, TokenProvider};
use sigstore::oauth::IdentityToken;
use sigstore::rekor::apis::configuration::Configuration as RekorConfiguration;
use sigstore::rekor::apis::entries_api::create_log_entry;
use sigstore::rekor::models::{hashedrekord, proposed_entry::ProposedEntry};
use sigstore::trust::sigstore::SigstoreTrustRoot;
use sigstore_protobuf_specs::dev::sigstore::bundle::v1::{VerificationMaterial, bundle, verification_material};
use sigstore_protobuf_specs::dev::sigstore::common::v1::{
    HashAlgorithm, HashOutput, MessageSignature, X509Certificate, X509CertificateChain,
};
use sigstore_protobuf_specs::dev::sigstore::rekor::v1::TransparencyLogEntry;
use x509_cert::attr::{AttributeTypeAndValue, AttributeValue};
use x509_cert::builder::{Builder, RequestBuilder};
use x509_cert::der::{Decode, Encode};
use x509_cert::ext::pkix::BasicConstraints;
use x509_cert::name::{Name, RdnSequence};

type Result<T> = std::result::Result<T, Box<dyn Error>>;

/// An error with what was being done, keeping the error as its source (printed as the causes).
#[derive(Debug)]
struct Context(String, Box<dyn Error>);

impl std::fmt::Display for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl Error for Context {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        Some(self.1.as_ref())
    }
}

fn context<E: Into<Box<dyn Error>>>(what: impl Into<String>) -> impl FnOnce(E) -> Box<dyn Error> {
    let what = what.into();
    move |e| Box::new(Context(what, e.into()))
}

const USAGE: &str = "usage:
  sgrs sign --fulcio-url URL --rekor-url URL --trusted-root FILE --token JWT --artifact FILE --bundle OUT
            [--fulcio-api v2|v1] [--tls-ca PEM]
  sgrs verify --trusted-root FILE --bundle FILE --artifact FILE|sha256:HEX --identity EMAIL --issuer URL";

/// `application/vnd.dev.sigstore.bundle+json;version=0.2`, as `SigningArtifact::to_bundle`
/// writes it (sigstore-0.15.0 src/bundle/sign.rs:375, src/bundle/models.rs:25).
const BUNDLE_MEDIA_TYPE: &str = "application/vnd.dev.sigstore.bundle+json;version=0.2";

struct Args(Vec<(String, String)>);

impl Args {
    /// `--name value` pairs; anything else is a usage error.
    fn parse(rest: &[String]) -> std::result::Result<Self, String> {
        let mut pairs = Vec::new();
        let mut it = rest.iter();
        while let Some(flag) = it.next() {
            let Some(name) = flag.strip_prefix("--") else { return Err(format!("unexpected argument {flag:?}")) };
            let Some(value) = it.next() else { return Err(format!("{flag} needs a value")) };
            pairs.push((name.to_owned(), value.clone()));
        }
        Ok(Self(pairs))
    }

    fn opt(&self, name: &str) -> Option<&str> {
        self.0.iter().rev().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    fn req(&self, name: &str) -> std::result::Result<&str, String> {
        self.opt(name).ok_or_else(|| format!("--{name} is required"))
    }

    fn only(&self, allowed: &[&str]) -> std::result::Result<(), String> {
        match self.0.iter().find(|(n, _)| !allowed.contains(&n.as_str())) {
            Some((n, _)) => Err(format!("unknown option --{n}")),
            None => Ok(()),
        }
    }
}

enum Command {
    Sign(SignArgs),
    Verify(VerifyArgs),
}

struct SignArgs {
    fulcio_url: String,
    rekor_url: String,
    trusted_root: PathBuf,
    token: String,
    artifact: PathBuf,
    bundle: PathBuf,
    fulcio_v1: bool,
    tls_ca: Option<PathBuf>,
}

struct VerifyArgs {
    trusted_root: PathBuf,
    bundle: PathBuf,
    artifact: String,
    identity: String,
    issuer: String,
}

fn parse(argv: &[String]) -> std::result::Result<Command, String> {
    let (command, rest) = argv.split_first().ok_or("a command is required")?;
    let args = Args::parse(rest)?;
    match command.as_str() {
        "sign" => {
            args.only(&["fulcio-url", "rekor-url", "trusted-root", "token", "artifact", "bundle", "fulcio-api", "tls-ca"])?;
            let fulcio_v1 = match args.opt("fulcio-api").unwrap_or("v2") {
                "v2" => false,
                "v1" => true,
                other => return Err(format!("--fulcio-api is v2 or v1, not {other:?}")),
            };
            Ok(Command::Sign(SignArgs {
                fulcio_url: args.req("fulcio-url")?.to_owned(),
                rekor_url: args.req("rekor-url")?.to_owned(),
                trusted_root: args.req("trusted-root")?.into(),
                token: args.req("token")?.to_owned(),
                artifact: args.req("artifact")?.into(),
                bundle: args.req("bundle")?.into(),
                fulcio_v1,
                tls_ca: args.opt("tls-ca").map(PathBuf::from),
            }))
        }
        "verify" => {
            args.only(&["trusted-root", "bundle", "artifact", "identity", "issuer"])?;
            Ok(Command::Verify(VerifyArgs {
                trusted_root: args.req("trusted-root")?.into(),
                bundle: args.req("bundle")?.into(),
                artifact: args.req("artifact")?.to_owned(),
                identity: args.req("identity")?.to_owned(),
                issuer: args.req("issuer")?.to_owned(),
            }))
        }
        other => Err(format!("unknown command {other:?}")),
    }
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let command = match parse(&argv) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("sgrs: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let done = match command {
        Command::Sign(a) => sign(a),
        Command::Verify(a) => verify(a).map(|()| println!("verified")),
    };
    match done {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sgrs: {e}");
            let mut cause = e.source();
            while let Some(c) = cause {
                eprintln!("  caused by: {c}");
                cause = c.source();
            }
            ExitCode::from(1)
        }
    }
}

fn read(path: &PathBuf) -> Result<Vec<u8>> {
    fs::read(path).map_err(|e| format!("reading {}: {e}", path.display()).into())
}

fn trust_root(path: &PathBuf) -> Result<SigstoreTrustRoot> {
    SigstoreTrustRoot::from_trusted_root_json_unchecked(&read(path)?)
        .map_err(|e| format!("reading the trusted root {}: {e}", path.display()).into())
}

fn verify(a: VerifyArgs) -> Result<()> {
    let verifier = Verifier::new(RekorConfiguration::default(), trust_root(&a.trusted_root)?)?;
    let bundle: Bundle = serde_json::from_slice(&read(&a.bundle)?).map_err(|e| format!("reading the bundle: {e}"))?;
    let policy = Identity::new(&a.identity, &a.issuer);
    let verified = match a.artifact.strip_prefix("sha256:") {
        Some(hex_digest) => {
            let digest: [u8; 32] = hex::decode(hex_digest)
                .ok()
                .and_then(|d| d.try_into().ok())
                .ok_or_else(|| format!("{:?} is not a SHA-256 digest", a.artifact))?;
            verifier.verify_digest_with(ArtifactDigest::Sha256(digest), bundle, &policy, true)
        }
        None => {
            let input = fs::File::open(&a.artifact).map_err(|e| format!("reading {}: {e}", a.artifact))?;
            verifier.verify(input, bundle, &policy, true)
        }
    };
    verified.map_err(|e| Box::new(e) as Box<dyn Error>)
}

fn sign(a: SignArgs) -> Result<()> {
    if let Some(ca) = &a.tls_ca {
        // Before any thread exists: the only way to give sigstore-rs's Fulcio client a root.
        // SAFETY: single-threaded here; nothing reads the environment concurrently.
        unsafe { std::env::set_var("SSL_CERT_FILE", ca) };
    }
    let token = IdentityToken::try_from(a.token.as_str())?;
    // Read before signing: a trusted root that does not parse stops here, not after the log entry.
    trust_root(&a.trusted_root)?;
    let artifact = read(&a.artifact)?;
    let digest: [u8; 32] = Sha256::digest(&artifact).into();

    let mut rekor = RekorConfiguration { base_path: a.rekor_url.trim_end_matches('/').to_owned(), ..Default::default() };
    if let Some(ca) = &a.tls_ca {
        let root = reqwest::Certificate::from_pem(&read(ca)?)?;
        rekor.client = reqwest::Client::builder().add_root_certificate(root).build()?;
    }
    let fulcio_url = url::Url::parse(&a.fulcio_url)?;

    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let (cert_der, signature) = if a.fulcio_v1 {
        rt.block_on(certify_v1(fulcio_url, &a.token, &token, &artifact))?
    } else {
        rt.block_on(certify_v2(fulcio_url, &token, &digest))?
    };

    let entry = ProposedEntry::Hashedrekord {
        api_version: "0.0.1".to_owned(),
        spec: hashedrekord::Spec {
            signature: hashedrekord::Signature {
                content: BASE64.encode(&signature),
                public_key: hashedrekord::PublicKey::new(BASE64.encode(cert_pem(&cert_der)?)),
            },
            data: hashedrekord::Data {
                hash: hashedrekord::Hash { algorithm: hashedrekord::AlgorithmKind::sha256, value: hex::encode(digest) },
            },
        },
    };
    let logged = rt.block_on(create_log_entry(&rekor, entry)).map_err(|e| -> Box<dyn Error> {
        let what = format!("Rekor ({}/api/v1/log/entries)", rekor.base_path);
        match e {
            // The crate's message has only the status; the answer says why.
            sigstore::rekor::apis::Error::ResponseError(r) => format!("{what}: status {}: {}", r.status, r.content.trim()).into(),
            e => context(what)(e),
        }
    })?;
    let tlog_entry: TransparencyLogEntry =
        logged.try_into().map_err(|()| "Rekor's log entry does not convert to a bundle's TransparencyLogEntry")?;

    let bundle = Bundle {
        media_type: BUNDLE_MEDIA_TYPE.to_owned(),
        verification_material: Some(VerificationMaterial {
            timestamp_verification_data: None,
            tlog_entries: vec![tlog_entry],
            content: Some(verification_material::Content::X509CertificateChain(X509CertificateChain {
                certificates: vec![X509Certificate { raw_bytes: cert_der }],
            })),
        }),
        content: Some(bundle::Content::MessageSignature(MessageSignature {
            message_digest: Some(HashOutput { algorithm: HashAlgorithm::Sha2256.into(), digest: digest.to_vec() }),
            signature,
        })),
    };
    fs::write(&a.bundle, serde_json::to_vec(&bundle)?).map_err(|e| format!("writing {}: {e}", a.bundle.display()))?;
    Ok(())
}

/// The certificate over REST v2, as `SigningSession::materials` asks for it
/// (sigstore-0.15.0 src/bundle/sign.rs:90-122): a CSR with the token's email and
/// `BasicConstraints` (not a CA); then the artifact's digest signed as a prehash. Returns
/// the leaf certificate's DER and the DER signature.
async fn certify_v2(fulcio_url: url::Url, token: &IdentityToken, digest: &[u8; 32]) -> Result<(Vec<u8>, Vec<u8>)> {
    let mut rdns = RdnSequence::default();
    rdns.push(
        vec![AttributeTypeAndValue {
            oid: const_oid::db::rfc3280::EMAIL_ADDRESS,
            value: AttributeValue::new(x509_cert::der::Tag::Utf8String, token.unverified_claims().email.as_bytes())?,
        }]
        .try_into()?,
    );
    let subject = Name::from_der(&rdns.to_der()?)?;
    let key = p256::ecdsa::SigningKey::generate();
    let mut builder = RequestBuilder::new(subject)?;
    builder.add_extension(&BasicConstraints { ca: false, path_len_constraint: None })?;
    let csr = builder.build::<_, p256::ecdsa::DerSignature>(&key)?;

    // The token provider is not used by `request_cert_v2`, which sends `token`.
    let fulcio = FulcioClient::new(fulcio_url, TokenProvider::Oauth(OauthTokenProvider::default()));
    let certs = fulcio.request_cert_v2(csr, token).await.map_err(context("Fulcio (api/v2/signingCert)"))?;

    let signature: p256::ecdsa::Signature = key.sign_prehash(digest)?;
    Ok((certs.cert_der, signature.to_der().as_bytes().to_vec()))
}

/// The certificate over Fulcio's legacy v1 API, through sigstore-rs's
/// `FulcioClient::request_cert` (sigstore-0.15.0 src/fulcio/mod.rs:158-195): it makes the key,
/// signs the challenge (the token's email) with it, and sends both; the artifact is then signed
/// with the key it returns. Returns the leaf certificate's DER and the DER signature.
async fn certify_v1(fulcio_url: url::Url, jwt: &str, token: &IdentityToken, artifact: &[u8]) -> Result<(Vec<u8>, Vec<u8>)> {
    let id_token = openidconnect::core::CoreIdToken::from_str(jwt).map_err(|e| format!("the token as an OpenID Connect ID token: {e}"))?;
    let provider = TokenProvider::Static((id_token, token.unverified_claims().email.clone()));
    let (signer, chain) = FulcioClient::new(fulcio_url, provider)
        .request_cert(SigningScheme::ECDSA_P256_SHA256_ASN1)
        .await
        .map_err(context("Fulcio (api/v1/signingCert)"))?;
    // The answer's text whatever its status: sigstore-rs does not look at it.
    let chain = chain.to_string();
    let first = first_pem(&chain);
    let (label, leaf) = x509_cert::der::pem::decode_vec(first.as_bytes())
        .map_err(|e| format!("Fulcio's v1 answer is not a PEM certificate chain ({e}): {chain:.300}"))?;
    if label != "CERTIFICATE" {
        return Err(format!("Fulcio's v1 answer starts with a {label}, not a CERTIFICATE").into());
    }
    x509_cert::Certificate::from_der(&leaf)?;
    let signature = signer.sign(artifact)?;
    Ok((leaf, signature))
}

/// The first PEM block of a chain.
fn first_pem(chain: &str) -> String {
    const END: &str = "-----END CERTIFICATE-----";
    match chain.find(END) {
        Some(i) => format!("{}\n", chain[..i + END.len()].trim_start()),
        None => chain.to_owned(),
    }
}

/// PEM of a certificate as sigstore-rs writes it into a hashedrekord (`der_to_pem`, LF).
fn cert_pem(der: &[u8]) -> Result<String> {
    Ok(x509_cert::der::pem::encode_string("CERTIFICATE", x509_cert::der::pem::LineEnding::LF, der)?)
}
