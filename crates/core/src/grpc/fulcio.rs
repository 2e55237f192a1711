//! The messages of Fulcio's gRPC CA service (`dev.sigstore.fulcio.v2.CA`, fulcio.proto), the
//! same ones its REST API writes as protojson. Field numbers are the proto's; a test below
//! checks them against encodings written out by hand from it.

/// The service's path prefix: a method is `POST {SERVICE}/{Method}`.
pub const SERVICE: &str = "/dev.sigstore.fulcio.v2.CA";
pub const CREATE_SIGNING_CERTIFICATE: &str = "/dev.sigstore.fulcio.v2.CA/CreateSigningCertificate";
pub const GET_TRUST_BUNDLE: &str = "/dev.sigstore.fulcio.v2.CA/GetTrustBundle";
pub const GET_CONFIGURATION: &str = "/dev.sigstore.fulcio.v2.CA/GetConfiguration";

#[derive(Clone, PartialEq, prost::Message)]
pub struct CreateSigningCertificateRequest {
    #[prost(message, optional, tag = "1")]
    pub credentials: Option<Credentials>,
    #[prost(oneof = "Key", tags = "2, 3")]
    pub key: Option<Key>,
}

/// How the key to certify is given: a public key with a proof of possession, or a CSR (PEM).
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum Key {
    #[prost(message, tag = "2")]
    PublicKeyRequest(PublicKeyRequest),
    #[prost(bytes = "vec", tag = "3")]
    CertificateSigningRequest(Vec<u8>),
}

