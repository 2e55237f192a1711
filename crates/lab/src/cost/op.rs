//! The operations whose cost is measured: each is a load workload, a fixed rate well under
//! this machine's ceiling, and the crypto the server must do for it (its recipe).

use serde::Serialize;

use crate::workload::Workload;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Op {
    /// A hashedrekord to Rekor v1, answered with its SET and inclusion proof.
    V1Append,
    /// A hashedRekordRequestV002 to Rekor v2.
    V2Append,
    /// A certificate with its embedded SCT (`POST /api/v2/signingCert`).
    Cert,
    /// An RFC 3161 timestamp.
    Stamp,
    /// An entry with its inclusion proof (`GET /api/v1/log/entries?logIndex=`).
    Read,
    /// The keyless flow as one transaction: certificate, v1 entry, timestamp.
    Sign,
}

/// What the server must sign, verify and hash for one operation, besides its share of each
/// batch's checkpoint signature (counted from the server's metrics, [`super::batches`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Recipe {
    /// ECDSA P-256 verifications, each with a key the request brought (parsed anew).
    pub verifies: u32,
    /// ECDSA P-256 signatures over a few hundred bytes (SET, precertificate, SCT, certificate, timestamp).
    pub signs: u32,
    /// SHA-256 of under a kilobyte (leaf hashes, key ids).
    pub hashes: u32,
}

impl Op {
    /// In the order they run: appends first, so that reads find entries.
    pub const ALL: [Op; 6] = [Op::V1Append, Op::V2Append, Op::Cert, Op::Stamp, Op::Read, Op::Sign];

    pub fn name(self) -> &'static str {
        match self {
            Op::V1Append => "v1-append",
            Op::V2Append => "v2-append",
            Op::Cert => "cert",
            Op::Stamp => "stamp",
            Op::Read => "read",
            Op::Sign => "sign",
        }
    }

    pub fn workload(self) -> Workload {
        match self {
            Op::V1Append => Workload::LogAppend,
            Op::V2Append => Workload::LogAppendV2,
            Op::Cert => Workload::Cert,
            Op::Stamp => Workload::Tsa,
            Op::Read => Workload::LogRead,
            Op::Sign => Workload::Sign,
        }
    }

    /// The offered rate: about a third of each operation's ceiling on this two-core machine
    /// (docs/performance.md), so the server has room and its CPU per operation is its own
    /// work, not time spent contending for a core with the generator.
    pub fn default_rate(self) -> f64 {
        match self {
            Op::V1Append | Op::V2Append => 4_000.0,
            Op::Cert => 3_000.0,
            Op::Stamp => 10_000.0,
            Op::Read => 20_000.0,
            Op::Sign => 1_000.0,
        }
    }

    /// Appends wait for their batch, so they need more requests in flight to keep the rate.
    pub fn connections(self) -> usize {
        match self {
            Op::V1Append | Op::V2Append | Op::Sign => 64,
            Op::Cert | Op::Stamp | Op::Read => 32,
        }
    }

    pub fn needs_token(self) -> bool {
        matches!(self, Op::Cert | Op::Sign)
    }

    /// The crypto of one operation on a `signet serve --dev` instance, whose keys are all
    /// P-256. Where each happens is in docs/performance.md ("Cost per operation").
    pub fn recipe(self) -> Recipe {
        match self {
            // The entry's signature; the SET; the leaf hash and the key's index hash.
            Op::V1Append => Recipe { verifies: 1, signs: 1, hashes: 2 },
            // The entry's signature; the leaf hash. No SET in v2.
            Op::V2Append => Recipe { verifies: 1, signs: 0, hashes: 1 },
            // The proof of possession; precertificate, SCT and certificate; the key ids and
            // the CT leaf. The identity token is verified once and cached until it expires,
            // and the run sends one token, so it is not in the floor.
            Op::Cert => Recipe { verifies: 1, signs: 3, hashes: 3 },
            // The signed attributes' signature; the TSTInfo's digest.
            Op::Stamp => Recipe { verifies: 0, signs: 1, hashes: 1 },
            // The SET was stored at append time and the checkpoint is the head's, signed once.
            Op::Read => Recipe { verifies: 0, signs: 0, hashes: 0 },
            // A certificate, a v1 append of an entry with that certificate, a timestamp.
            Op::Sign => Recipe { verifies: 2, signs: 5, hashes: 6 },
        }
    }
}

impl std::str::FromStr for Op {
    type Err = UnknownOp;
    fn from_str(s: &str) -> Result<Op, UnknownOp> {
        Op::ALL.into_iter().find(|op| op.name() == s).ok_or_else(|| UnknownOp(s.to_string()))
    }
}

#[derive(Debug, thiserror::Error)]
#[error("unknown operation {0:?}; expected one of: v1-append, v2-append, cert, stamp, read, sign")]
pub struct UnknownOp(pub String);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back_and_unknown_ones_are_refused() {
        for op in Op::ALL {
            assert_eq!(op.name().parse::<Op>().unwrap(), op);
        }
        let e = "append".parse::<Op>().unwrap_err();
        assert!(e.to_string().contains("\"append\"") && e.to_string().contains("v1-append"), "{e}");
    }

    #[test]
    fn a_transaction_is_the_sum_of_its_requests() {
        let sum = [Op::Cert, Op::V1Append, Op::Stamp].map(Op::recipe);
        let total = |f: fn(&Recipe) -> u32| sum.iter().map(f).sum::<u32>();
        let sign = Op::Sign.recipe();
        assert_eq!((sign.verifies, sign.signs, sign.hashes), (total(|r| r.verifies), total(|r| r.signs), total(|r| r.hashes)));
    }
}
