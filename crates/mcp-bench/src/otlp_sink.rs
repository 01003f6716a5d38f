//! P9's collector: an OTLP/HTTP endpoint that reads every export request
//! whole and answers `200` without decoding it, as a collector on another
//! machine would cost this one nothing but the bytes. (The decoding
//! receiver of the tests, `mcp_test_support::otlp`, keeps every span it
//! gets: on a 2-core machine it would measure itself.)

use std::sync::{
    Arc,
    atomic::{AtomicU64, Ordering},
};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response, body::Incoming, server::conn::http1, service::service_fn};
use hyper_util::rt::TokioIo;

/// A running sink; stops with its runtime when dropped.
pub(crate) struct Sink {
    /// `http://127.0.0.1:PORT`.
    pub(crate) endpoint: String,
    requests: Arc<AtomicU64>,
    bytes: Arc<AtomicU64>,
    _runtime: tokio::runtime::Runtime,
}

impl Sink {
    pub(crate) fn start() -> anyhow::Result<Sink> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()?;
        let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))?;
        let endpoint = format!("http://{}", listener.local_addr()?);
        let requests = Arc::new(AtomicU64::new(0));
        let bytes = Arc::new(AtomicU64::new(0));
        let (counted, sized) = (requests.clone(), bytes.clone());
        runtime.spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (counted, sized) = (counted.clone(), sized.clone());
                tokio::spawn(async move {
                    let service = service_fn(move |request: Request<Incoming>| {
                        let (counted, sized) = (counted.clone(), sized.clone());
                        async move {
                            let body = request.into_body().collect().await?.to_bytes();
                            counted.fetch_add(1, Ordering::Relaxed);
                            sized.fetch_add(body.len() as u64, Ordering::Relaxed);
                            // An empty Export*ServiceResponse is zero bytes of protobuf.
                            let mut response = Response::new(Full::new(Bytes::new()));
                            response.headers_mut().insert(
                                hyper::header::CONTENT_TYPE,
                                hyper::header::HeaderValue::from_static("application/x-protobuf"),
                            );
                            Ok::<_, hyper::Error>(response)
                        }
                    });
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Ok(Sink {
            endpoint,
            requests,
            bytes,
            _runtime: runtime,
        })
    }

    /// Export requests and bytes taken so far.
    pub(crate) fn taken(&self) -> (u64, u64) {
        (
            self.requests.load(Ordering::Relaxed),
            self.bytes.load(Ordering::Relaxed),
        )
    }
}
