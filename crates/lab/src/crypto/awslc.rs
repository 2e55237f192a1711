//! The aws-lc-rs backend (AWS-LC), as signet uses it: `ParsedPublicKey` for verification (the
//! key is parsed once), the key-pair types for signing, `LessSafeKey` for AES-GCM with
//! caller-managed nonces (the key schedule is built once in `LessSafeKey::new`), and
//! `hmac::Key` (the padded key states are computed once).

use aws_lc_rs::aead::{self, Aad, LessSafeKey, Nonce, UnboundKey};
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{self, EcdsaKeyPair, Ed25519KeyPair, KeyPair, ParsedPublicKey, RsaKeyPair};
use aws_lc_rs::{digest, hmac};

use super::backend::{nonce, AeadAlg, AeadSession, Backend, BackendError, Digest, Keys, Mac, SigAlg, Signature};

pub struct AwsLc;

enum Private {
    Rsa(RsaKeyPair),
    Ecdsa(EcdsaKeyPair),
    Ed25519(Ed25519KeyPair),
}

struct Sig {
    private: Private,
    public: ParsedPublicKey,
    rng: SystemRandom,
}

impl Signature for Sig {
    fn sign(&self, msg: &[u8], out: &mut [u8]) -> usize {
        let copy = |s: &[u8], out: &mut [u8]| {
            out[..s.len()].copy_from_slice(s);
            s.len()
        };
        match &self.private {
            Private::Rsa(k) => {
                let n = k.public_modulus_len();
                k.sign(&signature::RSA_PKCS1_SHA256, &self.rng, msg, &mut out[..n]).expect("aws-lc RSA sign");
                n
            }
            Private::Ecdsa(k) => copy(k.sign(&self.rng, msg).expect("aws-lc ECDSA sign").as_ref(), out),
            Private::Ed25519(k) => copy(k.sign(msg).as_ref(), out),
        }
    }

    fn verify(&self, msg: &[u8], sig: &[u8]) -> bool {
        self.public.verify_sig(msg, sig).is_ok()
    }
}

struct Sha256;

impl Digest for Sha256 {
    fn sha256(&self, data: &[u8]) -> [u8; 32] {
        digest::digest(&digest::SHA256, data).as_ref().try_into().expect("32-byte digest")
    }
}

struct Hmac(hmac::Key);

impl Mac for Hmac {
    fn hmac_sha256(&self, data: &[u8]) -> [u8; 32] {
        hmac::sign(&self.0, data).as_ref().try_into().expect("32-byte tag")
    }
}

struct Session {
    key: LessSafeKey,
    iv: [u8; 12],
    seq: u64,
}

impl AeadSession for Session {
    fn seal(&mut self, aad: &[u8], record: &mut [u8]) -> [u8; 16] {
        let n = Nonce::assume_unique_for_key(nonce(&self.iv, self.seq));
        self.seq += 1;
        let tag = self.key.seal_in_place_separate_tag(n, Aad::from(aad), record).expect("aws-lc AES-GCM seal");
        tag.as_ref().try_into().expect("16-byte tag")
    }
}

impl Backend for AwsLc {
    fn name(&self) -> &'static str {
        "aws-lc"
    }

    fn signature(&self, alg: SigAlg, keys: &Keys) -> Result<Box<dyn Signature>, BackendError> {
        let der = keys.pkcs8(alg);
        let rejected = |source| BackendError::AwsLcKey { alg, source };
        let (private, public) = match alg {
            SigAlg::Rsa2048Sha256 => {
                let k = RsaKeyPair::from_pkcs8(der).map_err(rejected)?;
                let p = ParsedPublicKey::new(&signature::RSA_PKCS1_2048_8192_SHA256, k.public_key().as_ref());
                (Private::Rsa(k), p)
            }
            SigAlg::EcdsaP256Sha256 | SigAlg::EcdsaP384Sha384 => {
                let (signing, verifying) = if alg == SigAlg::EcdsaP256Sha256 {
                    (&signature::ECDSA_P256_SHA256_ASN1_SIGNING, &signature::ECDSA_P256_SHA256_ASN1)
                } else {
                    (&signature::ECDSA_P384_SHA384_ASN1_SIGNING, &signature::ECDSA_P384_SHA384_ASN1)
                };
                let k = EcdsaKeyPair::from_pkcs8(signing, der).map_err(rejected)?;
                let p = ParsedPublicKey::new(verifying, k.public_key().as_ref());
                (Private::Ecdsa(k), p)
            }
            SigAlg::Ed25519 => {
                // OpenSSL writes PKCS#8 v1 (no public key inside); aws-lc-rs derives it.
                let k = Ed25519KeyPair::from_pkcs8_maybe_unchecked(der).map_err(rejected)?;
                let p = ParsedPublicKey::new(&signature::ED25519, k.public_key().as_ref());
                (Private::Ed25519(k), p)
            }
        };
        let public = public.map_err(rejected)?;
        Ok(Box::new(Sig { private, public, rng: SystemRandom::new() }))
    }

    fn digest(&self) -> Box<dyn Digest> {
        Box::new(Sha256)
    }

    fn mac(&self, key: &[u8]) -> Result<Box<dyn Mac>, BackendError> {
        Ok(Box::new(Hmac(hmac::Key::new(hmac::HMAC_SHA256, key))))
    }

    fn aead_session(&self, alg: AeadAlg, key: &[u8], iv: [u8; 12]) -> Result<Box<dyn AeadSession>, BackendError> {
        let algorithm = match alg {
            AeadAlg::Aes128Gcm => &aead::AES_128_GCM,
            AeadAlg::Aes256Gcm => &aead::AES_256_GCM,
        };
        // aws-lc-rs refuses a key only for its length (`Unspecified` says no more).
        let key = UnboundKey::new(algorithm, key).map_err(|_| BackendError::AeadKeyLength { backend: "aws-lc", alg, len: key.len() })?;
        Ok(Box::new(Session { key: LessSafeKey::new(key), iv, seq: 0 }))
    }
}
