use super::*;
use tough::{IntoVec, RepositoryLoader};

const HOUR: i64 = 3600;

fn docs(trusted_root: &str) -> Vec<(&'static str, Vec<u8>)> {
    vec![(super::super::TRUSTED_ROOT_TARGET, trusted_root.as_bytes().to_vec()), (super::super::SIGNING_CONFIG_TARGET, b"{\"sc\":1}".to_vec())]
}

fn ago(hours: i64) -> jiff::Timestamp {
    jiff::Timestamp::from_second(jiff::Timestamp::now().as_second() - hours * HOUR).unwrap()
}

/// What a TUF client (tough's own) reads from the repository, from its first root.
async fn client_reads(dir: &Path, name: &str) -> Vec<u8> {
    let root = std::fs::read(dir.join("1.root.json")).unwrap();
    let meta = url::Url::from_directory_path(dir).unwrap();
    let targets = url::Url::from_directory_path(dir.join("targets")).unwrap();
    let store = tempfile::tempdir().unwrap();
    let repo = RepositoryLoader::new(&root, meta, targets).datastore(store.path()).load().await.unwrap();
    let stream = repo.read_target(&TargetName::new(name).unwrap()).await.unwrap().unwrap();
    stream.into_vec().await.unwrap()
}

fn setup() -> (tempfile::TempDir, RoleKeys, Repository) {
    let tmp = tempfile::tempdir().unwrap();
    let keys = RoleKeys::generate_missing(&tmp.path().join("keys")).unwrap();
    let repo = Repository::at(tmp.path().join("tuf"));
    (tmp, keys, repo)
}

#[tokio::test]
async fn a_tuf_client_verifies_what_the_repository_publishes_and_its_changes() {
    let (_tmp, keys, repo) = setup();
    let expiry = Expiry::default();
    assert!(!repo.exists());
    repo.create(&keys, &expiry, &docs("{\"v\":1}"), jiff::Timestamp::now()).await.unwrap();
    assert!(repo.exists());
    assert_eq!(client_reads(repo.dir(), "trusted_root.json").await, b"{\"v\":1}");
    assert_eq!(client_reads(repo.dir(), "signing_config.v0.2.json").await, b"{\"sc\":1}");
    let status = repo.status().unwrap();
    assert_eq!((status.root.0, status.targets.0, status.snapshot.0, status.timestamp.0), (1, 1, 1, 1));

    // The same documents again: nothing new is signed.
    assert_eq!(repo.publish(&keys, &expiry, &docs("{\"v\":1}"), jiff::Timestamp::now()).await.unwrap(), Published::Unchanged);
    // Changed documents: new targets, snapshot and timestamp, which a client follows.
    assert_eq!(repo.publish(&keys, &expiry, &docs("{\"v\":2}"), jiff::Timestamp::now()).await.unwrap(), Published::Targets(2));
    assert_eq!(client_reads(repo.dir(), "trusted_root.json").await, b"{\"v\":2}");
    let status = repo.status().unwrap();
    assert_eq!((status.root.0, status.targets.0, status.snapshot.0, status.timestamp.0), (1, 2, 2, 2));
    // The old version stays for a client that read the previous timestamp.
    assert!(repo.dir().join("1.targets.json").exists() && repo.dir().join("1.snapshot.json").exists());
    // Expiries are whole seconds, as python-tuf parses them.
    let text = std::fs::read_to_string(repo.dir().join("timestamp.json")).unwrap();
    let expires: serde_json::Value = serde_json::from_str(&text).unwrap();
    let expires = expires["signed"]["expires"].as_str().unwrap().to_string();
    assert!(expires.ends_with('Z') && !expires.contains('.') && expires.len() == 20, "{expires}");
    // cosign and sigstore-go refuse a root without it (their re-encoding adds it).
    let root: serde_json::Value = serde_json::from_slice(&std::fs::read(repo.dir().join("1.root.json")).unwrap()).unwrap();
    assert_eq!(root["signed"]["consistent_snapshot"], true);
    assert_eq!(root["signed"]["keys"].as_object().unwrap().len(), 4);
}

