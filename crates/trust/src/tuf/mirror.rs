//! The repository directory as a copy of a repository published elsewhere: on PostgreSQL,
//! several instances serve one repository from the database, and the one that signs first
//! brings its directory up to date from it, signs there as a single instance does, and
//! stores back what changed (signet_server::tuf).

use bytes::Bytes;

use super::keys::{Role, RoleKeys};
use super::repo::Repository;
use super::error::TufError;

/// Where a file goes in a bottom-up write: targets, then the metadata naming them, then the
/// roots, then `timestamp.json`, which names the rest.
fn rank(name: &str) -> u8 {
    match name {
        _ if name.starts_with("targets/") => 0,
        _ if name.ends_with(".targets.json") => 1,
        _ if name.ends_with(".snapshot.json") => 2,
        "root.json" => 4,
        "timestamp.json" => 5,
        _ => 3,
    }
}

impl Repository {
    /// Writes each of `files` whose bytes differ from the directory's, bottom-up, so that a
    /// reader of the directory never sees a timestamp naming a file not yet written. Files
    /// only here stay (targets signed offline and not yet adopted, say). Returns how many
    /// were written.
    pub fn mirror<'a>(&self, files: impl IntoIterator<Item = (&'a str, &'a Bytes)>) -> Result<usize, TufError> {
        let mut files: Vec<_> = files.into_iter().filter(|(n, _)| super::files::publishable_path(n)).collect();
        files.sort_by_key(|(n, _)| (rank(n), n.to_string()));
        std::fs::create_dir_all(self.dir().join("targets")).map_err(|source| TufError::Io { path: self.dir().to_path_buf(), source })?;
        let mut written = 0;
        for (name, bytes) in files {
            if std::fs::read(self.dir().join(name)).is_ok_and(|held| held == bytes.as_ref()) {
                continue;
            }
            self.write(name, bytes)?;
            written += 1;
        }
        Ok(written)
    }

    /// Removes one file (a signing whose result could not be stored is undone this way).
    pub fn forget(&self, name: &str) -> Result<(), TufError> {
        let path = self.dir().join(name);
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(TufError::Io { path, source: e }),
            _ => Ok(()),
        }
    }

    /// The files the current state is made of: the newest root (and `root.json`),
    /// `timestamp.json`, the snapshot it names, the targets that names, and their target files.
    pub fn current_names(&self) -> Result<Vec<String>, TufError> {
        let c = self.current()?;
        let mut names = vec![self.newest_root_name(), "root.json".into(), "timestamp.json".into()];
        names.push(format!("{}.snapshot.json", c.snapshot.signed.version));
        names.push(format!("{}.targets.json", c.targets.signed.version));
        for (target, meta) in &c.targets.signed.targets {
            names.push(format!("targets/{}.{}", hex::encode(&meta.hashes.sha256), target.raw()));
        }
        Ok(names)
    }

    /// Signs again, with `keys`, the highest role whose current metadata the newest root
    /// does not accept (and the roles below it): after `signet tuf rotate` on this data dir,
    /// bringing it up to date from the database put back metadata the old key signed.
    /// Returns the role signed again, if one was.
    pub async fn resign_unaccepted(&self, keys: &RoleKeys, expiry: &super::Expiry, now: jiff::Timestamp) -> Result<Option<Role>, TufError> {
        let c = self.current()?;
        let root = &c.root.signed;
        let role = if root.verify_role(&c.targets).is_err() {
            Role::Targets
        } else if root.verify_role(&c.snapshot).is_err() {
            Role::Snapshot
        } else if root.verify_role(&c.timestamp).is_err() {
            Role::Timestamp
        } else {
            return Ok(None);
        };
        self.resign(role, keys, expiry, now).await?;
        Ok(Some(role))
    }

    /// The online roles whose key here is not the one the newest root names: this instance
    /// cannot sign for them. A role whose key is absent is not listed (signing it says so).
    pub fn foreign_keys(&self, keys: &RoleKeys) -> Result<Vec<Role>, TufError> {
        let mut foreign = Vec::new();
        for role in [Role::Targets, Role::Snapshot, Role::Timestamp] {
            let Some(key) = keys.get(role) else { continue };
            let (named, threshold) = self.role_key_ids(role)?;
            // Targets signed k of n come from a ceremony: a key held here has no part in them.
            if role == Role::Targets && threshold > 1 {
                continue;
            }
            if !named.contains(&key.key_id_hex()?) {
                foreign.push(role);
            }
        }
        Ok(foreign)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tuf::{Expiry, Files};

    #[tokio::test]
    async fn a_copy_brought_up_to_date_serves_the_same_repository_and_knows_foreign_keys() {
        let tmp = tempfile::tempdir().unwrap();
        let keys = RoleKeys::generate_missing(&tmp.path().join("keys")).unwrap();
        let first = Repository::at(tmp.path().join("first"));
        let docs = vec![(crate::tuf::TRUSTED_ROOT_TARGET, b"{}".to_vec())];
        first.create(&keys, &Expiry::default(), &docs, jiff::Timestamp::now()).await.unwrap();
        let published = Files::load(first.dir()).unwrap();

        let copy = Repository::at(tmp.path().join("copy"));
        assert_eq!(copy.mirror(published.iter()).unwrap(), published.len());
        assert_eq!(copy.mirror(published.iter()).unwrap(), 0, "nothing differs the second time");
        assert!(Files::load(copy.dir()).unwrap().changed_from(&published).is_empty());
        assert_eq!(copy.status().unwrap(), first.status().unwrap());
        let mut names = copy.current_names().unwrap();
        names.sort();
        assert_eq!(names.len(), 6, "{names:?}");
        assert!(names.iter().all(|n| published.get(n).is_some()), "{names:?}");

        assert!(copy.foreign_keys(&keys).unwrap().is_empty());
        let other = RoleKeys::generate_missing(&tmp.path().join("other-keys")).unwrap();
        assert_eq!(copy.foreign_keys(&other).unwrap(), vec![Role::Targets, Role::Snapshot, Role::Timestamp]);

        // A timestamp key rotated here, then the published (old-key) timestamp copied back
        // over it: it is signed again with the new key, once.
        let now = jiff::Timestamp::now();
        assert_eq!(copy.resign_unaccepted(&keys, &Expiry::default(), now).await.unwrap(), None);
        let (new_key, pem) = crate::tuf::keys::HeldKey::generate(Role::Timestamp).unwrap();
        copy.rotate_key(Role::Timestamp, &keys, new_key, &Expiry::default(), now).await.unwrap();
        std::fs::write(tmp.path().join("new-timestamp.pem"), pem).unwrap();
        let rotated = keys.clone().with_file(Role::Timestamp, &tmp.path().join("new-timestamp.pem")).unwrap();
        copy.mirror(published.iter().filter(|(n, _)| *n == "timestamp.json")).unwrap();
        assert_eq!(copy.resign_unaccepted(&rotated, &Expiry::default(), now).await.unwrap(), Some(Role::Timestamp));
        assert_eq!(copy.resign_unaccepted(&rotated, &Expiry::default(), now).await.unwrap(), None);
        assert_eq!(copy.status().unwrap().root.0, 2);

        copy.forget("timestamp.json").unwrap();
        copy.forget("timestamp.json").unwrap();
        assert!(!copy.dir().join("timestamp.json").exists());
    }
}
