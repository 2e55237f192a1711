//! Where a signing key is kept, as configured: a file in the data dir, an object on a
//! PKCS#11 token named by an RFC 7512 URI, or a key in AWS KMS.
//!
//! The URI is the key's whole address, so that one config line moves a key into an HSM.
//! What is secret (the PIN) may come in it (`pin-value`, `pin-source`), but is better given
//! apart ([`Pkcs11Settings`], from the config or `SIGNET_KEYS_PKCS11_PIN`): a URI is shown in
//! errors and logs, and its [`Display`](std::fmt::Display) never shows a PIN.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

/// A configured signing key.
#[derive(Clone, PartialEq, Eq)]
pub enum KeySource {
    /// A PKCS#8 PEM file (`/path`, or `file:///path`).
    File(PathBuf),
    /// An object on a PKCS#11 token (`pkcs11:token=…;object=…`).
    Pkcs11(Pkcs11Uri),
    /// A key in AWS KMS (`awskms://[host[:port]]/key-id|arn|alias/NAME`, as cosign names it).
    AwsKms(AwsKmsUri),
}

/// An AWS KMS key as cosign and sigstore-go name it: `awskms:///KEY` uses the SDK's
/// endpoint (the region's, or `AWS_ENDPOINT_URL_KMS`); `awskms://HOST:PORT/KEY` the
/// endpoint `https://HOST:PORT`. KEY is a key id, a key ARN or `alias/NAME`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AwsKmsUri {
    pub endpoint: Option<String>,
    pub key: String,
}

/// An RFC 7512 PKCS#11 URI, reduced to what finds one key pair.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Pkcs11Uri {
    /// The token's label (`token=`).
    pub token: Option<String>,
    /// The token's serial number (`serial=`).
    pub serial: Option<String>,
    /// The slot (`slot-id=`).
    pub slot_id: Option<u64>,
    /// The key pair's label (`object=`, CKA_LABEL).
    pub object: Option<String>,
    /// The key pair's id (`id=`, CKA_ID), raw bytes.
    pub id: Option<Vec<u8>>,
    /// The PKCS#11 module to load (`module-path=`).
    pub module_path: Option<PathBuf>,
    /// The user PIN (`pin-value=`); never shown.
    pub pin_value: Option<String>,
    /// A file holding the user PIN (`pin-source=`).
    pub pin_source: Option<PathBuf>,
}

/// What a PKCS#11 URI may leave out, given once for every key: the module and the PIN.
#[derive(Clone, Default)]
pub struct Pkcs11Settings {
    pub module: Option<PathBuf>,
    pub pin: Option<String>,
    /// Sessions kept open per key (each signature takes one for its duration); 0 means the default.
    pub sessions: usize,
}

impl fmt::Debug for Pkcs11Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pkcs11Settings")
            .field("module", &self.module)
            .field("pin", &self.pin.as_ref().map(|_| "<hidden>"))
            .field("sessions", &self.sessions)
            .finish()
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("key {given:?}: {why}")]
pub struct SourceError {
    /// What was given, with any PIN in it hidden.
    pub given: String,
    pub why: Unusable,
}

/// What is wrong with a key's file path or URI, and what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Unusable {
    #[error("a file:// URI takes an absolute path (file:///path)")]
    RelativeFileUri,
    #[error("expected a file path or a pkcs11: URI")]
    Empty,
    #[error("the {0}:// key backend is not supported; expected a file path, file:///path, pkcs11:token=…;object=… or awskms:///KEY")]
    Backend(String),
    #[error("expected a pkcs11: URI naming a token (pkcs11:token=LABEL)")]
    NotAToken,
    #[error("names a key; give only the token (init names each key it keeps there signet-…)")]
    TokenNamesKey,
    #[error("expected awskms:/// or awskms://HOST:PORT/ (init names each key alias/signet-…)")]
    NotAKmsHome,
    #[error("expected awskms:///KEY or awskms://HOST:PORT/KEY")]
    KmsShape,
    #[error("{0:?} is not a KMS key: expected a key id, a key ARN (arn:aws…) or alias/NAME")]
    KmsKey(String),
    #[error("{0:?} is not a HOST[:PORT]")]
    KmsHost(String),
    #[error("attribute {0:?} has no '=' (RFC 7512: name=value)")]
    NoValue(String),
    #[error("query attribute {0:?} has no '='")]
    NoQueryValue(String),
    #[error("{0}: a '%' is not followed by two hex digits")]
    BadEscape(String),
    #[error("{0} is not UTF-8")]
    NotUtf8(String),
    #[error("slot-id is not a number")]
    SlotId,
    #[error("unknown attribute {0:?}; expected token, serial, slot-id, object or id")]
    UnknownAttribute(String),
    #[error("module-name is not supported; give module-path (or pkcs11.module in the config)")]
    ModuleName,
    #[error("unknown query attribute {0:?}; expected module-path, pin-value or pin-source")]
    UnknownQueryAttribute(String),
    #[error("names no key: give object= (its label) or id=")]
    NoKey,
    #[error("{0} is given twice")]
    Twice(String),
}

