use super::*;
use signet_keys::Algorithm;
use tough::{IntoVec, RepositoryLoader, TargetName};

fn docs(trusted_root: &str) -> Vec<(&'static str, Vec<u8>)> {
    vec![(crate::tuf::TRUSTED_ROOT_TARGET, trusted_root.as_bytes().to_vec())]
}

/// What tough's client reads from the repository, from its first root.
async fn client_reads(dir: &Path) -> Vec<u8> {
    let root = std::fs::read(dir.join("1.root.json")).unwrap();
    let meta = url::Url::from_directory_path(dir).unwrap();
    let targets = url::Url::from_directory_path(dir.join("targets")).unwrap();
    let store = tempfile::tempdir().unwrap();
    let repo = RepositoryLoader::new(&root, meta, targets).datastore(store.path()).load().await.unwrap();
    let stream = repo.read_target(&TargetName::new(crate::tuf::TRUSTED_ROOT_TARGET).unwrap()).await.unwrap().unwrap();
    stream.into_vec().await.unwrap()
}

fn holders(n: usize) -> Vec<Signer> {
    (0..n).map(|_| Signer::generate(Algorithm::Ed25519).unwrap()).collect()
}

fn publics(keys: &[Signer]) -> Vec<Key> {
    keys.iter().map(|k| tuf_key(k).unwrap()).collect()
}

/// Copies a proposal's target files into the repository, as `signet tuf publish` does.
fn carry_targets(from: &Path, repo: &Repository) {
    for e in std::fs::read_dir(from.join("targets")).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), repo.dir().join("targets").join(e.file_name())).unwrap();
    }
}

#[tokio::test]
async fn root_and_targets_move_to_three_of_five_and_a_client_follows() {
    let tmp = tempfile::tempdir().unwrap();
    let keys = RoleKeys::generate_missing(&tmp.path().join("keys")).unwrap();
    let repo = Repository::at(tmp.path().join("tuf"));
    let expiry = Expiry::default();
    let now = jiff::Timestamp::now();
    repo.create(&keys, &expiry, &docs("{\"v\":1}"), now).await.unwrap();
    let (root_holders, targets_holders) = (holders(5), holders(5));

    let change = RootChange {
        keys: vec![(Role::Root, publics(&root_holders)), (Role::Targets, publics(&targets_holders))],
        thresholds: vec![(Role::Root, 3), (Role::Targets, 3)],
    };
    let mut root = Proposal::Root(repo.propose_root(&change, &expiry, now).unwrap());
    assert_eq!(root.file_name(), "2.root.json");
    let out = tmp.path().join("ceremony");
    let mut targets = Proposal::Targets(repo.propose_targets(&docs("{\"v\":2}"), &expiry, now, &out).unwrap());
    assert_eq!(targets.file_name(), "2.targets.json");
    carry_targets(&out, &repo);

    // The old root's key, and two of the five new ones: short of the new threshold.
    root.sign(keys.get(Role::Root).unwrap().signer()).unwrap();
    for k in &root_holders[..2] {
        root.sign(k).unwrap();
    }
    // Signing twice with one key replaces its signature rather than counting twice.
    root.sign(&root_holders[0]).unwrap();
    let err = repo.check(&[root.clone(), targets.clone()], now).unwrap_err().to_string();
    assert!(err.contains("2.root.json is refused") && err.contains("2 valid signatures of the 3 needed from the 5 root keys"), "{err}");
    // A root whose targets keys changed needs targets signed by them beside it.
    root.sign(&root_holders[4]).unwrap();
    let err = repo.check(&[root.clone()], now).unwrap_err().to_string();
    assert!(err.contains("propose targets"), "{err}");
    let err = repo.check(&[root.clone(), targets.clone()], now).unwrap_err().to_string();
    assert!(err.contains("2.targets.json") && err.contains("0 valid signatures of the 3 needed from the 5 targets keys"), "{err}");
    // A signature by a key the role does not name does not count.
    targets.sign(&root_holders[1]).unwrap();
    for k in &targets_holders[1..4] {
        targets.sign(k).unwrap();
    }
    repo.check(&[root.clone(), targets.clone()], now).unwrap();

    // Carried through a file, as a holder's machine would: the same bytes each time.
    let carried = Proposal::parse(&root.to_bytes().unwrap(), "carried").unwrap();
    assert_eq!(carried.to_bytes().unwrap(), root.to_bytes().unwrap());
    repo.stage(&carried).unwrap();
    repo.stage(&targets).unwrap();
    assert_eq!(client_reads(repo.dir()).await, b"{\"v\":1}", "staged metadata is not published");
    let adopted = repo.adopt_staged(&keys, &expiry, now).await.unwrap();
    assert_eq!(adopted, ["2.root.json", "2.targets.json"]);
    // Staged until the server serves them and forgets them.
    assert_eq!(repo.staged_stamp().len(), 2);
    assert!(repo.forget_adopted().unwrap());
    assert!(repo.staged_stamp().is_empty());
    assert!(!repo.forget_adopted().unwrap());
    assert_eq!(client_reads(repo.dir()).await, b"{\"v\":2}");
    assert_eq!(repo.role_key_ids(Role::Root).unwrap().0.len(), 5);
    assert_eq!(repo.role_key_ids(Role::Targets).unwrap().1, 3);
    // The online snapshot and timestamp keys still sign (and are not taken for foreign).
    assert!(repo.foreign_keys(&keys).unwrap().is_empty());

    // One key online can no longer publish targets, and says why.
    let err = repo.publish(&keys, &expiry, &docs("{\"v\":3}"), now).await.unwrap_err().to_string();
    assert!(err.contains("needs 3 signatures") && err.contains("signet tuf propose targets"), "{err}");
    let err = repo.rotate_key(Role::Targets, &keys, crate::tuf::keys::HeldKey::generate(Role::Targets).unwrap().0, &expiry, now).await.unwrap_err().to_string();
    assert!(err.contains("in a ceremony"), "{err}");

    // The root signed again before it expires, its keys unchanged: three of the five.
    let mut resigned = Proposal::Root(repo.propose_root(&RootChange::default(), &expiry, now).unwrap());
    for k in [&root_holders[1], &root_holders[2]] {
        resigned.sign(k).unwrap();
    }
    repo.stage(&resigned).unwrap();
    let err = repo.adopt_staged(&keys, &expiry, now).await.unwrap_err().to_string();
    assert!(err.contains("3.root.json is refused") && err.contains("2 valid signatures of the 3"), "{err}");
    assert!(repo.dir().join("staged/3.root.json.refused").exists() && repo.staged_stamp().is_empty());
    assert_eq!(repo.status().unwrap().root.0, 2, "nothing adopted");
    resigned.sign(&root_holders[3]).unwrap();
    repo.stage(&resigned).unwrap();
    assert_eq!(repo.adopt_staged(&keys, &expiry, now).await.unwrap(), ["3.root.json"]);
    assert_eq!(repo.status().unwrap().root.0, 3);
    // A server stopped before it forgot: the next round forgets what is published, adopts nothing.
    assert_eq!(repo.staged_stamp().len(), 1);
    assert!(repo.adopt_staged(&keys, &expiry, now).await.unwrap().is_empty());
    assert!(repo.staged_stamp().is_empty());
    assert_eq!(client_reads(repo.dir()).await, b"{\"v\":2}");
}

