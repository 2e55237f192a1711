//! Trace export over OTLP/HTTP, off by default (`[tracing] otlp_endpoint`).
//!
//! Each request is a server span named `METHOD /route/template`, with OpenTelemetry's HTTP
//! attributes; the slow steps inside it (OIDC verification, certificate issuance, a log
//! append waiting for its batch, a timestamp) are child spans, and a W3C `traceparent` from
//! the client makes the request part of the client's trace. Spans use the target
//! [`TARGET`], which the log output never shows, and cost one relaxed load per call site
//! when export is off.
//!
//! The exporter runs on the SDK's own thread and sends protobuf batches with
//! [`signet_tls::Fetcher`]: plain HTTP only to loopback (a collector beside signet), HTTPS
//! with the system's roots otherwise. A collector that is down or slow costs spans, never
//! requests: the queue is bounded and its overflow dropped.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use axum::extract::{MatchedPath, Request};
use bytes::Bytes;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry::KeyValue;
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::trace::{BatchConfigBuilder, BatchSpanProcessor, Sampler, SdkTracerProvider};
use crate::config::TracingSettings;
use signet_core::request_id::RequestId;
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The target of every exported span; the log output filters it out.
pub const TARGET: &str = "signet::otel";

static ENABLED: AtomicBool = AtomicBool::new(false);
static PROVIDER: OnceLock<SdkTracerProvider> = OnceLock::new();

/// What setting up trace export fails with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OtelError {
    #[error(transparent)]
    Settings(#[from] crate::config::TracingError),
    #[error("tracing.ca_file: {0}")]
    CaFile(#[source] signet_tls::TrustError),
    #[error("tracing: the OTLP exporter: {0}")]
    Exporter(#[source] opentelemetry_otlp::ExporterBuildError),
}

/// Whether spans are exported: the request layer makes none otherwise.
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// A child span of the request's (`span!("ca.issue", field = …)`), or `Span::none()` when
/// export is off. The log output filters [`TARGET`] out, but the registry still makes every
/// span that some layer's filter might want: an allocation, an enter, an exit and a close,
/// about a microsecond a request, for a span nobody sees (issue 40).
macro_rules! span {
    ($name:expr $(, $($fields:tt)*)?) => {
        if $crate::otel::enabled() {
            tracing::info_span!(target: $crate::otel::TARGET, $name $(, $($fields)*)?)
        } else {
            tracing::Span::none()
        }
    };
}
pub(crate) use span;

/// The tracer provider for `settings`, or None when export is off. Installed by
/// [`crate::logging::init_serving`].
pub fn provider(settings: &TracingSettings) -> Result<Option<SdkTracerProvider>, OtelError> {
    let Some(url) = settings.traces_url()? else { return Ok(None) };
    let trust = settings.ca_file.clone().map_or(signet_tls::Trust::Platform, signet_tls::Trust::PemFile);
    let tls = signet_tls::client_config(&trust).map_err(OtelError::CaFile)?;
    let client = Collector {
        url: url.clone(),
        fetcher: signet_tls::Fetcher::new(tls)
            .with_timeout(Duration::from_secs(settings.export_timeout_secs))
            .with_max_bytes(64 * 1024),
    };
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_http_client(client)
        .with_endpoint(url)
        .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
        .with_timeout(Duration::from_secs(settings.export_timeout_secs))
        .build()
        .map_err(OtelError::Exporter)?;
    let batching = BatchConfigBuilder::default()
        .with_scheduled_delay(Duration::from_millis(settings.export_interval_ms))
        .with_max_queue_size(settings.max_queue)
        .with_max_export_batch_size(settings.max_queue.min(512))
        .build();
    let resource = opentelemetry_sdk::Resource::builder()
        .with_service_name(settings.service_name.clone())
        .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
        .build();
    let provider = SdkTracerProvider::builder()
        .with_span_processor(BatchSpanProcessor::builder(exporter).with_batch_config(batching).build())
        .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(settings.sample_ratio))))
        .with_resource(resource)
        .build();
    Ok(Some(provider))
}

