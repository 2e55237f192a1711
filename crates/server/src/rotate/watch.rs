//! Each running instance's part in a scheduled rotation ([`super::scheduled`]): every
//! [`LOOK_EVERY`] it hands a rotation scheduled here to the other instances, publishes it,
//! loads the new key beside the old, and after the hand-over promotes the files.

use std::sync::Arc;

use super::error::RotateError;
use super::scheduled::{mark_published, promote_due, LOOK_EVERY};
use super::record::Next;
use super::shared::{adopt_shared, offer_shared};
use super::record::{now_unix, read, read_der, Authority};
use crate::shards::active::blocking;
use crate::state::AppState;

/// What the watch needs besides the state.
pub struct Watch {
    pub data_dir: std::path::PathBuf,
    pub pkcs11: signet_keys::Pkcs11Settings,
    /// On PostgreSQL: the store the instances share, and the seal key of their file keys.
    pub shared: Option<(Arc<dyn signet_log::storage::Storage>, Option<Arc<crate::shards::sealed::SealKey>>)>,
}

/// Looks for scheduled rotations every [`LOOK_EVERY`] for as long as the server runs, and
/// carries each through: publish, load, hand over, promote. On PostgreSQL it also takes up
/// the log keys other instances prepared ([`crate::shards::prepared`]).
pub fn watch(state: Arc<AppState>, w: Watch) -> tokio::task::JoinHandle<()> {
    let w = Arc::new(w);
    tokio::spawn(async move {
        // Per authority: the rotation published (its first second), and the last failure said.
        let mut published: [Option<i64>; 2] = [None, None];
        let mut failing: [Option<String>; 2] = [None, None];
        let mut prepared_failing: Option<String> = None;
        loop {
            match crate::shards::prepared::follow_all(&state).await.map_err(|e| e.to_string()) {
                Ok(true) => crate::api::rekor_v1::republish(&state).await,
                Ok(false) => prepared_failing = None,
                Err(e) => {
                    if prepared_failing.as_deref() != Some(e.as_str()) {
                        tracing::error!(error = %e, "cannot take up a log key another instance prepared; retrying");
                        prepared_failing = Some(e);
                    }
                }
            }
            for (i, authority) in Authority::ALL.into_iter().enumerate() {
                // As text: a cause is logged once, not at every look.
                let looked = look(&state, &w, authority, &mut published[i]).await.map_err(|e| e.to_string());
                match looked {
                    Ok(()) => failing[i] = None,
                    Err(e) => {
                        if failing[i].as_deref() != Some(e.as_str()) {
                            tracing::error!(authority = authority.name(), error = %e, "a scheduled rotation cannot go on yet; retrying");
                            failing[i] = Some(e);
                        }
                    }
                }
            }
            tokio::time::sleep(LOOK_EVERY).await;
        }
    })
}

async fn look(state: &Arc<AppState>, w: &Arc<Watch>, authority: Authority, published: &mut Option<i64>) -> Result<(), RotateError> {
    let next = {
        let w = w.clone();
        blocking(move || {
            if let Some((store, seal)) = &w.shared {
                if adopt_shared(store.as_ref(), seal.as_deref(), &w.data_dir, authority)? {
                    tracing::info!(authority = authority.name(), "took up a rotation scheduled through another instance");
                }
            }
            let mut rotations = read(&w.data_dir)?;
            Ok::<_, RotateError>(authority.record(&mut rotations).as_ref().and_then(|r| r.next.clone()))
        })
        .await?
    };
    let Some(next) = next else { return Ok(()) };
    let from = next.from_unix()?;
    // Published first, whether or not this instance can load the key: the others may.
    if *published != Some(from) {
        if let Some((store, seal)) = &w.shared {
            let (store, seal, data_dir) = (store.clone(), seal.clone(), w.data_dir.clone());
            blocking(move || offer_shared(store.as_ref(), seal.as_deref(), &data_dir, authority)).await?;
        }
        match authority {
            Authority::Tsa => state.tsa.end_at(from),
            Authority::Intermediate => state.ca.end_at(from),
        }
        crate::api::rekor_v1::republish(state).await;
        let data_dir = w.data_dir.clone();
        blocking(move || mark_published(&data_dir, authority, from)).await?;
        tracing::info!(authority = authority.name(), from = %next.from, old_to = %next.old_to, "published a scheduled rotation");
        *published = Some(from);
    }
    let loaded = match authority {
        Authority::Tsa => state.tsa.has_next_from(from),
        Authority::Intermediate => state.ca.hands_over_at(from),
    };
    if !loaded {
        let (state2, w2, next2) = (state.clone(), w.clone(), next.clone());
        blocking(move || load(&state2, &w2, authority, &next2, from)).await?;
    }
    let now = now_unix();
    if now >= from {
        match authority {
            Authority::Tsa => state.tsa.settle(now),
            Authority::Intermediate => state.ca.settle(now),
        }
        let data_dir = w.data_dir.clone();
        blocking(move || promote_due(&data_dir, now)).await?;
        tracing::info!(authority = authority.name(), "handed over to the scheduled key");
    }
    Ok(())
}

/// Opens the new key and hands over to it at `from`.
fn load(state: &AppState, w: &Watch, authority: Authority, next: &Next, from: i64) -> Result<(), RotateError> {
    let source = super::record::key_source(&w.data_dir, &next.key)?;
    let cert = read_der(&w.data_dir.join("ca").join(&next.cert))?;
    match authority {
        Authority::Tsa => {
            let key = signet_keys::Signer::open(&source, &w.pkcs11, &[signet_keys::Algorithm::EcdsaP256Sha256], false)
                .map_err(|error| RotateError::NewTsaKey { key: source.clone(), error })?;
            let current = state.tsa.now();
            let tsa = signet_ca::tsa::Tsa::new(Arc::new(key), cert, current.root_der())?.counting_with(&current);
            state.tsa.hand_over_at(from, tsa);
        }
        Authority::Intermediate => {
            let curve = super::curve_of(&cert)?;
            let key = signet_ca::x509::CaKey::open(&source, &w.pkcs11, curve, false)
                .map_err(|error| RotateError::NewIntermediateKey { key: source.clone(), error })?;
            let next = state.ca.authority().successor(key, cert)?;
            state.ca.hand_over_at(from, Arc::new(next));
        }
    }
    Ok(())
}
