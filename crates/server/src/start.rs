//! Startup: open storage, load or create keys, open the logs, and assemble the [`AppState`].

use std::sync::Arc;

use signet_keys::{KeySource, Signer};
use signet_log::storage::{PostgresStorage, Storage};
use signet_log::{BatchPolicy, Role};

use signet_ca::oidc::dev::{self, DevIssuer};
use signet_ca::authority::Authority;
use signet_ca::ct::CtLog;
use signet_ca::issue::Issuer;
use signet_ca::oidc::IssuerConfig;
use signet_ca::tsa::Tsa;

use crate::api::rekor_v1::RekorV1;
use crate::config::Config;

use crate::rotate::RotateError;
use crate::shards::active::ActiveShard;
use crate::shards::Kind;

use crate::error::StartError;
use crate::layout::{init_hint, PRODUCTION_FILES};
use crate::state::AppState;

/// The key configured (a file or a token's object), or the data dir's file `default_name`.
/// Under `--dev` a missing file is made; a token's key is never made here (`signet init --keys`).
pub(crate) fn key(cfg: &Config, configured: &Option<KeySource>, default_name: &str) -> Result<Arc<Signer>, StartError> {
    let source = configured.clone().unwrap_or_else(|| KeySource::File(cfg.data_dir.join("keys").join(default_name)));
    if let KeySource::File(path) = &source {
        if !cfg.dev && !path.exists() {
            return Err(StartError::MissingKey { path: path.display().to_string(), hint: init_hint(&cfg.data_dir) });
        }
        if let Some(dir) = path.parent() {
            signet_core::files::ensure_private_dir(dir)
                .map_err(|source| StartError::DataDir { path: dir.display().to_string(), source })?;
        }
    }
    Ok(Arc::new(Signer::open(&source, &cfg.keys.pkcs11(), &[signet_keys::Algorithm::EcdsaP256Sha256], cfg.dev)?))
}

fn check_initialised(cfg: &Config) -> Result<(), StartError> {
    if cfg.dev {
        return Ok(());
    }
    // A rotation onto a token or into KMS records its key (crate::rotate::Rotated::key).
    let rotations = crate::rotate::read(&cfg.data_dir).unwrap_or_default();
    let rotated = |r: &Option<crate::rotate::Rotated>| r.as_ref().is_some_and(|r| r.key.is_some());
    let configured = |f: &str| match f {
        "keys/ct.pem" => cfg.keys.ct.is_some(),
        "keys/tsa.pem" => cfg.keys.tsa.is_some() || rotated(&rotations.tsa),
        "keys/ca-intermediate.pem" => cfg.keys.ca_intermediate.is_some() || rotated(&rotations.intermediate),
        _ => false,
    };
    let missing: Vec<&str> = PRODUCTION_FILES.iter().copied().filter(|f| !configured(f) && !cfg.data_dir.join(f).exists()).collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(StartError::NotInitialised { data_dir: cfg.data_dir.display().to_string(), missing: missing.join(", "), hint: init_hint(&cfg.data_dir) })
}

