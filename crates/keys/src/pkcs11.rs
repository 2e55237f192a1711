//! Keys that never leave a PKCS#11 token (an HSM, SoftHSM2, a smart card): ECDSA P-256 and
//! P-384, and Ed25519.
//!
//! Each key keeps a small pool of logged-in sessions: a PKCS#11 session does one operation
//! at a time, and tokens allow few of them, so signers wait for a free one rather than open
//! one per signature. For ECDSA the digest is computed here and only it crosses to the token
//! (`CKM_ECDSA`), whatever the message's length; Ed25519 (`CKM_EDDSA`) signs the message.
//!
//! A token can go away (unplugged, its daemon restarted) and come back: a signature that
//! fails drops its session, and the next one opens a fresh session, logs in and looks the
//! object up again. Until then signing fails with [`KeyError::Unavailable`], which callers
//! answer with 503.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, OnceLock, RwLock};
use std::time::{Duration, Instant};

use cryptoki::context::{CInitializeArgs, CInitializeFlags, Pkcs11};
use cryptoki::error::{Error as CkError, RvError};
use cryptoki::mechanism::eddsa::{EddsaParams, EddsaSignatureScheme};
use cryptoki::mechanism::Mechanism;
use cryptoki::object::{Attribute, AttributeType, KeyType, ObjectClass, ObjectHandle};
use cryptoki::session::{Session, UserType};
use cryptoki::slot::Slot;
use cryptoki::types::AuthPin;
use der::asn1::{BitString, ObjectIdentifier, OctetString, UintRef};
use der::{Decode, Encode, Sequence};
use spki::{AlgorithmIdentifierOwned, SubjectPublicKeyInfoOwned};

use signet_core::hash;

use crate::algorithm::{ID_EC_PUBLIC_KEY, ID_ED25519};
use crate::source::{Pkcs11Settings, Pkcs11Uri};
use crate::{Algorithm, HsmError, KeyError};

mod error;
pub use error::{Pkcs11Error, PresentToken};

/// Sessions per key unless configured: enough for both cores to sign at once, and a
/// checkpoint beside them.
const DEFAULT_SESSIONS: usize = 4;
/// How long a signer waits for a free session before the request is answered 503.
const SESSION_WAIT: Duration = Duration::from_secs(5);

/// A private key on a token.
pub struct Key {
    uri: Pkcs11Uri,
    module: Arc<Module>,
    pin: AuthPin,
    sessions: Pool,
}

/// A loaded PKCS#11 module, shared by every key that uses it. Signing holds `generation`
/// for reading; a reset (C_Finalize, C_Initialize: how a module sees a token that went away
/// come back) holds it for writing, and bumps it, so that no call runs across a reset and
/// sessions opened before one are forgotten, never closed (their handles may name new ones).
struct Module {
    path: PathBuf,
    context: Pkcs11,
    generation: RwLock<u64>,
    last_reset: Mutex<Option<Instant>>,
    /// Why the last reset's C_Initialize failed (SoftHSM's fails while its token directory
    /// is gone), until one succeeds: what a signer is told instead of "not initialised".
    uninitialised: Mutex<Option<Arc<CkError>>>,
}

/// A module is reset at most this often, however many keys and signers fail at once.
const RESET_AT_MOST_EVERY: Duration = Duration::from_secs(1);

impl Module {
    fn reset(&self, seen: u64) {
        let Ok(mut generation) = self.generation.write() else { return };
        if *generation != seen {
            return; // someone else reset it since this signer failed
        }
        let Ok(mut last) = self.last_reset.lock() else { return };
        if last.is_some_and(|t| t.elapsed() < RESET_AT_MOST_EVERY) {
            return;
        }
        *last = Some(Instant::now());
        let _ = self.context.clone().finalize();
        let outcome = self.context.initialize(CInitializeArgs::new(CInitializeFlags::OS_LOCKING_OK));
        if let Ok(mut why) = self.uninitialised.lock() {
            *why = outcome.err().map(Arc::new);
        }
        *generation += 1;
    }
}

struct Pool {
    state: Mutex<PoolState>,
    freed: Condvar,
    max: usize,
}

#[derive(Default)]
struct PoolState {
    /// Logged-in sessions with the key's handle, and the module generation they were opened in.
    idle: Vec<(Session, ObjectHandle, u64)>,
    open: usize,
}

