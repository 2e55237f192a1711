//! `GET /api/openapi.json`: an OpenAPI 3.1 description of every route, made from the code.
//!
//! - The paths, methods and what each needs come from the router's own table
//!   ([`super::route_list`]): a route cannot exist without being described, and a test
//!   ([`tests`]) fails if one has no entry in [`operation`].
//! - Request bodies are the schemas `utoipa` derives from the very types the handlers read
//!   (`Typed<T>`), so that the description follows the strict reading: required fields,
//!   unknown fields refused (`additionalProperties: false`), encodings.
//! - Responses are written here, next to the route's summary: the handlers build them as
//!   JSON values, not types. schemathesis (scripts/test) checks every answer against them.

use std::sync::LazyLock;

use axum::http::{header, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Map, Value};
use signet_guard::Needs;
use utoipa::openapi::schema::Schema;
use utoipa::openapi::RefOr;
use utoipa::{PartialSchema, ToSchema};

/// The document, made once: it depends on nothing but the code.
static DOCUMENT: LazyLock<Result<Vec<u8>, OpenApiError>> = LazyLock::new(|| document().and_then(|d| Ok(serde_json::to_vec_pretty(&d)?)));

/// What is missing from the description (a bug: the test of every route catches it).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenApiError {
    #[error("{method} {template} is not described in api::openapi")]
    Undescribed { method: Method, template: &'static str },
    #[error("{method} {template}: no responses")]
    NoResponses { method: Method, template: &'static str },
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

pub async fn openapi_json() -> Response {
    match &*DOCUMENT {
        Ok(bytes) => ([(header::CONTENT_TYPE, "application/json"), (header::CACHE_CONTROL, "no-cache")], bytes.clone()).into_response(),
        Err(e) => super::error::ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, format!("the OpenAPI description could not be made: {e}"))
            .into_response(),
    }
}

/// The whole description, or what is missing from it.
pub fn document() -> Result<Value, OpenApiError> {
    let mut paths = Map::new();
    // gRPC methods are described by their .proto (fulcio.proto), not by OpenAPI.
    for (method, template, needs) in super::route_list().into_iter().filter(|(_, t, _)| !crate::grpc::is_grpc_path(t)) {
        let method_name = method.as_str().to_ascii_lowercase();
        let Some(mut op) = operation(&method, template) else { return Err(OpenApiError::Undescribed { method, template }) };
        op["operationId"] = json!(operation_id(&method, template));
        op["security"] = security(template, needs);
        if let Needs::Permission(p) = needs {
            op["x-signet-permission"] = json!(p.name());
        }
        let Some(responses) = op["responses"].as_object_mut() else { return Err(OpenApiError::NoResponses { method, template }) };
        responses.insert("default".into(), json!({"description": "An error: what was wrong, and what was expected.", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}));
        let item = paths.entry(openapi_path(template)).or_insert_with(|| json!({}));
        item[method_name] = op;
    }
    Ok(json!({
        "openapi": "3.1.0",
        "info": {
            "title": "signet",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "A self-hosted Sigstore service: a Fulcio-compatible CA with its CT log, a Rekor-compatible transparency log (v1 and v2), an RFC 3161 timestamp authority, and the trust documents and TUF repository clients bootstrap from.",
            "license": {"name": "Apache-2.0", "identifier": "Apache-2.0"},
        },
        "paths": paths,
        "components": {
            "schemas": schemas()?,
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer", "description": "A signet API token (`sgt_…`, `signet admin token create`), or on the signing-certificate route an OIDC identity token."},
            },
        },
    }))
}

/// `/tuf/{*file}` → `/tuf/{file}`.
fn openapi_path(template: &str) -> String {
    template.replace("{*", "{")
}

fn operation_id(method: &Method, template: &str) -> String {
    let mut id = method.as_str().to_ascii_lowercase();
    for word in template.split(|c: char| !c.is_ascii_alphanumeric()).filter(|w| !w.is_empty()) {
        let mut chars = word.chars();
        if let Some(first) = chars.next() {
            id.push(first.to_ascii_uppercase());
            id.extend(chars);
        }
    }
    id
}

