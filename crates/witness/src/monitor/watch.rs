//! The watch list: what the monitor alerts on, read from a TOML file.
//!
//! ```toml
//! emails = ["alice@example.com"]                 # an email SAN (any case)
//! uris = ["https://github.com/org/repo/.github/workflows/release.yml@refs/heads/main"]
//! san_regex = ['^https://github\.com/my-org/']   # any SAN (email, URI or DNS name)
//! issuers = ["https://token.actions.githubusercontent.com"]   # the certificate's OIDC issuer
//! keys = ["sha256:<hex>"]      # SHA-256 of a signing key's DER SubjectPublicKeyInfo
//! digests = ["sha256:<hex>"]   # an artifact digest
//! ```
//! Every list is optional, and an entry matches when any rule does. A key the file does not
//! know is an error that names it: a typo must not silently watch nothing.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::entries::{Facts, San};

/// Why a watch list is refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WatchError {
    /// Not TOML, or a key the format does not know (its message, without the position).
    #[error("{}", .0.message())]
    Toml(#[source] toml::de::Error),
    #[error("san_regex: {0}")]
    SanRegex(#[source] regex::Error),
    #[error("keys: {0:?} is not sha256:<64 hex digits>")]
    Key(String),
    #[error("digests: {0:?} is not <algorithm>:<hex>, e.g. sha256:…")]
    Digest(String),
    #[error("watches nothing: give at least one of emails, uris, san_regex, issuers, keys, digests")]
    Empty,
}

/// Why a watch file cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WatchFileError {
    #[error("watch file {}: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("watch file {}: {source}", path.display())]
    Invalid { path: PathBuf, source: WatchError },
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    emails: Vec<String>,
    #[serde(default)]
    uris: Vec<String>,
    #[serde(default)]
    san_regex: Vec<String>,
    #[serde(default)]
    issuers: Vec<String>,
    #[serde(default)]
    keys: Vec<String>,
    #[serde(default)]
    digests: Vec<String>,
}

/// One reason an entry matched: the rule's kind and the value that matched it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Match {
    pub rule: &'static str,
    pub value: String,
}

#[derive(Debug, Default)]
pub struct WatchList {
    emails: HashSet<String>,
    uris: HashSet<String>,
    san_regex: Option<regex::RegexSet>,
    issuers: HashSet<String>,
    keys: HashSet<[u8; 32]>,
    digests: HashSet<String>,
}

impl WatchList {
    pub fn load(path: &Path) -> Result<WatchList, WatchFileError> {
        let text = std::fs::read_to_string(path).map_err(|source| WatchFileError::Read { path: path.to_path_buf(), source })?;
        Self::parse(&text).map_err(|source| WatchFileError::Invalid { path: path.to_path_buf(), source })
    }

    pub fn parse(text: &str) -> Result<WatchList, WatchError> {
        let f: File = toml::from_str(text).map_err(WatchError::Toml)?;
        let san_regex = match f.san_regex.is_empty() {
            true => None,
            false => Some(regex::RegexSet::new(&f.san_regex).map_err(WatchError::SanRegex)?),
        };
        let keys = f
            .keys
            .iter()
            .map(|k| {
                k.strip_prefix("sha256:")
                    .and_then(|h| hex::decode(h).ok())
                    .and_then(|b| <[u8; 32]>::try_from(b).ok())
                    .ok_or_else(|| WatchError::Key(k.clone()))
            })
            .collect::<Result<_, _>>()?;
        let digests = f
            .digests
            .iter()
            .map(|d| match d.split_once(':') {
                Some((alg, hex)) if !alg.is_empty() && !hex.is_empty() && hex.bytes().all(|b| b.is_ascii_hexdigit()) => {
                    Ok(d.to_ascii_lowercase())
                }
                _ => Err(WatchError::Digest(d.clone())),
            })
            .collect::<Result<_, _>>()?;
        let list = WatchList {
            emails: f.emails.iter().map(|e| e.to_lowercase()).collect(),
            uris: f.uris.into_iter().collect(),
            san_regex,
            issuers: f.issuers.into_iter().collect(),
            keys,
            digests,
        };
        if list.is_empty() {
            return Err(WatchError::Empty);
        }
        Ok(list)
    }

