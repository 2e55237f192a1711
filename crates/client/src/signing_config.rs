//! SigningConfig v0.2 (protobuf-specs): which CA, transparency log and TSA to use.
//!
//! Of the services valid now, the client takes the highest API version it speaks (Rekor v2
//! over v1, as cosign v3 and sigstore-python 4.5 do) and, within it, the first listed. A
//! selector of ALL or EXACT asks for several logs; this client writes to one and says so.

use serde_json::Value;
use signet_verify::time::parse_rfc3339;

use crate::ClientError;

pub const MEDIA_TYPE: &str = "application/vnd.dev.sigstore.signingconfig.v0.2+json";

/// A Rekor log and the API version to speak to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tlog {
    pub url: String,
    pub major: u64,
}

/// The services one signing uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Services {
    pub ca: String,
    pub tlog: Tlog,
    /// Required when the log is Rekor v2, which gives no signed timestamp of its own.
    pub tsa: Option<String>,
}

pub fn parse(bytes: &[u8], now_unix: i64) -> Result<Services, ClientError> {
    let config: Value = serde_json::from_slice(bytes).map_err(|e| ClientError::Config(format!("not JSON: {e}")))?;
    let media = config.get("mediaType").and_then(Value::as_str).unwrap_or("");
    if media != MEDIA_TYPE {
        return Err(ClientError::Config(format!("mediaType {media:?} is not supported; expected {MEDIA_TYPE}")));
    }
    let ca = pick(&config, "caUrls", &[1], now_unix)?.ok_or_else(|| none_valid("caUrls"))?;
    let tlog = pick(&config, "rekorTlogUrls", &[1, 2], now_unix)?.ok_or_else(|| none_valid("rekorTlogUrls"))?;
    let tsa = pick(&config, "tsaUrls", &[1], now_unix)?;
    if tlog.1 == 2 && tsa.is_none() {
        return Err(ClientError::Config("the selected log is Rekor v2, which needs a TSA, and tsaUrls has none valid now".into()));
    }
    Ok(Services { ca: ca.0, tlog: Tlog { url: tlog.0, major: tlog.1 }, tsa: tsa.map(|t| t.0) })
}

fn none_valid(list: &str) -> ClientError {
    ClientError::Config(format!("{list} lists no service that is valid now with a supported API version"))
}

/// The first service of the highest supported version that is valid at `now`.
fn pick(config: &Value, list: &str, versions: &[u64], now: i64) -> Result<Option<(String, u64)>, ClientError> {
    let Some(services) = config.get(list) else { return Ok(None) };
    let services = services.as_array().ok_or_else(|| ClientError::Config(format!("{list} must be an array")))?;
    let mut best: Option<(String, u64)> = None;
    for (i, s) in services.iter().enumerate() {
        let url = s.get("url").and_then(Value::as_str).ok_or_else(|| ClientError::Config(format!("{list}[{i}].url is missing")))?;
        let major = s.get("majorApiVersion").and_then(Value::as_u64).unwrap_or(0);
        let valid = s.get("validFor").ok_or_else(|| ClientError::Config(format!("{list}[{i}].validFor is missing")))?;
        let bound = |k: &str| -> Result<Option<i64>, ClientError> {
            match valid.get(k).and_then(Value::as_str) {
                None => Ok(None),
                Some(t) => parse_rfc3339(t)
                    .map(|(secs, _)| Some(secs))
                    .ok_or_else(|| ClientError::Config(format!("{list}[{i}].validFor.{k} {t:?} is not an RFC 3339 time"))),
            }
        };
        let start = bound("start")?.ok_or_else(|| ClientError::Config(format!("{list}[{i}].validFor.start is missing")))?;
        let in_window = start <= now && bound("end")?.is_none_or(|end| now <= end);
        if in_window && versions.contains(&major) && best.as_ref().is_none_or(|b| major > b.1) {
            best = Some((url.trim_end_matches('/').to_string(), major));
        }
    }
    Ok(best)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn svc(url: &str, major: u64, start: &str) -> Value {
        json!({"url": url, "majorApiVersion": major, "validFor": {"start": start}})
    }

    #[test]
    fn picks_highest_valid_version() {
        let now = parse_rfc3339("2026-11-22T10:00:00Z").unwrap().0;
        let config = json!({
            "mediaType": MEDIA_TYPE,
            "caUrls": [svc("http://ca/", 1, "2026-01-01T00:00:00Z")],
            "rekorTlogUrls": [svc("http://v1", 1, "2026-01-01T00:00:00Z"), svc("http://v2", 2, "2026-01-01T00:00:00Z"),
                              svc("http://v3", 3, "2026-01-01T00:00:00Z"), svc("http://later", 2, "2027-01-01T00:00:00Z")],
            "tsaUrls": [svc("http://tsa/api/v1/timestamp", 1, "2026-01-01T00:00:00.5Z")],
        });
        let s = parse(config.to_string().as_bytes(), now).unwrap();
        assert_eq!(s.ca, "http://ca");
        assert_eq!(s.tlog, Tlog { url: "http://v2".into(), major: 2 });
        assert_eq!(s.tsa.as_deref(), Some("http://tsa/api/v1/timestamp"));

        let mut no_tsa = config.clone();
        no_tsa["tsaUrls"] = json!([]);
        assert!(parse(no_tsa.to_string().as_bytes(), now).unwrap_err().to_string().contains("needs a TSA"));
        let mut wrong = config;
        wrong["mediaType"] = json!("application/vnd.dev.sigstore.signingconfig.v0.1+json");
        assert!(parse(wrong.to_string().as_bytes(), now).unwrap_err().to_string().contains("mediaType"));
    }
}
