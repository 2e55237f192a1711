//! Where a log's later shards keep their keys. Shard 0's key is the configured one
//! (`[keys] rekor_v1`, `rekor_v2`, `ct`). When that is on a token or in KMS, every later
//! shard's key is made beside it (object or alias `<shard 0's name>-shard-<n>`), so a
//! rotation never brings a key that was kept off the disk back onto it. Otherwise each is a
//! file in the data dir ([`super::kind::key_path`]).
//!
//! Every instance of a database derives the same name from the same config, so on
//! PostgreSQL a key made on a shared HSM or in KMS needs no sealed copy in the database: the
//! other instances open it where it is, and check it against the public key the shard's
//! record names.

use std::path::{Path, PathBuf};

use signet_keys::{Algorithm, AwsKmsUri, KeySource, Pkcs11Settings, Signer};

use super::error::ShardError;
use super::kind::Kind;

#[derive(Clone, Default)]
pub struct KeyHomes {
    /// Shard 0's key of each log that is not a file.
    zero: Vec<(Kind, KeySource)>,
    pkcs11: Pkcs11Settings,
}

/// Where one shard's key is.
#[derive(Debug)]
pub enum Place {
    File(PathBuf),
    Elsewhere(KeySource),
}

impl std::fmt::Display for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Place::File(p) => write!(f, "{}", p.display()),
            Place::Elsewhere(s) => write!(f, "{s}"),
        }
    }
}

impl KeyHomes {
    /// From each log's configured shard-0 key (`None`: a file in the data dir).
    pub fn new(zero: [(Kind, Option<&KeySource>); 3], pkcs11: Pkcs11Settings) -> KeyHomes {
        let zero = zero.into_iter().filter_map(|(kind, s)| s.filter(|s| !matches!(s, KeySource::File(_))).map(|s| (kind, s.clone()))).collect();
        KeyHomes { zero, pkcs11 }
    }

    /// From a config's `[keys]`.
    pub fn of(keys: &crate::config::KeyPaths) -> KeyHomes {
        KeyHomes::new([(Kind::RekorV1, keys.rekor_v1.as_ref()), (Kind::RekorV2, keys.rekor_v2.as_ref()), (Kind::Ct, keys.ct.as_ref())], keys.pkcs11())
    }

    /// True when `kind`'s later shards' keys are made beside shard 0's, not in the data dir.
    pub fn elsewhere(&self, kind: Kind) -> bool {
        self.zero.iter().any(|(k, _)| *k == kind)
    }

    /// Where shard `number` (after 0) of `kind` keeps its key.
    pub fn place(&self, kind: Kind, data_dir: &Path, number: u32) -> Result<Place, ShardError> {
        let Some((_, zero)) = self.zero.iter().find(|(k, _)| *k == kind) else { return Ok(Place::File(super::kind::key_path(kind, data_dir, number))) };
        let suffix = format!("-shard-{number}");
        Ok(Place::Elsewhere(match zero {
            KeySource::Pkcs11(uri) => {
                let Some(object) = &uri.object else {
                    return Err(ShardError::NoObject { zero: zero.clone(), kind });
                };
                let mut next = uri.clone();
                next.object = Some(format!("{object}{suffix}"));
                next.id = None;
                KeySource::Pkcs11(next)
            }
            KeySource::AwsKms(uri) => {
                // An alias names the next key after it; a bare key id, after the log.
                let base = uri.key.strip_prefix("alias/").map_or_else(|| format!("signet-{}", kind.cli_name()), str::to_string);
                KeySource::AwsKms(AwsKmsUri { endpoint: uri.endpoint.clone(), key: format!("alias/{base}{suffix}") })
            }
            KeySource::File(_) => return Ok(Place::File(super::kind::key_path(kind, data_dir, number))),
        }))
    }

    /// The key at `place`, made there first when `make` is set and it is not there.
    pub fn open(&self, place: &Place, make: bool) -> Result<Signer, ShardError> {
        let p256 = Algorithm::EcdsaP256Sha256;
        Ok(match place {
            Place::File(path) => match make {
                true => Signer::load_or_generate(path, p256),
                false => Signer::open(&KeySource::File(path.clone()), &self.pkcs11, &[p256], false),
            }?,
            Place::Elsewhere(source) => {
                if make {
                    signet_keys::home::ensure(source, &self.pkcs11, p256).map_err(|error| ShardError::Making { key: source.clone(), error })?;
                }
                Signer::open(source, &self.pkcs11, &[p256], false)?
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shard_s_key_is_named_beside_shard_zero_s() {
        let token: KeySource = "pkcs11:token=signet;object=signet-ct".parse().unwrap();
        let kms: KeySource = "awskms://127.0.0.1:4566/alias/signet-rekor-v2".parse().unwrap();
        let bare: KeySource = "awskms:///1234abcd-12ab-34cd-56ef-1234567890ab".parse().unwrap();
        let homes = KeyHomes::new([(Kind::Ct, Some(&token)), (Kind::RekorV2, Some(&kms)), (Kind::RekorV1, None)], Pkcs11Settings::default());
        let dir = Path::new("/data");
        assert_eq!(homes.place(Kind::Ct, dir, 2).unwrap().to_string(), "pkcs11:token=signet;object=signet-ct-shard-2");
        assert_eq!(homes.place(Kind::RekorV2, dir, 1).unwrap().to_string(), "awskms://127.0.0.1:4566/alias/signet-rekor-v2-shard-1");
        assert_eq!(homes.place(Kind::RekorV1, dir, 1).unwrap().to_string(), "/data/keys/rekor-v1.shard-1.pem");
        assert!(homes.elsewhere(Kind::Ct) && !homes.elsewhere(Kind::RekorV1));
        let homes = KeyHomes::new([(Kind::Ct, Some(&bare)), (Kind::RekorV2, None), (Kind::RekorV1, None)], Pkcs11Settings::default());
        assert_eq!(homes.place(Kind::Ct, dir, 1).unwrap().to_string(), "awskms:///alias/signet-ct-shard-1");
        let by_id: KeySource = "pkcs11:token=signet;id=%01".parse().unwrap();
        let homes = KeyHomes::new([(Kind::Ct, Some(&by_id)), (Kind::RekorV2, None), (Kind::RekorV1, None)], Pkcs11Settings::default());
        assert!(homes.place(Kind::Ct, dir, 1).unwrap_err().to_string().contains("object="));
    }
}
