//! Times as Unix seconds, and the closed validity windows (`validFor`) of the trusted root.
//!
//! protobuf-specs `TimeRange` is a closed interval: a time equal to `end` is inside it. JSON
//! timestamps are RFC 3339 (protojson writes `Z` and 0, 3, 6 or 9 fractional digits). A
//! fractional start is rounded up and a fractional end down, so rounding never widens a window.

use der::DateTime;

/// A closed window `[start, end]` in Unix seconds; `end` may be open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub start: i64,
    pub end: Option<i64>,
}

impl Window {
    pub fn contains(&self, t: i64) -> bool {
        t >= self.start && self.end.is_none_or(|e| t <= e)
    }
}

impl std::fmt::Display for Window {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.start, self.end) {
            (i64::MIN, Some(e)) => write!(f, "until {}", format_unix(e)),
            (i64::MIN, None) => write!(f, "unbounded"),
            (s, Some(e)) => write!(f, "{} to {}", format_unix(s), format_unix(e)),
            (s, None) => write!(f, "from {}", format_unix(s)),
        }
    }
}

/// Where a trusted signing time came from; error messages name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeSource {
    /// A log's integrated time, vouched for by a verified SET.
    IntegratedTime,
    /// The genTime of a verified RFC 3161 timestamp.
    Rfc3161,
}

/// A time at which the signature is known to have existed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SigningTime {
    pub unix: i64,
    pub source: TimeSource,
}

impl std::fmt::Display for SigningTime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let source = match self.source {
            TimeSource::IntegratedTime => "the log's integrated time",
            TimeSource::Rfc3161 => "the RFC 3161 timestamp",
        };
        write!(f, "{source} {}", format_unix(self.unix))
    }
}

/// Parses an RFC 3339 timestamp; returns (whole seconds, has a nonzero fraction).
pub fn parse_rfc3339(s: &str) -> Option<(i64, bool)> {
    let b = s.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't') || b[13] != b':' || b[16] != b':' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<u32> {
        let part = s.get(r)?;
        part.bytes().all(|c| c.is_ascii_digit()).then(|| part.parse().ok())?
    };
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let mut rest = &s[19..];
    let mut fraction = false;
    if let Some(r) = rest.strip_prefix('.') {
        let digits = r.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        fraction = r[..digits].bytes().any(|c| c != b'0');
        rest = &r[digits..];
    }
    let offset: i64 = match rest {
        "Z" | "z" => 0,
        _ => {
            let sign = match rest.as_bytes().first()? {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let ob = rest.as_bytes();
            if ob.len() != 6 || ob[3] != b':' {
                return None;
            }
            let h: i64 = rest[1..3].parse().ok()?;
            let m: i64 = rest[4..6].parse().ok()?;
            sign * (h * 3600 + m * 60)
        }
    };
    let dt = DateTime::new(u16::try_from(year).ok()?, month as u8, day as u8, hour as u8, minute as u8, second as u8).ok()?;
    Some((dt.unix_duration().as_secs() as i64 - offset, fraction))
}

/// Why a `validFor` cannot be read; `what` names the entry it belongs to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WindowError {
    #[error("{what}: validFor has no start (a missing bound is not unbounded)")]
    NoStart { what: String },
    #[error("{what}: validFor.start {value:?} is not an RFC 3339 time")]
    BadStart { what: String, value: String },
    #[error("{what}: validFor.end {value:?} is not an RFC 3339 time")]
    BadEnd { what: String, value: String },
}

/// The window of a protobuf-specs `TimeRange` JSON object; `start` is required.
pub fn window(start: Option<&str>, end: Option<&str>, what: &str) -> Result<Window, WindowError> {
    let start = start.ok_or_else(|| WindowError::NoStart { what: what.to_string() })?;
    let (s, s_frac) = parse_rfc3339(start).ok_or_else(|| WindowError::BadStart { what: what.to_string(), value: start.to_string() })?;
    let end = match end {
        None => None,
        Some(e) => Some(parse_rfc3339(e).ok_or_else(|| WindowError::BadEnd { what: what.to_string(), value: e.to_string() })?.0),
    };
    Ok(Window { start: if s_frac { s + 1 } else { s }, end })
}

/// `YYYY-MM-DDTHH:MM:SSZ` for error messages.
pub fn format_unix(t: i64) -> String {
    match u64::try_from(t).ok().and_then(|t| DateTime::from_unix_duration(std::time::Duration::from_secs(t)).ok()) {
        Some(dt) => dt.to_string(),
        None => format!("@{t}"),
    }
}

/// Now, in Unix seconds.
pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_protojson_times_and_closed_windows() {
        assert_eq!(parse_rfc3339("2023-07-12T15:56:36Z"), Some((1689177396, false)));
        assert_eq!(parse_rfc3339("2022-12-31T23:59:59.999Z"), Some((1672531199, true)));
        assert_eq!(parse_rfc3339("2022-12-31T23:59:59.000000Z"), Some((1672531199, false)));
        assert_eq!(parse_rfc3339("2023-07-12T17:56:36+02:00"), Some((1689177396, false)));
        for bad in ["", "2023-07-12", "2023-07-12T15:56:36", "2023-13-12T15:56:36Z", "2023-07-12T15:56:36.Z", "x023-07-12T15:56:36Z"] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
        let w = window(Some("2021-01-12T11:53:27Z"), Some("2023-07-12T15:56:36Z"), "tlog").unwrap();
        assert!(w.contains(1689177396));
        assert!(!w.contains(1689177397));
        assert!(!w.contains(1610452406));
        assert!(window(None, Some("2023-07-12T15:56:36Z"), "tlog").unwrap_err().to_string().contains("no start"));
        assert_eq!(window(Some("2021-01-01T00:00:00.5Z"), None, "x").unwrap().start, 1609459201);
    }
}
