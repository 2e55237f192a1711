//! Load presets: named offered rates with a duration and a connection count that suit them.
//! Explicit `--rate`, `--duration` and `--connections` override what a preset sets.

/// Connections without a preset (the `--connections` default).
pub const DEFAULT_CONNECTIONS: usize = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preset {
    Low,
    Medium,
    High,
    Stress,
    /// A long run at a modest rate that samples the server process (needs `--duration` and `--server-pid`).
    Soak,
}

impl std::str::FromStr for Preset {
    type Err = UnknownPreset;
    fn from_str(s: &str) -> Result<Self, UnknownPreset> {
        Ok(match s {
            "low" => Preset::Low,
            "medium" => Preset::Medium,
            "high" => Preset::High,
            "stress" => Preset::Stress,
            "soak" => Preset::Soak,
            other => return Err(UnknownPreset(other.to_string())),
        })
    }
}

/// `--preset` names no preset; the name given.
#[derive(Debug, thiserror::Error)]
#[error("unknown preset {0:?}; expected low, medium, high, stress or soak")]
pub struct UnknownPreset(pub String);

/// A run's rate or duration, given neither by a flag nor by the preset.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ResolveError {
    #[error("--rate is required (or give --preset low|medium|high|stress|soak)")]
    NoRate,
    #[error("--preset soak needs --duration SECONDS (e.g. 3600)")]
    SoakNeedsDuration,
    #[error("--duration is required (or give --preset low|medium|high|stress)")]
    NoDuration,
}

impl Preset {
    /// Offered requests (or transactions) per second, duration in seconds (`None`: must be
    /// given), connections.
    pub fn defaults(self) -> (f64, Option<f64>, usize) {
        match self {
            Preset::Low => (100.0, Some(30.0), 16),
            Preset::Medium => (1_000.0, Some(30.0), 64),
            Preset::High => (10_000.0, Some(30.0), 256),
            Preset::Stress => (50_000.0, Some(30.0), 1024),
            Preset::Soak => (100.0, None, 16),
        }
    }
}

/// What a run will use.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Resolved {
    pub rate: f64,
    pub duration: f64,
    pub connections: usize,
}

/// Applies a preset under the explicit flags. Without a preset, `rate` and `duration` are required.
pub fn resolve(preset: Option<Preset>, rate: Option<f64>, duration: Option<f64>, connections: Option<usize>) -> Result<Resolved, ResolveError> {
    let (p_rate, p_duration, p_connections) = match preset {
        Some(p) => {
            let (r, d, c) = p.defaults();
            (Some(r), d, c)
        }
        None => (None, None, DEFAULT_CONNECTIONS),
    };
    let rate = rate.or(p_rate).ok_or(ResolveError::NoRate)?;
    let duration = match (duration.or(p_duration), preset) {
        (Some(d), _) => d,
        (None, Some(Preset::Soak)) => return Err(ResolveError::SoakNeedsDuration),
        (None, _) => return Err(ResolveError::NoDuration),
    };
    Ok(Resolved { rate, duration, connections: connections.unwrap_or(p_connections) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_set_rate_duration_and_connections() {
        let r = |p: &str| resolve(Some(p.parse().unwrap()), None, None, None).unwrap();
        assert_eq!(r("low"), Resolved { rate: 100.0, duration: 30.0, connections: 16 });
        assert_eq!(r("medium").rate, 1_000.0);
        assert_eq!(r("high").rate, 10_000.0);
        let stress = r("stress");
        assert_eq!((stress.rate, stress.duration), (50_000.0, 30.0));
        // Enough connections for the rate at a 20 ms response time: C / L >= rate.
        assert!(stress.connections as f64 / 0.020 >= stress.rate);
    }

    #[test]
    fn explicit_flags_override_the_preset() {
        let r = resolve(Some(Preset::High), Some(2_000.0), Some(5.0), Some(8)).unwrap();
        assert_eq!(r, Resolved { rate: 2_000.0, duration: 5.0, connections: 8 });
        let r = resolve(Some(Preset::Medium), None, Some(3.0), None).unwrap();
        assert_eq!(r, Resolved { rate: 1_000.0, duration: 3.0, connections: 64 });
    }

    #[test]
    fn soak_needs_a_duration_and_no_preset_needs_rate_and_duration() {
        let e = resolve(Some(Preset::Soak), None, None, None).unwrap_err().to_string();
        assert!(e.contains("--preset soak needs --duration"), "{e}");
        assert_eq!(resolve(Some(Preset::Soak), None, Some(3600.0), None).unwrap().rate, 100.0);
        assert!(resolve(None, None, Some(1.0), None).unwrap_err().to_string().contains("--rate is required"));
        assert_eq!(resolve(None, Some(1.0), None, None), Err(ResolveError::NoDuration));
        assert_eq!(resolve(None, Some(10.0), Some(1.0), None).unwrap().connections, DEFAULT_CONNECTIONS);
        assert!("huge".parse::<Preset>().unwrap_err().to_string().contains("expected low, medium, high, stress or soak"));
    }
}
