//! Witness policies: which cosignatures a checkpoint needs (k of n, nested), in Sigsum's
//! policy format (sigsum.org's `policy` files), read offline like everything here.
//!
//! ```text
//! # comment
//! log     <hex key> [url]                   accepted, not used: the trusted root names the logs
//! witness <name> <key> [url]                key: 64 hex digits (the note key is named <name>),
//!                                           or a C2SP cosignature vkey (<name>+<id>+<base64>)
//! group   <name> <k|all|any> <member>…      members: witnesses or groups defined above
//! quorum  <name>                            the group (or witness) that must be satisfied
//! ```
//! A witness counts when one of its cosignature lines (c2sp.org/tlog-cosignature) verifies
//! over the checkpoint's text; lines of unknown keys are ignored.

use std::collections::HashMap;

use signet_core::note::{NoteError, SignedNote};
use signet_core::notekey::{NoteKeyError, NoteKeyType, VerifierKey};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("witness policy line {line}: {why}")]
pub struct PolicyError {
    pub line: usize,
    pub why: Mistake,
}

/// What is wrong with a line of a policy (or, for [`Mistake::NoQuorum`], with the whole).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Mistake {
    #[error("expected: log <hex key> [url]")]
    LogLine,
    #[error("expected: witness <name> <key> [url]")]
    WitnessLine,
    #[error("expected: group <name> <k|all|any> <member>...")]
    GroupLine,
    #[error("expected: quorum <name>")]
    QuorumLine,
    #[error("{0:?} is defined twice")]
    DefinedTwice(String),
    #[error("group {0:?} has no members")]
    NoMembers(String),
    #[error("{0:?} is not a witness or group defined above")]
    Undefined(String),
    #[error("threshold {given:?} must be all, any, or 1 to {members}")]
    Threshold { given: String, members: usize },
    #[error("quorum is given twice")]
    QuorumTwice,
    #[error("unknown keyword {0:?}; expected log, witness, group or quorum")]
    UnknownKeyword(String),
    #[error("the policy has no quorum line")]
    NoQuorum,
    /// The witness's vkey does not parse, or its name cannot name a note key.
    #[error(transparent)]
    Key(#[from] NoteKeyError),
    #[error("witness {0:?}: the vkey is not a cosignature/v1 key (type 0x04)")]
    NotCosignatureKey(String),
    #[error("witness {0:?}: the key is neither 64 hex digits nor a vkey")]
    KeyFormat(String),
}

/// A checkpoint whose cosignatures do not satisfy the quorum: who cosigned it, and what was needed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the checkpoint of size {size} lacks the witness quorum: it needs {needs}, and is cosigned by {}", cosigners(.cosigned_by))]
pub struct Unsatisfied {
    pub size: u64,
    pub needs: Needed,
    /// The names of the policy's witnesses whose cosignatures verify.
    pub cosigned_by: Vec<String>,
}

/// The quorum a policy names.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Needed {
    Witness(String),
    Group { name: String, threshold: usize, members: usize },
}

impl std::fmt::Display for Needed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Needed::Witness(name) => write!(f, "witness {name}"),
            Needed::Group { name, threshold, members } => write!(f, "group {name} ({threshold} of {members})"),
        }
    }
}

fn cosigners(names: &[String]) -> String {
    match names.is_empty() {
        true => "no witness of the policy".to_string(),
        false => names.join(", "),
    }
}

/// Why a bundle does not satisfy a witness policy.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Unwitnessed {
    #[error("tlog entry {entry}: {source}")]
    Checkpoint {
        entry: usize,
        #[source]
        source: NoteError,
    },
    #[error("tlog entry {entry}: {source}")]
    Unsatisfied {
        entry: usize,
        #[source]
        source: Unsatisfied,
    },
    #[error("the bundle has no checkpoint to check the witness policy on")]
    NoCheckpoint,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Member {
    Witness(usize),
    Group(usize),
}

#[derive(Debug, Clone)]
struct Group {
    name: String,
    threshold: usize,
    members: Vec<Member>,
}

/// A parsed policy.
#[derive(Debug, Clone)]
pub struct WitnessPolicy {
    witnesses: Vec<(String, VerifierKey)>,
    groups: Vec<Group>,
    quorum: Member,
}

