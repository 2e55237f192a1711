//! TrustedRoot v0.1, SigningConfig v0.2 and ClientTrustConfig v0.1 documents.
//!
//! Field names and enum spellings follow the Sigstore protobuf-specs' JSON form exactly:
//! sigstore-python parses signing configs strictly, so an unknown or misspelt field fails.

use serde_json::{json, Value};
use signet_core::b64;
use signet_core::hash::sha256;

pub const TRUSTED_ROOT_MEDIA_TYPE: &str = "application/vnd.dev.sigstore.trustedroot+json;version=0.1";
pub const SIGNING_CONFIG_MEDIA_TYPE: &str = "application/vnd.dev.sigstore.signingconfig.v0.2+json";
pub const CLIENT_TRUST_CONFIG_MEDIA_TYPE: &str = "application/vnd.dev.sigstore.clienttrustconfig.v0.1+json";

/// The public parts of one signet instance.
pub struct Instance {
    /// The public base URL, no trailing slash.
    pub url: String,
    /// Who runs it (the `operator` of every service).
    pub operator: String,
    /// RFC 3339 start of validity for every key and service.
    pub valid_from: String,
    /// The Rekor v1 log's keys (ECDSA P-256), one per shard, oldest first.
    pub rekor_v1: Vec<ShardKey>,
    /// The Rekor v2 log's keys (ECDSA P-256), oldest first: each rotation starts a new log.
    pub rekor_v2: Vec<ShardKey>,
    /// The CT log's keys (ECDSA P-256), oldest first: each rotation starts a new log.
    pub ct: Vec<ShardKey>,
    /// DER certificates above leaves: intermediate, root.
    pub ca_chain: Vec<Vec<u8>>,
    /// When the current intermediate started to sign (RFC 3339); `valid_from` until a rotation.
    pub ca_valid_from: String,
    /// Intermediates rotated out, oldest first: clients still verify the certificates each
    /// issued within its window.
    pub retired_cas: Vec<RetiredAuthority>,
    /// DER certificates of the TSA: its certificate, root.
    pub tsa_chain: Vec<Vec<u8>>,
    /// When the current TSA certificate started to sign (RFC 3339); `valid_from` until a rotation.
    pub tsa_valid_from: String,
    /// TSA certificates rotated out, oldest first: clients still verify the timestamps each
    /// made within its window.
    pub retired_tsas: Vec<RetiredAuthority>,
    /// Trusted roots from elsewhere (an earlier deployment, extra logs or TSAs), whose
    /// entries follow this instance's own in its trusted root, so that what they signed keeps
    /// verifying for clients that take trust from this instance.
    pub included: Vec<Value>,
}

/// A certificate authority (the CA's intermediate, or a TSA) that signed until a rotation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetiredAuthority {
    pub chain: Vec<Vec<u8>>,
    pub valid_from: String,
    pub valid_to: String,
}

/// One shard's key (or one log's, of a CT or Rekor v2 log rotated into a new one) and the
/// window in which it signed (RFC 3339). A frozen shard's window has an end: clients accept
/// its key for entries integrated (or SCTs dated) before it, and no later.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardKey {
    pub spki: Vec<u8>,
    pub valid_from: String,
    pub valid_to: Option<String>,
}

fn p256_key(spki: &[u8], valid_from: &str, valid_to: Option<&str>) -> Value {
    let mut valid_for = json!({"start": valid_from});
    if let Some(end) = valid_to {
        valid_for["end"] = json!(end);
    }
    json!({"rawBytes": b64::encode(spki), "keyDetails": "PKIX_ECDSA_P256_SHA_256", "validFor": valid_for})
}

fn log(base_url: &str, spki: &[u8], valid_from: &str, valid_to: Option<&str>) -> Value {
    json!({
        "baseUrl": base_url,
        "hashAlgorithm": "SHA2_256",
        "publicKey": p256_key(spki, valid_from, valid_to),
        "logId": {"keyId": b64::encode(sha256(spki))},
    })
}

fn chain(certs: &[Vec<u8>]) -> Value {
    json!({"certificates": certs.iter().map(|c| json!({"rawBytes": b64::encode(c)})).collect::<Vec<_>>()})
}