impl FromStr for KeySource {
    type Err = SourceError;

    fn from_str(s: &str) -> Result<Self, SourceError> {
        if let Some(rest) = s.strip_prefix("pkcs11:") {
            return parse_pkcs11(rest).map(KeySource::Pkcs11).map_err(|why| SourceError { given: hide_pin(s), why });
        }
        if let Some(rest) = s.strip_prefix("awskms://") {
            return AwsKmsUri::parse(rest).map(KeySource::AwsKms).map_err(|why| SourceError { given: s.into(), why });
        }
        let path = match s.strip_prefix("file://") {
            Some(p) if p.starts_with('/') => p,
            Some(_) => return Err(SourceError { given: s.into(), why: Unusable::RelativeFileUri }),
            None => s,
        };
        if path.is_empty() {
            return Err(SourceError { given: s.into(), why: Unusable::Empty });
        }
        if s.contains("://") && !s.starts_with("file://") {
            let scheme = s.split("://").next().unwrap_or_default();
            return Err(SourceError { given: s.into(), why: Unusable::Backend(scheme.to_string()) });
        }
        Ok(KeySource::File(PathBuf::from(path)))
    }
}

impl<'de> serde::Deserialize<'de> for KeySource {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl fmt::Display for KeySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeySource::File(p) => write!(f, "{}", p.display()),
            KeySource::Pkcs11(u) => write!(f, "{u}"),
            KeySource::AwsKms(u) => write!(f, "awskms://{}/{}", u.endpoint.as_deref().unwrap_or(""), u.key),
        }
    }
}

impl fmt::Debug for KeySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

impl fmt::Display for Pkcs11Uri {
    /// The URI as RFC 7512 writes it, without the PIN.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut path = Vec::new();
        if let Some(t) = &self.token {
            path.push(format!("token={}", escape(t.as_bytes())));
        }
        if let Some(s) = &self.serial {
            path.push(format!("serial={}", escape(s.as_bytes())));
        }
        if let Some(s) = self.slot_id {
            path.push(format!("slot-id={s}"));
        }
        if let Some(o) = &self.object {
            path.push(format!("object={}", escape(o.as_bytes())));
        }
        if let Some(id) = &self.id {
            path.push(format!("id={}", id.iter().map(|b| format!("%{b:02x}")).collect::<String>()));
        }
        write!(f, "pkcs11:{}", path.join(";"))?;
        let mut query = Vec::new();
        if let Some(m) = &self.module_path {
            query.push(format!("module-path={}", escape(m.to_string_lossy().as_bytes())));
        }
        if let Some(p) = &self.pin_source {
            query.push(format!("pin-source={}", escape(p.to_string_lossy().as_bytes())));
        }
        if self.pin_value.is_some() {
            query.push("pin-value=<hidden>".into());
        }
        if !query.is_empty() {
            write!(f, "?{}", query.join("&"))?;
        }
        Ok(())
    }
}

impl fmt::Debug for Pkcs11Uri {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

impl Pkcs11Uri {
    /// This URI naming the object `label` instead (the keys `signet init --keys` makes on one
    /// token), without a `pin-value`: the result is written to config files.
    pub fn with_object(&self, label: &str) -> Pkcs11Uri {
        Pkcs11Uri { object: Some(label.to_string()), id: None, pin_value: None, ..self.clone() }
    }

