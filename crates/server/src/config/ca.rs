//! `[ca]`: the certificate authority's certificates.

use serde::Deserialize;

use super::error::ConfigError;

/// The certificate authority.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CaSettings {
    /// Curve of the intermediate that signs leaves, `p256` or `p384` (Fulcio's). It applies
    /// when the key is made; an existing key keeps its curve and must match it. Unset: the
    /// key on disk, or P-256 for a new one.
    pub intermediate_key: Option<String>,
}

impl CaSettings {
    pub fn intermediate_curve(&self) -> Result<Option<signet_ca::x509::CaCurve>, ConfigError> {
        self.intermediate_key
            .as_deref()
            .map(|s| s.parse().map_err(|e: signet_ca::x509::UnknownCurve| ConfigError::Invalid(format!("ca.intermediate_key: {e}"))))
            .transpose()
    }
}