impl Instance {
    pub fn trusted_root(&self) -> Value {
        let org = self.operator.as_str();
        // Every Rekor v1 shard shares the log's URL; clients tell them apart by key (logId).
        let mut tlogs: Vec<Value> =
            self.rekor_v1.iter().map(|k| log(&self.url, &k.spki, &k.valid_from, k.valid_to.as_deref())).collect();
        tlogs.extend(self.rekor_v2.iter().map(|k| log(&self.url, &k.spki, &k.valid_from, k.valid_to.as_deref())));
        let ct_url = format!("{}/ct", self.url);
        let mut ctlogs: Vec<Value> = self.ct.iter().map(|k| log(&ct_url, &k.spki, &k.valid_from, k.valid_to.as_deref())).collect();
        let tsa = |certs: &[Vec<u8>], valid_for: Value| {
            json!({
                "subject": {"organization": org, "commonName": "signet timestamp authority"},
                "uri": format!("{}/api/v1/timestamp", self.url),
                "certChain": chain(certs),
                "validFor": valid_for,
            })
        };
        // Retired TSAs first, each with the end of its window, then the one signing now.
        let mut tsas: Vec<Value> =
            self.retired_tsas.iter().map(|r| tsa(&r.chain, json!({"start": r.valid_from, "end": r.valid_to}))).collect();
        tsas.push(tsa(&self.tsa_chain, json!({"start": self.tsa_valid_from})));
        let ca = |certs: &[Vec<u8>], valid_for: Value| {
            json!({
                "subject": {"organization": org, "commonName": "signet"},
                "uri": self.url,
                "certChain": chain(certs),
                "validFor": valid_for,
            })
        };
        let mut cas: Vec<Value> =
            self.retired_cas.iter().map(|r| ca(&r.chain, json!({"start": r.valid_from, "end": r.valid_to}))).collect();
        cas.push(ca(&self.ca_chain, json!({"start": self.ca_valid_from})));
        for doc in &self.included {
            for (list, field) in [(&mut tlogs, "tlogs"), (&mut cas, "certificateAuthorities"), (&mut ctlogs, "ctlogs"), (&mut tsas, "timestampAuthorities")] {
                for entry in doc[field].as_array().into_iter().flatten() {
                    // The same log or authority from two places is listed once.
                    if !list.contains(entry) {
                        list.push(entry.clone());
                    }
                }
            }
        }
        json!({
            "mediaType": TRUSTED_ROOT_MEDIA_TYPE,
            "tlogs": tlogs,
            "certificateAuthorities": cas,
            "ctlogs": ctlogs,
            "timestampAuthorities": tsas,
        })
    }

    pub fn signing_config(&self) -> Value {
        let service = |url: String, major: u32| {
            json!({"url": url, "majorApiVersion": major, "validFor": {"start": self.valid_from}, "operator": self.operator})
        };
        json!({
            "mediaType": SIGNING_CONFIG_MEDIA_TYPE,
            // majorApiVersion is the Fulcio *client* API version, 1, though the path is /api/v2.
            "caUrls": [service(self.url.clone(), 1)],
            "oidcUrls": [service(format!("{}/oidc", self.url), 1)],
            "rekorTlogUrls": [service(self.url.clone(), 1), service(self.url.clone(), 2)],
            // The TSA URL is the full endpoint.
            "tsaUrls": [service(format!("{}/api/v1/timestamp", self.url), 1)],
            "rekorTlogConfig": {"selector": "ANY"},
            "tsaConfig": {"selector": "ANY"},
        })
    }

