//! [`KeyHome`]: where `signet init --keys` makes an instance's keys, each under a name of
//! its own: the objects of one PKCS#11 token, or aliases in AWS KMS.

use std::fmt;

use crate::source::{AwsKmsUri, KeySource, Pkcs11Settings, Pkcs11Uri, SourceError, Unusable};
use crate::{awskms, pkcs11, Algorithm, KeyError};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyHome {
    /// `pkcs11:token=LABEL`: each key the object labelled with its name.
    Token(Pkcs11Uri),
    /// `awskms:///` or `awskms://HOST:PORT/`: each key `alias/<name>`.
    AwsKms { endpoint: Option<String> },
}

impl KeyHome {
    /// A home as `--keys` takes it: a token, or a KMS, without naming any one key.
    pub fn parse(s: &str) -> Result<KeyHome, SourceError> {
        if let Some(rest) = s.strip_prefix("awskms://") {
            return match rest.split_once('/') {
                Some((host, "")) if !host.contains(['@', '?', '#']) => Ok(KeyHome::AwsKms { endpoint: (!host.is_empty()).then(|| host.to_string()) }),
                _ => Err(SourceError { given: s.into(), why: Unusable::NotAKmsHome }),
            };
        }
        Pkcs11Uri::parse_token(s).map(KeyHome::Token)
    }

    /// The key called `name` in this home.
    pub fn key(&self, name: &str) -> KeySource {
        match self {
            KeyHome::Token(token) => KeySource::Pkcs11(token.with_object(name)),
            KeyHome::AwsKms { endpoint } => KeySource::AwsKms(AwsKmsUri { endpoint: endpoint.clone(), key: format!("alias/{name}") }),
        }
    }

    pub fn is_token(&self) -> bool {
        matches!(self, KeyHome::Token(_))
    }
}

impl fmt::Display for KeyHome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyHome::Token(t) => write!(f, "{t}"),
            KeyHome::AwsKms { endpoint } => write!(f, "awskms://{}/", endpoint.as_deref().unwrap_or("")),
        }
    }
}

/// Makes an `algorithm` key where `source` names one, unless one is there: on a token, in
/// KMS (an alias), or a file (mode 0600). Returns whether it made one.
pub fn ensure(source: &KeySource, settings: &Pkcs11Settings, algorithm: Algorithm) -> Result<bool, KeyError> {
    match source {
        KeySource::Pkcs11(uri) => pkcs11::Key::ensure(uri, settings, algorithm),
        KeySource::AwsKms(uri) => awskms::Key::ensure(uri, algorithm),
        KeySource::File(path) => {
            let existed = path.exists();
            crate::file::load_or_generate_pkcs8(path, algorithm)?;
            Ok(!existed)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_home_names_each_key_its_own_way() {
        let token = KeyHome::parse("pkcs11:token=signet").unwrap();
        assert_eq!(token.key("signet-tsa").to_string(), "pkcs11:token=signet;object=signet-tsa");
        let kms = KeyHome::parse("awskms:///").unwrap();
        assert_eq!(kms.key("signet-tsa").to_string(), "awskms:///alias/signet-tsa");
        let there = KeyHome::parse("awskms://kms.example:4566/").unwrap();
        assert_eq!(there.key("signet-ct").to_string(), "awskms://kms.example:4566/alias/signet-ct");
        assert_eq!(there.to_string(), "awskms://kms.example:4566/");
        for bad in ["awskms:///alias/one-key", "awskms://", "pkcs11:token=signet;object=signet-tsa", "/a/file"] {
            assert!(KeyHome::parse(bad).is_err(), "{bad}");
        }
    }
}
