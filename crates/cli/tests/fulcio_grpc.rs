//! Fulcio's gRPC API (`dev.sigstore.fulcio.v2.CA`) on a real `signet serve --dev`, called by
//! tonic's own client over HTTP/2: cleartext with prior knowledge, and TLS with ALPN h2.
//! A certificate from it is the REST API's certificate; refusals, from the handler and from
//! the layers before it, arrive as gRPC statuses with their message, and the audit log
//! records them as it records REST refusals.

use crate::common;

use std::path::Path;
use std::time::{Duration, Instant};

use aws_lc_rs::rand::SystemRandom;
use common::*;
use der::Decode;
use serde_json::Value;
use signet_core::grpc::fulcio as pb;
use tonic::transport::{Channel, Endpoint};
use tonic::Code;

use crate::fulcio_api::{key, token, Key};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

/// A unary call of `path` with tonic's client, the way generated stubs make it.
async fn call<Req, Resp>(channel: &Channel, path: &'static str, message: Req, bearer: Option<&str>) -> Result<Resp, tonic::Status>
where
    Req: prost::Message + Send + Sync + 'static,
    Resp: prost::Message + Default + Send + Sync + 'static,
{
    let mut client = tonic::client::Grpc::new(channel.clone());
    client.ready().await.map_err(|e| tonic::Status::unknown(format!("not ready: {e}")))?;
    let mut request = tonic::Request::new(message);
    if let Some(bearer) = bearer {
        request.metadata_mut().insert("authorization", format!("Bearer {bearer}").parse().unwrap());
    }
    let codec = tonic_prost::ProstCodec::<Req, Resp>::default();
    client.unary(request, http::uri::PathAndQuery::from_static(path), codec).await.map(tonic::Response::into_inner)
}

async fn h2c(url: &str) -> Channel {
    Endpoint::from_shared(url.to_string()).unwrap().connect().await.unwrap()
}

fn key_request(k: &Key, oidc: Option<&str>, challenge: &str) -> pb::CreateSigningCertificateRequest {
    let proof = k.pair.sign(&SystemRandom::new(), challenge.as_bytes()).unwrap();
    pb::CreateSigningCertificateRequest {
        credentials: oidc.map(|t| pb::Credentials { oidc_identity_token: Some(t.to_string()) }),
        key: Some(pb::Key::PublicKeyRequest(pb::PublicKeyRequest {
            public_key: Some(pb::PublicKey { algorithm: pb::ALGORITHM_ECDSA, content: k.pem.clone() }),
            proof_of_possession: proof.as_ref().to_vec(),
        })),
    }
}

/// Whether the leaf certificate names `email` (an rfc822Name SAN is its bytes as they are).
fn names(leaf_pem: &str, email: &str) -> bool {
    let der = signet_core::pem::decode_first(leaf_pem.as_bytes()).unwrap().der;
    x509_cert::Certificate::from_der(&der).unwrap();
    der.windows(email.len()).any(|w| w == email.as_bytes())
}

#[test]
fn a_certificate_over_grpc_is_the_rest_apis_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let oidc = token(dir.path(), "alice@example.com");
    runtime().block_on(async {
        let channel = h2c(&server.url).await;
        let k = key();
        let answer: pb::SigningCertificate =
            call(&channel, pb::CREATE_SIGNING_CERTIFICATE, key_request(&k, Some(&oidc), "alice@example.com"), None).await.unwrap();
        assert!(matches!(answer.certificate, Some(pb::Certificate::SignedCertificateEmbeddedSct(_))), "the SCT is embedded");
        let chain = answer.chain().to_vec();
        assert_eq!(chain.len(), 3, "leaf, intermediate, root");
        assert!(names(&chain[0], "alice@example.com"));

        // The trust bundle is the REST API's, and it is the chain above the leaf.
        let bundle: pb::TrustBundle = call(&channel, pb::GET_TRUST_BUNDLE, pb::GetTrustBundleRequest {}, None).await.unwrap();
        let rest = get(&agent(), &format!("{}/api/v2/trustBundle", server.url)).unwrap().json();
        assert_eq!(bundle.chains.len(), 1);
        assert_eq!(serde_json::json!(bundle.chains[0].certificates), rest["chains"][0]["certificates"]);
        assert_eq!(bundle.chains[0].certificates, chain[1..]);

        // The configuration names the same issuers as the REST API's.
        let config: pb::Configuration = call(&channel, pb::GET_CONFIGURATION, pb::GetConfigurationRequest {}, None).await.unwrap();
        let rest = get(&agent(), &format!("{}/api/v2/configuration", server.url)).unwrap().json();
        let urls: Vec<Value> = config
            .issuers
            .iter()
            .map(|i| match &i.issuer {
                Some(pb::Issuer::IssuerUrl(u)) => serde_json::json!({"issuerUrl": u, "audience": i.audience, "issuerType": i.issuer_type}),
                Some(pb::Issuer::WildcardIssuerUrl(u)) => serde_json::json!({"wildcardIssuerUrl": u, "audience": i.audience, "issuerType": i.issuer_type}),
                None => Value::Null,
            })
            .collect();
        let rest_urls: Vec<Value> = rest["issuers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| {
                let mut i = i.clone();
                let o = i.as_object_mut().unwrap();
                o.retain(|k, _| ["issuerUrl", "wildcardIssuerUrl", "audience", "issuerType"].contains(&k.as_str()));
                i
            })
            .collect();
        assert!(!urls.is_empty());
        assert_eq!(urls, rest_urls);

        // The identity token may come as metadata instead, as Fulcio also reads it.
        let bob = token(dir.path(), "bob@example.com");
        let k = key();
        let answer: pb::SigningCertificate =
            call(&channel, pb::CREATE_SIGNING_CERTIFICATE, key_request(&k, None, "bob@example.com"), Some(&bob)).await.unwrap();
        assert!(names(&answer.chain()[0], "bob@example.com"));
    });
}