    pub fn client_trust_config(&self) -> Value {
        json!({
            "mediaType": CLIENT_TRUST_CONFIG_MEDIA_TYPE,
            "trustedRoot": self.trusted_root(),
            "signingConfig": self.signing_config(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn instance() -> Instance {
        Instance {
            url: "https://sign.example".into(),
            operator: "example".into(),
            valid_from: "2026-11-22T00:00:00Z".into(),
            rekor_v1: vec![ShardKey { spki: vec![1], valid_from: "2026-11-22T00:00:00Z".into(), valid_to: None }],
            rekor_v2: vec![ShardKey { spki: vec![2], valid_from: "2026-11-22T00:00:00Z".into(), valid_to: None }],
            ct: vec![ShardKey { spki: vec![3], valid_from: "2026-11-22T00:00:00Z".into(), valid_to: None }],
            ca_chain: vec![vec![4], vec![5]],
            ca_valid_from: "2026-11-22T00:00:00Z".into(),
            retired_cas: Vec::new(),
            tsa_chain: vec![vec![6], vec![5]],
            tsa_valid_from: "2026-11-22T00:00:00Z".into(),
            retired_tsas: Vec::new(),
            included: Vec::new(),
        }
    }

    #[test]
    fn an_included_trusted_root_s_entries_follow_the_instance_s_own_once_each() {
        let mut i = instance();
        let own = i.trusted_root();
        let other = json!({
            "mediaType": TRUSTED_ROOT_MEDIA_TYPE,
            "tlogs": [{"baseUrl": "https://rekor.old.example", "logId": {"keyId": "AA=="}}],
            "ctlogs": [own["ctlogs"][0].clone(), {"baseUrl": "https://ct.old.example", "logId": {"keyId": "AQ=="}}],
            "timestampAuthorities": [{"uri": "https://tsa.old.example"}],
        });
        i.included = vec![other.clone(), other];
        let merged = i.trusted_root();
        assert_eq!(merged["tlogs"].as_array().unwrap().len(), 3);
        assert_eq!(merged["tlogs"][2]["baseUrl"], "https://rekor.old.example");
        assert_eq!(merged["ctlogs"].as_array().unwrap().len(), 2, "the instance's own CT log, listed there too, once");
        assert_eq!(merged["timestampAuthorities"].as_array().unwrap().len(), 2);
        assert_eq!(merged["certificateAuthorities"], own["certificateAuthorities"]);
    }

    #[test]
    fn documents_have_the_protobuf_specs_shape() {
        let i = instance();
        let root = i.trusted_root();
        assert_eq!(root["tlogs"].as_array().unwrap().len(), 2);
        assert_eq!(root["tlogs"][1]["logId"]["keyId"], b64::encode(sha256(&[2])));
        assert_eq!(root["tlogs"][0]["publicKey"]["keyDetails"], "PKIX_ECDSA_P256_SHA_256");
        assert_eq!(root["certificateAuthorities"][0]["certChain"]["certificates"][1]["rawBytes"], b64::encode([5]));
        assert!(root["tlogs"][0]["publicKey"]["validFor"].get("end").is_none());

        // A rotated Rekor v1 log lists every shard's key, the frozen ones with an end.
        let mut rotated = instance();
        rotated.rekor_v1[0].valid_to = Some("2026-11-23T00:00:00Z".into());
        rotated.rekor_v1.push(ShardKey { spki: vec![9], valid_from: "2026-11-23T00:00:00Z".into(), valid_to: None });
        let tlogs = rotated.trusted_root()["tlogs"].as_array().unwrap().clone();
        assert_eq!(tlogs.len(), 3);
        assert_eq!(tlogs[0]["publicKey"]["validFor"]["end"], "2026-11-23T00:00:00Z");
        assert_eq!(tlogs[1]["logId"]["keyId"], b64::encode(sha256(&[9])));
        assert_eq!(tlogs[1]["publicKey"]["validFor"]["start"], "2026-11-23T00:00:00Z");
        assert_eq!(tlogs[1]["baseUrl"], tlogs[0]["baseUrl"]);
        assert_eq!(tlogs[2]["logId"]["keyId"], b64::encode(sha256(&[2])));

        // A rotated CT log and Rekor v2 log: both keys under the same URL, the old one's window
        // ending where the new one's starts.
        let mut rotated = instance();
        let (end, start) = ("2026-11-23T00:00:01Z", "2026-11-23T00:00:00Z");
        rotated.ct[0].valid_to = Some(end.into());
        rotated.ct.push(ShardKey { spki: vec![13], valid_from: start.into(), valid_to: None });
        rotated.rekor_v2[0].valid_to = Some(end.into());
        rotated.rekor_v2.push(ShardKey { spki: vec![12], valid_from: start.into(), valid_to: None });
        let r = rotated.trusted_root();
        let ct = r["ctlogs"].as_array().unwrap();
        assert_eq!(ct.len(), 2);
        assert_eq!(ct[0]["publicKey"]["validFor"], json!({"start": "2026-11-22T00:00:00Z", "end": end}));
        assert_eq!(ct[1]["publicKey"]["validFor"], json!({"start": start}));
        assert_eq!(ct[1]["logId"]["keyId"], b64::encode(sha256(&[13])));
        assert_eq!((ct[0]["baseUrl"].as_str(), ct[1]["baseUrl"].as_str()), (Some("https://sign.example/ct"), Some("https://sign.example/ct")));
        let tlogs = r["tlogs"].as_array().unwrap();
        assert_eq!(tlogs.len(), 3);
        assert_eq!(tlogs[1]["publicKey"]["validFor"]["end"], end);
        assert_eq!(tlogs[2]["logId"]["keyId"], b64::encode(sha256(&[12])));
        assert_eq!(tlogs[2]["publicKey"]["validFor"], json!({"start": start}));
        assert_eq!(tlogs[2]["baseUrl"], "https://sign.example");
        // The signing config does not change: the same URLs serve the new logs.
        assert_eq!(rotated.signing_config(), i.signing_config());

        // A rotated TSA: the retired one keeps its window, with an end; the new one starts there.
        let mut rotated = instance();
        rotated.retired_tsas.push(RetiredAuthority { chain: vec![vec![6], vec![5]], valid_from: i.valid_from.clone(), valid_to: "2026-11-24T00:00:00Z".into() });
        (rotated.tsa_chain, rotated.tsa_valid_from) = (vec![vec![7], vec![5]], "2026-11-24T00:00:00Z".into());
        let tsas = rotated.trusted_root()["timestampAuthorities"].as_array().unwrap().clone();
        assert_eq!(tsas.len(), 2);
        assert_eq!(tsas[0]["certChain"]["certificates"][0]["rawBytes"], b64::encode([6]));
        assert_eq!(tsas[0]["validFor"], json!({"start": "2026-11-22T00:00:00Z", "end": "2026-11-24T00:00:00Z"}));
        assert_eq!(tsas[1]["certChain"]["certificates"][0]["rawBytes"], b64::encode([7]));
        assert_eq!(tsas[1]["validFor"], json!({"start": "2026-11-24T00:00:00Z"}));
        assert_eq!(i.trusted_root()["timestampAuthorities"].as_array().unwrap().len(), 1);

        // A rotated intermediate, the same way.
        let mut rotated = instance();
        rotated.retired_cas.push(RetiredAuthority { chain: vec![vec![4], vec![5]], valid_from: i.valid_from.clone(), valid_to: "2026-11-25T00:00:00Z".into() });
        (rotated.ca_chain, rotated.ca_valid_from) = (vec![vec![8], vec![5]], "2026-11-25T00:00:00Z".into());
        let cas = rotated.trusted_root()["certificateAuthorities"].as_array().unwrap().clone();
        assert_eq!(cas.len(), 2);
        assert_eq!(cas[0]["certChain"]["certificates"][0]["rawBytes"], b64::encode([4]));
        assert_eq!(cas[0]["validFor"], json!({"start": "2026-11-22T00:00:00Z", "end": "2026-11-25T00:00:00Z"}));
        assert_eq!(cas[1]["certChain"]["certificates"][0]["rawBytes"], b64::encode([8]));
        assert_eq!(cas[1]["validFor"], json!({"start": "2026-11-25T00:00:00Z"}));

        let sc = i.signing_config();
        let majors: Vec<u64> = sc["rekorTlogUrls"].as_array().unwrap().iter().map(|s| s["majorApiVersion"].as_u64().unwrap()).collect();
        assert_eq!(majors, [1, 2]);
        assert_eq!(sc["caUrls"][0]["majorApiVersion"], 1);
        assert_eq!(sc["tsaUrls"][0]["url"], "https://sign.example/api/v1/timestamp");
        for list in ["caUrls", "oidcUrls", "rekorTlogUrls", "tsaUrls"] {
            for s in sc[list].as_array().unwrap() {
                let keys: Vec<&String> = s.as_object().unwrap().keys().collect();
                assert_eq!(keys, ["majorApiVersion", "operator", "url", "validFor"], "{list}");
            }
        }
        assert_eq!(sc["tsaConfig"]["selector"], "ANY");
        let ctc = i.client_trust_config();
        assert_eq!(ctc["trustedRoot"], root);
    }
}
