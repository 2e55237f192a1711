//! The published repository in memory: each file's name under `/tuf/` and its bytes. A
//! request looks a name up in a map, so no request path ever reaches the file system.

use std::collections::HashMap;
use std::path::Path;

use bytes::Bytes;

use super::error::TufError;

#[derive(Debug, Default, Clone)]
pub struct Files {
    by_name: HashMap<String, Bytes>,
}

/// Names as the repository writes them: no separators, no dot files (temporaries).
fn publishable(name: &str) -> bool {
    !name.is_empty() && !name.starts_with('.') && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

/// A name under `/tuf/` as [`Files`] holds it: a metadata file, or `targets/` and a target file.
pub fn publishable_path(name: &str) -> bool {
    publishable(name.strip_prefix("targets/").unwrap_or(name))
}

impl Files {
    /// Reads the metadata in `dir` and the targets in `dir/targets`.
    pub fn load(dir: &Path) -> Result<Files, TufError> {
        let mut by_name = HashMap::new();
        for (sub, prefix) in [(dir.to_path_buf(), ""), (dir.join("targets"), "targets/")] {
            let entries = match std::fs::read_dir(&sub) {
                Ok(entries) => entries,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(source) => return Err(TufError::Io { path: sub, source }),
            };
            for entry in entries {
                let entry = entry.map_err(|source| TufError::Io { path: sub.clone(), source })?;
                let name = entry.file_name().to_string_lossy().into_owned();
                if !publishable(&name) || !entry.file_type().is_ok_and(|t| t.is_file()) {
                    continue;
                }
                let bytes = std::fs::read(entry.path()).map_err(|source| TufError::Io { path: entry.path(), source })?;
                by_name.insert(format!("{prefix}{name}"), Bytes::from(bytes));
            }
        }
        Ok(Files { by_name })
    }

    /// Adds (or replaces) one file; a name the repository would never write is refused.
    pub fn insert(&mut self, name: &str, bytes: Bytes) -> Result<(), TufError> {
        if !publishable_path(name) {
            return Err(TufError::Corrupt { path: name.into(), msg: "not a name a TUF repository publishes".into() });
        }
        self.by_name.insert(name.to_string(), bytes);
        Ok(())
    }

    /// Every file, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Bytes)> {
        self.by_name.iter().map(|(n, b)| (n.as_str(), b))
    }

    /// The files that `base` lacks or holds with other bytes.
    pub fn changed_from(&self, base: &Files) -> Vec<(String, Bytes)> {
        self.by_name.iter().filter(|(n, b)| base.by_name.get(*n) != Some(*b)).map(|(n, b)| (n.clone(), b.clone())).collect()
    }

    pub fn get(&self, name: &str) -> Option<Bytes> {
        self.by_name.get(name).cloned()
    }

    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_repository_s_own_names_are_published() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("targets")).unwrap();
        std::fs::write(dir.path().join("1.root.json"), b"{}").unwrap();
        std::fs::write(dir.path().join(".timestamp.json.tmp1"), b"half").unwrap();
        std::fs::write(dir.path().join("targets").join("ab.trusted_root.json"), b"t").unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        let files = Files::load(dir.path()).unwrap();
        assert_eq!(files.len(), 2);
        assert_eq!(files.get("1.root.json").as_deref(), Some(&b"{}"[..]));
        assert_eq!(files.get("targets/ab.trusted_root.json").as_deref(), Some(&b"t"[..]));
        assert!(files.get(".timestamp.json.tmp1").is_none());
        assert!(files.get("../1.root.json").is_none());
    }

    #[test]
    fn changes_are_what_the_base_lacks_or_holds_otherwise() {
        let mut base = Files::default();
        base.insert("1.root.json", Bytes::from_static(b"r")).unwrap();
        base.insert("timestamp.json", Bytes::from_static(b"t1")).unwrap();
        let mut now = base.clone();
        now.insert("timestamp.json", Bytes::from_static(b"t2")).unwrap();
        now.insert("targets/ab.trusted_root.json", Bytes::from_static(b"x")).unwrap();
        let mut changed: Vec<_> = now.changed_from(&base).into_iter().map(|(n, _)| n).collect();
        changed.sort();
        assert_eq!(changed, ["targets/ab.trusted_root.json", "timestamp.json"]);
        for bad in ["../keys/tuf-root.pem", "targets/../x", ".timestamp.json.tmp", "targets/", "a/b.json"] {
            assert!(now.insert(bad, Bytes::new()).is_err(), "{bad}");
        }
    }
}