/// One module per path per process: `C_Initialize` runs once, and every key shares it.
fn module(path: &Path) -> Result<Arc<Module>, Pkcs11Error> {
    static MODULES: OnceLock<Mutex<HashMap<PathBuf, Arc<Module>>>> = OnceLock::new();
    let mut modules = MODULES.get_or_init(Default::default).lock().map_err(|_| Pkcs11Error::Poisoned { what: "PKCS#11 module table" })?;
    if let Some(m) = modules.get(path) {
        return Ok(m.clone());
    }
    let context = Pkcs11::new(path).map_err(|source| Pkcs11Error::Load { path: path.to_path_buf(), source })?;
    match context.initialize(CInitializeArgs::new(CInitializeFlags::OS_LOCKING_OK)) {
        Ok(()) | Err(CkError::Pkcs11(RvError::CryptokiAlreadyInitialized, _)) => {}
        Err(source) => return Err(Pkcs11Error::Initialise { path: path.to_path_buf(), source }),
    }
    let m = Arc::new(Module {
        path: path.to_path_buf(),
        context,
        generation: RwLock::new(0),
        last_reset: Mutex::new(None),
        uninitialised: Mutex::new(None),
    });
    modules.insert(path.to_path_buf(), m.clone());
    Ok(m)
}

/// The module and PIN `uri` names, with `settings` filling what it leaves out.
fn locate(uri: &Pkcs11Uri, settings: &Pkcs11Settings) -> Result<(Arc<Module>, AuthPin), Pkcs11Error> {
    let path = uri.module_path.clone().or_else(|| settings.module.clone()).ok_or(Pkcs11Error::NoModule)?;
    let module = module(&path)?;
    let pin = match (&uri.pin_value, &uri.pin_source, &settings.pin) {
        (Some(p), _, _) => p.clone(),
        (None, Some(file), _) => std::fs::read_to_string(file)
            .map_err(|source| Pkcs11Error::PinFile { path: file.clone(), source })?
            .trim_end_matches(['\r', '\n'])
            .to_string(),
        (None, None, Some(p)) => p.clone(),
        (None, None, None) => return Err(Pkcs11Error::NoPin),
    };
    Ok((module, AuthPin::from(pin)))
}

/// The slot holding `uri`'s token, looked up on every login: a slot's number may change
/// when its token comes back.
fn slot(module: &Module, uri: &Pkcs11Uri) -> Result<Slot, Pkcs11Error> {
    if let Some(source) = module.uninitialised.lock().ok().and_then(|w| w.clone()) {
        return Err(Pkcs11Error::Reinitialise { path: module.path.clone(), source });
    }
    let slots = module.context.get_slots_with_token().map_err(|source| Pkcs11Error::Slots { path: module.path.clone(), source })?;
    let mut seen = Vec::new();
    for slot in slots {
        let Ok(info) = module.context.get_token_info(slot) else { continue };
        let (label, serial) = (info.label().trim_end().to_string(), info.serial_number().trim_end().to_string());
        let wanted = uri.token.as_ref().is_none_or(|t| *t == label)
            && uri.serial.as_ref().is_none_or(|s| *s == serial)
            && uri.slot_id.is_none_or(|id| id == slot.id());
        if wanted {
            return Ok(slot);
        }
        seen.push(PresentToken { label, serial, slot: slot.id() });
    }
    Err(Pkcs11Error::NoToken { present: seen })
}

impl Key {
    /// The most sessions this key signs through at once.
    pub fn sessions(&self) -> usize {
        self.sessions.max
    }

    fn new(uri: &Pkcs11Uri, settings: &Pkcs11Settings, max: usize) -> Result<Key, Pkcs11Error> {
        let (module, pin) = locate(uri, settings)?;
        Ok(Key { uri: uri.clone(), module, pin, sessions: Pool { state: Mutex::default(), freed: Condvar::new(), max } })
    }

    /// Opens the key pair `uri` names. Returns it with its algorithm and SubjectPublicKeyInfo DER.
    pub fn open(uri: &Pkcs11Uri, settings: &Pkcs11Settings) -> Result<(Key, Algorithm, Vec<u8>), KeyError> {
        let fail = |why: Pkcs11Error| KeyError::Hsm { key: uri.to_string(), why: HsmError::Pkcs11(why) };
        let max = if settings.sessions == 0 { DEFAULT_SESSIONS } else { settings.sessions };
        let key = Key::new(uri, settings, max).map_err(fail)?;
        let generation = key.module.generation.read().map(|g| *g).map_err(|_| fail(Pkcs11Error::Poisoned { what: "module lock" }))?;
        let session = key.login().map_err(fail)?;
        let found = public_key(&session, uri).and_then(|spki| find(&session, uri, ObjectClass::PRIVATE_KEY).map(|h| (spki, h)));
        let ((algorithm, spki), handle) = match found {
            Ok(f) => f,
            Err(e) => {
                let _ = session.close();
                return Err(fail(e));
            }
        };
        if let Ok(mut pool) = key.sessions.state.lock() {
            pool.open += 1;
            pool.idle.push((session, handle, generation));
        }
        Ok((key, algorithm, spki))
    }