impl AppState {
    pub async fn open(
        cfg: &Config,
        lifecycle: Arc<crate::lifecycle::Lifecycle>,
        conn: Arc<crate::conn::ConnStats>,
    ) -> Result<AppState, StartError> {
        cfg.validate()?;
        signet_core::files::ensure_private_dir(&cfg.data_dir)
            .map_err(|source| StartError::DataDir { path: cfg.data_dir.display().to_string(), source })?;
        check_initialised(cfg)?;
        let host = cfg.hostname()?;
        let url_file = crate::trust::public_url_file(&cfg.data_dir);
        signet_core::files::write_atomic(&url_file, cfg.public_url().as_bytes(), 0o644)
            .map_err(|source| StartError::Io { what: format!("writing {}", url_file.display()), source })?;
        let url = cfg.storage_url()?;
        let logs_in_data_dir = matches!(url, signet_log::storage::StorageUrl::Sqlite(_));
        // On PostgreSQL, many instances share the logs: the one holding the sequencer lease
        // sequences them, and the others follow (see signet_log::follow).
        let holder = crate::lease::holder(&cfg.listen);
        let v1_key = key(cfg, &cfg.keys.rekor_v1, "rekor-v1.pem")?;
        let (storage, pg): (Arc<dyn Storage>, Option<Arc<PostgresStorage>>) = match url {
            signet_log::storage::StorageUrl::Postgres(u) => {
                let pg = Arc::new(
                    tokio::task::spawn_blocking(move || PostgresStorage::open(&u))
                        .await
                        .map_err(|e| StartError::Panicked { what: "storage open", why: e.to_string() })??,
                );
                (pg.clone(), Some(pg))
            }
            sqlite => (
                tokio::task::spawn_blocking(move || signet_log::storage::open(&sqlite))
                    .await
                    .map_err(|e| StartError::Panicked { what: "storage open", why: e.to_string() })??,
                None,
            ),
        };
        // A rotation on PostgreSQL hands the new shard's key to the other instances sealed
        // (crate::shards::sealed); every data dir gets the seal key, so that its copies share it.
        let seal = {
            let (store, data_dir, on_pg) = (storage.clone(), cfg.data_dir.clone(), pg.is_some());
            tokio::task::spawn_blocking(move || match on_pg {
                true => crate::shards::seal_key_for(store.as_ref(), &data_dir),
                false => crate::shards::sealed::SealKey::load_or_make(&data_dir).map(|_| None).map_err(crate::shards::ShardError::from),
            })
            .await
            .map_err(|e| StartError::Panicked { what: "shard seal key", why: e.to_string() })?
            .map_err(StartError::Shards)?
        };
        // A TSA or intermediate rotation scheduled through another instance of the database,
        // then any whose second has come, before their keys are opened (crate::rotate::scheduled).
        {
            let (store, seal, data_dir, on_pg) = (storage.clone(), seal.clone(), cfg.data_dir.clone(), pg.is_some());
            tokio::task::spawn_blocking(move || {
                let shared = on_pg.then(|| (store.as_ref(), seal.as_deref()));
                crate::rotate::scheduled::at_start(shared, &data_dir)
            })
            .await
            .map_err(|e| StartError::Panicked { what: "scheduled rotations", why: e.to_string() })?
            .map_err(StartError::Rotation)?;
        }
        // Every log is a list of shards (crate::shards); the newest takes the appends. Rekor
        // v1 serves them all; a rotated CT or Rekor v2 log is a new log, its old ones frozen.
        // An import of a Rekor log under way: said as it is, with the command that finishes it.
        if let Some(why) = crate::shards::import::unfinished(storage.as_ref())? {
            return Err(why.into());
        }
        let registry = crate::shards::registry(Kind::RekorV1, storage.as_ref(), v1_key.spki_der())?;
        let v2_key = key(cfg, &cfg.keys.rekor_v2, "rekor-v2.pem")?;
        let ct_key = key(cfg, &cfg.keys.ct, "ct.pem")?;
        for (kind, zero) in [(Kind::RekorV1, &v1_key), (Kind::RekorV2, &v2_key), (Kind::Ct, &ct_key)] {
            crate::shards::keep_zero_public(kind, &cfg.data_dir, zero).map_err(StartError::Shards)?;
        }
        let homes = crate::shards::KeyHomes::of(&cfg.keys);
        let v2_list = crate::shards::registry(Kind::RekorV2, storage.as_ref(), v2_key.spki_der())?;
        let ct_list = crate::shards::registry(Kind::Ct, storage.as_ref(), ct_key.spki_der())?;
        let (v2_shard, v2_key) = crate::shards::active_key(Kind::RekorV2, storage.as_ref(), seal.as_deref(), &cfg.data_dir, &homes, &v2_list, &v2_key).map_err(StartError::Shards)?;
        let (ct_shard, ct_key) = crate::shards::active_key(Kind::Ct, storage.as_ref(), seal.as_deref(), &cfg.data_dir, &homes, &ct_list, &ct_key).map_err(StartError::Shards)?;
        crate::shards::check_frozen(Kind::RekorV2, storage.as_ref(), &v2_list).map_err(StartError::Shards)?;
        crate::shards::check_frozen(Kind::Ct, storage.as_ref(), &ct_list).map_err(StartError::Shards)?;
        let shared: Option<(Arc<PostgresStorage>, Role)> = match pg {
            Some(pg) => {
                // The logs that must exist before a follower can open them: the active shards'.
                let v1_active = match registry.last() {
                    Some(s) if s.frozen.is_none() => s.log_id,
                    _ => crate::shards::SHARD_ZERO_LOG,
                };
                let role = crate::lease::role_at_start(pg.clone(), &holder, &[v1_active, v2_shard.log_id, ct_shard.log_id]).await?;
                Some((pg, role))
            }
            None => None,
        };
        let batch = BatchPolicy { max_entries: cfg.log.batch_max_entries, max_delay: cfg.batch_delay() };

        for (kind, list) in [(Kind::RekorV1, &registry), (Kind::RekorV2, &v2_list), (Kind::Ct, &ct_list)] {
            crate::shards::write_public(&cfg.data_dir, kind, list)
                .map_err(|source| StartError::Io { what: "writing log-shards.json".into(), source })?;
        }
        let opener = crate::shards::ShardOpener {
            storage: storage.clone(),
            shared: shared.as_ref().map(|(pg, _)| pg.clone()),
            seal,
            homes,
            data_dir: cfg.data_dir.clone(),
            host: host.clone(),
            batch,
            ct_batch: BatchPolicy {
                max_entries: cfg.log.batch_max_entries,
                max_delay: std::time::Duration::from_millis(cfg.log.ct_batch_max_delay_ms),
            },
            max_pending: cfg.log.max_pending_appends,
            tile_cache: tile_cache_tiles(cfg),
            entry_cache: cfg.log.entry_cache_mb.saturating_mul(1 << 20),
            v2_note_key: cfg.log.witnesses.note_key(&cfg.data_dir, &cfg.keys.pkcs11(), &host)?,
        };
        let mut v1_frozen = Vec::new();
        let mut v1_active = None;
        for shard in &registry {
            let shard_key = match shard.number {
                0 if shard.imported.is_some() => Arc::new(crate::shards::import::public_key(shard).map_err(StartError::Shards)?),
                0 => v1_key.clone(),
                _ => crate::shards::take_key(Kind::RekorV1, storage.as_ref(), opener.seal.as_deref(), &cfg.data_dir, &opener.homes, shard)
                    .map_err(StartError::Shards)?,
            };
            let log = opener.open(shard, shard_key).await?;
            let served = crate::api::rekor_v1::Shard::new(log, shard.tree_id, shard.start);
            match shard.frozen {
                Some(_) => v1_frozen.push(served),
                None => v1_active = Some(served),
            }
        }
        let Some(v1_active) = v1_active else {
            return Err(crate::shards::ShardError::CutShort { kind: Kind::RekorV1 }.into());
        };
        let v1 = v1_active.log.clone();
        // Rekor v2 and CT: the active log alone is served (crate::shards::active).
        let v2_log = opener.open_kind(Kind::RekorV2, &v2_shard, v2_key.clone()).await?;
        let v2 = v2_log.clone();
        let ct_log = opener.open_kind(Kind::Ct, &ct_shard, ct_key.clone()).await?;
        let rekor_v2 = Arc::new(ActiveShard::new(Kind::RekorV2, v2_log, v2_key, v2_list, opener.clone()));
        let ct = Arc::new(ActiveShard::new(Kind::Ct, ct_log.clone(), ct_key.clone(), ct_list, opener.clone()));
        let rekor_v1 = RekorV1::new(v1_active, v1_frozen, registry, opener);

        // A new log's sequencer writes its genesis entry first; wait for it, so that a start
        // that cannot write one fails here rather than serve.
        v1.genesis_written().await.map_err(StartError::Genesis)?;
        v2.genesis_written().await.map_err(StartError::Genesis)?;

        // The dev issuer lives under the instance's own URL, and is trusted only in dev mode.
        let dev_issuer = if cfg.dev {
            let issuer = Arc::new(DevIssuer::open(&cfg.data_dir, &format!("{}/oidc", cfg.public_url()))?);
            let file = dev::issuer_file(&cfg.data_dir);
            signet_core::files::write_atomic(&file, issuer.issuer().as_bytes(), 0o644)
                .map_err(|source| StartError::Io { what: format!("writing {}", file.display()), source })?;
            Some(issuer)
        } else {
            None
        };
        let dev_issuers: Vec<IssuerConfig> = dev_issuer.iter().map(|d| d.config()).collect();
        let tokens = Arc::new(crate::issuers::verifier(&cfg.oidc, dev_issuers)?);

        // The CA and its CT log. A key a rotation chose wins over the config's, which named the
        // one before (crate::rotate::Rotated::key).
        let rotated = |authority: crate::rotate::Authority, configured: &Option<KeySource>| -> Result<Option<KeySource>, StartError> {
            let mut rotations = crate::rotate::read(&cfg.data_dir).map_err(RotateError::from)?;
            let recorded = authority.record(&mut rotations).as_ref().map(|r| r.key_source(&cfg.data_dir)).transpose().map_err(RotateError::from)?.flatten();
            match (recorded, configured) {
                (Some(r), Some(c)) if &r != c => {
                    tracing::warn!(authority = authority.name(), configured = %c, rotated_to = %r, "the config names a key the authority was rotated away from; using the rotated one: update [keys]");
                    Ok(Some(r))
                }
                (Some(r), _) => Ok(Some(r)),
                (None, c) => Ok(c.clone()),
            }
        };
        let mut ca_keys = cfg.keys.ca(&cfg.ca)?;
        ca_keys.intermediate = rotated(crate::rotate::Authority::Intermediate, &ca_keys.intermediate)?;
        let data_dir = cfg.data_dir.clone();
        let authority = Arc::new(
            tokio::task::spawn_blocking({
                let ca_keys = ca_keys.clone();
                move || Authority::open(&data_dir, &ca_keys)
            })
            .await
                .map_err(|e| StartError::Panicked { what: "CA open", why: e.to_string() })??,
        );
        // Every log taking appends, when asked: after an online rotation, the new Rekor v1
        // shard (a takeover promotes it; a witness that shows a restore refuses it).
        let taking_appends: crate::witnessing::LogsTakingAppends = {
            let (v1_now, v2, ct) = (rekor_v1.active_log_source(), rekor_v2.clone(), ct.clone());
            Arc::new(move || vec![v1_now(), v2.log(), ct.log()])
        };
        // On PostgreSQL the TUF repository is the database's too (crate::tuf).
        let tuf_pg = shared.as_ref().map(|(pg, _)| pg.clone());
        if let Some((pg, Role::Follower)) = shared {
            let logs = taking_appends.clone();
            crate::lease::take_over_when_free(pg, holder, move || logs());
        }
        // The root key signs the TSA's certificate once, when it is made (under --dev); a
        // production root key may be offline (`signet init --root-key-out`).
        let tsa_key = key(cfg, &rotated(crate::rotate::Authority::Tsa, &cfg.keys.tsa)?, "tsa.pem")?;
        let tsa = Tsa::open(&cfg.data_dir, tsa_key, || ca_keys.root_key(&cfg.data_dir), authority.root_der())?;
        let ca = Issuer::new(authority, CtLog::new(ct_log, ct_key), tokens.clone());
        let tsa = signet_ca::handover::Handover::new(tsa);
        // A rotation scheduled for later: the current keys stop at its second even before the
        // watch loads their successors (crate::rotate::scheduled).
        for (authority, from) in crate::rotate::scheduled::pending(&cfg.data_dir).map_err(RotateError::from)? {
            match authority {
                crate::rotate::Authority::Tsa => tsa.end_at(from),
                crate::rotate::Authority::Intermediate => ca.end_at(from),
            }
        }
        // A rotation of the CT log hands the CA the new one before any append reaches it.
        let issuer = ca.clone();
        ct.on_serve(move |now| issuer.replace_ct(CtLog::new(now.log.clone(), now.key.clone())));
        let (data_dir, guard_cfg) = (cfg.data_dir.clone(), cfg.guard.clone());
        // On PostgreSQL, tokens and bans are the database's, so every instance sees the same.
        let guard_db = match cfg.storage_url()? {
            signet_log::storage::StorageUrl::Postgres(u) => Some(u),
            _ => None,
        };
        let guard = tokio::task::spawn_blocking(move || match guard_db {
            Some(url) => signet_guard::Guard::with_store(signet_guard::Store::open_postgres(&url)?, guard_cfg),
            None => signet_guard::Guard::open(&data_dir, guard_cfg),
        })
            .await
                .map_err(|e| StartError::Panicked { what: "guard open", why: e.to_string() })??;
        // The audit key first: on PostgreSQL, it names this instance's chain.
        let audit_key = match cfg.guard.audit.enabled {
            true => {
                let (data_dir, source, pkcs11) = (cfg.data_dir.clone(), cfg.keys.audit.clone(), cfg.keys.pkcs11());
                let key = tokio::task::spawn_blocking(move || crate::anchor::audit_key(&data_dir, source.as_ref(), &pkcs11))
                    .await
                    .map_err(|e| StartError::Panicked { what: "audit key", why: e.to_string() })?
                    .map_err(StartError::AuditKey)?;
                Some(Arc::new(key))
            }
            false => None,
        };
        let audit = match &audit_key {
            Some(key) => {
                let (data_dir, mode) = (cfg.data_dir.clone(), cfg.guard.audit.mode);
                let shared = match cfg.storage_url()? {
                    signet_log::storage::StorageUrl::Postgres(url) => {
                        Some((url, crate::anchor::chain_name(cfg.guard.audit.chain.as_deref(), key)))
                    }
                    _ => None,
                };
                Some(
                    tokio::task::spawn_blocking(move || {
                        let place = match shared {
                            Some((url, chain)) => signet_guard::audit::Place::postgres(&data_dir, &url, &chain)?,
                            None => signet_guard::audit::Place::sqlite(&data_dir),
                        };
                        signet_guard::audit::AuditLog::open_at(place, mode)
                    })
                    .await
                    .map_err(|e| StartError::Panicked { what: "audit open", why: e.to_string() })??,
                )
            }
            None => None,
        };

        let trust = Arc::new(crate::trust::instance(&cfg.data_dir, None).map_err(StartError::Trust)?);
        let tuf = match cfg.tuf.enabled {
            true => Some(Arc::new(crate::tuf::Tuf::open(&cfg.data_dir, cfg.keys.tuf(&cfg.data_dir), cfg.tuf.expiry(), &trust, tuf_pg).await?)),
            false => None,
        };
        // A backup that was never restored: reads go on, appends are refused (crate::restore).
        // Only where the logs are in the data dir: a copy of an instance on PostgreSQL is how
        // another instance of the same shared logs is made.
        if let Some(marker) = logs_in_data_dir.then(|| crate::restore::marker(&cfg.data_dir)).transpose()?.flatten() {
            let why = marker.refusal(&cfg.data_dir);
            tracing::warn!("{why}");
            for log in [&v1, &v2, &ct.log()] {
                log.refuse_appends(why.clone());
            }
        }
        // A log whose storage is behind what this instance served of it: a restored database.
        let marks = {
            let data_dir = cfg.data_dir.clone();
            tokio::task::spawn_blocking(move || crate::watermark::read(&data_dir))
                .await
                .map_err(|e| StartError::Panicked { what: "watermarks", why: e.to_string() })??
        };
        for (what, log) in [("Rekor v1", &v1), ("Rekor v2", &v2), ("CT", &ct.log())] {
            let (m, l, d) = (marks.clone(), log.clone(), cfg.data_dir.clone());
            let refused = tokio::task::spawn_blocking(move || m.check(&l, what, &d))
                .await
                .map_err(|e| StartError::Panicked { what: "watermarks", why: e.to_string() })?;
            if let Some(why) = refused {
                tracing::error!("{why}");
                log.refuse_appends(why);
            }
        }
        // Started once every log is open: a witness that holds more than storage refuses them all.
        let cosigning = crate::witnessing::start_cosigning(&cfg.log.witnesses, &cfg.data_dir, rekor_v2.clone(), taking_appends)?;
        Ok(AppState {
            watermarks: crate::watermark::Keeper::new(cfg.data_dir.clone(), marks),
            rekor_v1,
            rekor_v2,
            ct,
            max_body: cfg.limits.max_body_bytes,
            input_limits: cfg.limits.input(),
            max_entry: cfg.limits.max_entry_bytes,
            max_attestation: cfg.limits.max_attestation_bytes,
            dev_issuer,
            tokens,
            ca,
            tsa,
            trust: parking_lot::RwLock::new(trust),
            tuf,
            metrics: Arc::new(crate::metrics::Metrics::with_conn(conn, cfg.scheme())),
            guard,
            audit,
            audit_key,
            lifecycle,
            reports_dir: cfg.data_dir.join("reports"),
            witness: crate::witnessing::open(
                &cfg.witness,
                crate::witnessing::Home {
                    data_dir: cfg.data_dir.clone(),
                    base: cfg.source.as_deref().and_then(std::path::Path::parent).unwrap_or(&cfg.data_dir).to_path_buf(),
                    host: cfg.hostname(),
                    pkcs11: cfg.keys.pkcs11(),
                    storage: cfg.storage_url()?,
                },
            )?,
            monitor_metrics: crate::monitoring::metrics(&cfg.monitor),
            cosigning,
        })
    }
}

/// `log.tile_cache_mb` as a count of tiles (16 KiB each, with their inner levels).
fn tile_cache_tiles(cfg: &Config) -> usize {
    cfg.log.tile_cache_mb.saturating_mul(64)
}
