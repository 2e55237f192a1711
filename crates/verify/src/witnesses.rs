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

use signet_core::note::SignedNote;
use signet_core::notekey::{NoteKeyType, VerifierKey};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("witness policy line {line}: {why}")]
pub struct PolicyError {
    pub line: usize,
    pub why: String,
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
            let err = |why: String| PolicyError { line, why };
            let words: Vec<&str> = raw.split('#').next().unwrap_or("").split_whitespace().collect();
            let Some((&keyword, args)) = words.split_first() else { continue };
            match keyword {
                "log" => {
                    if args.is_empty() || args.len() > 2 {
                        return Err(err("expected: log <hex key> [url]".into()));
                    }
                }
                "witness" => {
                    let (name, key) = match args {
                        [n, k] | [n, k, _] => (*n, *k),
                        _ => return Err(err("expected: witness <name> <key> [url]".into())),
                    };
                    let vkey = witness_key(name, key).map_err(err)?;
                    if names.insert(name.to_string(), Member::Witness(witnesses.len())).is_some() {
                        return Err(err(format!("{name:?} is defined twice")));
                    }
                    witnesses.push((name.to_string(), vkey));
                }
                "group" => {
                    let [name, threshold, members @ ..] = args else {
                        return Err(err("expected: group <name> <k|all|any> <member>...".into()));
                    };
                    if members.is_empty() {
                        return Err(err(format!("group {name:?} has no members")));
                    }
                    let members = members
                        .iter()
                        .map(|m| names.get(*m).copied().ok_or_else(|| err(format!("{m:?} is not a witness or group defined above"))))
                        .collect::<Result<Vec<_>, _>>()?;
                    let threshold = match *threshold {
                        "all" => members.len(),
                        "any" => 1,
                        k => k
                            .parse::<usize>()
                            .ok()
                            .filter(|k| (1..=members.len()).contains(k))
                            .ok_or_else(|| err(format!("threshold {k:?} must be all, any, or 1 to {}", members.len())))?,
                    };
                    if names.insert(name.to_string(), Member::Group(groups.len())).is_some() {
                        return Err(err(format!("{name:?} is defined twice")));
                    }
                    groups.push(Group { name: name.to_string(), threshold, members });
                }
                "quorum" => {
                    let [name] = args else { return Err(err("expected: quorum <name>".into())) };
                    if quorum.is_some() {
                        return Err(err("quorum is given twice".into()));
                    }
                    quorum = Some(names.get(*name).copied().ok_or_else(|| err(format!("{name:?} is not a witness or group defined above")))?);
                }
                other => return Err(err(format!("unknown keyword {other:?}; expected log, witness, group or quorum"))),
            }
        }
        let quorum = quorum.ok_or(PolicyError { line: text.lines().count(), why: "the policy has no quorum line".into() })?;
        Ok(WitnessPolicy { witnesses, groups, quorum })
    }

    /// Whether the checkpoint's cosignatures satisfy the quorum; if not, who cosigned and what was needed.
    pub fn check(&self, note: &SignedNote) -> Result<(), String> {
        let cosigned: Vec<bool> = self.witnesses.iter().map(|(_, k)| k.verify(note).is_some()).collect();
        if self.satisfied(self.quorum, &cosigned, 0) {
            return Ok(());
        }
        let by: Vec<&str> = self.witnesses.iter().zip(&cosigned).filter(|(_, c)| **c).map(|((n, _), _)| n.as_str()).collect();
        let need = match self.quorum {
            Member::Witness(w) => format!("witness {}", self.witnesses[w].0),
            Member::Group(g) => format!("group {} ({} of {})", self.groups[g].name, self.groups[g].threshold, self.groups[g].members.len()),
        };
        Err(format!(
            "the checkpoint of size {} lacks the witness quorum: it needs {need}, and is cosigned by {}",
            note.checkpoint.size,
            if by.is_empty() { "no witness of the policy".to_string() } else { by.join(", ") }
        ))
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
pub fn check_bundle(bundle: &crate::bundle::Bundle, policy: &WitnessPolicy) -> Result<(), String> {
    let mut checked = 0;
    for (i, entry) in bundle.tlog_entries.iter().enumerate() {
        let Some(envelope) = entry.inclusion_proof.as_ref().and_then(|p| p.checkpoint.as_ref()) else { continue };
        let note = SignedNote::parse(envelope).map_err(|e| format!("tlog entry {i}: {e}"))?;
        policy.check(&note).map_err(|e| format!("tlog entry {i}: {e}"))?;
        checked += 1;
    }
    match checked {
        0 => Err("the bundle has no checkpoint to check the witness policy on".into()),
        _ => Ok(()),
    }
}

fn witness_key(name: &str, key: &str) -> Result<VerifierKey, String> {
    if key.contains('+') {
        let vkey = VerifierKey::parse(key).map_err(|e| e.to_string())?;
        if vkey.kind != NoteKeyType::Cosignature {
            return Err(format!("witness {name:?}: the vkey is not a cosignature/v1 key (type 0x04)"));
        }
        return Ok(vkey);
    }
    let raw = hex::decode(key).ok().and_then(|b| <[u8; 32]>::try_from(b).ok());
    let raw = raw.ok_or_else(|| format!("witness {name:?}: the key is neither 64 hex digits nor a vkey"))?;
    VerifierKey::new(name, NoteKeyType::Cosignature, raw).map_err(|e| e.to_string())
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
        let err = policy.check(&note(&[&w[1]])).unwrap_err();
        assert!(err.contains("needs group top (1 of 1)") && err.contains("cosigned by w1.example"), "{err}");
        assert!(policy.check(&note(&[])).unwrap_err().contains("no witness of the policy"));
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
