//! What a verified token's claims become: every issuer type's principal, every built-in CI
//! provider's templates, and the meta-issuer match of its `iss`. The claims are the
//! issuer's, but a compromised or careless issuer must not be able to crash the CA.
#![no_main]
use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use signet_ca::ci::providers;
use signet_ca::oidc::meta::MetaPattern;
use signet_ca::oidc::IssuerKind;

fn kinds() -> &'static Vec<IssuerKind> {
    static KINDS: OnceLock<Vec<IssuerKind>> = OnceLock::new();
    KINDS.get_or_init(|| {
        let mut kinds = vec![
            IssuerKind::Email { skip_email_verification: false },
            IssuerKind::Uri { subject_domain: "https://ci.example.com".into() },
            IssuerKind::Spiffe { trust_domain: "example.org".into() },
            IssuerKind::Username { subject_domain: "example.com".into() },
            IssuerKind::Kubernetes,
            IssuerKind::Chainguard,
        ];
        for name in providers::NAMES {
            if let Some(Ok(provider)) = providers::builtin(name) {
                kinds.push(IssuerKind::Ci(Arc::new(provider)));
            }
        }
        kinds
    })
}

fn patterns() -> &'static Vec<MetaPattern> {
    static PATTERNS: OnceLock<Vec<MetaPattern>> = OnceLock::new();
    PATTERNS.get_or_init(|| {
        ["https://oidc.eks.*.amazonaws.com/id/*", "https://*.oic.prod-aks.azure.com/*/*/", "https://x.example/*a*a*a*b"]
            .iter()
            .filter_map(|p| MetaPattern::new(p).ok())
            .collect()
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(serde_json::Value::Object(claims)) = serde_json::from_slice::<serde_json::Value>(data) else {
        if let Ok(iss) = std::str::from_utf8(data) {
            for p in patterns() {
                let _ = p.matches(iss);
            }
        }
        return;
    };
    let iss = claims.get("iss").and_then(|v| v.as_str()).unwrap_or("https://issuer.example.com");
    for p in patterns() {
        let _ = p.matches(iss);
    }
    for kind in kinds() {
        let _ = kind.principal(iss, &claims);
    }
});
