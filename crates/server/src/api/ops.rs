//! Operational endpoints: liveness, readiness and metrics; the dev OIDC issuer's documents.

use std::sync::Arc;

use axum::extract::State;
use axum::Json;
use serde_json::Value;

use crate::state::AppState;

/// `GET /metrics`: Prometheus text format (see [`crate::metrics`]).
pub async fn metrics(State(state): State<Arc<AppState>>) -> ([(axum::http::HeaderName, &'static str); 1], String) {
    let mut text = state.metrics.render();
    log_caches(&state, &mut text);
    if let Some(shared) = &state.guard.shared {
        use std::fmt::Write;
        let (checks, failures) = shared.counts();
        text.push_str("# HELP signet_guard_redis_checks_total Rate-limit checks sent to Redis ([guard.redis]).\n");
        text.push_str("# TYPE signet_guard_redis_checks_total counter\n");
        let _ = writeln!(text, "signet_guard_redis_checks_total {checks}");
        text.push_str("# HELP signet_guard_redis_failures_total Checks Redis did not answer; guard.redis.on_failure decided them.\n");
        text.push_str("# TYPE signet_guard_redis_failures_total counter\n");
        let _ = writeln!(text, "signet_guard_redis_failures_total {failures}");
    }
    guard_and_audit(&state, &mut text);
    witnessing(&state, &mut text);
    if let Some(m) = &state.monitor_metrics {
        text.push_str(&m.render());
    }
    services(&state, &mut text);
    // What /readyz answers, for alerts: a load balancer's probe is not a record anyone keeps.
    let ready = super::ready::readiness(&state).is_ok();
    text.push_str("# HELP signet_ready Whether /readyz answers 200: this instance can take writes.\n# TYPE signet_ready gauge\n");
    text.push_str(if ready { "signet_ready 1\n" } else { "signet_ready 0\n" });
    ([(axum::http::header::CONTENT_TYPE, "text/plain; version=0.0.4")], text)
}

/// The guard's bans, and the audit log's queue, writes and losses.
fn guard_and_audit(state: &AppState, text: &mut String) {
    use std::fmt::Write;
    let mut metric = |name: &str, kind: &str, help: &str, value: String| {
        let _ = write!(text, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}\n");
    };
    metric("signet_guard_active_bans", "gauge", "Clients banned on this instance now (its own bans and the store's).", state.guard.active_bans().to_string());
    if let Some(audit) = &state.audit {
        let s = audit.stats();
        metric("signet_audit_queue_depth", "gauge", "Audit records waiting for the writer.", s.queued.to_string());
        metric("signet_audit_records_written_total", "counter", "Audit records written since start.", s.written.to_string());
        metric("signet_audit_records_lost_total", "counter", "Audit records lost since start (a full queue or a failed write; the chain records the count).", s.lost.to_string());
        metric("signet_audit_write_failures_total", "counter", "Batches of audit records whose write failed.", s.failed_writes.to_string());
        metric("signet_audit_refused_total", "counter", "Answers replaced with 503 because their audit record could not be made durable (mode = closed).", s.refused.to_string());
        metric("signet_audit_unanchored_records", "gauge", "Audit records written that no anchor in the Rekor v2 log covers yet.", s.unanchored.to_string());
        if s.anchored_at_ms > 0 {
            let age = signet_guard::audit::chain::now_ms().saturating_sub(s.anchored_at_ms) as f64 / 1000.0;
            metric("signet_audit_last_anchor_age_seconds", "gauge", "Seconds since the audit chain was last anchored (absent until the first anchor since start).", format!("{age:.3}"));
        }
    }
}

/// The witness's answers, and the Rekor v2 log's witnesses and the checkpoint they cosigned.
fn witnessing(state: &AppState, text: &mut String) {
    use std::fmt::Write;
    use std::sync::atomic::Ordering::Relaxed;
    if let Some(w) = &state.witness {
        text.push_str("# HELP signet_witness_requests_total add-checkpoint requests this witness answered, by outcome.\n# TYPE signet_witness_requests_total counter\n");
        let _ = writeln!(text, "signet_witness_requests_total{{outcome=\"cosigned\"}} {}", w.stats.cosigned.load(Relaxed));
        for (reason, n) in signet_witness::witness::REFUSAL_REASONS.iter().zip(&w.stats.refused) {
            let _ = writeln!(text, "signet_witness_requests_total{{outcome=\"{reason}\"}} {}", n.load(Relaxed));
        }
    }
    if let Some(c) = &state.cosigning {
        text.push_str("# HELP signet_log_witness_cosignatures_total Cosignatures of the Rekor v2 log's checkpoints received, by witness.\n# TYPE signet_log_witness_cosignatures_total counter\n");
        for (e, n) in c.endpoints().iter().zip(&c.counters) {
            let _ = writeln!(text, "signet_log_witness_cosignatures_total{{witness=\"{}\"}} {}", e.vkey.name, n.cosigned.load(Relaxed));
        }
        text.push_str("# HELP signet_log_witness_failures_total Requests to a witness that failed or were refused.\n# TYPE signet_log_witness_failures_total counter\n");
        for (e, n) in c.endpoints().iter().zip(&c.counters) {
            let _ = writeln!(text, "signet_log_witness_failures_total{{witness=\"{}\"}} {}", e.vkey.name, n.failures.load(Relaxed));
        }
        let served = c.served().map_or(0, |(size, _)| size);
        let head = state.rekor_v2.log().head().checkpoint.size;
        text.push_str("# HELP signet_log_witnessed_size Size of the newest Rekor v2 checkpoint a quorum of witnesses cosigned (0: none yet).\n# TYPE signet_log_witnessed_size gauge\n");
        let _ = writeln!(text, "signet_log_witnessed_size {served}");
        text.push_str("# HELP signet_log_unwitnessed_entries Entries of the Rekor v2 log past its newest witnessed checkpoint.\n# TYPE signet_log_unwitnessed_entries gauge\n");
        let _ = writeln!(text, "signet_log_unwitnessed_entries {}", head.saturating_sub(served));
    }
}

fn now_secs() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

fn not_after(der: &[u8]) -> Option<u64> {
    use der::Decode;
    x509_cert::Certificate::from_der(der).ok().map(|c| c.tbs_certificate.validity.not_after.to_unix_duration().as_secs())
}

/// Per service: each log's appends, batches, integration latency and checkpoint age; the
/// CA's certificates and the TSA's timestamps; when certificates and TUF metadata expire.
fn services(state: &AppState, text: &mut String) {
    use std::fmt::Write;
    use std::sync::atomic::Ordering;
    let shards = state.rekor_v1.current();
    let mut logs: Vec<(String, signet_log::Log)> = shards.logs().map(|(tree, log)| (format!("rekor_v1/{tree}"), log)).collect();
    logs.push(("rekor_v2".into(), state.rekor_v2.log()));
    logs.push(("ct".into(), state.ct.log()));
    text.push_str("# HELP signet_log_entries_appended_total Entries this instance integrated into each log since start.\n");
    text.push_str("# TYPE signet_log_entries_appended_total counter\n");
    for (name, log) in &logs {
        let _ = writeln!(text, "signet_log_entries_appended_total{{log=\"{name}\"}} {}", log.stats().appended.load(Ordering::Relaxed));
    }
    text.push_str("# HELP signet_log_size Entries in each log under its newest durable checkpoint.\n# TYPE signet_log_size gauge\n");
    for (name, log) in &logs {
        let _ = writeln!(text, "signet_log_size{{log=\"{name}\"}} {}", log.durable_size());
    }
    text.push_str("# HELP signet_log_sequencer 1 when this instance sequences the log, 0 when it follows another.\n# TYPE signet_log_sequencer gauge\n");
    for (name, log) in &logs {
        let leads = u8::from(log.role() == signet_log::Role::Sequencer);
        let _ = writeln!(text, "signet_log_sequencer{{log=\"{name}\"}} {leads}");
    }
    text.push_str("# HELP signet_log_batch_entries Entries per integrated batch.\n# TYPE signet_log_batch_entries histogram\n");
    for (name, log) in &logs {
        log.stats().batch_entries.render(text, "signet_log_batch_entries", &format!("log=\"{name}\""));
    }
    text.push_str("# HELP signet_log_integration_seconds From a batch's first entry arriving to its durable checkpoint.\n");
    text.push_str("# TYPE signet_log_integration_seconds histogram\n");
    for (name, log) in &logs {
        log.stats().integration_seconds.render(text, "signet_log_integration_seconds", &format!("log=\"{name}\""));
    }
    text.push_str("# HELP signet_log_reconciles_total Times the log rebuilt its state from storage after a commit whose outcome was unknown.\n");
    text.push_str("# TYPE signet_log_reconciles_total counter\n");
    for (name, log) in &logs {
        let _ = writeln!(text, "signet_log_reconciles_total{{log=\"{name}\"}} {}", log.stats().reconciles.load(Ordering::Relaxed));
    }
    text.push_str("# HELP signet_log_reconcile_seconds From a commit's failure to the log's state rebuilt from storage.\n");
    text.push_str("# TYPE signet_log_reconcile_seconds histogram\n");
    for (name, log) in &logs {
        log.stats().reconcile_seconds.render(text, "signet_log_reconcile_seconds", &format!("log=\"{name}\""));
    }
    text.push_str("# HELP signet_log_checkpoint_age_seconds Seconds since this instance last integrated a batch into the log (absent before the first).\n");
    text.push_str("# TYPE signet_log_checkpoint_age_seconds gauge\n");
    let now = now_secs();
    for (name, log) in &logs {
        let at = log.stats().last_integrated_ms.load(Ordering::Relaxed);
        if at > 0 {
            let _ = writeln!(text, "signet_log_checkpoint_age_seconds{{log=\"{name}\"}} {:.3}", (now - at as f64 / 1000.0).max(0.0));
        }
    }
    let _ = write!(
        text,
        "# HELP signet_ca_certificates_issued_total Certificates the CA issued since start.\n# TYPE signet_ca_certificates_issued_total counter\n\
         signet_ca_certificates_issued_total {}\n\
         # HELP signet_tsa_timestamps_total RFC 3161 timestamps issued since start.\n# TYPE signet_tsa_timestamps_total counter\n\
         signet_tsa_timestamps_total {}\n\
         # HELP signet_sequencer_lease_renew_failures_total Renewals of the sequencer lease that failed (PostgreSQL storage).\n\
         # TYPE signet_sequencer_lease_renew_failures_total counter\nsignet_sequencer_lease_renew_failures_total {}\n",
        state.ca.issued(),
        state.tsa.now().stamped(),
        crate::lease::renew_failures()
    );
    let trust = state.trust.read().clone();
    text.push_str("# HELP signet_certificate_expiry_timestamp_seconds When each CA and TSA certificate, and the served TLS certificate, expires (Unix time).\n");
    text.push_str("# TYPE signet_certificate_expiry_timestamp_seconds gauge\n");
    let certs = [("ca_root", trust.ca_chain.last()), ("ca_intermediate", trust.ca_chain.first()), ("tsa", trust.tsa_chain.first())];
    for (which, der) in certs {
        if let Some(t) = der.and_then(|d| not_after(d)) {
            let _ = writeln!(text, "signet_certificate_expiry_timestamp_seconds{{certificate=\"{which}\"}} {t}");
        }
    }
    // The served TLS certificate, once a handshake has used it (it may be reloaded any time).
    let tls = state.metrics.conn.tls_not_after.load(Ordering::Relaxed);
    if tls > 0 {
        let _ = writeln!(text, "signet_certificate_expiry_timestamp_seconds{{certificate=\"tls\"}} {tls}");
    }
    if let Some(tuf) = &state.tuf {
        if let Ok(status) = tuf.repository().status() {
            text.push_str("# HELP signet_tuf_expiry_timestamp_seconds When each role's current TUF metadata expires (Unix time).\n");
            text.push_str("# TYPE signet_tuf_expiry_timestamp_seconds gauge\n");
            for role in signet_trust::tuf::Role::ALL {
                let _ = writeln!(text, "signet_tuf_expiry_timestamp_seconds{{role=\"{}\"}} {}", role.name(), status.of(role).1);
            }
        }
    }
}

/// Each log's caches: of full tiles (bounded by `log.tile_cache_mb`) and of entries (by
/// `log.entry_cache_mb`), what they hold and how often proofs and reads found what they
/// needed there.
fn log_caches(state: &AppState, text: &mut String) {
    use std::fmt::Write;
    let shards = state.rekor_v1.current();
    let mut logs: Vec<(String, signet_log::Log)> = shards.logs().map(|(tree, log)| (format!("rekor_v1/{tree}"), log)).collect();
    logs.push(("rekor_v2".into(), state.rekor_v2.log()));
    logs.push(("ct".into(), state.ct.log()));
    let entries: Vec<(&str, signet_log::entrycache::EntryCacheStats)> = logs.iter().map(|(name, log)| (name.as_str(), log.entry_cache_stats())).collect();
    text.push_str("# HELP signet_log_entry_cache_bytes Bytes of entries a log keeps in memory for reads (at most log.entry_cache_mb each).\n");
    text.push_str("# TYPE signet_log_entry_cache_bytes gauge\n");
    for (name, s) in &entries {
        let _ = writeln!(text, "signet_log_entry_cache_bytes{{log=\"{name}\"}} {}", s.bytes);
    }
    text.push_str("# HELP signet_log_entry_cache_lookups_total Entry reads, by whether the cache held the entry.\n");
    text.push_str("# TYPE signet_log_entry_cache_lookups_total counter\n");
    for (name, s) in &entries {
        let _ = writeln!(text, "signet_log_entry_cache_lookups_total{{log=\"{name}\",result=\"hit\"}} {}", s.hits);
        let _ = writeln!(text, "signet_log_entry_cache_lookups_total{{log=\"{name}\",result=\"miss\"}} {}", s.misses);
    }
    let stats: Vec<(String, (usize, u64, u64))> = logs.into_iter().map(|(name, log)| (name, log.tile_cache_stats())).collect();
    text.push_str("# HELP signet_log_tile_cache_bytes Bytes of full tiles a log keeps in memory for proofs (at most log.tile_cache_mb each).\n");
    text.push_str("# TYPE signet_log_tile_cache_bytes gauge\n");
    for (name, (tiles, _, _)) in &stats {
        let _ = writeln!(text, "signet_log_tile_cache_bytes{{log=\"{name}\"}} {}", tiles * signet_log::tilecache::TILE_BYTES);
    }
    text.push_str("# HELP signet_log_tile_cache_lookups_total Tile lookups by proofs, by whether the cache held the tile.\n");
    text.push_str("# TYPE signet_log_tile_cache_lookups_total counter\n");
    for (name, (_, hits, misses)) in &stats {
        let _ = writeln!(text, "signet_log_tile_cache_lookups_total{{log=\"{name}\",result=\"hit\"}} {hits}");
        let _ = writeln!(text, "signet_log_tile_cache_lookups_total{{log=\"{name}\",result=\"miss\"}} {misses}");
    }
}

/// `GET /oidc/.well-known/openid-configuration` (dev only).
pub async fn oidc_discovery(State(state): State<Arc<AppState>>) -> Result<Json<Value>, super::error::ApiError> {
    let dev = state.dev_issuer.as_ref().ok_or_else(|| super::error::ApiError::not_found("no dev OIDC issuer outside --dev"))?;
    Ok(Json(dev.discovery()))
}

/// `GET /oidc/jwks` (dev only).
pub async fn oidc_jwks(State(state): State<Arc<AppState>>) -> Result<Json<Value>, super::error::ApiError> {
    let dev = state.dev_issuer.as_ref().ok_or_else(|| super::error::ApiError::not_found("no dev OIDC issuer outside --dev"))?;
    Ok(Json(dev.jwks().clone()))
}