    /// Makes an `algorithm` key pair labelled as `uri`'s object on its token, its private
    /// half sensitive and never extractable, unless the token holds it already. Returns
    /// whether it made one.
    pub fn ensure(uri: &Pkcs11Uri, settings: &Pkcs11Settings, algorithm: Algorithm) -> Result<bool, KeyError> {
        let fail = |why: Pkcs11Error| KeyError::Hsm { key: uri.to_string(), why: HsmError::Pkcs11(why) };
        let label = uri.object.clone().ok_or_else(|| fail(Pkcs11Error::NoLabel))?;
        let key = Key::new(uri, settings, 1).map_err(fail)?;
        let session = key.login().map_err(fail)?;
        let made = make(&session, uri, &label, algorithm);
        let _ = session.close();
        made.map_err(fail)
    }

    /// A signature over `message` by this `algorithm` key, made on the token: ASN.1 DER for
    /// ECDSA, raw for Ed25519.
    pub fn sign(&self, algorithm: Algorithm, message: &[u8]) -> Result<Vec<u8>, KeyError> {
        let input = algorithm.to_be_signed(message);
        let eddsa = EddsaParams::new(EddsaSignatureScheme::Pure);
        let mechanism = match algorithm {
            Algorithm::Ed25519 => Mechanism::Eddsa(eddsa),
            _ => Mechanism::Ecdsa,
        };
        let unavailable = |why: Pkcs11Error| KeyError::Unavailable { key: self.uri.to_string(), why: HsmError::Pkcs11(why) };
        // A failure is retried on a fresh session (one can go stale while the token is fine),
        // then once more after resetting the module (the token went away and came back).
        let mut attempt = 0;
        loop {
            let generation = self.module.generation.read().map_err(|_| unavailable(Pkcs11Error::Poisoned { what: "module lock" }))?;
            let outcome = self.take(*generation).and_then(|(session, handle)| match session.sign(&mechanism, handle, &input) {
                Ok(raw) => {
                    self.give_back(session, handle, *generation);
                    Ok(raw)
                }
                Err(e) => {
                    let _ = session.close();
                    self.forget_one();
                    Err(Pkcs11Error::Sign(e))
                }
            });
            match outcome {
                Ok(raw) if algorithm == Algorithm::Ed25519 => return if raw.len() == 64 { Ok(raw) } else { Err(KeyError::Sign) },
                Ok(raw) => return der_signature(&raw, algorithm.scalar_len()).ok_or(KeyError::Sign),
                Err(e) if attempt == 2 => return Err(unavailable(e)),
                Err(_) => {}
            }
            let seen = *generation;
            drop(generation);
            if attempt == 1 {
                self.module.reset(seen);
            }
            attempt += 1;
        }
    }