/// The `tracing` layer that turns [`TARGET`] spans into OpenTelemetry spans.
pub fn layer<S>(provider: SdkTracerProvider) -> impl tracing_subscriber::Layer<S>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    use tracing_subscriber::Layer as _;
    let tracer = provider.tracer("signet");
    let _ = PROVIDER.set(provider);
    ENABLED.store(true, Ordering::Relaxed);
    let only_ours = tracing_subscriber::filter::Targets::new().with_target(TARGET, tracing::Level::TRACE);
    tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_location(false)
        .with_threads(false)
        .with_target(false)
        .with_level(false)
        .with_tracked_inactivity(false)
        .with_filter(only_ours)
}

/// Sends what is queued and stops the exporter: the spans of the last requests before a
/// shutdown reach the collector.
pub fn shutdown() {
    if let Some(provider) = PROVIDER.get() {
        if let Err(e) = provider.shutdown() {
            tracing::warn!(error = %e, "the last spans could not be exported");
        }
    }
}

/// The exporter's HTTP client: one blocking POST per batch, on the exporter's own thread.
struct Collector {
    url: String,
    fetcher: signet_tls::Fetcher,
}

impl std::fmt::Debug for Collector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Collector").field("url", &self.url).finish()
    }
}

#[async_trait::async_trait]
impl opentelemetry_http::HttpClient for Collector {
    async fn send_bytes(&self, request: http::Request<Bytes>) -> Result<http::Response<Bytes>, opentelemetry_http::HttpError> {
        let answer = self.fetcher.send(&self.url, request);
        let failure = match &answer {
            Ok(response) if response.status().is_success() => None,
            Ok(response) => Some(format!("{}: answered HTTP {}", self.url, response.status().as_u16())),
            Err(e) => Some(e.to_string()),
        };
        exported(failure);
        Ok(answer?)
    }
}

static EXPORTS_OK: AtomicU64 = AtomicU64::new(0);
static EXPORTS_FAILED: AtomicU64 = AtomicU64::new(0);
/// Seconds since the epoch of the last failure logged: one line a minute at most.
static FAILURE_LOGGED: AtomicU64 = AtomicU64::new(0);

/// Counts an export, and tells the operator when the collector stops taking spans (at most
/// once a minute) and when it takes them again.
fn exported(failure: Option<String>) {
    match failure {
        None => {
            EXPORTS_OK.fetch_add(1, Ordering::Relaxed);
            if FAILURE_LOGGED.swap(0, Ordering::Relaxed) != 0 {
                tracing::info!("trace export works again: spans reach the collector");
            }
        }
        Some(why) => {
            EXPORTS_FAILED.fetch_add(1, Ordering::Relaxed);
            let now = jiff::Timestamp::now().as_second().max(1) as u64;
            let last = FAILURE_LOGGED.load(Ordering::Relaxed);
            if now >= last + 60 && FAILURE_LOGGED.compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed).is_ok() {
                tracing::warn!(error = %why, "trace export failed: these spans are dropped, requests are not affected");
            }
        }
    }
}

/// `/metrics` lines, when export is on.
pub fn render(out: &mut String) {
    use std::fmt::Write as _;
    if !enabled() {
        return;
    }
    out.push_str("# HELP signet_trace_exports_total Batches of spans sent to the OTLP collector, by outcome.\n");
    out.push_str("# TYPE signet_trace_exports_total counter\n");
    let _ = writeln!(out, "signet_trace_exports_total{{outcome=\"ok\"}} {}", EXPORTS_OK.load(Ordering::Relaxed));
    let _ = writeln!(out, "signet_trace_exports_total{{outcome=\"failed\"}} {}", EXPORTS_FAILED.load(Ordering::Relaxed));
}

/// The server span of one request, when export is on: named by its route template, a child
/// of the caller's `traceparent` if it sent one.
pub fn request_span(request: &Request, id: RequestId) -> Span {
    if !enabled() {
        return Span::none();
    }
    let route = request.extensions().get::<MatchedPath>().map(|p| p.as_str());
    let method = request.method().as_str();
    let peer = request.extensions().get::<axum::extract::ConnectInfo<std::net::SocketAddr>>().map(|c| c.0.ip());
    let span = tracing::info_span!(
        target: TARGET,
        "request",
        otel.name = %format_args!("{method} {}", route.unwrap_or("unmatched")),
        otel.kind = "server",
        otel.status_code = tracing::field::Empty,
        http.request.method = method,
        http.route = route,
        url.path = request.uri().path(),
        client.address = peer.map(tracing::field::display),
        http.response.status_code = tracing::field::Empty,
        signet.request_id = %id,
    );
    let propagator = opentelemetry_sdk::propagation::TraceContextPropagator::new();
    let parent = opentelemetry::propagation::TextMapPropagator::extract(&propagator, &opentelemetry_http::HeaderExtractor(request.headers()));
    let _ = span.set_parent(parent);
    span
}

