//! The signet binary's integration tests, as one test binary (each file a module).
//!
//! Every test binary links all of signet (thin LTO in release): 34 of them were most of
//! CI's build time. Run one file's tests with `cargo test -p signet --test tests <file>::`.

mod chaos;
mod common;

mod audit;
mod backup;
mod bench_cost;
mod bench_gates;
mod bench_micro;
mod bench_transport;
mod bench_workloads;
mod ci_identities;
mod crash;
mod ct_submissions;
mod deploy;
mod dev_token;
mod doctor;
mod failures;
mod fulcio_api;
mod fulcio_grpc;
mod guard;
mod haproxy;
mod hsm;
mod hardening;
mod identity_search;
mod kms;
mod log_key_rotation;
mod observability;
mod oidc_discovery;
mod permissions;
mod postgres;
mod principals;
mod redis;
mod rekor_api;
mod scheduled_rotation;
mod scopes;
mod serve_tls;
mod shards;
mod trust_export;
mod tsa_api;
mod tuf;
mod tuf_shared;
mod validation;
mod verify_bundle_cli;
mod witness;