    /// A logged-in session of this generation: idle, newly opened under the cap, or the
    /// next one freed.
    fn take(&self, generation: u64) -> Result<(Session, ObjectHandle), Pkcs11Error> {
        let pool = &self.sessions;
        const POISONED: Pkcs11Error = Pkcs11Error::Poisoned { what: "session pool" };
        let mut state = pool.state.lock().map_err(|_| POISONED)?;
        let deadline = Instant::now() + SESSION_WAIT;
        loop {
            // Opened before a reset: their handles are void (and may name new sessions).
            let before = state.idle.len();
            state.idle.retain(|(_, _, g)| *g == generation);
            state.open = state.open.saturating_sub(before - state.idle.len());
            if let Some((session, handle, _)) = state.idle.pop() {
                return Ok((session, handle));
            }
            if state.open < pool.max {
                state.open += 1;
                drop(state);
                let opened = self.login().and_then(|s| match find(&s, &self.uri, ObjectClass::PRIVATE_KEY) {
                    Ok(h) => Ok((s, h)),
                    Err(e) => {
                        let _ = s.close();
                        Err(e)
                    }
                });
                if opened.is_err() {
                    self.forget_one();
                }
                return opened;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Pkcs11Error::Busy { sessions: pool.max, waited: SESSION_WAIT });
            }
            state = pool.freed.wait_timeout(state, left).map_err(|_| POISONED)?.0;
        }
    }

    fn give_back(&self, session: Session, handle: ObjectHandle, generation: u64) {
        if let Ok(mut state) = self.sessions.state.lock() {
            state.idle.push((session, handle, generation));
        }
        self.sessions.freed.notify_one();
    }

    fn forget_one(&self) {
        if let Ok(mut state) = self.sessions.state.lock() {
            state.open = state.open.saturating_sub(1);
        }
        self.sessions.freed.notify_one();
    }

    /// A new session on the key's token, logged in.
    fn login(&self) -> Result<Session, Pkcs11Error> {
        let slot = slot(&self.module, &self.uri)?;
        // Closed explicitly, never on drop: after a reset an old handle may name a new session.
        let session = self
            .module
            .context
            .open_rw_session_no_drop(slot)
            .map_err(Pkcs11Error::OpenSession)?;
        let login = match session.login(UserType::User, Some(&self.pin)) {
            // Login is per token, not per session: the second session finds it done.
            Ok(()) | Err(CkError::Pkcs11(RvError::UserAlreadyLoggedIn, _)) => Ok(()),
            Err(CkError::Pkcs11(RvError::PinIncorrect, _)) => Err(Pkcs11Error::PinIncorrect),
            Err(CkError::Pkcs11(RvError::PinLocked, _)) => Err(Pkcs11Error::PinLocked),
            Err(e) => Err(Pkcs11Error::Login(e)),
        };
        match login {
            Ok(()) => Ok(session),
            Err(e) => {
                let _ = session.close();
                Err(e)
            }
        }
    }
}

impl Drop for Key {
    /// Closes the idle sessions (they were opened never to close on drop): a key reopened
    /// (a TUF key per signing round, a rotation) must not leave sessions behind on the token.
    /// Those of an earlier module generation are void, and not touched.
    fn drop(&mut self) {
        let Ok(generation) = self.module.generation.read() else { return };
        if let Ok(mut state) = self.sessions.state.lock() {
            for (session, _, g) in state.idle.drain(..) {
                if g == *generation {
                    let _ = session.close();
                }
            }
        }
    }
}

/// Makes `uri`'s key pair labelled `label` unless the token holds it; whether it made one.
fn make(session: &Session, uri: &Pkcs11Uri, label: &str, algorithm: Algorithm) -> Result<bool, Pkcs11Error> {
    let held = |class| session.find_objects(&template(uri, class)).map(|found| !found.is_empty());
    match (held(ObjectClass::PRIVATE_KEY), held(ObjectClass::PUBLIC_KEY)) {
        (Ok(false), Ok(false)) => {}
        (Ok(true), Ok(true)) => return Ok(false),
        (Ok(_), Ok(_)) => return Err(Pkcs11Error::HalfKeyPair),
        (Err(e), _) | (_, Err(e)) => return Err(Pkcs11Error::Find(e)),
    }
    let id = uri.id.clone().unwrap_or_else(|| hash::sha256(label.as_bytes())[..8].to_vec());
    let params = algorithm.curve().to_der()?;
    let public = [
        Attribute::Token(true),
        Attribute::Verify(true),
        Attribute::EcParams(params),
        Attribute::Label(label.as_bytes().to_vec()),
        Attribute::Id(id.clone()),
    ];
    let private = [
        Attribute::Token(true),
        Attribute::Private(true),
        Attribute::Sensitive(true),
        Attribute::Extractable(false),
        Attribute::Sign(true),
        Attribute::Label(label.as_bytes().to_vec()),
        Attribute::Id(id),
    ];
    let generate = match algorithm {
        Algorithm::Ed25519 => Mechanism::EccEdwardsKeyPairGen,
        _ => Mechanism::EccKeyPairGen,
    };
    session
        .generate_key_pair(&generate, &public, &private)
        .map_err(Pkcs11Error::Generate)?;
    Ok(true)
}

/// What finds `uri`'s key of `class` (its type is checked once found).
fn template(uri: &Pkcs11Uri, class: ObjectClass) -> Vec<Attribute> {
    let mut template = vec![Attribute::Class(class)];
    if let Some(label) = &uri.object {
        template.push(Attribute::Label(label.as_bytes().to_vec()));
    }
    if let Some(id) = &uri.id {
        template.push(Attribute::Id(id.clone()));
    }
    template
}