#[test]
fn refusals_arrive_as_grpc_statuses_that_say_what_was_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let oidc = token(dir.path(), "alice@example.com");
    runtime().block_on(async {
        let channel = h2c(&server.url).await;
        let k = key();
        let refused = |r: Result<pb::SigningCertificate, tonic::Status>| r.expect_err("refused");

        let e = refused(call(&channel, pb::CREATE_SIGNING_CERTIFICATE, key_request(&k, Some("not.a.token"), "x"), None).await);
        assert_eq!(e.code(), Code::Unauthenticated, "{e:?}");
        assert!(!e.message().is_empty());

        let e = refused(call(&channel, pb::CREATE_SIGNING_CERTIFICATE, key_request(&k, Some(&oidc), "mallory@example.com"), None).await);
        assert_eq!(e.code(), Code::InvalidArgument, "a proof over another claim: {e:?}");

        let keyless = pb::CreateSigningCertificateRequest { credentials: Some(pb::Credentials { oidc_identity_token: Some(oidc.clone()) }), key: None };
        let e = refused(call(&channel, pb::CREATE_SIGNING_CERTIFICATE, keyless, None).await);
        assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
        assert!(e.message().contains("publicKeyRequest or certificateSigningRequest"), "{e:?}");

        let e = refused(call(&channel, pb::CREATE_SIGNING_CERTIFICATE, pb::CreateSigningCertificateRequest::default(), None).await);
        assert_eq!(e.code(), Code::Unauthenticated, "no token anywhere: {e:?}");

        // A method the service does not have.
        let e = call::<_, pb::TrustBundle>(&channel, "/dev.sigstore.fulcio.v2.CA/GetRoots", pb::GetTrustBundleRequest {}, None).await.unwrap_err();
        assert_eq!(e.code(), Code::Unimplemented, "{e:?}");

        // A message over the small-body limit is refused by the validation layer, before any parsing.
        let mut big = key_request(&k, Some(&oidc), "alice@example.com");
        big.credentials = Some(pb::Credentials { oidc_identity_token: Some("x".repeat(200_000)) });
        let e = refused(call(&channel, pb::CREATE_SIGNING_CERTIFICATE, big, None).await);
        assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
        assert!(e.message().contains("max_small_body_bytes"), "{e:?}");

        // The connection is still good.
        let ok: pb::SigningCertificate = call(&channel, pb::CREATE_SIGNING_CERTIFICATE, key_request(&k, Some(&oidc), "alice@example.com"), None).await.unwrap();
        assert_eq!(ok.chain().len(), 3);
    });

    // gRPC over HTTP/1.1: a named refusal, in gRPC's form.
    let r = post_raw(&agent(), &format!("{}{}", server.url, pb::CREATE_SIGNING_CERTIFICATE), "application/grpc", vec![0; 5]).unwrap();
    assert_eq!(r.status, 200, "a gRPC status travels in a 200");
    let mut headers = http::HeaderMap::new();
    for name in ["grpc-status", "grpc-message"] {
        headers.insert(name, r.header(name).unwrap_or_default().parse().unwrap());
    }
    let status = tonic::Status::from_header_map(&headers).unwrap();
    assert_eq!(status.code(), Code::Unimplemented);
    assert!(status.message().contains("served over HTTP/2"), "{status:?}");
}

