//! `signet bench tls compare A B`: report 003's GO/NO-GO between two servers measured in one
//! run. B is GO against A when it is at parity, within a margin on every measure (faster
//! counts as within), or when it saves CPU: at least a margin less server CPU per handshake.
//! Report 003 used ±10 % for both, and needed one of the two.

use std::str::FromStr;

use signet_tls::Backend;

use super::{Report, ServerResult, Spec};
use crate::error::BenchError;
use crate::table::{Align, Table};

/// The margins, in percent.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Criteria {
    /// B's full-handshake median may be at most this much slower than A's.
    pub handshake_pct: f64,
    /// B's throughput at each size may be at most this much lower than A's.
    pub throughput_pct: f64,
    /// B saves CPU when its CPU per handshake is at least this much lower than A's.
    pub cpu_pct: f64,
}

impl Default for Criteria {
    /// Report 003's: ±10 % parity, or a 10 % CPU reduction.
    fn default() -> Self {
        Criteria { handshake_pct: 10.0, throughput_pct: 10.0, cpu_pct: 10.0 }
    }
}

/// A `--criteria` part that is not `NAME=PERCENT` with a known name and a margin in range.
#[derive(Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum CriteriaError {
    #[error("criterion {part:?}: expected NAME=PERCENT")]
    Syntax { part: String },
    #[error("criterion {part:?}: {value:?} is not a number")]
    NotANumber { part: String, value: String },
    #[error("criterion {part:?}: the margin must be 0..=1000 percent")]
    Margin { part: String },
    #[error("criterion {name:?} is not known; expected parity, handshake, throughput or cpu")]
    Unknown { name: String },
}

impl FromStr for Criteria {
    type Err = CriteriaError;
    /// `parity=10,cpu=10`, or `handshake=…,throughput=…,cpu=…`; what is not named keeps its default.
    fn from_str(s: &str) -> Result<Criteria, CriteriaError> {
        let mut c = Criteria::default();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) = part.split_once('=').ok_or_else(|| CriteriaError::Syntax { part: part.into() })?;
            let pct: f64 = value
                .trim()
                .trim_end_matches('%')
                .parse()
                .map_err(|_| CriteriaError::NotANumber { part: part.into(), value: value.into() })?;
            if !(0.0..=1000.0).contains(&pct) {
                return Err(CriteriaError::Margin { part: part.into() });
            }
            match key.trim() {
                "parity" => (c.handshake_pct, c.throughput_pct) = (pct, pct),
                "handshake" => c.handshake_pct = pct,
                "throughput" => c.throughput_pct = pct,
                "cpu" => c.cpu_pct = pct,
                other => return Err(CriteriaError::Unknown { name: other.into() }),
            }
        }
        Ok(c)
    }
}

/// The payload sizes of a comparison when none are given: report 003's throughput figure.
pub const SIZES: [usize; 1] = [16_384];

/// Measures servers `a` and `b` of `spec` (each a backend, or the name of one of its
/// targets) and no other, in one run.
pub fn measure(mut spec: Spec, a: &str, b: &str, progress: &mut dyn FnMut(String)) -> Result<Report, BenchError> {
    let names = [a, b];
    spec.backends = names.iter().filter_map(|n| n.parse::<Backend>().ok()).collect();
    spec.targets.retain(|(name, _)| names.contains(&name.as_str()));
    for name in names {
        if name.parse::<Backend>().is_err() && !spec.targets.iter().any(|(t, _)| t == name) {
            return Err(BenchError::UnknownServer(name.to_string()));
        }
    }
    super::run(&spec, progress)
}

/// The decision and the table that shows why.
#[derive(Debug, Clone)]
pub struct Verdict {
    pub go: bool,
    pub text: String,
}

/// Judges `b` against `a`, both servers of `report`.
pub fn judge(report: &Report, a: &str, b: &str, criteria: &Criteria) -> Result<Verdict, BenchError> {
    let find = |name: &str| {
        report.servers.iter().find(|s| s.name == name).ok_or_else(|| BenchError::NotMeasured(name.to_string()))
    };
    let (sa, sb): (&ServerResult, &ServerResult) = (find(a)?, find(b)?);
    let mut table = Table::new(&[
        ("measure", Align::Left),
        (a, Align::Right),
        (b, Align::Right),
        (&format!("{b} vs {a}"), Align::Right),
        ("criterion", Align::Left),
        ("met", Align::Left),
    ]);
    let pct = |x: f64, base: f64| (x / base - 1.0) * 100.0;
    let mark = |ok: bool| if ok { "yes" } else { "no" }.to_string();
    let mut parity = true;
    let handshake_ok = sb.handshake_ms_p50 <= sa.handshake_ms_p50 * (1.0 + criteria.handshake_pct / 100.0);
    parity &= handshake_ok;
    table.row(vec![
        "full handshake p50 (ms)".into(),
        format!("{:.3}", sa.handshake_ms_p50),
        format!("{:.3}", sb.handshake_ms_p50),
        format!("{:+.1}%", pct(sb.handshake_ms_p50, sa.handshake_ms_p50)),
        format!("parity: at most +{}%", criteria.handshake_pct),
        mark(handshake_ok),
    ]);
    for (pa, pb) in sa.payloads.iter().zip(&sb.payloads) {
        let ok = pb.mb_s >= pa.mb_s * (1.0 - criteria.throughput_pct / 100.0);
        parity &= ok;
        table.row(vec![
            format!("{} B: MB/s", pa.bytes),
            format!("{:.2}", pa.mb_s),
            format!("{:.2}", pb.mb_s),
            format!("{:+.1}%", pct(pb.mb_s, pa.mb_s)),
            format!("parity: at least -{}%", criteria.throughput_pct),
            mark(ok),
        ]);
    }
    let cpu = match (sa.handshake_cpu_ms_per_1000, sb.handshake_cpu_ms_per_1000) {
        (Some(ca), Some(cb)) => {
            let ok = cb <= ca * (1.0 - criteria.cpu_pct / 100.0);
            table.row(vec![
                "server CPU per 1,000 full handshakes (ms)".into(),
                format!("{ca:.0}"),
                format!("{cb:.0}"),
                format!("{:+.1}%", pct(cb, ca)),
                format!("CPU saving: at least -{}%", criteria.cpu_pct),
                mark(ok),
            ]);
            Some(ok)
        }
        _ => {
            table.row(vec![
                "server CPU per 1,000 full handshakes (ms)".into(),
                sa.handshake_cpu_ms_per_1000.map_or("n/a".into(), |c| format!("{c:.0}")),
                sb.handshake_cpu_ms_per_1000.map_or("n/a".into(), |c| format!("{c:.0}")),
                "n/a".into(),
                "CPU saving (needs both: --pid for an external server)".into(),
                "n/a".into(),
            ]);
            None
        }
    };
    let go = parity || cpu == Some(true);
    let why = match (parity, cpu) {
        (true, Some(true)) => format!("GO: {b} is at parity with {a} and saves CPU"),
        (true, _) => format!("GO: {b} is at parity with {a} on every measure"),
        (false, Some(true)) => format!("GO: {b} is not at parity with {a}, but saves at least {}% CPU per handshake", criteria.cpu_pct),
        (false, Some(false)) => format!("NO-GO: {b} is neither at parity with {a} nor saves {}% CPU per handshake", criteria.cpu_pct),
        (false, None) => format!("NO-GO: {b} is not at parity with {a}, and its CPU saving was not measured"),
    };
    Ok(Verdict { go, text: format!("{}\n{why}\n", table.render()) })
}

