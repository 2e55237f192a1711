//! What a PKCS#11 module or token failed with: [`Pkcs11Error`], and the tokens a module
//! has when none matches ([`PresentToken`]). A leaf: the signer raises these, and
//! [`crate::HsmError`] wraps them, without either reaching back.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use cryptoki::error::Error as CkError;
use cryptoki::object::KeyType;
use der::asn1::ObjectIdentifier;

use crate::Algorithm;

/// What a PKCS#11 module or token failed with. The module's own errors are kept as
/// [`cryptoki`]'s, return value and function included.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Pkcs11Error {
    #[error("no PKCS#11 module: give module-path in the URI, pkcs11_module in [keys], or SIGNET_KEYS_PKCS11_MODULE")]
    NoModule,
    #[error("cannot load the PKCS#11 module {}: {source}", path.display())]
    Load { path: PathBuf, source: CkError },
    #[error("the PKCS#11 module {} does not initialise: {source}", path.display())]
    Initialise { path: PathBuf, source: CkError },
    /// A reset found the module unable to start again (SoftHSM's, while its token directory
    /// is gone); shared by every signer until a reset succeeds.
    #[error("the PKCS#11 module {} does not initialise again: {source}", path.display())]
    Reinitialise { path: PathBuf, source: Arc<CkError> },
    #[error("no PIN: give pkcs11_pin in [keys], SIGNET_KEYS_PKCS11_PIN, or pin-source in the URI")]
    NoPin,
    #[error("reading the PIN from {}: {source}", path.display())]
    PinFile { path: PathBuf, source: std::io::Error },
    #[error("listing the slots of {}: {source}", path.display())]
    Slots { path: PathBuf, source: CkError },
    #[error("no token matches (tokens present: {})", present_list(present))]
    NoToken { present: Vec<PresentToken> },
    #[error("opening a session on the token: {0}")]
    OpenSession(#[source] CkError),
    #[error("the PIN is wrong (CKR_PIN_INCORRECT)")]
    PinIncorrect,
    #[error("the token's user PIN is locked (CKR_PIN_LOCKED)")]
    PinLocked,
    #[error("logging in to the token: {0}")]
    Login(#[source] CkError),
    #[error("all {sessions} sessions stayed busy for {waited:?}")]
    Busy { sessions: usize, waited: Duration },
    /// A lock held by a thread that panicked: `what` names it.
    #[error("the {what} is poisoned")]
    Poisoned { what: &'static str },
    #[error("a key to make needs object= (its label)")]
    NoLabel,
    #[error("looking the key up: {0}")]
    Find(#[source] CkError),
    #[error("the token holds no {what} with this label/id (make one with `signet init --keys`)")]
    NoObject { what: &'static str },
    #[error("the token holds {count} {what}s with this label/id; name one by id=")]
    ManyObjects { what: &'static str, count: usize },
    #[error("the token holds only one half of this key pair; remove it or name another object")]
    HalfKeyPair,
    #[error("making the key pair: {0}")]
    Generate(#[source] CkError),
    #[error("reading the public key: {0}")]
    ReadPublicKey(#[source] CkError),
    #[error("the public key has no CKA_EC_PARAMS (signet signs with EC and Ed25519 keys only)")]
    NoEcParams,
    #[error("the public key has no CKA_EC_POINT")]
    NoEcPoint,
    #[error("the Edwards key is not on Ed25519")]
    NotEd25519,
    #[error("the key is not on P-256 or P-384 (its curve: {})", .0.map_or("unknown".into(), |c| c.to_string()))]
    Curve(Option<ObjectIdentifier>),
    #[error("the key is of type {}; signet signs with EC and Ed25519 keys", .0.map_or("unknown".into(), |k| k.to_string()))]
    KeyType(Option<KeyType>),
    #[error("the public key is not a 32-byte Ed25519 key")]
    Ed25519Length,
    #[error("the public key's point is not an uncompressed {0} point")]
    Point(Algorithm),
    #[error("signing: {0}")]
    Sign(#[source] CkError),
    #[error(transparent)]
    Der(#[from] der::Error),
}

/// A token a module has, when none matches the URI: what it is told by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PresentToken {
    pub label: String,
    pub serial: String,
    pub slot: u64,
}

impl std::fmt::Display for PresentToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?} (serial {}, slot {})", self.label, self.serial, self.slot)
    }
}

fn present_list(present: &[PresentToken]) -> String {
    match present.is_empty() {
        true => "none".to_string(),
        false => present.iter().map(PresentToken::to_string).collect::<Vec<_>>().join(", "),
    }
}
