//! `/ui`: the web log explorer, a page of plain HTML, CSS and JS compiled into the binary
//! (`crates/server/ui/`), and the lab's HTML reports that an operator put in
//! `<data dir>/reports`.
//!
//! The page reads only the public API, from its own origin. Its policy forbids everything
//! else (inline script and style, other origins, framing), so that an entry's contents, which
//! the page shows, cannot run as code even if the page had a bug that inserted them as HTML.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use super::error::ApiError;
use crate::state::AppState;

const INDEX: &[u8] = include_bytes!("../../ui/index.html");
const SCRIPT: &[u8] = include_bytes!("../../ui/app.js");
const STYLE: &[u8] = include_bytes!("../../ui/style.css");

/// The explorer's own pages; lab reports get a stricter one (below).
const PAGE_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
    connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";
/// A lab report is a generated page with inline styles and SVG charts, and no script.
const REPORT_POLICY: &str = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; frame-ancestors 'none'; base-uri 'none'";

/// At most this many reports are listed: the listing's cost is bounded whatever the directory holds.
const MAX_REPORTS: usize = 100;
/// A report larger than this is not served (the lab's are a few hundred KB).
const MAX_REPORT_BYTES: u64 = 16 << 20;

fn page(kind: &'static str, policy: &'static str, body: impl IntoResponse) -> Response {
    (
        [
            (header::CONTENT_TYPE, kind),
            (header::CONTENT_SECURITY_POLICY, policy),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::REFERRER_POLICY, "no-referrer"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

/// `GET /ui`: the explorer.
pub async fn index() -> Response {
    page("text/html; charset=utf-8", PAGE_POLICY, INDEX)
}

/// `GET /ui/{file}`: the explorer's script and style, and the list of lab reports.
pub async fn asset(State(state): State<Arc<AppState>>, Path(file): Path<String>) -> Result<Response, ApiError> {
    match file.as_str() {
        "app.js" => Ok(page("text/javascript; charset=utf-8", PAGE_POLICY, SCRIPT)),
        "style.css" => Ok(page("text/css; charset=utf-8", PAGE_POLICY, STYLE)),
        "reports.json" => Ok(Json(reports(&state.reports_dir).await).into_response()),
        _ => Err(ApiError::not_found(format!("no explorer file {file:?}; there are app.js, style.css and reports.json"))),
    }
}

/// `GET /ui/reports/{name}`: one lab report from `<data dir>/reports`.
pub async fn report(State(state): State<Arc<AppState>>, Path(name): Path<String>) -> Result<Response, ApiError> {
    let missing = || ApiError::not_found(format!("no lab report {name:?} in the data dir's reports/"));
    // Only a plain file name: the request never names another directory.
    if !is_report_name(&name) {
        return Err(missing());
    }
    let path = state.reports_dir.join(&name);
    let bytes = tokio::task::spawn_blocking(move || -> std::io::Result<Option<Vec<u8>>> {
        let meta = std::fs::symlink_metadata(&path)?;
        if !meta.is_file() || meta.len() > MAX_REPORT_BYTES {
            return Ok(None);
        }
        std::fs::read(&path).map(Some)
    })
    .await
    .ok()
    .and_then(Result::ok)
    .flatten()
    .ok_or_else(missing)?;
    Ok(page("text/html; charset=utf-8", REPORT_POLICY, bytes))
}

/// The reports the explorer links, by name; none when the directory is missing.
async fn reports(dir: &std::path::Path) -> Value {
    let dir = dir.to_path_buf();
    let mut names = tokio::task::spawn_blocking(move || {
        let Ok(entries) = std::fs::read_dir(&dir) else { return Vec::new() };
        entries
            .filter_map(Result::ok)
            .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| is_report_name(n))
            .take(MAX_REPORTS)
            .collect::<Vec<_>>()
    })
    .await
    .unwrap_or_default();
    names.sort();
    Value::Array(names.into_iter().map(|n| json!({"url": format!("/ui/reports/{n}"), "name": n})).collect())
}

/// `name.html`, of letters, digits, `-`, `_` and `.`, not hidden.
fn is_report_name(name: &str) -> bool {
    name.len() <= 128
        && name.ends_with(".html")
        && !name.starts_with('.')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

#[cfg(test)]
mod tests {
    use super::is_report_name;

    #[test]
    fn report_names_are_plain_html_files() {
        assert!(is_report_name("lab-2026-11-26.html"));
        for bad in ["../x.html", "a/b.html", ".hidden.html", "x.htm", "x.html/", "x%2f.html", "", "é.html"] {
            assert!(!is_report_name(bad), "{bad}");
        }
    }
}