/// Open routes need nothing; the others take a token, which the deployment's `[guard]`
/// may or may not require (admin routes always do).
fn security(template: &str, needs: Needs) -> Value {
    match needs {
        Needs::Open => json!([]),
        _ if template.starts_with("/api/admin/") => json!([{"bearer": []}]),
        Needs::Permission(_) => json!([{}, {"bearer": []}]),
    }
}

/// The named schemas: the request types' (derived), and the responses' (below).
fn schemas() -> Result<Value, OpenApiError> {
    let mut derived: Vec<(String, RefOr<Schema>)> = Vec::new();
    fn add<T: ToSchema>(out: &mut Vec<(String, RefOr<Schema>)>) {
        out.push((T::name().into_owned(), <T as PartialSchema>::schema()));
        T::schemas(out);
    }
    signet_log::rekor::v1::request_schemas(&mut derived);
    signet_log::rekor::v2::request_schemas(&mut derived);
    add::<super::fulcio::SigningCertRequest>(&mut derived);
    add::<super::fulcio::LegacySigningCertRequest>(&mut derived);
    add::<super::rekor_v1::RetrieveRequest>(&mut derived);
    add::<super::rekor_v1::SearchRequest>(&mut derived);
    add::<super::tsa::JsonRequest>(&mut derived);
    add::<super::admin::RotateRequest>(&mut derived);
    add::<super::admin::LiftRequest>(&mut derived);
    add::<super::admin::ReindexRequest>(&mut derived);
    let mut out = Map::new();
    for (name, schema) in derived {
        out.insert(name, serde_json::to_value(schema)?);
    }
    for (name, schema) in response_schemas() {
        out.insert(name.into(), schema);
    }
    Ok(Value::Object(out))
}

fn r(name: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{name}")})
}

const HEX32: &str = "^[0-9a-f]{64}$";