#[tokio::test]
async fn a_new_root_that_changes_the_timestamp_key_is_adopted_only_where_that_key_is_held() {
    let tmp = tempfile::tempdir().unwrap();
    let keys = RoleKeys::generate_missing(&tmp.path().join("keys")).unwrap();
    let repo = Repository::at(tmp.path().join("tuf"));
    let (expiry, now) = (Expiry::default(), jiff::Timestamp::now());
    repo.create(&keys, &expiry, &docs("{}"), now).await.unwrap();
    let (new_timestamp, pem) = crate::tuf::keys::HeldKey::generate(Role::Timestamp).unwrap();
    let change = RootChange { keys: vec![(Role::Timestamp, vec![new_timestamp.public().unwrap()])], thresholds: vec![] };
    let mut root = Proposal::Root(repo.propose_root(&change, &expiry, now).unwrap());
    root.sign(keys.get(Role::Root).unwrap().signer()).unwrap();
    repo.stage(&root).unwrap();
    // Without the new key here, nothing is written and the root stays staged.
    let err = repo.adopt_staged(&keys, &expiry, now).await.unwrap_err().to_string();
    assert!(err.contains("timestamp signature") && err.contains("stays staged"), "{err}");
    assert_eq!(repo.status().unwrap().root.0, 1);
    assert_eq!(repo.staged_stamp().len(), 1);
    // With it, the root is adopted and the timestamp signed again by the new key.
    std::fs::write(tmp.path().join("new-timestamp.pem"), pem).unwrap();
    let keys = keys.with_file(Role::Timestamp, &tmp.path().join("new-timestamp.pem")).unwrap();
    assert_eq!(repo.adopt_staged(&keys, &expiry, now).await.unwrap(), ["2.root.json"]);
    let status = repo.status().unwrap();
    assert_eq!((status.root.0, status.timestamp.0), (2, 2));
    assert_eq!(client_reads(repo.dir()).await, b"{}");
}

#[test]
fn proposals_that_signet_could_not_serve_are_refused_when_proposed() {
    let tmp = tempfile::tempdir().unwrap();
    let keys = RoleKeys::generate_missing(&tmp.path().join("keys")).unwrap();
    let repo = Repository::at(tmp.path().join("tuf"));
    let (expiry, now) = (Expiry::default(), jiff::Timestamp::now());
    tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(repo.create(&keys, &expiry, &docs("{}"), now)).unwrap();
    let two = publics(&holders(2));
    for (change, expected) in [
        (RootChange { keys: vec![(Role::Root, two.clone())], thresholds: vec![(Role::Root, 3)] }, "threshold is 3, but it has 2 keys"),
        (RootChange { keys: vec![(Role::Snapshot, two.clone())], thresholds: vec![] }, "snapshot role must have one key"),
        (RootChange { keys: vec![(Role::Targets, vec![])], thresholds: vec![] }, "targets role has no key"),
        (RootChange { keys: vec![], thresholds: vec![(Role::Root, 0)] }, "at least 1"),
    ] {
        let err = repo.propose_root(&change, &expiry, now).unwrap_err().to_string();
        assert!(err.contains(expected), "{err}");
    }
    for bad in [&b"{}"[..], b"not json", br#"{"signed":{"_type":"snapshot"},"signatures":[]}"#] {
        assert!(Proposal::parse(bad, "x.json").is_err());
    }
}
