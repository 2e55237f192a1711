//! The OpenSSL backend: the `openssl` crate over the system's libssl 3, used the way its API is
//! meant to be used.
//!
//! - Signatures: `Signer`/`Verifier` (one `EVP_DigestSign`/`EVP_DigestVerify` context per
//!   operation, as the crate and Python's `cryptography` both do) over keys parsed once.
//! - SHA-256: the one-shot `SHA256()`, the same call aws-lc-rs makes into AWS-LC.
//! - AES-GCM: one `EVP_CIPHER_CTX` per session, keyed once; each record only sets its IV
//!   (`EVP_EncryptInit_ex` with no cipher and no key keeps the key schedule), as TLS stacks do.
//! - HMAC: the crate exposes HMAC only through `Signer` over an HMAC `PKey`, so each operation
//!   builds its context from the key; aws-lc-rs reuses precomputed pad states. The HMAC rows
//!   therefore compare the two APIs more than the two HMAC implementations.

use ::openssl::cipher::Cipher;
use ::openssl::cipher_ctx::CipherCtx;
use ::openssl::hash::MessageDigest;
use ::openssl::pkey::{PKey, Private, Public};
use ::openssl::sha;
use ::openssl::sign::{Signer, Verifier};

use super::backend::{nonce, AeadAlg, AeadSession, Backend, BackendError, Digest, Keys, Mac, SigAlg, Signature};

pub struct OpenSsl;

struct Sig {
    private: PKey<Private>,
    public: PKey<Public>,
    /// None for Ed25519, which hashes inside the scheme.
    md: Option<MessageDigest>,
}

impl Signature for Sig {
    fn sign(&self, msg: &[u8], out: &mut [u8]) -> usize {
        let mut signer = match self.md {
            Some(md) => Signer::new(md, &self.private),
            None => Signer::new_without_digest(&self.private),
        }
        .expect("OpenSSL signer");
        signer.sign_oneshot(out, msg).expect("OpenSSL sign")
    }

    fn verify(&self, msg: &[u8], sig: &[u8]) -> bool {
        let verifier = match self.md {
            Some(md) => Verifier::new(md, &self.public),
            None => Verifier::new_without_digest(&self.public),
        };
        verifier.and_then(|mut v| v.verify_oneshot(sig, msg)).unwrap_or(false)
    }
}

struct Sha256;

impl Digest for Sha256 {
    fn sha256(&self, data: &[u8]) -> [u8; 32] {
        sha::sha256(data)
    }
}

struct Hmac(PKey<Private>);

impl Mac for Hmac {
    fn hmac_sha256(&self, data: &[u8]) -> [u8; 32] {
        let mut out = [0u8; 32];
        let mut signer = Signer::new(MessageDigest::sha256(), &self.0).expect("OpenSSL HMAC");
        signer.update(data).expect("OpenSSL HMAC update");
        signer.sign(&mut out).expect("OpenSSL HMAC final");
        out
    }
}

struct Session {
    ctx: CipherCtx,
    iv: [u8; 12],
    seq: u64,
}

impl AeadSession for Session {
    fn seal(&mut self, aad: &[u8], record: &mut [u8]) -> [u8; 16] {
        let n = nonce(&self.iv, self.seq);
        self.seq += 1;
        let mut tag = [0u8; 16];
        let ctx = &mut self.ctx;
        ctx.encrypt_init(None, None, Some(&n)).expect("OpenSSL GCM IV");
        ctx.cipher_update(aad, None).expect("OpenSSL GCM AAD");
        let len = record.len();
        let written = ctx.cipher_update_inplace(record, len).expect("OpenSSL GCM encrypt");
        debug_assert_eq!(written, len);
        ctx.cipher_final(&mut []).expect("OpenSSL GCM final");
        ctx.tag(&mut tag).expect("OpenSSL GCM tag");
        tag
    }
}

impl Backend for OpenSsl {
    fn name(&self) -> &'static str {
        "openssl"
    }

    fn signature(&self, alg: SigAlg, keys: &Keys) -> Result<Box<dyn Signature>, BackendError> {
        let err = |source| BackendError::OpenSslKey { alg, source };
        let private = PKey::private_key_from_pkcs8(keys.pkcs8(alg)).map_err(err)?;
        // The verifier holds only the public key, parsed from its SubjectPublicKeyInfo once.
        let public = PKey::public_key_from_der(&private.public_key_to_der().map_err(err)?).map_err(err)?;
        let md = match alg {
            SigAlg::Rsa2048Sha256 | SigAlg::EcdsaP256Sha256 => Some(MessageDigest::sha256()),
            SigAlg::EcdsaP384Sha384 => Some(MessageDigest::sha384()),
            SigAlg::Ed25519 => None,
        };
        Ok(Box::new(Sig { private, public, md }))
    }

    fn digest(&self) -> Box<dyn Digest> {
        Box::new(Sha256)
    }

    fn mac(&self, key: &[u8]) -> Result<Box<dyn Mac>, BackendError> {
        let key = PKey::hmac(key).map_err(BackendError::OpenSslHmacKey)?;
        Ok(Box::new(Hmac(key)))
    }

    fn aead_session(&self, alg: AeadAlg, key: &[u8], iv: [u8; 12]) -> Result<Box<dyn AeadSession>, BackendError> {
        if key.len() != alg.key_len() {
            return Err(BackendError::AeadKeyLength { backend: "openssl", alg, len: key.len() });
        }
        let cipher = match alg {
            AeadAlg::Aes128Gcm => Cipher::aes_128_gcm(),
            AeadAlg::Aes256Gcm => Cipher::aes_256_gcm(),
        };
        let err = |source| BackendError::OpenSslSession { alg, source };
        let mut ctx = CipherCtx::new().map_err(err)?;
        // Cipher and key once: this is where the key schedule is built.
        ctx.encrypt_init(Some(cipher), Some(key), None).map_err(err)?;
        Ok(Box::new(Session { ctx, iv, seq: 0 }))
    }
}