fn response_schemas() -> Vec<(&'static str, Value)> {
    let b64 = json!({"type": "string", "contentEncoding": "base64"});
    vec![
        ("Error", json!({
            "type": "object", "required": ["code", "message"],
            "properties": {
                "code": {"type": "integer", "description": "the HTTP status"},
                "message": {"type": "string", "description": "what was wrong, and what was expected"},
                "path": {"type": "string", "description": "the JSON path of the request body's field at fault"},
            },
        })),
        ("LogInfo", json!({
            "type": "object", "required": ["rootHash", "signedTreeHead", "treeID", "treeSize"],
            "properties": {
                "rootHash": {"type": "string", "pattern": HEX32},
                "signedTreeHead": {"type": "string", "description": "the checkpoint, a C2SP signed note"},
                "treeID": {"type": "string"},
                "treeSize": {"type": "integer", "minimum": 0},
                "inactiveShards": {"type": "array", "items": r("InactiveShard")},
            },
        })),
        ("InactiveShard", json!({
            "type": "object", "required": ["rootHash", "signedTreeHead", "treeID", "treeSize"],
            "properties": {
                "rootHash": {"type": "string", "pattern": HEX32},
                "signedTreeHead": {"type": "string"},
                "treeID": {"type": "string"},
                "treeSize": {"type": "integer", "minimum": 0},
            },
        })),
        ("ConsistencyProof", json!({
            "type": "object", "required": ["hashes", "rootHash"],
            "properties": {"hashes": {"type": "array", "items": {"type": "string", "pattern": HEX32}}, "rootHash": {"type": "string", "pattern": HEX32}},
        })),
        ("LogEntries", json!({
            "type": "object", "description": "entries by UUID",
            "additionalProperties": r("LogEntry"),
        })),
        ("LogEntry", json!({
            "type": "object", "required": ["body", "integratedTime", "logID", "logIndex", "verification"],
            "properties": {
                "attestation": {
                    "type": "object", "description": "an intoto entry's statement, kept beside the log (limits.max_attestation_bytes); not covered by the SET",
                    "properties": {"data": b64},
                },
                "body": {"type": "string", "contentEncoding": "base64", "description": "the entry's canonical body (the leaf data)"},
                "integratedTime": {"type": "integer"},
                "logID": {"type": "string", "pattern": HEX32},
                "logIndex": {"type": "integer", "minimum": 0},
                "verification": {
                    "type": "object",
                    "properties": {
                        "inclusionProof": r("InclusionProof"),
                        "signedEntryTimestamp": b64,
                    },
                },
            },
        })),
        ("InclusionProof", json!({
            "type": "object", "required": ["checkpoint", "hashes", "logIndex", "rootHash", "treeSize"],
            "properties": {
                "checkpoint": {"type": "string"},
                "hashes": {"type": "array", "items": {"type": "string", "pattern": HEX32}},
                "logIndex": {"type": "integer", "minimum": 0},
                "rootHash": {"type": "string", "pattern": HEX32},
                "treeSize": {"type": "integer", "minimum": 1},
            },
        })),
        ("TransparencyLogEntry", json!({
            "type": "object", "required": ["logIndex", "logId", "kindVersion", "integratedTime", "inclusionProof", "canonicalizedBody"],
            "description": "protobuf-specs' dev.sigstore.rekor.v1.TransparencyLogEntry, as protojson writes it",
            "properties": {
                "logIndex": {"type": "string", "pattern": "^[0-9]+$"},
                "logId": {"type": "object", "properties": {"keyId": b64}},
                "kindVersion": {"type": "object", "properties": {"kind": {"type": "string"}, "version": {"type": "string"}}},
                "integratedTime": {"type": "string", "pattern": "^[0-9]+$"},
                "inclusionProof": {"type": "object"},
                "canonicalizedBody": b64,
            },
        })),
        ("CertificateChain", json!({
            "type": "object", "required": ["certificates"],
            "properties": {"certificates": {"type": "array", "items": {"type": "string", "description": "a PEM certificate"}}},
        })),
        ("SigningCertificate", json!({
            "type": "object", "required": ["signedCertificateEmbeddedSct"],
            "properties": {"signedCertificateEmbeddedSct": {"type": "object", "required": ["chain"], "properties": {"chain": r("CertificateChain")}}},
        })),
        ("TrustBundle", json!({
            "type": "object", "required": ["chains"],
            "properties": {"chains": {"type": "array", "items": r("CertificateChain")}},
        })),
        ("Configuration", json!({
            "type": "object", "required": ["issuers"],
            "properties": {"issuers": {"type": "array", "items": {
                "type": "object", "required": ["issuerUrl"],
                "properties": {"issuerUrl": {"type": "string"}, "audience": {"type": "string"}, "challengeClaim": {"type": "string"}},
            }}},
        })),
        ("SignedTreeHead", json!({
            "type": "object", "required": ["sha256_root_hash", "timestamp", "tree_head_signature", "tree_size"],
            "properties": {"sha256_root_hash": b64, "timestamp": {"type": "integer"}, "tree_head_signature": b64, "tree_size": {"type": "integer", "minimum": 0}},
        })),
        ("Status", json!({
            "type": "object", "required": ["status"],
            "properties": {"status": {"type": "string"}},
        })),
    ]
}

fn text(content_type: &str, description: &str) -> Value {
    json!({"description": description, "content": {content_type: {"schema": {"type": "string"}}}})
}

fn bytes(content_type: &str, description: &str) -> Value {
    json!({"description": description, "content": {content_type: {"schema": {"type": "string", "contentMediaType": content_type}}}})
}

fn json_of(schema: Value, description: &str) -> Value {
    json!({"description": description, "content": {"application/json": {"schema": schema}}})
}

fn body(schema: &str) -> Value {
    json!({"required": true, "content": {"application/json": {"schema": r(schema)}}})
}

fn query(name: &str, required: bool, schema: Value, description: &str) -> Value {
    json!({"name": name, "in": "query", "required": required, "schema": schema, "description": description})
}

