//! Criterion micro-benchmark suites, and the registry they are listed in.
//!
//! Every crate that has suites exposes them behind its `micro` feature as a [`Suite`]: a
//! name and a list of [`Bench`]es, each with a stable id (`suite/group/name`). The same
//! suite runs from `cargo bench -p <crate>` (see [`main`]) and, selected by name, from
//! `signet bench micro`, which reads criterion's estimates back for its table and JSON.
//! Criterion is re-exported so that suites and the runner agree on one version.
//!
//! - [`fixture`]: realistic signed inputs (a P-256 key, a certificate, a signature).
//! - [`suite`]: this crate's suite: RFC 8785 canonical JSON, and a request's key parsed and
//!   checked.

pub mod fixture;

pub use criterion;

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, Throughput};

/// One benchmark.
pub struct Bench {
    /// `suite/group/name`: what criterion reports it as, and what filters match.
    pub id: &'static str,
    /// What one iteration does, for `--list`.
    pub about: &'static str,
    /// Builds the inputs, then measures under `id` (through [`measure`]). Called only when
    /// the benchmark is selected, so a costly setup is paid only by runs that want it.
    pub run: fn(&mut Criterion, &Bench),
}

/// The benchmarks of one crate.
pub struct Suite {
    pub name: &'static str,
    pub about: &'static str,
    pub benches: Vec<Bench>,
}

/// How one benchmark is measured, beyond criterion's defaults.
#[derive(Default, Clone)]
pub struct Opts {
    /// Work per iteration, reported as a rate beside the time.
    pub throughput: Option<Throughput>,
    /// Milliseconds per iteration (disk commits): 10 flat samples instead of 100 growing ones,
    /// so a run stays within its measurement time.
    pub slow: bool,
}

/// Measures `f` as the benchmark `bench.id`: criterion group `suite/group`, function `name`.
pub fn measure(c: &mut Criterion, bench: &Bench, opts: Opts, f: impl FnMut(&mut criterion::Bencher<'_, WallTime>)) {
    let (group, name) = bench.id.rsplit_once('/').expect("benchmark ids are suite/group/name");
    let mut g: BenchmarkGroup<'_, WallTime> = c.benchmark_group(group);
    if let Some(t) = opts.throughput {
        g.throughput(t);
    }
    if opts.slow {
        g.sample_size(10).sampling_mode(criterion::SamplingMode::Flat);
    }
    g.bench_function(name, f);
    g.finish();
}

/// The `main` of a crate's `benches/<name>.rs`: criterion configured from the command line
/// (`cargo bench -p <crate> -- FILTER`), every benchmark of `suite`.
pub fn main(suite: Suite) {
    let mut c = Criterion::default().configure_from_args();
    for b in &suite.benches {
        (b.run)(&mut c, b);
    }
    c.final_summary();
}

/// The core suite.
pub fn suite() -> Suite {
    Suite {
        name: "core",
        about: "shared building blocks: RFC 8785 canonical JSON, public keys",
        benches: vec![
            Bench {
                id: "core/jcs/hashedrekord",
                about: "RFC 8785 canonical bytes of a hashedrekord 0.0.1 body with a P-256 certificate (from a serde_json::Value)",
                run: jcs_hashedrekord,
            },
            Bench {
                id: "core/pubkey/parse_and_verify_digest",
                about: "a P-256 key from its SPKI (as an append's key arrives), then its signature over a SHA-256 digest checked",
                run: pubkey_parse_and_verify,
            },
            Bench {
                id: "core/pubkey/verify_digest",
                about: "the same check with the key already parsed: the difference is what parsing costs",
                run: pubkey_verify,
            },
        ],
    }
}

fn pubkey_parse_and_verify(c: &mut Criterion, bench: &Bench) {
    use crate::pubkey::{HashAlg, PublicKey};
    let s = fixture::SignedArtifact::new(b"micro-benchmark artifact");
    measure(c, bench, Opts::default(), |b| {
        b.iter(|| {
            let key = PublicKey::from_spki(std::hint::black_box(&s.spki_der)).expect("the fixture's key parses");
            key.verify_digest(HashAlg::Sha256, &s.digest, &s.signature).expect("the fixture's signature verifies")
        })
    });
}

fn pubkey_verify(c: &mut Criterion, bench: &Bench) {
    use crate::pubkey::{HashAlg, PublicKey};
    let s = fixture::SignedArtifact::new(b"micro-benchmark artifact");
    let key = PublicKey::from_spki(&s.spki_der).expect("the fixture's key parses");
    measure(c, bench, Opts::default(), |b| {
        b.iter(|| key.verify_digest(HashAlg::Sha256, std::hint::black_box(&s.digest), &s.signature).expect("the fixture's signature verifies"))
    });
}

fn jcs_hashedrekord(c: &mut Criterion, bench: &Bench) {
    let body = fixture::SignedArtifact::new(b"micro-benchmark artifact").hashedrekord_v1();
    let len = crate::jcs::to_vec(&body).len() as u64;
    measure(c, bench, Opts { throughput: Some(Throughput::Bytes(len)), ..Opts::default() }, |b| {
        b.iter(|| crate::jcs::to_vec(std::hint::black_box(&body)))
    });
}
