//! The admin HTTP API of the long-lived process (docs/SUPERVISION.md, "Admin
//! API"): health, readiness,
//! `/status`, `/metrics`, reset and reload, all answered from the registry.
//!
//! # Layout
//! - [`status`]: a status snapshot as the `/status` JSON (pure).
//! - [`metrics`]: a status snapshot as Prometheus text (pure).
//! - [`reload`]: [`Reloader`], re-reading the config for `POST /reload` and SIGHUP.
//! - `dashboard`: the web dashboard at `/` (docs/DASHBOARD.md).
//! - [`server`]: the axum router, its protection (`Host`, `Origin`, JSON
//!   content type, bearer token) and [`serve_admin_with`].
//!
//! Everything here is built from [`ConnectionStatus`](crate::registry::ConnectionStatus),
//! which never holds a URL, token, header or argument value, so neither can the
//! JSON, the metrics labels or the logs.

mod dashboard;
pub mod metrics;
pub mod reload;
pub mod server;
pub mod status;

pub use dashboard::LoginLinks;
pub use metrics::{METRICS_CONTENT_TYPE, metrics_text};
pub use reload::{ConfigSource, ReloadError, Reloader, report_json};
pub use server::{
    AdminLinks, READY_TIMEOUT, router, router_with, serve_admin, serve_admin_linked,
    serve_admin_with,
};
pub use status::status_json;