fn path_param(name: &str, description: &str) -> Value {
    json!({"name": name, "in": "path", "required": true, "schema": {"type": "string"}, "description": description})
}

fn index() -> Value {
    json!({"type": "integer", "minimum": 0, "maximum": i64::MAX})
}

/// A tree size a proof is between: at least 1.
fn size() -> Value {
    json!({"type": "integer", "minimum": 1, "maximum": i64::MAX})
}

fn tree_id() -> Value {
    query("treeID", false, json!({"type": "string", "pattern": "^[0-9]+$"}), "a shard's tree ID (`GET /api/v1/log` lists them); the active shard when absent")
}

/// The route's summary, tag, parameters, body and successful answers (errors are added to
/// every operation by [`document`]). `None` for a route not described: a test fails then.
fn operation(method: &Method, template: &str) -> Option<Value> {
    let op = |tag: &str, summary: &str, extra: Value| {
        let mut o = json!({"tags": [tag], "summary": summary});
        if let (Some(o), Some(extra)) = (o.as_object_mut(), extra.as_object()) {
            o.extend(extra.clone());
        }
        o
    };
    let object = || json!({"type": "object"});
    Some(match (method.as_str(), template) {
        ("GET", "/api/admin/tokens") => op("admin", "The API tokens (their ids, roles and scopes, never the secrets)", json!({"responses": {"200": json_of(object(), "the tokens")}})),
        ("GET", "/api/admin/roles") => op("admin", "The roles and the permissions each grants", json!({"responses": {"200": json_of(object(), "the roles")}})),
        ("POST", "/api/admin/log/rotate") => op("admin", "Rotates a log (rekor-v1, rekor-v2 or ct) to a new shard under a new key, online; with prepare, only makes the next shard's key and publishes it in the trust documents first", json!({"requestBody": body("RotateLogRequest"), "responses": {"200": json_of(object(), "the frozen and the new shard, or (prepare) the prepared key"), "409": json_of(object(), "a rotation this instance cannot make (another instance rotated a moment ago, no shared seal key, or witnesses that know the Rekor v2 log by its key)")}})),
        ("POST", "/api/admin/log/reindex") => op("admin", "Starts giving the Rekor v1 entries logged before search by identity and key existed those keys, found in their stored bodies: online, in the background, resuming from where a run before stopped", json!({"requestBody": body("ReindexLogRequest"), "responses": {"202": json_of(object(), "the job's status: started, or already running")}})),
        ("GET", "/api/admin/log/reindex") => op("admin", "How far the reindex is on this instance: each shard's cursor, size, and the entries given keys", json!({"responses": {"200": json_of(object(), "the job's status")}})),
        ("GET", "/api/admin/bans") => op("admin", "The clients banned now", json!({"responses": {"200": json_of(object(), "the bans")}})),
        ("POST", "/api/admin/bans/lift") => op("admin", "Lifts a ban", json!({"requestBody": body("LiftBanRequest"), "responses": {"200": json_of(object(), "what was lifted")}})),
        ("GET", "/api/admin/audit/verify") => op("admin", "Verifies the audit log's hash chain", json!({"responses": {"200": json_of(object(), "the chain verifies")}})),
        ("GET", "/healthz") => op("operations", "Liveness", json!({"responses": {"200": json_of(r("Status"), "the process is up")}})),
        ("GET", "/readyz") => op("operations", "Readiness: the logs are open and, on shared storage, the sequencer is known", json!({"responses": {"200": json_of(r("Status"), "ready"), "503": json_of(r("Status"), "starting, shutting down, stepped down, or refusing appends (an unrestored backup)")}})),
        ("GET", "/metrics") => op("operations", "Prometheus metrics (OpenTelemetry names)", json!({"responses": {"200": text("text/plain; version=0.0.4", "the metrics")}})),
        ("GET", "/api/openapi.json") => op("operations", "This description", json!({"responses": {"200": json_of(object(), "OpenAPI 3.1")}})),
        ("GET", "/oidc/.well-known/openid-configuration") => op("dev", "The development OIDC issuer's discovery document (`serve --dev` only)", json!({"responses": {"200": json_of(object(), "OpenID provider metadata")}})),
        ("GET", "/oidc/jwks") => op("dev", "The development OIDC issuer's keys (`serve --dev` only)", json!({"responses": {"200": json_of(object(), "a JWK set")}})),
        ("POST", "/api/v2/signingCert") => op("fulcio", "Issues a short-lived signing certificate for an OIDC identity", json!({"requestBody": body("SigningCertRequest"), "responses": {"200": json_of(r("SigningCertificate"), "the certificate, with its SCT embedded, and its chain")}})),
        ("GET", "/api/v2/trustBundle") => op("fulcio", "The CA's certificate chains", json!({"responses": {"200": json_of(r("TrustBundle"), "the chains")}})),
        ("POST", "/api/v1/signingCert") => op("fulcio", "Fulcio's legacy API: issues a short-lived signing certificate for the OIDC identity of `Authorization: Bearer`", json!({"requestBody": body("LegacySigningCertRequest"), "responses": {"201": text("application/pem-certificate-chain", "PEM certificates, leaf first, its SCT embedded")}})),
        ("GET", "/api/v1/rootCert") => op("fulcio", "Fulcio's legacy API: the CA's certificate chain", json!({"responses": {"200": text("application/pem-certificate-chain", "PEM certificates")}})),
        ("GET", "/api/v2/configuration") => op("fulcio", "The OIDC issuers the CA accepts", json!({"responses": {"200": json_of(r("Configuration"), "the issuers")}})),
        ("GET", "/trust/{name}") => op("trust", "A trust document", json!({
            "parameters": [{"name": "name", "in": "path", "required": true, "schema": {"type": "string", "enum": ["trusted_root.json", "signing_config.json", "client_trust_config.json"]}}],
            "responses": {"200": json_of(object(), "the document, as `signet trust export` writes it")}})),
        ("GET", "/tuf/{*file}") => op("trust", "A file of the TUF repository", json!({
            "parameters": [{"name": "file", "in": "path", "required": true, "schema": {"type": "string", "examples": ["1.root.json", "timestamp.json"]},
                "description": "`N.root.json`, `timestamp.json`, `N.snapshot.json`, `N.targets.json` or `targets/<sha256>.<name>`"}],
            "responses": {"200": {"description": "the file", "content": {"application/json": {"schema": object()}, "application/octet-stream": {"schema": {"type": "string"}}}}}})),
        ("GET", "/ui") => op("explorer", "The web log explorer", json!({"responses": {"200": text("text/html; charset=utf-8", "the page")}})),
        ("GET", "/ui/{file}") => op("explorer", "The explorer's script and style, and the list of lab reports", json!({
            "parameters": [{"name": "file", "in": "path", "required": true, "schema": {"type": "string", "enum": ["app.js", "style.css", "reports.json"]}}],
            "responses": {"200": {"description": "the file", "content": {
                "text/javascript; charset=utf-8": {"schema": {"type": "string"}},
                "text/css; charset=utf-8": {"schema": {"type": "string"}},
                "application/json": {"schema": {"type": "array", "items": {"type": "object", "required": ["name", "url"], "properties": {"name": {"type": "string"}, "url": {"type": "string"}}}}},
            }}}})),
        ("GET", "/ui/reports/{name}") => op("explorer", "A lab report from the data dir's `reports/`", json!({
            "parameters": [path_param("name", "`<name>.html`")],
            "responses": {"200": text("text/html; charset=utf-8", "the report")}})),
        ("GET", "/ct/v1/get-sth") => op("ct", "The CT log's signed tree head (RFC 6962)", json!({"responses": {"200": json_of(r("SignedTreeHead"), "the tree head")}})),
        ("GET", "/ct/v1/get-sth-consistency") => op("ct", "A consistency proof between two tree sizes (RFC 6962)", json!({
            "parameters": [query("first", true, index(), "the older tree size"), query("second", true, index(), "the newer tree size")],
            "responses": {"200": json_of(json!({"type": "object", "required": ["consistency"], "properties": {"consistency": {"type": "array", "items": {"type": "string"}}}}), "the proof")}})),
        ("GET", "/ct/v1/get-proof-by-hash") => op("ct", "An inclusion proof by leaf hash (RFC 6962)", json!({
            "parameters": [query("hash", true, json!({"type": "string", "pattern": "^[A-Za-z0-9+/]{43}=$"}), "base64 of the 32-byte leaf hash"), query("tree_size", true, index(), "the tree size to prove against")],
            "responses": {"200": json_of(json!({"type": "object", "required": ["leaf_index", "audit_path"], "properties": {"leaf_index": {"type": "integer"}, "audit_path": {"type": "array", "items": {"type": "string"}}}}), "the proof")}})),
        ("GET", "/ct/v1/get-entries") => op("ct", "Entries of the CT log (RFC 6962)", json!({
            "parameters": [query("start", true, index(), "the first index"), query("end", true, index(), "the last index, inclusive")],
            "responses": {"200": json_of(json!({"type": "object", "required": ["entries"], "properties": {"entries": {"type": "array", "items": {"type": "object", "properties": {"leaf_input": {"type": "string"}, "extra_data": {"type": "string"}}}}}}), "the entries")}})),
        ("GET", "/ct/v1/get-roots") => op("ct", "The roots the CT log accepts chains to: signet's CA root (RFC 6962)", json!({
            "responses": {"200": json_of(json!({"type": "object", "required": ["certificates"], "properties": {"certificates": {"type": "array", "items": {"type": "string"}}}}), "base64 DER certificates")}})),
        ("GET", "/ct/v1/get-entry-and-proof") => op("ct", "One entry and its inclusion proof (RFC 6962)", json!({
            "parameters": [query("leaf_index", true, index(), "the entry's index"), query("tree_size", true, index(), "the tree size to prove against")],
            "responses": {"200": json_of(json!({"type": "object", "required": ["leaf_input", "extra_data", "audit_path"], "properties": {"leaf_input": {"type": "string"}, "extra_data": {"type": "string"}, "audit_path": {"type": "array", "items": {"type": "string"}}}}), "the entry and its proof")}})),
        ("POST", "/ct/v1/add-chain") | ("POST", "/ct/v1/add-pre-chain") => {
            let (what, summary) = match template {
                "/ct/v1/add-chain" => ("a certificate", "Logs a certificate of signet's CA, and answers its SCT (RFC 6962 §4.1)"),
                _ => ("a precertificate (critical CT poison extension)", "Logs a precertificate of signet's CA, and answers its SCT (RFC 6962 §4.2)"),
            };
            op("ct", summary, json!({
                "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object", "required": ["chain"], "additionalProperties": false, "properties": {
                    "chain": {"type": "array", "minItems": 2, "maxItems": 3, "items": {"type": "string", "contentEncoding": "base64"},
                        "description": format!("{what}, the intermediate of signet's CA that issued it, and optionally the root: base64 DER")}}}}}},
                "responses": {"200": json_of(json!({"type": "object", "required": ["sct_version", "id", "timestamp", "extensions", "signature"], "properties": {
                    "sct_version": {"type": "integer"}, "id": {"type": "string"}, "timestamp": {"type": "integer"}, "extensions": {"type": "string"}, "signature": {"type": "string"}}}), "the SCT, once the entry is durable")}}))
        }
        ("POST", "/api/v1/timestamp") => op("tsa", "An RFC 3161 timestamp", json!({
            "requestBody": {"required": true, "content": {
                "application/timestamp-query": {"schema": {"type": "string", "contentMediaType": "application/timestamp-query"}},
                "application/json": {"schema": r("TimestampJsonRequest")},
            }},
            "responses": {"200": bytes("application/timestamp-reply", "the DER TimeStampResp")}})),
        ("GET", "/api/v1/timestamp/certchain") => op("tsa", "The TSA's certificate chain", json!({"responses": {"200": text("application/pem-certificate-chain", "PEM certificates, leaf first")}})),
        ("GET", "/api/v1/log") => op("rekor-v1", "The log's size, root and checkpoint, and its frozen shards", json!({"responses": {"200": json_of(r("LogInfo"), "the log")}})),
        ("GET", "/api/v1/log/publicKey") => op("rekor-v1", "The log's public key", json!({"parameters": [tree_id()], "responses": {"200": text("application/x-pem-file", "a PEM public key")}})),
        ("GET", "/api/v1/log/proof") => op("rekor-v1", "A consistency proof between two tree sizes", json!({
            "parameters": [query("firstSize", false, size(), "the older size (default 1)"), query("lastSize", false, size(), "the newer size (default: the current size)"), tree_id()],
            "responses": {"200": json_of(r("ConsistencyProof"), "the proof")}})),
        ("POST", "/api/v1/log/entries") => op("rekor-v1", "Appends an entry (hashedrekord or dsse 0.0.1)", json!({
            "requestBody": body("ProposedEntry"),
            "responses": {"201": json_of(r("LogEntries"), "the entry, with its inclusion proof and signed entry timestamp")}})),
        ("GET", "/api/v1/log/entries") => op("rekor-v1", "An entry by log index", json!({
            "parameters": [query("logIndex", true, index(), "the log-wide index")],
            "responses": {"200": json_of(r("LogEntries"), "the entry")}})),
        ("POST", "/api/v1/log/entries/retrieve") => op("rekor-v1", "Entries by UUID, index or content", json!({
            "requestBody": body("SearchLogQuery"),
            "responses": {"200": json_of(json!({"type": "array", "items": r("LogEntries")}), "the entries found")}})),
        ("GET", "/api/v1/log/entries/{uuid}") => op("rekor-v1", "An entry by UUID", json!({
            "parameters": [{"name": "uuid", "in": "path", "required": true, "schema": {"type": "string", "pattern": "^([0-9a-fA-F]{16})?[0-9a-fA-F]{64}$"}, "description": "64 hex (the leaf hash) or 80 hex (tree ID and leaf hash)"}],
            "responses": {"200": json_of(r("LogEntries"), "the entry")}})),
        ("POST", "/api/v1/index/retrieve") => op("rekor-v1", "The UUIDs of entries for an artifact digest or a signing identity (exactly one of hash, email, identity), a page at a time", json!({
            "parameters": [query("after", false, index(), "the `x-next-after` of the previous page")],
            "requestBody": body("SearchIndex"),
            "responses": {"200": json_of(json!({"type": "array", "items": {"type": "string"}}), "UUIDs, oldest first; `x-next-after` when there are more")}})),
        ("POST", "/api/v2/log/entries") => op("rekor-v2", "Appends a hashedrekord 0.0.2 entry", json!({
            "requestBody": body("CreateEntryRequest"),
            "responses": {"201": json_of(r("TransparencyLogEntry"), "the entry, with its inclusion proof and checkpoint")}})),
        ("GET", "/api/v2/checkpoint") => op("rekor-v2", "The log's checkpoint (C2SP tlog-checkpoint)", json!({"responses": {"200": text("text/plain; charset=utf-8", "a signed note")}})),
        ("GET", "/api/v2/tile/{*path}") => op("rekor-v2", "A tile of the log (C2SP tlog-tiles)", json!({
            "parameters": [path_param("path", "`<L>/<N>[.p/<W>]` or `entries/<N>[.p/<W>]`, N in three-digit segments (`x001/234`)")],
            "responses": {"200": bytes("application/octet-stream", "the tile")}})),
        ("POST", "/add-checkpoint") => op("witness", "Cosigns a log's checkpoint (C2SP tlog-witness), when `[witness]` lists the log", json!({
            "requestBody": {"required": true, "content": {"text/plain": {"schema": {"type": "string",
                "description": "`old <size>`, up to 63 base64 consistency proof hashes, an empty line, then the signed checkpoint"}}}},
            "responses": {
                "200": text("text/plain; charset=utf-8", "the witness's cosignature lines (C2SP tlog-cosignature)"),
                "409": text("text/x.tlog.size", "the size of the latest checkpoint the witness cosigned for this log"),
            }})),
        ("GET", "/witness/checkpoint") => op("witness", "The latest checkpoint of a log this witness cosigned since it started", json!({
            "parameters": [query("origin", true, json!({"type": "string", "minLength": 1}), "the log's origin")],
            "responses": {"200": text("text/plain; charset=utf-8", "the signed checkpoint with this witness's cosignature")}})),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_route_is_described_with_its_method() {
        let doc = document().unwrap();
        // Every route but the gRPC methods, which fulcio.proto describes.
        let (grpc, routes): (Vec<_>, Vec<_>) = crate::api::route_list().into_iter().partition(|(_, t, _)| crate::grpc::is_grpc_path(t));
        for (method, template, _) in &routes {
            let op = &doc["paths"][openapi_path(template)][method.as_str().to_ascii_lowercase()];
            assert!(op["summary"].is_string(), "{method} {template} has no summary");
            assert!(op["responses"]["default"].is_object(), "{method} {template} has no error response");
        }
        let described: usize = doc["paths"].as_object().unwrap().values().map(|item| item.as_object().unwrap().len()).sum();
        assert_eq!(described, routes.len(), "the description has operations the router does not");
        assert_eq!(grpc.len(), 3, "Fulcio's three gRPC methods");
        assert!(grpc.iter().all(|(_, t, _)| doc["paths"].get(*t).is_none()), "a gRPC method in the OpenAPI description");
    }

    #[test]
    fn every_reference_resolves() {
        let doc = document().unwrap();
        let text = doc.to_string();
        for piece in text.split("\"$ref\":\"").skip(1) {
            let target = piece.split('"').next().unwrap();
            let name = target.strip_prefix("#/components/schemas/").unwrap_or_else(|| panic!("unexpected $ref {target}"));
            assert!(doc["components"]["schemas"][name].is_object(), "$ref {target} does not resolve");
        }
    }

    #[test]
    fn request_schemas_follow_the_strict_reading() {
        let doc = document().unwrap();
        let schemas = &doc["components"]["schemas"];
        // Unknown fields are refused, so the description says so.
        assert_eq!(schemas["ProposedEntry"]["additionalProperties"], json!(false));
        assert_eq!(schemas["SigningCertRequest"]["additionalProperties"], json!(false));
        let required: Vec<&str> = schemas["ProposedEntry"]["required"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
        assert_eq!(required, ["apiVersion", "kind", "spec"]);
        // The spec is one of the kinds' specs, each described.
        assert_eq!(schemas["HashedRekordV001Spec"]["properties"]["signature"]["$ref"], json!("#/components/schemas/HashedRekordV001Signature"));
        assert_eq!(schemas["HashedRekordV001Hash"]["properties"]["algorithm"]["$ref"], json!("#/components/schemas/HashAlg"));
        assert_eq!(schemas["HashAlg"]["enum"], json!(["sha256", "sha384", "sha512"]));
    }

    #[test]
    fn admin_routes_require_a_token_and_open_ones_none() {
        let doc = document().unwrap();
        assert_eq!(doc["paths"]["/api/admin/tokens"]["get"]["security"], json!([{"bearer": []}]));
        assert_eq!(doc["paths"]["/healthz"]["get"]["security"], json!([]));
        assert_eq!(doc["paths"]["/api/v1/log"]["get"]["security"], json!([{}, {"bearer": []}]));
        assert_eq!(doc["paths"]["/tuf/{file}"]["get"]["parameters"][0]["name"], json!("file"));
    }

    #[test]
    fn operation_ids_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for (method, template, _) in crate::api::route_list() {
            assert!(seen.insert(operation_id(&method, template)), "{method} {template}");
        }
    }
}