#[test]
fn grpc_over_tls_is_negotiated_by_alpn() {
    use signet_tls::testing::TestPki;
    let dir = tempfile::tempdir().unwrap();
    let pki = TestPki::new();
    let pem = pki.server_pem();
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_string()
    };
    let (cert, key_file, ca) = (write("cert.pem", &pem.chain), write("key.pem", &pem.key), write("ca.pem", &pki.ca_pem));
    for backend in ["rustls", "openssl"] {
        let data = dir.path().join(format!("data-{backend}"));
        let server = Server::start(&data, &["--tls-cert", &cert, "--tls-key", &key_file, "--tls-backend", backend]);
        let oidc = token(&data, "alice@example.com");
        runtime().block_on(async {
            let channel = tls_channel(&server.url, Path::new(&ca)).await;
            let k = key();
            let answer: pb::SigningCertificate =
                call(&channel, pb::CREATE_SIGNING_CERTIFICATE, key_request(&k, Some(&oidc), "alice@example.com"), None).await.unwrap();
            assert_eq!(answer.chain().len(), 3, "{backend}");
        });
    }
}

/// A channel over TLS (rustls, trusting `ca`, offering only h2): tonic speaks HTTP/2 on
/// whatever stream the connector hands it.
async fn tls_channel(url: &str, ca: &Path) -> Channel {
    let mut config = (*signet_tls::client_config(&signet_tls::Trust::PemFile(ca.to_path_buf())).unwrap()).clone();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config));
    let authority = url.trim_start_matches("https://").to_string();
    let connect = tower::service_fn(move |_: http::Uri| {
        let (connector, authority) = (connector.clone(), authority.clone());
        async move {
            let tcp = tokio::net::TcpStream::connect(&authority).await?;
            let name = rustls::pki_types::ServerName::try_from("localhost").unwrap().to_owned();
            let tls = connector.connect(name, tcp).await?;
            assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]), "the server chose h2");
            Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(tls))
        }
    });
    // The URI's scheme only names the channel; the connector above makes the connection.
    Endpoint::from_shared(url.replacen("https", "http", 1)).unwrap().connect_with_connector(connect).await.unwrap()
}

#[test]
fn grpc_calls_go_through_the_guard_and_into_the_audit_log() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config = dir.path().join("signet.toml");
    std::fs::write(&config, "[guard.audit]\nenabled = true\n[guard.auth]\nrequire = \"writes\"\n").unwrap();
    let server = Server::start(&data, &["--config", config.to_str().unwrap()]);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_signet"))
        .args(["admin", "token", "create", "--data-dir", data.to_str().unwrap(), "--role", "signer"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let api_token = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let oidc = token(&data, "ci@acme.dev");
    let deadline = Instant::now() + Duration::from_secs(5);
    while get_bearer(&agent(), &format!("{}/healthz", server.url), &api_token).unwrap().status != 200 {
        assert!(Instant::now() < deadline, "the token was never accepted");
        std::thread::sleep(Duration::from_millis(50));
    }
    runtime().block_on(async {
        let channel = h2c(&server.url).await;
        let k = key();
        let e = call::<_, pb::SigningCertificate>(&channel, pb::CREATE_SIGNING_CERTIFICATE, key_request(&k, Some(&oidc), "ci@acme.dev"), None)
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::Unauthenticated, "no API token for a write: {e:?}");
        let ok: pb::SigningCertificate =
            call(&channel, pb::CREATE_SIGNING_CERTIFICATE, key_request(&k, Some(&oidc), "ci@acme.dev"), Some(&api_token)).await.unwrap();
        assert_eq!(ok.chain().len(), 3);
    });
    wait_for_audit_records(&data, 3);
    let conn = rusqlite::Connection::open(data.join("audit.sqlite")).unwrap();
    let mut q = conn.prepare("SELECT records FROM audit ORDER BY first_seq").unwrap();
    let records: Vec<Value> = q
        .query_map([], |r| r.get::<_, Vec<u8>>(0))
        .unwrap()
        .flat_map(|batch| batch.unwrap().split(|b| *b == b'\n').map(|l| serde_json::from_slice(l).unwrap()).collect::<Vec<Value>>())
        .filter(|r: &Value| r["path"] == pb::CREATE_SIGNING_CERTIFICATE)
        .collect();
    assert_eq!(records.len(), 2, "{records:?}");
    assert_eq!((records[0]["status"].as_u64(), records[0]["reason"].as_str()), (Some(401), Some("token_missing")), "{records:?}");
    assert_eq!(records[1]["status"], 200);
    assert_eq!(records[1]["role"], "signer");
    assert_eq!(records[1]["did"]["issued"]["identity"], "ci@acme.dev", "{records:?}");
}