    /// This URI naming only a token, as `signet init --keys` takes it (it names the objects).
    pub fn parse_token(s: &str) -> Result<Pkcs11Uri, SourceError> {
        let rest = s.strip_prefix("pkcs11:").ok_or_else(|| SourceError { given: hide_pin(s), why: Unusable::NotAToken })?;
        let names_key = rest.split('?').next().unwrap_or_default().split(';').any(|a| a.starts_with("object=") || a.starts_with("id="));
        if names_key {
            return Err(SourceError { given: hide_pin(s), why: Unusable::TokenNamesKey });
        }
        // The objects are named by init: parse with a placeholder, then drop it.
        let probe = match rest.split_once('?') {
            Some((path, query)) => format!("{path};object=_?{query}"),
            None => format!("{rest};object=_"),
        };
        let mut uri = parse_pkcs11(&probe).map_err(|why| SourceError { given: hide_pin(s), why })?;
        uri.object = None;
        Ok(uri)
    }
}

impl AwsKmsUri {
    fn parse(rest: &str) -> Result<AwsKmsUri, Unusable> {
        let (host, key) = rest.split_once('/').ok_or(Unusable::KmsShape)?;
        let key_ok = key.starts_with("alias/") && key.len() > 6
            || key.starts_with("arn:aws")
            || (!key.is_empty() && key.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-'));
        if !key_ok {
            return Err(Unusable::KmsKey(key.to_string()));
        }
        if host.contains(['@', '?', '#']) {
            return Err(Unusable::KmsHost(host.to_string()));
        }
        Ok(AwsKmsUri { endpoint: (!host.is_empty()).then(|| host.to_string()), key: key.to_string() })
    }
}

fn parse_pkcs11(rest: &str) -> Result<Pkcs11Uri, Unusable> {
    let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
    let mut uri = Pkcs11Uri::default();
    for attr in path.split(';').filter(|a| !a.is_empty()) {
        let (name, value) = attr.split_once('=').ok_or_else(|| Unusable::NoValue(attr.to_string()))?;
        let bytes = unescape(value).ok_or_else(|| Unusable::BadEscape(name.to_string()))?;
        let text = || String::from_utf8(bytes.clone()).map_err(|_| Unusable::NotUtf8(name.to_string()));
        match name {
            "token" => set(&mut uri.token, text()?, name)?,
            "serial" => set(&mut uri.serial, text()?, name)?,
            "object" => set(&mut uri.object, text()?, name)?,
            "id" => set(&mut uri.id, bytes, name)?,
            "slot-id" => set(&mut uri.slot_id, text()?.parse().map_err(|_| Unusable::SlotId)?, name)?,
            // Describe the key or the module, and select nothing signet needs selected.
            "type" | "manufacturer" | "model" | "library-manufacturer" | "library-description" | "library-version"
            | "slot-manufacturer" | "slot-description" => {}
            _ if name.starts_with("x-") => {}
            _ => return Err(Unusable::UnknownAttribute(name.to_string())),
        }
    }
    for attr in query.split('&').filter(|a| !a.is_empty()) {
        let (name, value) = attr.split_once('=').ok_or_else(|| Unusable::NoQueryValue(attr.to_string()))?;
        let bytes = unescape(value).ok_or_else(|| Unusable::BadEscape(name.to_string()))?;
        let text = String::from_utf8(bytes).map_err(|_| Unusable::NotUtf8(name.to_string()))?;
        match name {
            "module-path" => set(&mut uri.module_path, PathBuf::from(text), name)?,
            "pin-value" => set(&mut uri.pin_value, text, name)?,
            "pin-source" => set(&mut uri.pin_source, PathBuf::from(text.strip_prefix("file:").unwrap_or(&text)), name)?,
            "module-name" => return Err(Unusable::ModuleName),
            _ if name.starts_with("x-") => {}
            _ => return Err(Unusable::UnknownQueryAttribute(name.to_string())),
        }
    }
    if uri.object.is_none() && uri.id.is_none() {
        return Err(Unusable::NoKey);
    }
    Ok(uri)
}

fn set<T>(slot: &mut Option<T>, value: T, name: &str) -> Result<(), Unusable> {
    match slot.replace(value) {
        None => Ok(()),
        Some(_) => Err(Unusable::Twice(name.to_string())),
    }
}

/// `s` with its `%XX` escapes decoded; `None` when a `%` is not followed by two hex digits.
fn unescape(s: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len());
    let mut bytes = s.bytes();
    while let Some(b) = bytes.next() {
        if b != b'%' {
            out.push(b);
            continue;
        }
        let hex = [bytes.next(), bytes.next()];
        let [Some(hi), Some(lo)] = hex else { return None };
        let digit = |c: u8| (c as char).to_digit(16);
        out.push((digit(hi)? * 16 + digit(lo)?) as u8);
    }
    Some(out)
}

fn escape(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|&b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' | b':' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// `s` with the value of any `pin-value=` replaced, for errors.
fn hide_pin(s: &str) -> String {
    let Some(at) = s.find("pin-value=") else { return s.to_string() };
    let start = at + "pin-value=".len();
    let end = s[start..].find('&').map_or(s.len(), |e| start + e);
    format!("{}<hidden>{}", &s[..start], &s[end..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_file_uris_are_files() {
        assert_eq!("keys/tsa.pem".parse(), Ok(KeySource::File("keys/tsa.pem".into())));
        assert_eq!("file:///etc/signet/tsa.pem".parse(), Ok(KeySource::File("/etc/signet/tsa.pem".into())));
        assert!("file://relative".parse::<KeySource>().unwrap_err().why.to_string().contains("absolute"));
        assert!("".parse::<KeySource>().is_err());
        let kms = "gcpkms://projects/p/keys/tsa".parse::<KeySource>().unwrap_err();
        assert!(kms.why.to_string().contains("gcpkms:// key backend is not supported"), "{kms}");
        // cosign's spellings of an AWS KMS key.
        for (given, endpoint, key) in [
            ("awskms:///alias/signet-tsa", None, "alias/signet-tsa"),
            ("awskms://localhost:4566/alias/signet-tsa", Some("localhost:4566"), "alias/signet-tsa"),
            ("awskms:///arn:aws:kms:eu-west-2:111122223333:key/1234abcd-12ab", None, "arn:aws:kms:eu-west-2:111122223333:key/1234abcd-12ab"),
            ("awskms:///1234abcd-12ab-34cd-56ef-1234567890ab", None, "1234abcd-12ab-34cd-56ef-1234567890ab"),
        ] {
            let parsed = given.parse::<KeySource>().unwrap();
            assert_eq!(parsed, KeySource::AwsKms(AwsKmsUri { endpoint: endpoint.map(String::from), key: key.into() }), "{given}");
            assert_eq!(parsed.to_string(), given);
        }
        for bad in ["awskms://alias/tsa", "awskms:///", "awskms:///alias/", "awskms:///not a key"] {
            let err = bad.parse::<KeySource>().unwrap_err();
            assert!(err.why.to_string().contains("expected"), "{bad}: {err}");
        }
    }

    #[test]
    fn pkcs11_uris_parse_as_rfc_7512_writes_them() {
        let KeySource::Pkcs11(u) = "pkcs11:token=signet%20hsm;object=tsa;id=%01%ff?module-path=/usr/lib/softhsm/libsofthsm2.so&pin-value=1234"
            .parse()
            .unwrap()
        else {
            panic!("not pkcs11")
        };
        assert_eq!(u.token.as_deref(), Some("signet hsm"));
        assert_eq!(u.object.as_deref(), Some("tsa"));
        assert_eq!(u.id.as_deref(), Some(&[1u8, 0xff][..]));
        assert_eq!(u.module_path, Some(PathBuf::from("/usr/lib/softhsm/libsofthsm2.so")));
        assert_eq!(u.pin_value.as_deref(), Some("1234"));
        // Shown without its PIN, and read back the same.
        let shown = u.to_string();
        assert!(!shown.contains("1234"), "{shown}");
        assert_eq!(shown, "pkcs11:token=signet%20hsm;object=tsa;id=%01%ff?module-path=/usr/lib/softhsm/libsofthsm2.so&pin-value=<hidden>");
        assert!(!format!("{u:?}").contains("1234"));
    }

    #[test]
    fn bad_pkcs11_uris_say_what_is_wrong_and_hide_the_pin() {
        let err = |s: &str| s.parse::<KeySource>().unwrap_err();
        assert!(err("pkcs11:token=a").why.to_string().contains("names no key"));
        assert!(err("pkcs11:token=a;object=b;object=c").why.to_string().contains("object is given twice"));
        assert!(err("pkcs11:token=a;objekt=b").why.to_string().contains("unknown attribute \"objekt\""));
        assert!(err("pkcs11:object=%zz").why.to_string().contains("two hex digits"));
        assert!(err("pkcs11:object=a%4").why.to_string().contains("two hex digits"));
        assert!(err("pkcs11:object=a?module-name=softhsm2").why.to_string().contains("module-path"));
        let e = err("pkcs11:object=a?pin-value=secret&bogus=1");
        assert!(e.why.to_string().contains("bogus") && !e.to_string().contains("secret"), "{e}");
        // `init --keys` takes a token alone.
        let token = Pkcs11Uri::parse_token("pkcs11:token=t?pin-value=9").unwrap();
        assert_eq!((token.token.as_deref(), token.object.as_deref()), (Some("t"), None));
        assert_eq!(token.with_object("signet-tsa").to_string(), "pkcs11:token=t;object=signet-tsa");
        assert!(Pkcs11Uri::parse_token("pkcs11:token=t;object=x").unwrap_err().why.to_string().contains("names a key"));
        assert!(Pkcs11Uri::parse_token("/keys/x.pem").is_err());
        // Vendor attributes and descriptions select nothing and are accepted.
        assert!("pkcs11:object=a;type=private;x-vendor=1;manufacturer=SoftHSM".parse::<KeySource>().is_ok());
    }
}