    fn is_empty(&self) -> bool {
        self.emails.is_empty()
            && self.uris.is_empty()
            && self.san_regex.is_none()
            && self.issuers.is_empty()
            && self.keys.is_empty()
            && self.digests.is_empty()
    }

    /// Every rule `facts` matches; empty when none does.
    pub fn matches(&self, facts: &Facts) -> Vec<Match> {
        let mut out = Vec::new();
        for signer in &facts.signers {
            for san in &signer.sans {
                match san {
                    San::Email(e) if self.emails.contains(&e.to_lowercase()) => out.push(Match { rule: "email", value: e.clone() }),
                    San::Uri(u) if self.uris.contains(u) => out.push(Match { rule: "uri", value: u.clone() }),
                    _ => {}
                }
                if self.san_regex.as_ref().is_some_and(|r| r.is_match(san.value())) {
                    out.push(Match { rule: "san_regex", value: san.value().to_string() });
                }
            }
            if let Some(issuer) = signer.issuer.as_ref().filter(|i| self.issuers.contains(*i)) {
                out.push(Match { rule: "issuer", value: issuer.clone() });
            }
            if self.keys.contains(&signer.key_sha256) {
                out.push(Match { rule: "key", value: format!("sha256:{}", hex::encode(signer.key_sha256)) });
            }
        }
        for d in facts.digests.iter().filter(|d| self.digests.contains(*d)) {
            out.push(Match { rule: "digest", value: d.clone() });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::monitor::entries::Signer;

    fn facts(email: &str) -> Facts {
        Facts {
            kind: "hashedrekord 0.0.2".into(),
            signers: vec![Signer {
                sans: vec![San::Email(email.into())],
                issuer: Some("https://issuer.example".into()),
                key_sha256: [7; 32],
                is_certificate: true,
            }],
            digests: vec![format!("sha256:{}", "ab".repeat(32))],
        }
    }

    #[test]
    fn each_rule_matches_what_it_names() {
        let w = WatchList::parse(r#"emails = ["Alice@Example.com"]"#).unwrap();
        assert_eq!(w.matches(&facts("alice@example.COM")), vec![Match { rule: "email", value: "alice@example.COM".into() }]);
        assert!(w.matches(&facts("bob@example.com")).is_empty());

        let w = WatchList::parse(r#"san_regex = ['@example\.com$']"#).unwrap();
        assert_eq!(w.matches(&facts("bob@example.com")).len(), 1);
        let w = WatchList::parse(r#"issuers = ["https://issuer.example"]"#).unwrap();
        assert_eq!(w.matches(&facts("x@y"))[0].rule, "issuer");
        let w = WatchList::parse(&format!("keys = [\"sha256:{}\"]", "07".repeat(32))).unwrap();
        assert_eq!(w.matches(&facts("x@y"))[0].rule, "key");
        let w = WatchList::parse(&format!("digests = [\"SHA256:{}\"]", "AB".repeat(32))).unwrap();
        assert_eq!(w.matches(&facts("x@y"))[0].rule, "digest");
    }

    #[test]
    fn bad_files_are_refused_with_the_reason() {
        assert!(WatchList::parse("").unwrap_err().to_string().contains("watches nothing"));
        assert!(WatchList::parse("email = [\"a@b\"]").unwrap_err().to_string().contains("email"));
        assert!(WatchList::parse("san_regex = ['(']").unwrap_err().to_string().contains("san_regex"));
        assert_eq!(WatchList::parse("keys = ['abc']").unwrap_err().to_string(), r#"keys: "abc" is not sha256:<64 hex digits>"#);
    }
}
