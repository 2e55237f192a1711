//! Meta-issuers: one configured entry for a family of issuer URLs, such as every EKS
//! cluster's (`https://oidc.eks.*.amazonaws.com/id/*`).
//!
//! A `*` matches one or more of `A-Z a-z 0-9 - _`, as in Fulcio, and never a `.`, `/`, `:`,
//! `?` or `@`: a star can fill in a label or a path segment, but cannot move the match to
//! another host (`https://evil.example/?https://oidc.eks…`) or past a label boundary. The
//! whole URL must match.

use super::error::IssuerError;

/// The longest issuer URL tried against a pattern; longer ones match nothing.
pub const MAX_ISSUER_LEN: usize = 512;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetaPattern {
    pattern: String,
    /// The literal text between the stars: one more piece than there are stars.
    pieces: Vec<String>,
}

impl MetaPattern {
    /// `Err` says why `pattern` is not a meta-issuer pattern.
    pub fn new(pattern: &str) -> Result<MetaPattern, IssuerError> {
        if !pattern.contains('*') {
            return Err(IssuerError::NotAPattern(pattern.to_string()));
        }
        if pattern.contains("**") {
            return Err(IssuerError::DoubleStar(pattern.to_string()));
        }
        let host_and_after = pattern.split_once("://").map(|(_, rest)| rest).ok_or_else(|| IssuerError::PatternScheme(pattern.to_string()))?;
        let host = host_and_after.split('/').next().unwrap_or(host_and_after);
        if host == "*" || (host.starts_with("*.") && host.matches('.').count() < 2) {
            return Err(IssuerError::StarHost(pattern.to_string()));
        }
        Ok(MetaPattern { pattern: pattern.to_string(), pieces: pattern.split('*').map(str::to_string).collect() })
    }

    pub fn as_str(&self) -> &str {
        &self.pattern
    }

    pub fn matches(&self, url: &str) -> bool {
        url.len() <= MAX_ISSUER_LEN && matches_from(&self.pieces, url)
    }
}

fn star_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-' || c == '_'
}

/// `pieces[0]`, then for each further piece a run of star characters and that piece.
///
/// Tracks the set of positions each prefix of the pattern can end at, so that the cost is
/// at most pieces × length², whatever the URL (a backtracking match of `*a*a*a` against
/// `aaaa…` would be exponential in the stars).
fn matches_from(pieces: &[String], text: &str) -> bool {
    let Some((first, rest)) = pieces.split_first() else { return text.is_empty() };
    if !text.starts_with(first.as_str()) {
        return false;
    }
    let bytes = text.as_bytes();
    let mut reachable = vec![false; bytes.len() + 1];
    reachable[first.len()] = true;
    for piece in rest {
        let mut next = vec![false; bytes.len() + 1];
        for start in (0..=bytes.len()).filter(|&p| reachable[p]) {
            // The star takes one or more star characters, then the piece must follow.
            let mut end = start;
            while end < bytes.len() && star_char(bytes[end] as char) {
                end += 1;
                if text.get(end..).is_some_and(|after| after.starts_with(piece.as_str())) {
                    next[end + piece.len()] = true;
                }
            }
        }
        reachable = next;
    }
    reachable[bytes.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fulcios_shipped_patterns() {
        let eks = MetaPattern::new("https://oidc.eks.*.amazonaws.com/id/*").unwrap();
        assert!(eks.matches("https://oidc.eks.eu-west-1.amazonaws.com/id/B2E4C1A8D0F3"));
        assert!(!eks.matches("https://oidc.eks.eu-west-1.amazonaws.com/id/"));
        assert!(!eks.matches("https://oidc.eks.evil.example/x.amazonaws.com/id/1"));
        assert!(!eks.matches("https://oidc.eks.a.b.amazonaws.com/id/1"), "a star takes no dot");
        assert!(!eks.matches("https://oidc.eks.eu-west-1.amazonaws.com/id/1/more"));
        let gke = MetaPattern::new("https://container.googleapis.com/v1/projects/*/locations/*/clusters/*").unwrap();
        assert!(gke.matches("https://container.googleapis.com/v1/projects/p-1/locations/us-central1/clusters/c_2"));
        let aks = MetaPattern::new("https://*.oic.prod-aks.azure.com/*/*/").unwrap();
        assert!(aks.matches("https://eastus.oic.prod-aks.azure.com/0000-1111/2222-3333/"));
        assert!(!aks.matches("https://eastus.oic.prod-aks.azure.com/0000-1111/2222-3333"));
        let ghe = MetaPattern::new("https://token.actions.githubusercontent.com/*").unwrap();
        assert!(ghe.matches("https://token.actions.githubusercontent.com/octo-enterprise"));
        assert!(!ghe.matches("https://token.actions.githubusercontent.com/octo/extra"));
        assert!(!ghe.matches(&format!("https://token.actions.githubusercontent.com/{}", "a".repeat(MAX_ISSUER_LEN))));
    }

    #[test]
    fn many_stars_over_a_long_run_still_answer() {
        let pattern = MetaPattern::new("https://x.example/*a*a*a*a*a*b").unwrap();
        let long = format!("https://x.example/{}", "a".repeat(400));
        assert!(!pattern.matches(&long));
        assert!(pattern.matches(&format!("{long}b")));
        assert!(!MetaPattern::new("https://x.example/*a*").unwrap().matches("https://x.example/a"));
        assert!(MetaPattern::new("https://x.example/*a*").unwrap().matches("https://x.example/bab"));
    }

    #[test]
    fn patterns_that_could_match_any_host_are_refused() {
        for bad in ["https://*", "https://*/x", "https://*.com", "https://a**b.example", "oidc.*.example", "https://plain.example"] {
            assert!(MetaPattern::new(bad).is_err(), "{bad}");
        }
        assert!(MetaPattern::new("https://*.example.com").is_ok());
    }
}