/// The proto's `oneof credentials` has one member; on the wire that is an optional field.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Credentials {
    #[prost(string, optional, tag = "1")]
    pub oidc_identity_token: Option<String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct PublicKeyRequest {
    #[prost(message, optional, tag = "1")]
    pub public_key: Option<PublicKey>,
    #[prost(bytes = "vec", tag = "2")]
    pub proof_of_possession: Vec<u8>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct PublicKey {
    /// `PublicKeyAlgorithm`: informational, the PEM says what the key is.
    #[prost(int32, tag = "1")]
    pub algorithm: i32,
    /// A PEM public key.
    #[prost(string, tag = "2")]
    pub content: String,
}

/// `PublicKeyAlgorithm.ECDSA`.
pub const ALGORITHM_ECDSA: i32 = 2;

#[derive(Clone, PartialEq, prost::Message)]
pub struct SigningCertificate {
    #[prost(oneof = "Certificate", tags = "1, 2")]
    pub certificate: Option<Certificate>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
pub enum Certificate {
    /// A chain and a separate SCT: what a Fulcio without an embedded-SCT profile answers.
    /// signet always embeds; clients read both.
    #[prost(message, tag = "1")]
    SignedCertificateDetachedSct(SigningCertificateDetachedSct),
    #[prost(message, tag = "2")]
    SignedCertificateEmbeddedSct(SigningCertificateEmbeddedSct),
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct SigningCertificateDetachedSct {
    #[prost(message, optional, tag = "1")]
    pub chain: Option<CertificateChain>,
    #[prost(bytes = "vec", tag = "2")]
    pub signed_certificate_timestamp: Vec<u8>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct SigningCertificateEmbeddedSct {
    #[prost(message, optional, tag = "1")]
    pub chain: Option<CertificateChain>,
}

/// PEM certificates, leaf (if any) first, root last.
#[derive(Clone, PartialEq, prost::Message)]
pub struct CertificateChain {
    #[prost(string, repeated, tag = "1")]
    pub certificates: Vec<String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct GetTrustBundleRequest {}

#[derive(Clone, PartialEq, prost::Message)]
pub struct TrustBundle {
    #[prost(message, repeated, tag = "1")]
    pub chains: Vec<CertificateChain>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct GetConfigurationRequest {}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Configuration {
    #[prost(message, repeated, tag = "1")]
    pub issuers: Vec<OidcIssuer>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct OidcIssuer {
    #[prost(oneof = "Issuer", tags = "1, 2")]
    pub issuer: Option<Issuer>,
    #[prost(string, tag = "3")]
    pub audience: String,
    #[prost(string, tag = "4")]
    pub challenge_claim: String,
    #[prost(string, tag = "5")]
    pub spiffe_trust_domain: String,
    #[prost(string, tag = "6")]
    pub issuer_type: String,
    #[prost(string, tag = "7")]
    pub subject_domain: String,
    #[prost(bool, tag = "8")]
    pub skip_email_verification: bool,
}

#[derive(Clone, PartialEq, prost::Oneof)]
pub enum Issuer {
    #[prost(string, tag = "1")]
    IssuerUrl(String),
    #[prost(string, tag = "2")]
    WildcardIssuerUrl(String),
}

impl SigningCertificate {
    /// The answer with `chain` (PEM, leaf first), its SCT embedded in the leaf.
    pub fn embedded(chain: Vec<String>) -> SigningCertificate {
        let chain = Some(CertificateChain { certificates: chain });
        SigningCertificate { certificate: Some(Certificate::SignedCertificateEmbeddedSct(SigningCertificateEmbeddedSct { chain })) }
    }

    /// The PEM chain, whichever form the answer took.
    pub fn chain(&self) -> &[String] {
        let chain = match &self.certificate {
            Some(Certificate::SignedCertificateEmbeddedSct(c)) => c.chain.as_ref(),
            Some(Certificate::SignedCertificateDetachedSct(c)) => c.chain.as_ref(),
            None => None,
        };
        chain.map_or(&[], |c| &c.certificates)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    // Each expected encoding is written from fulcio.proto's field numbers (tag byte =
    // number << 3 | wire type; 2 = length-delimited, 0 = varint), not from these types.

    #[test]
    fn a_public_key_request_has_fulcio_protos_field_numbers() {
        let request = CreateSigningCertificateRequest {
            credentials: Some(Credentials { oidc_identity_token: Some("t".into()) }),
            key: Some(Key::PublicKeyRequest(PublicKeyRequest {
                public_key: Some(PublicKey { algorithm: ALGORITHM_ECDSA, content: "k".into() }),
                proof_of_possession: vec![0xaa],
            })),
        };
        let expected = [
            0x0a, 3, 0x0a, 1, b't', // credentials (1) { oidc_identity_token (1) }
            0x12, 10, // public_key_request (2)
            0x0a, 5, 0x08, 2, 0x12, 1, b'k', // public_key (1) { algorithm (1) = ECDSA, content (2) }
            0x12, 1, 0xaa, // proof_of_possession (2)
        ];
        assert_eq!(request.encode_to_vec(), expected);
        assert_eq!(CreateSigningCertificateRequest::decode(&expected[..]).unwrap(), request);
    }

    #[test]
    fn a_csr_request_has_fulcio_protos_field_numbers() {
        let request = CreateSigningCertificateRequest { credentials: None, key: Some(Key::CertificateSigningRequest(b"pem".to_vec())) };
        assert_eq!(request.encode_to_vec(), [0x1a, 3, b'p', b'e', b'm']);
    }

    #[test]
    fn answers_have_fulcio_protos_field_numbers() {
        let answer = SigningCertificate::embedded(vec!["a".into()]);
        // signed_certificate_embedded_sct (2) { chain (1) { certificates (1) } }
        assert_eq!(answer.encode_to_vec(), [0x12, 5, 0x0a, 3, 0x0a, 1, b'a']);
        assert_eq!(answer.chain(), ["a"]);
        let detached = SigningCertificate::decode(&[0x0a, 5, 0x0a, 3, 0x0a, 1, b'b'][..]).unwrap();
        assert_eq!(detached.chain(), ["b"], "a detached-SCT answer (1) is read too");

        let bundle = TrustBundle { chains: vec![CertificateChain { certificates: vec!["r".into()] }] };
        assert_eq!(bundle.encode_to_vec(), [0x0a, 3, 0x0a, 1, b'r']);

        let issuer = OidcIssuer {
            issuer: Some(Issuer::WildcardIssuerUrl("w".into())),
            audience: "a".into(),
            challenge_claim: "c".into(),
            spiffe_trust_domain: "s".into(),
            issuer_type: "t".into(),
            subject_domain: "d".into(),
            skip_email_verification: true,
        };
        let expected = [0x12, 1, b'w', 0x1a, 1, b'a', 0x22, 1, b'c', 0x2a, 1, b's', 0x32, 1, b't', 0x3a, 1, b'd', 0x40, 1];
        assert_eq!(issuer.encode_to_vec(), expected);
        let config = Configuration { issuers: vec![OidcIssuer { issuer: Some(Issuer::IssuerUrl("u".into())), ..Default::default() }] };
        assert_eq!(config.encode_to_vec(), [0x0a, 3, 0x0a, 1, b'u']);
    }

    #[test]
    fn unknown_fields_are_skipped_as_protobuf_says() {
        // A newer client's field 9 (varint) beside the token.
        let bytes = [0x0a, 3, 0x0a, 1, b't', 0x48, 1];
        let request = CreateSigningCertificateRequest::decode(&bytes[..]).unwrap();
        assert_eq!(request.credentials.unwrap().oidc_identity_token.as_deref(), Some("t"));
        assert!(request.key.is_none());
    }
}
