//! Opening a session over streamable HTTP.

use std::{collections::HashMap, time::Duration};

use http::{HeaderName, HeaderValue};
use rmcp::{
    ServiceExt,
    transport::{
        StreamableHttpClientTransport, streamable_http_client::StreamableHttpClientTransportConfig,
    },
};
use tokio::time::Instant;

use tokio_util::sync::CancellationToken;

use super::{Session, SessionHandler, classify_recorded, watch::Watched};
use crate::{
    config::HttpTransport,
    failure::{Failure, FailureKind},
    http::{HttpRecorder, RecordingClient},
};

/// The one pooled HTTP client all HTTP connections share: keep-alive reuse is
/// ~1.6× faster than a connection per call and far lighter for many upstreams.
pub fn shared_http_client() -> reqwest::Client {
    reqwest::Client::builder()
        .tcp_nodelay(true)
        .pool_idle_timeout(Duration::from_secs(60))
        // Deadlines are per operation (call_timeout etc.), enforced above the client.
        .connect_timeout(Duration::from_secs(30))
        // Never follow redirects: a redirect could carry the bearer token to
        // another origin, and an MCP endpoint has no business redirecting.
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap_or_else(|_| reqwest::Client::new())
}

/// Connects and initializes a session to `transport`, within `deadline`.
///
/// The bearer token goes into rmcp's transport config only here, and that
/// config (which derives `Debug`) is moved into rmcp and never logged.
pub async fn open_http(
    transport: &HttpTransport,
    client: reqwest::Client,
    recorder: HttpRecorder,
    handler: SessionHandler,
    deadline: Instant,
) -> Result<Session, Failure> {
    let mut config = StreamableHttpClientTransportConfig::with_uri(transport.url.as_str())
        .custom_headers(header_map(transport)?);
    if let Some(token) = &transport.auth {
        config = config.auth_header(token.expose());
    }
    let client = RecordingClient::new(client, recorder.clone());
    let ended = CancellationToken::new();
    let rmcp_transport = Watched::new(
        StreamableHttpClientTransport::with_client(client, config),
        ended.clone(),
    );
    match tokio::time::timeout_at(deadline, handler.serve(rmcp_transport)).await {
        Ok(Ok(service)) => Ok(Session::new(service, Some(recorder), ended)),
        Ok(Err(error)) => Err(classify_recorded(&error, Some(&recorder))),
        Err(_) => Err(Failure::timeout("initialize did not complete in time")),
    }
}

fn header_map(transport: &HttpTransport) -> Result<HashMap<HeaderName, HeaderValue>, Failure> {
    use secrecy::ExposeSecret;
    transport
        .headers
        .iter()
        .map(|(name, value)| {
            let name = HeaderName::try_from(name.as_str());
            let value = HeaderValue::try_from(value.expose_secret());
            match (name, value) {
                (Ok(name), Ok(mut value)) => {
                    value.set_sensitive(true);
                    Ok((name, value))
                }
                // Config validation rejects these; this only guards the invariant.
                _ => Err(Failure::new(
                    FailureKind::Protocol,
                    "invalid configured header",
                )),
            }
        })
        .collect()
}