#[tokio::test]
async fn a_client_holding_the_first_root_follows_each_key_rotation() {
    let (tmp, mut keys, repo) = setup();
    let expiry = Expiry::default();
    repo.create(&keys, &expiry, &docs("{\"v\":1}"), jiff::Timestamp::now()).await.unwrap();
    for (n, role) in [Role::Timestamp, Role::Snapshot, Role::Targets, Role::Root].into_iter().enumerate() {
        let (new_key, pem) = HeldKey::generate(role).unwrap();
        let id = new_key.public().unwrap().key_id().unwrap();
        let version = repo.rotate_key(role, &keys, new_key, &expiry, jiff::Timestamp::now()).await.unwrap();
        assert_eq!(version, n as u64 + 2);
        let root: Signed<Root> = serde_json::from_slice(&std::fs::read(repo.dir().join(format!("{version}.root.json"))).unwrap()).unwrap();
        assert_eq!(root.signed.roles[&role.tough()].keyids, vec![id]);
        assert_eq!(root.signed.keys.len(), 4, "the old key left the root");
        // The root's own rotation is signed by the old root key and the new one.
        assert_eq!(root.signatures.len(), if role == Role::Root { 2 } else { 1 });
        // tough's client, from 1.root.json, walks the roots and reads the targets.
        assert_eq!(client_reads(repo.dir(), "trusted_root.json").await, b"{\"v\":1}", "after rotating {}", role.name());
        let path = tmp.path().join(format!("new-{}.pem", role.name()));
        std::fs::write(&path, pem).unwrap();
        keys = keys.with_file(role, &path).unwrap();
    }
    // The new keys publish, and the old root's holder follows.
    assert_eq!(repo.publish(&keys, &expiry, &docs("{\"v\":2}"), jiff::Timestamp::now()).await.unwrap(), Published::Targets(3));
    assert_eq!(client_reads(repo.dir(), "trusted_root.json").await, b"{\"v\":2}");
    assert_eq!(repo.status().unwrap().root.0, 5);
    // Without the root key, nothing rotates and nothing is written.
    let online = RoleKeys::default().with_file(Role::Timestamp, &tmp.path().join("new-timestamp.pem")).unwrap();
    let (new_key, _) = HeldKey::generate(Role::Timestamp).unwrap();
    assert!(matches!(repo.rotate_key(Role::Timestamp, &online, new_key, &expiry, jiff::Timestamp::now()).await, Err(TufError::MissingKey { .. })));
    assert!(!repo.dir().join("6.root.json").exists());
}

#[tokio::test]
async fn targets_signed_again_with_a_new_key_are_valid_for_the_configured_term_from_then() {
    let (_tmp, keys, repo) = setup();
    // Targets signed 80 days ago with a 90-day term, and a 100-day term configured now.
    repo.create(&keys, &Expiry::default(), &docs("{}"), ago(80 * 24)).await.unwrap();
    let expiry = Expiry { targets: std::time::Duration::from_secs(100 * 86_400), ..Expiry::default() };
    let (new_key, _) = HeldKey::generate(Role::Targets).unwrap();
    let now = jiff::Timestamp::now();
    repo.rotate_key(Role::Targets, &keys, new_key, &expiry, now).await.unwrap();
    let status = repo.status().unwrap();
    assert_eq!(status.targets.0, 2);
    assert_eq!(status.targets.1, now.as_second() + 100 * 86_400, "not the old targets' expiry, ten days off");
    assert_eq!(client_reads(repo.dir(), "trusted_root.json").await, b"{}");
}

#[tokio::test]
async fn each_role_is_signed_again_past_half_its_life_and_only_then() {
    let (tmp, keys, repo) = setup();
    let expiry = Expiry::default();
    repo.create(&keys, &expiry, &docs("{}"), ago(0)).await.unwrap();
    assert_eq!(repo.refresh(&keys, &expiry, jiff::Timestamp::now()).await.unwrap(), Vec::<Role>::new());

    // A timestamp signed 13 hours ago (of 24) is due; with the root and targets keys
    // offline, the online keys are enough.
    let (_tmp2, _, repo2) = setup();
    repo2.create(&keys, &expiry, &docs("{}"), ago(13)).await.unwrap();
    for role in [Role::Root, Role::Targets] {
        std::fs::remove_file(RoleKeys::path(&tmp.path().join("keys"), role)).unwrap();
    }
    let online = RoleKeys::load(&tmp.path().join("keys")).unwrap();
    assert_eq!(repo2.refresh(&online, &expiry, jiff::Timestamp::now()).await.unwrap(), vec![Role::Timestamp]);
    assert_eq!(repo2.status().unwrap().timestamp.0, 2);
    assert_eq!(client_reads(repo2.dir(), "trusted_root.json").await, b"{}");

    // A snapshot four days old (of seven): snapshot and timestamp.
    let (_tmp3, _, repo3) = setup();
    repo3.create(&keys, &expiry, &docs("{}"), ago(4 * 24)).await.unwrap();
    assert_eq!(repo3.refresh(&online, &expiry, jiff::Timestamp::now()).await.unwrap(), vec![Role::Snapshot, Role::Timestamp]);
    let s = repo3.status().unwrap();
    assert_eq!((s.targets.0, s.snapshot.0, s.timestamp.0), (1, 2, 2));

    // Targets 50 days old (of 90) need their key, and the error says where it belongs.
    let (_tmp4, _, repo4) = setup();
    repo4.create(&keys, &expiry, &docs("{}"), ago(50 * 24)).await.unwrap();
    let err = repo4.refresh(&online, &expiry, jiff::Timestamp::now()).await.unwrap_err().to_string();
    assert!(err.contains("TUF targets key") && err.contains("tuf-targets.pem"), "{err}");
    assert_eq!(repo4.status().unwrap().targets.0, 1, "nothing half-written");
    // Publishing new documents needs it too.
    let err = repo4.publish(&online, &expiry, &docs("{\"new\":1}"), jiff::Timestamp::now()).await.unwrap_err().to_string();
    assert!(err.contains("tuf-targets.pem"), "{err}");
}