/// The one object of `class` that `uri` names.
fn find(session: &Session, uri: &Pkcs11Uri, class: ObjectClass) -> Result<ObjectHandle, Pkcs11Error> {
    let what = if class == ObjectClass::PRIVATE_KEY { "private key" } else { "public key" };
    match session.find_objects(&template(uri, class)).map_err(Pkcs11Error::Find)?.as_slice() {
        [one] => Ok(*one),
        [] => Err(Pkcs11Error::NoObject { what }),
        many => Err(Pkcs11Error::ManyObjects { what, count: many.len() }),
    }
}

/// The algorithm and SPKI DER of `uri`'s public key: an EC key on P-256 or P-384, or an
/// Edwards key on Ed25519.
fn public_key(session: &Session, uri: &Pkcs11Uri) -> Result<(Algorithm, Vec<u8>), Pkcs11Error> {
    let handle = find(session, uri, ObjectClass::PUBLIC_KEY)?;
    let attrs = session
        .get_attributes(handle, &[AttributeType::KeyType, AttributeType::EcParams, AttributeType::EcPoint])
        .map_err(Pkcs11Error::ReadPublicKey)?;
    let (mut kind, mut params, mut point) = (None, None, None);
    for a in attrs {
        match a {
            Attribute::KeyType(k) => kind = Some(k),
            Attribute::EcParams(p) => params = Some(p),
            Attribute::EcPoint(p) => point = Some(p),
            _ => {}
        }
    }
    let params = params.ok_or(Pkcs11Error::NoEcParams)?;
    let algorithm = match kind {
        // PKCS#11 3.0 lets an Edwards key name its curve by OID or by the printable name.
        Some(k) if k == KeyType::EC_EDWARDS => match ObjectIdentifier::from_der(&params) {
            Ok(oid) if oid == ID_ED25519 => Algorithm::Ed25519,
            _ if params.ends_with(b"edwards25519") => Algorithm::Ed25519,
            _ => return Err(Pkcs11Error::NotEd25519),
        },
        Some(k) if k == KeyType::EC => {
            let curve = ObjectIdentifier::from_der(&params).ok();
            curve.and_then(Algorithm::of_curve).filter(|a| *a != Algorithm::Ed25519).ok_or(Pkcs11Error::Curve(curve))?
        }
        other => return Err(Pkcs11Error::KeyType(other)),
    };
    let point = point.ok_or(Pkcs11Error::NoEcPoint)?;
    // PKCS#11 wraps the point in an OCTET STRING; some modules give it bare.
    let point = OctetString::from_der(&point).map(|o| o.into_bytes()).unwrap_or(point);
    let (oid, parameters) = match algorithm {
        Algorithm::Ed25519 if point.len() == 32 => (ID_ED25519, None),
        Algorithm::Ed25519 => return Err(Pkcs11Error::Ed25519Length),
        _ if point.len() == 1 + 2 * algorithm.scalar_len() && point[0] == 4 => (ID_EC_PUBLIC_KEY, Some(der::Any::encode_from(&algorithm.curve())?)),
        _ => return Err(Pkcs11Error::Point(algorithm)),
    };
    let spki = SubjectPublicKeyInfoOwned { algorithm: AlgorithmIdentifierOwned { oid, parameters }, subject_public_key: BitString::from_bytes(&point)? };
    Ok((algorithm, spki.to_der()?))
}

#[derive(Sequence)]
struct EcdsaSignature<'a> {
    r: UintRef<'a>,
    s: UintRef<'a>,
}

/// PKCS#11's r‖s (each `scalar` bytes) as the ASN.1 DER that X.509, CMS and Sigstore carry.
fn der_signature(raw: &[u8], scalar: usize) -> Option<Vec<u8>> {
    if raw.len() != 2 * scalar {
        return None;
    }
    let (r, s) = raw.split_at(scalar);
    EcdsaSignature { r: UintRef::new(r).ok()?, s: UintRef::new(s).ok()? }.to_der().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_signatures_become_der_with_minimal_integers() {
        let mut raw = [0u8; 64];
        raw[31] = 1; // r = 1
        raw[32] = 0x80; // s has its top bit set: needs a leading zero
        let der = der_signature(&raw, 32).unwrap();
        assert_eq!(&der[..5], &[0x30, 0x26, 0x02, 0x01, 0x01]);
        assert_eq!(&der[5..8], &[0x02, 0x21, 0x00]);
        assert!(der_signature(&raw[..63], 32).is_none());
        assert!(der_signature(&[1u8; 96], 48).is_some_and(|d| d.len() == 2 + 2 + 48 + 2 + 48));
    }
}