impl WitnessPolicy {
    pub fn parse(text: &str) -> Result<WitnessPolicy, PolicyError> {
        let mut witnesses: Vec<(String, VerifierKey)> = Vec::new();
        let mut groups: Vec<Group> = Vec::new();
        let mut names: HashMap<String, Member> = HashMap::new();
        let mut quorum = None;
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let err = |why: Mistake| PolicyError { line, why };
            let words: Vec<&str> = raw.split('#').next().unwrap_or("").split_whitespace().collect();
            let Some((&keyword, args)) = words.split_first() else { continue };
            match keyword {
                "log" => {
                    if args.is_empty() || args.len() > 2 {
                        return Err(err(Mistake::LogLine));
                    }
                }
                "witness" => {
                    let (name, key) = match args {
                        [n, k] | [n, k, _] => (*n, *k),
                        _ => return Err(err(Mistake::WitnessLine)),
                    };
                    let vkey = witness_key(name, key).map_err(err)?;
                    if names.insert(name.to_string(), Member::Witness(witnesses.len())).is_some() {
                        return Err(err(Mistake::DefinedTwice(name.to_string())));
                    }
                    witnesses.push((name.to_string(), vkey));
                }
                "group" => {
                    let [name, threshold, members @ ..] = args else {
                        return Err(err(Mistake::GroupLine));
                    };
                    if members.is_empty() {
                        return Err(err(Mistake::NoMembers(name.to_string())));
                    }
                    let members = members
                        .iter()
                        .map(|m| names.get(*m).copied().ok_or_else(|| err(Mistake::Undefined(m.to_string()))))
                        .collect::<Result<Vec<_>, _>>()?;
                    let threshold = match *threshold {
                        "all" => members.len(),
                        "any" => 1,
                        k => k
                            .parse::<usize>()
                            .ok()
                            .filter(|k| (1..=members.len()).contains(k))
                            .ok_or_else(|| err(Mistake::Threshold { given: k.to_string(), members: members.len() }))?,
                    };
                    if names.insert(name.to_string(), Member::Group(groups.len())).is_some() {
                        return Err(err(Mistake::DefinedTwice(name.to_string())));
                    }
                    groups.push(Group { name: name.to_string(), threshold, members });
                }
                "quorum" => {
                    let [name] = args else { return Err(err(Mistake::QuorumLine)) };
                    if quorum.is_some() {
                        return Err(err(Mistake::QuorumTwice));
                    }
                    quorum = Some(names.get(*name).copied().ok_or_else(|| err(Mistake::Undefined(name.to_string())))?);
                }
                other => return Err(err(Mistake::UnknownKeyword(other.to_string()))),
            }
        }
        let quorum = quorum.ok_or(PolicyError { line: text.lines().count(), why: Mistake::NoQuorum })?;
        Ok(WitnessPolicy { witnesses, groups, quorum })
    }

    /// Whether the checkpoint's cosignatures satisfy the quorum; if not, who cosigned and what was needed.
    pub fn check(&self, note: &SignedNote) -> Result<(), Unsatisfied> {
        let cosigned: Vec<bool> = self.witnesses.iter().map(|(_, k)| k.verify(note).is_some()).collect();
        if self.satisfied(self.quorum, &cosigned, 0) {
            return Ok(());
        }
        let cosigned_by = self.witnesses.iter().zip(&cosigned).filter(|(_, c)| **c).map(|((n, _), _)| n.clone()).collect();
        let needs = match self.quorum {
            Member::Witness(w) => Needed::Witness(self.witnesses[w].0.clone()),
            Member::Group(g) => {
                let group = &self.groups[g];
                Needed::Group { name: group.name.clone(), threshold: group.threshold, members: group.members.len() }
            }
        };
        Err(Unsatisfied { size: note.checkpoint.size, needs, cosigned_by })
    }

    fn satisfied(&self, m: Member, cosigned: &[bool], depth: usize) -> bool {
        match m {
            Member::Witness(w) => cosigned[w],
            // Groups only name groups defined before them, so this terminates; the depth is a
            // second guard for the reader.
            Member::Group(g) if depth < 64 => {
                let group = &self.groups[g];
                group.members.iter().filter(|m| self.satisfied(**m, cosigned, depth + 1)).count() >= group.threshold
            }
            Member::Group(_) => false,
        }
    }
}