#[cfg(test)]
mod tests {
    use super::super::PayloadResult;
    use super::*;
    use crate::tlsbench::client::Agreed;

    fn server(name: &str, handshake: f64, mb_s: f64, cpu: Option<f64>) -> ServerResult {
        ServerResult {
            name: name.into(),
            agreed: Agreed { version: "TLSv1.3".into(), cipher: "TLS_AES_256_GCM_SHA384".into() },
            handshakes: 100,
            handshake_ms_p50: handshake,
            handshake_ms_p99: handshake * 2.0,
            handshake_cpu_ms_per_1000: cpu,
            resumed: 100,
            resumed_ms_p50: handshake / 2.0,
            resumed_ms_p99: handshake,
            payloads: vec![PayloadResult { bytes: 16384, messages: 1000, mb_s, latency_ms_p50: 0.1, latency_ms_p99: 0.2 }],
        }
    }

    fn report(a: ServerResult, b: ServerResult) -> Report {
        Report { method: "get".into(), connections: 1, servers: vec![a, b] }
    }

    #[test]
    fn parity_or_a_cpu_saving_is_go_and_neither_is_no_go() {
        let c = Criteria::default();
        // Report 003's own case: 27.6 % faster handshakes and 50 % more throughput.
        let v = judge(&report(server("gnutls", 2.109, 403.65, None), server("wolfssl", 1.526, 606.84, None)), "gnutls", "wolfssl", &c).unwrap();
        assert!(v.go && v.text.contains("GO: wolfssl is at parity with gnutls"), "{}", v.text);
        // 9 % slower is parity; 11 % less throughput is not.
        assert!(judge(&report(server("a", 1.0, 100.0, None), server("b", 1.09, 95.0, None)), "a", "b", &c).unwrap().go);
        let v = judge(&report(server("a", 1.0, 100.0, None), server("b", 1.0, 89.0, None)), "a", "b", &c).unwrap();
        assert!(!v.go && v.text.contains("NO-GO") && v.text.contains("not measured"), "{}", v.text);
        // Not at parity, but 20 % less CPU per handshake.
        let v = judge(&report(server("a", 1.0, 100.0, Some(500.0)), server("b", 1.5, 80.0, Some(400.0))), "a", "b", &c).unwrap();
        assert!(v.go && v.text.contains("saves at least 10% CPU"), "{}", v.text);
        let v = judge(&report(server("a", 1.0, 100.0, Some(500.0)), server("b", 1.5, 80.0, Some(480.0))), "a", "b", &c).unwrap();
        assert!(!v.go && v.text.contains("NO-GO: b is neither"), "{}", v.text);
        assert!(judge(&report(server("a", 1.0, 1.0, None), server("b", 1.0, 1.0, None)), "a", "c", &c).is_err());
    }

    #[test]
    fn criteria_parse_with_defaults_and_name_their_mistakes() {
        assert_eq!("".parse::<Criteria>().unwrap(), Criteria::default());
        assert_eq!("parity=5".parse::<Criteria>().unwrap(), Criteria { handshake_pct: 5.0, throughput_pct: 5.0, cpu_pct: 10.0 });
        assert_eq!("handshake=20%, cpu=0".parse::<Criteria>().unwrap(), Criteria { handshake_pct: 20.0, throughput_pct: 10.0, cpu_pct: 0.0 });
        assert!("speed=5".parse::<Criteria>().unwrap_err().to_string().contains("expected parity, handshake, throughput or cpu"));
        assert!("parity".parse::<Criteria>().unwrap_err().to_string().contains("NAME=PERCENT"));
        assert!("cpu=lots".parse::<Criteria>().unwrap_err().to_string().contains("not a number"));
        assert!("cpu=-1".parse::<Criteria>().unwrap_err().to_string().contains("0..=1000"));
    }
}
