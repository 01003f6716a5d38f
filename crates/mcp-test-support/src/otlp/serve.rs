//! The receiver's two listeners: OTLP/HTTP handlers and the tonic OTLP/gRPC
//! services, each an axum router behind one accept loop of ours.
//!
//! The accept loop is ours (HTTP/1.1 and h2c on the same port, TLS never)
//! rather than tonic's transport so that dropping the receiver really cuts
//! every connection, as a collector that went away would, and so that the
//! gRPC side can keep each request's bytes as they travelled: a middleware
//! buffers the (unary) body before tonic decodes it.

use std::sync::Arc;

use axum::{
    Router,
    body::Body,
    extract::{Request, State},
    http::{HeaderMap, StatusCode, header},
    middleware::Next,
    response::{IntoResponse, Response},
    routing::post,
};
use opentelemetry_proto::tonic::collector::{
    metrics::v1::{
        ExportMetricsServiceRequest, ExportMetricsServiceResponse,
        metrics_service_server::{MetricsService, MetricsServiceServer},
    },
    trace::v1::{
        ExportTraceServiceRequest, ExportTraceServiceResponse,
        trace_service_server::{TraceService, TraceServiceServer},
    },
};
use prost::Message as _;

use super::{Admission, Decoded, Shared, Signal, Travelled};

/// Largest export taken, over either transport.
const MAX_BODY_BYTES: usize = 16 * 1024 * 1024;

/// gRPC's length-prefixed message framing (flag byte and length).
const GRPC_FRAME_BYTES: usize = 5;

/// The only OTLP/HTTP content type taken.
const PROTOBUF: &str = "application/x-protobuf";

/// `POST /v1/traces` and `POST /v1/metrics`.
pub(super) fn http_router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route(Signal::Traces.http_path(), post(http_traces))
        .route(Signal::Metrics.http_path(), post(http_metrics))
        .with_state(shared)
}

async fn http_traces(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    http_export(&shared, Signal::Traces, request).await
}

async fn http_metrics(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    http_export(&shared, Signal::Metrics, request).await
}

async fn http_export(shared: &Shared, signal: Signal, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    if let Some(refusal) = unsupported_media(&parts.headers) {
        return refusal;
    }
    let Ok(body) = axum::body::to_bytes(body, MAX_BODY_BYTES).await else {
        return (StatusCode::PAYLOAD_TOO_LARGE, "body too large or cut short").into_response();
    };
    if shared.admit().await == Admission::Refuse {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "collector failing (set_failing)",
        )
            .into_response();
    }
    let decoded = match signal {
        Signal::Traces => ExportTraceServiceRequest::decode(body.clone()).map(Decoded::Traces),
        Signal::Metrics => ExportMetricsServiceRequest::decode(body.clone()).map(Decoded::Metrics),
    };
    let decoded = match decoded {
        Ok(decoded) => decoded,
        Err(error) => {
            let message = format!("undecodable {signal:?} export: {error}");
            return (StatusCode::BAD_REQUEST, message).into_response();
        }
    };
    shared.accept(Travelled::from_http(&parts.headers, body), &decoded);
    let answer = match signal {
        Signal::Traces => ExportTraceServiceResponse::default().encode_to_vec(),
        Signal::Metrics => ExportMetricsServiceResponse::default().encode_to_vec(),
    };
    ([(header::CONTENT_TYPE, PROTOBUF)], answer).into_response()
}

/// `415` unless the body is uncompressed protobuf.
fn unsupported_media(headers: &HeaderMap) -> Option<Response> {
    if let Some(encoding) = headers.get(header::CONTENT_ENCODING) {
        let message =
            format!("content-encoding {encoding:?} is not supported; send it uncompressed");
        return Some((StatusCode::UNSUPPORTED_MEDIA_TYPE, message).into_response());
    }
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default();
    let essence = content_type.split(';').next().unwrap_or_default().trim();
    if essence.eq_ignore_ascii_case(PROTOBUF) {
        return None;
    }
    let message = format!("content-type {content_type:?} is not supported; send {PROTOBUF}");
    Some((StatusCode::UNSUPPORTED_MEDIA_TYPE, message).into_response())
}

/// The tonic `TraceService` and `MetricsService`, behind the middleware
/// that keeps each request's bytes.
pub(super) fn grpc_router(shared: Arc<Shared>) -> Router {
    let collector = Collector { shared };
    tonic::service::Routes::new(
        TraceServiceServer::new(collector.clone()).max_decoding_message_size(MAX_BODY_BYTES),
    )
    .add_service(MetricsServiceServer::new(collector).max_decoding_message_size(MAX_BODY_BYTES))
    .prepare()
    .into_axum_router()
    .layer(axum::middleware::from_fn(keep_travelled))
}

/// Buffers a gRPC request's body and hands it, with the headers, to the
/// service as a request extension.
async fn keep_travelled(request: Request, next: Next) -> Response {
    let (mut parts, body) = request.into_parts();
    let Ok(body) = axum::body::to_bytes(body, MAX_BODY_BYTES + GRPC_FRAME_BYTES).await else {
        return tonic::Status::resource_exhausted("body too large or cut short").into_http();
    };
    parts
        .extensions
        .insert(Travelled::from_http(&parts.headers, body.clone()));
    next.run(Request::from_parts(parts, Body::from(body))).await
}

/// Both gRPC services: they share the record.
#[derive(Debug, Clone)]
struct Collector {
    shared: Arc<Shared>,
}

impl Collector {
    async fn export<T>(
        &self,
        request: tonic::Request<T>,
        decoded: impl FnOnce(T) -> Decoded,
    ) -> Result<(), tonic::Status> {
        if self.shared.admit().await == Admission::Refuse {
            return Err(tonic::Status::unavailable(
                "collector failing (set_failing)",
            ));
        }
        // Always there: the middleware runs before every service call.
        let travelled = request
            .extensions()
            .get::<Travelled>()
            .cloned()
            .unwrap_or_default();
        self.shared
            .accept(travelled, &decoded(request.into_inner()));
        Ok(())
    }
}

#[tonic::async_trait]
impl TraceService for Collector {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        Collector::export(self, request, Decoded::Traces).await?;
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

#[tonic::async_trait]
impl MetricsService for Collector {
    async fn export(
        &self,
        request: tonic::Request<ExportMetricsServiceRequest>,
    ) -> Result<tonic::Response<ExportMetricsServiceResponse>, tonic::Status> {
        Collector::export(self, request, Decoded::Metrics).await?;
        Ok(tonic::Response::new(ExportMetricsServiceResponse::default()))
    }
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    #[test]
    fn only_uncompressed_protobuf_is_taken() {
        let headers = |pairs: &[(header::HeaderName, &'static str)]| {
            let mut map = HeaderMap::new();
            for (name, value) in pairs {
                map.insert(name.clone(), HeaderValue::from_static(value));
            }
            map
        };
        let taken = |pairs| unsupported_media(&headers(pairs)).is_none();
        assert!(taken(&[(header::CONTENT_TYPE, "application/x-protobuf")]));
        assert!(taken(&[(
            header::CONTENT_TYPE,
            "Application/X-Protobuf; charset=x"
        )]));
        assert!(!taken(&[]));
        assert!(!taken(&[(header::CONTENT_TYPE, "application/json")]));
        assert!(!taken(&[
            (header::CONTENT_TYPE, "application/x-protobuf"),
            (header::CONTENT_ENCODING, "gzip"),
        ]));
    }
}