/// Copies `from`'s metadata and targets over `to`, as an operator carries an offline
/// signing back.
fn copy_repo(from: &Path, to: &Path) {
    for sub in ["", "targets"] {
        std::fs::create_dir_all(to.join(sub)).unwrap();
        for e in std::fs::read_dir(from.join(sub)).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_file() {
                std::fs::copy(e.path(), to.join(sub).join(e.file_name())).unwrap();
            }
        }
    }
}

#[tokio::test]
async fn targets_signed_offline_are_adopted_once_they_check_out() {
    let (tmp, keys, live) = setup();
    let expiry = Expiry::default();
    live.create(&keys, &expiry, &docs("{\"v\":1}"), jiff::Timestamp::now()).await.unwrap();
    // The root and targets keys leave the machine.
    let keys_dir = tmp.path().join("keys");
    let offline_keys = tmp.path().join("offline-keys");
    std::fs::create_dir(&offline_keys).unwrap();
    for role in [Role::Root, Role::Targets] {
        std::fs::rename(RoleKeys::path(&keys_dir, role), RoleKeys::path(&offline_keys, role)).unwrap();
    }
    let online = RoleKeys::load(&keys_dir).unwrap();
    let offline = RoleKeys::load(&offline_keys).unwrap();

    // On a copy, with the targets key only: new targets, no snapshot or timestamp.
    let copy = Repository::at(tmp.path().join("copy"));
    copy_repo(live.dir(), copy.dir());
    assert_eq!(copy.sign_targets(&offline, &expiry, &docs("{\"v\":2}"), jiff::Timestamp::now()).await.unwrap(), 2);
    assert_eq!(copy.status().unwrap().targets.0, 1, "not current until a snapshot names it");
    assert!(copy.publish(&offline, &expiry, &docs("{\"v\":3}"), jiff::Timestamp::now()).await.is_err(), "a snapshot needs its key");

    // Carried back: the live repository signs a snapshot and timestamp for it.
    copy_repo(copy.dir(), live.dir());
    assert_eq!(live.adopt(&online, &expiry, jiff::Timestamp::now()).await.unwrap(), Some(2));
    assert_eq!(live.adopt(&online, &expiry, jiff::Timestamp::now()).await.unwrap(), None);
    assert_eq!(client_reads(live.dir(), "trusted_root.json").await, b"{\"v\":2}");

    // Targets whose signature does not check (a version edited after signing) are
    // refused, and nothing changes.
    let mut targets: serde_json::Value = serde_json::from_slice(&std::fs::read(live.dir().join("2.targets.json")).unwrap()).unwrap();
    targets["signed"]["version"] = 3.into();
    std::fs::write(live.dir().join("3.targets.json"), serde_json::to_vec(&targets).unwrap()).unwrap();
    let err = live.adopt(&online, &expiry, jiff::Timestamp::now()).await.unwrap_err().to_string();
    assert!(err.contains("3.targets.json") && err.contains("not signed by the root's targets key"), "{err}");
    assert_eq!(live.status().unwrap().targets.0, 2);
    std::fs::remove_file(live.dir().join("3.targets.json")).unwrap();

    // Targets whose files were not carried back are refused by name.
    let copy2 = Repository::at(tmp.path().join("copy2"));
    copy_repo(live.dir(), copy2.dir());
    assert_eq!(copy2.sign_targets(&offline, &expiry, &docs("{\"v\":4}"), jiff::Timestamp::now()).await.unwrap(), 3);
    std::fs::copy(copy2.dir().join("3.targets.json"), live.dir().join("3.targets.json")).unwrap();
    let err = live.adopt(&online, &expiry, jiff::Timestamp::now()).await.unwrap_err().to_string();
    assert!(err.contains("is missing; copy targets/ too"), "{err}");
    assert_eq!(live.status().unwrap().targets.0, 2);
}

#[tokio::test]
async fn a_bad_key_file_is_named_and_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("keys");
    RoleKeys::generate_missing(&dir).unwrap();
    let p256 = signet_keys::Signer::load_or_generate(&tmp.path().join("p256.pem"), signet_keys::Algorithm::EcdsaP256Sha256).unwrap();
    std::fs::copy(tmp.path().join("p256.pem"), RoleKeys::path(&dir, Role::Snapshot)).unwrap();
    drop(p256);
    let err = RoleKeys::load(&dir).err().unwrap().to_string();
    assert!(err.contains("tuf-snapshot.pem") && err.contains("Ed25519"), "{err}");
    std::fs::write(RoleKeys::path(&dir, Role::Snapshot), b"not pem").unwrap();
    let err = RoleKeys::load(&dir).err().unwrap().to_string();
    assert!(err.contains("tuf-snapshot.pem"), "{err}");
}

#[test]
fn role_keys_are_private_and_never_printed() {
    let tmp = tempfile::tempdir().unwrap();
    let keys = RoleKeys::generate_missing(tmp.path()).unwrap();
    for role in Role::ALL {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(RoleKeys::path(tmp.path(), role)).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{role:?}");
        assert_eq!(format!("{:?}", keys.get(role).unwrap()), format!("HeldKey({})", role.name()));
    }
}