/// Records the answer on the request's span; a 5xx marks it failed.
pub fn answered(span: &Span, status: u16) {
    if span.is_none() {
        return;
    }
    // As an int: the bridge exports unsigned integers as strings.
    span.record("http.response.status_code", i64::from(status));
    if status >= 500 {
        span.record("otel.status_code", "ERROR");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoint(e: &str) -> Result<Option<String>, crate::config::TracingError> {
        TracingSettings { otlp_endpoint: Some(e.into()), ..Default::default() }.traces_url()
    }

    #[test]
    fn with_export_off_no_span_is_made_even_for_a_subscriber_that_wants_every_span() {
        use tracing_subscriber::layer::SubscriberExt as _;
        // The log layer as `serve` installs it, with a filter that lets everything through.
        let subscriber = tracing_subscriber::registry().with(tracing_subscriber::fmt::layer().with_writer(std::io::sink));
        tracing::subscriber::with_default(subscriber, || {
            assert!(!enabled());
            // The subscriber would make this span: the macro's `Span::none()` is its doing.
            assert!(!tracing::info_span!(target: TARGET, "tsa.stamp").is_none());
            assert!(span!("tsa.stamp").is_none());
            assert!(span!("log.append", signet.log = "rekor-v1").is_none());
        });
    }

    #[test]
    fn a_bare_collector_gets_the_traces_path_and_a_full_url_is_kept() {
        assert_eq!(TracingSettings::default().traces_url().unwrap(), None);
        assert_eq!(endpoint("").unwrap(), None);
        assert_eq!(endpoint("http://127.0.0.1:4318").unwrap().as_deref(), Some("http://127.0.0.1:4318/v1/traces"));
        assert_eq!(endpoint("http://localhost:4318/").unwrap().as_deref(), Some("http://localhost:4318/v1/traces"));
        assert_eq!(endpoint("http://[::1]:4318").unwrap().as_deref(), Some("http://[::1]:4318/v1/traces"));
        assert_eq!(endpoint("https://otel.example/otlp/v1/traces").unwrap().as_deref(), Some("https://otel.example/otlp/v1/traces"));
    }

    #[test]
    fn endpoints_that_would_leak_or_cannot_work_are_refused_by_name() {
        for (bad, why) in [
            ("http://collector.example:4318", "loopback"),
            ("grpc://127.0.0.1:4317", "http:// or https://"),
            ("127.0.0.1:4318", "http:// or https://"),
            ("https://user:pw@otel.example", "user info"),
            ("https://otel.example/v1/traces?k=v", "query"),
            ("not a url at all", "not a URL"),
        ] {
            let e = endpoint(bad).unwrap_err().to_string();
            assert!(e.contains("tracing.otlp_endpoint") && e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn settings_out_of_range_name_their_key() {
        let ok = TracingSettings::default();
        ok.validate().unwrap();
        for (bad, key) in [
            (TracingSettings { sample_ratio: -0.1, ..Default::default() }, "sample_ratio"),
            (TracingSettings { sample_ratio: f64::NAN, ..Default::default() }, "sample_ratio"),
            (TracingSettings { service_name: String::new(), ..Default::default() }, "service_name"),
            (TracingSettings { export_interval_ms: 0, ..Default::default() }, "export_interval_ms"),
            (TracingSettings { export_timeout_secs: 0, ..Default::default() }, "export_timeout_secs"),
            (TracingSettings { max_queue: 0, ..Default::default() }, "max_queue"),
        ] {
            let e = bad.validate().unwrap_err().to_string();
            assert!(e.contains(&format!("tracing.{key}")), "{key}: {e}");
        }
    }
}