/// Checks every checkpoint of a bundle's log entries against `policy`. Run after the bundle
/// verified: that checked each checkpoint's log signature and the entry's proof under it.
pub fn check_bundle(bundle: &crate::bundle::Bundle, policy: &WitnessPolicy) -> Result<(), Unwitnessed> {
    let mut checked = 0;
    for (entry, tlog) in bundle.tlog_entries.iter().enumerate() {
        let Some(envelope) = tlog.inclusion_proof.as_ref().and_then(|p| p.checkpoint.as_ref()) else { continue };
        let note = SignedNote::parse(envelope).map_err(|source| Unwitnessed::Checkpoint { entry, source })?;
        policy.check(&note).map_err(|source| Unwitnessed::Unsatisfied { entry, source })?;
        checked += 1;
    }
    match checked {
        0 => Err(Unwitnessed::NoCheckpoint),
        _ => Ok(()),
    }
}

fn witness_key(name: &str, key: &str) -> Result<VerifierKey, Mistake> {
    if key.contains('+') {
        let vkey = VerifierKey::parse(key)?;
        if vkey.kind != NoteKeyType::Cosignature {
            return Err(Mistake::NotCosignatureKey(name.to_string()));
        }
        return Ok(vkey);
    }
    let raw = hex::decode(key).ok().and_then(|b| <[u8; 32]>::try_from(b).ok());
    let raw = raw.ok_or_else(|| Mistake::KeyFormat(name.to_string()))?;
    Ok(VerifierKey::new(name, NoteKeyType::Cosignature, raw)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use signet_core::notekey::signature_line;
    use signet_keys::NoteSigner;

    const TEXT: &str = "log.example\n7\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n";

    fn note(cosigners: &[&NoteSigner]) -> SignedNote {
        let log = NoteSigner::generate("log.example", NoteKeyType::Ed25519).unwrap();
        let mut n = format!("{TEXT}\n{}", signature_line(&log.sign(TEXT, 0).unwrap()));
        for c in cosigners {
            n.push_str(&signature_line(&c.sign(TEXT, 1_700_000_000).unwrap()));
        }
        SignedNote::parse(&n).unwrap()
    }

    #[test]
    fn k_of_n_nested_groups_decide() {
        let w: Vec<NoteSigner> = (0..3).map(|i| NoteSigner::generate(&format!("w{i}.example"), NoteKeyType::Cosignature).unwrap()).collect();
        let hex = |s: &NoteSigner| hex::encode(s.vkey().key);
        let policy = WitnessPolicy::parse(&format!(
            "log 00ff\nwitness w0.example {}\nwitness w1.example {} https://w1\nwitness third {}  # a vkey\ngroup two 2 w0.example w1.example third\ngroup top all two\nquorum top\n",
            hex(&w[0]),
            hex(&w[1]),
            w[2].vkey()
        ))
        .unwrap();
        assert!(policy.check(&note(&[&w[0], &w[2]])).is_ok());
        let err = policy.check(&note(&[&w[1]])).unwrap_err().to_string();
        assert_eq!(err, "the checkpoint of size 7 lacks the witness quorum: it needs group top (1 of 1), and is cosigned by w1.example");
        assert!(policy.check(&note(&[])).unwrap_err().to_string().ends_with("cosigned by no witness of the policy"));
        // A cosignature by a key of the right name but another key does not count.
        let impostor = NoteSigner::generate("w0.example", NoteKeyType::Cosignature).unwrap();
        assert!(policy.check(&note(&[&impostor, &w[1]])).is_err());
    }

    #[test]
    fn mistakes_name_their_line() {
        for (text, line, says) in [
            ("witness a 00\nquorum a\n", 1, "neither 64 hex"),
            ("group g 1 nobody\n", 1, "not a witness or group"),
            (&format!("witness a {}\ngroup g 3 a\nquorum g\n", "11".repeat(32)), 2, "1 to 1"),
            (&format!("witness a {}\n", "11".repeat(32)), 1, "no quorum"),
            ("frobnicate x\n", 1, "unknown keyword"),
        ] {
            let e = WitnessPolicy::parse(text).unwrap_err();
            assert_eq!(e.line, line, "{text}: {e}");
            assert!(e.to_string().contains(says), "{text}: {e}");
        }
    }
}
