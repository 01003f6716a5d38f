//! The web dashboard at the admin listener's root (docs/DASHBOARD.md):
//! every connection's health, live, and a reset button.
//!
//! # Layout
//! - `auth`: login links, sessions, the same-origin and CSRF rules.
//! - `html`: escaping, the page frame, the compiled-in assets.
//! - `model`: a connection's row, worded once for the page and the feed.
//! - `views`: the pages, pure functions of what the registry reported.
//! - `search`: finding tools by words.
//! - `feed`: the live feed's actor behind `/events`.
//!
//! Pages are server-rendered and complete without JavaScript; one script
//! (`assets/app.js`) adds the live updates, countdowns and the reset button.
//! Looking never connects anything: catalogs not loaded yet are shown as such.

mod auth;
mod feed;
mod html;
mod model;
mod search;
mod views;

use std::{
    convert::Infallible,
    sync::{Arc, OnceLock},
    time::{Duration, SystemTime},
};

use actix::{Actor, Addr};
use axum::{
    Extension, Json, Router,
    extract::{FromRef, Path, Query, Request, State},
    http::{HeaderMap, HeaderValue, Method, StatusCode, header},
    middleware::Next,
    response::{
        Html, IntoResponse, Response,
        sse::{Event, KeepAlive, Sse},
    },
    routing::{get, post},
};
use futures::{StreamExt, stream};
use serde_json::json;
use tokio::sync::{Semaphore, broadcast::error::RecvError};
use tokio_util::sync::CancellationToken;

pub use self::auth::LoginLinks;
use self::{
    auth::{Cookie, Sessions},
    feed::{Feed, Join},
    html::{ASSETS, Frame, Nav, VERSION, page},
    model::{Row, sorted},
    search::{Hit, ToolSearch},
    views::{ConnectionView, Filter},
};
use crate::registry::{
    FleetOverview, LoadedCatalogs, RecentOf, Registry, Status, UnknownConnection,
};

/// How long a page waits for the registry.
const ASK_TIMEOUT: Duration = Duration::from_secs(5);

/// The dashboard's state, shared by its handlers and the admin API's
/// protection.
#[derive(Debug)]
pub(crate) struct Dashboard {
    registry: Addr<Registry>,
    pub(crate) sessions: Sessions,
    pub(crate) links: Arc<LoginLinks>,
    /// With `[admin] auth`: sessions carry their own CSRF tokens.
    pub(crate) auth: bool,
    /// Without `auth`, the token a browser's state change must carry.
    pub(crate) process_csrf: String,
    /// The `--config` file, for the commands a page shows.
    config: Option<String>,
    feed: OnceLock<Addr<Feed>>,
    /// Where the feed's actor runs: the actix system the router was made in
    /// (requests are served on tasks of their own).
    arbiter: Option<actix::ArbiterHandle>,
    /// Live streams open at once (each holds an admin connection).
    streams: Arc<Semaphore>,
    shutdown: CancellationToken,
}

impl Dashboard {
    pub(crate) fn new(
        registry: Addr<Registry>,
        links: Arc<LoginLinks>,
        auth: bool,
        config: Option<String>,
        max_streams: usize,
        shutdown: CancellationToken,
    ) -> Self {
        Dashboard {
            registry,
            sessions: Sessions::default(),
            links,
            auth,
            process_csrf: auth::process_csrf(),
            config,
            feed: OnceLock::new(),
            arbiter: actix::Arbiter::try_current(),
            streams: Arc::new(Semaphore::new(max_streams.max(1))),
            shutdown,
        }
    }

    /// The feed's actor, started by the first page that listens (`None`
    /// outside an actix system).
    fn feed(&self) -> Option<Addr<Feed>> {
        let arbiter = self.arbiter.as_ref()?;
        let registry = self.registry.clone();
        Some(
            self.feed
                .get_or_init(|| Feed::start_in_arbiter(arbiter, |_| Feed::new(registry)))
                .clone(),
        )
    }
}

/// Which rules a path answers under (see [`auth`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route {
    /// Probes, `/login` and the assets: no credential (they hold no state).
    Open,
    /// A dashboard page (HTML): a session or the bearer.
    Page,
    /// The dashboard's feed, JSON and logout: a session or the bearer.
    Browser,
    /// A state change the dashboard makes (reset): a session (with CSRF) or the bearer.
    Change,
    /// The rest of the admin API: the bearer only.
    Api,
}

impl Route {
    pub(crate) fn of(method: &Method, path: &str) -> Route {
        match (method, path) {
            (_, "/healthz" | "/readyz" | "/login") => Route::Open,
            (_, path) if path.starts_with("/ui/") => Route::Open,
            (&Method::GET | &Method::HEAD, "/" | "/tools" | "/fleet") => Route::Page,
            (&Method::GET | &Method::HEAD, path) if path.starts_with("/connections/") => {
                Route::Page
            }
            (_, "/events" | "/logout") => Route::Browser,
            (_, path) if path.starts_with("/dashboard/api/") => Route::Browser,
            (&Method::POST, path) if path.starts_with("/connections/") => Route::Change,
            _ => Route::Api,
        }
    }

    /// A session cookie may stand in for the bearer here.
    pub(crate) fn takes_cookie(self) -> bool {
        matches!(self, Route::Page | Route::Browser | Route::Change)
    }

    /// Only this machine may use it without `[admin] auth` (the probes and
    /// the API keep today's rules).
    pub(crate) fn local_only(self) -> bool {
        matches!(self, Route::Page | Route::Browser)
    }
}

/// The CSRF token a page embeds (empty for a bearer's request).
#[derive(Debug, Clone)]
pub(crate) struct PageCsrf(pub(crate) String);

/// Who the protection let in, decided before any route.
pub(crate) enum Let {
    In(PageCsrf),
    Out(Response),
}

impl Dashboard {
    /// The dashboard's part of the admin API's protection: the rules for a
    /// `route` the bearer did not open (`bearer` false), or did.
    pub(crate) fn admit(&self, route: Route, request: &Request, bearer: bool) -> Let {
        let headers = request.headers();
        if self.auth {
            if route == Route::Open {
                return Let::In(PageCsrf(String::new()));
            }
            if bearer {
                return Let::In(PageCsrf(String::new()));
            }
            if route.takes_cookie()
                && let Cookie::Session { csrf } = self.sessions.check(headers)
            {
                return match auth::same_origin(request.method(), headers, &csrf) {
                    Ok(()) => Let::In(PageCsrf(csrf)),
                    Err(refused) => Let::Out(refused_page(StatusCode::FORBIDDEN, &refused)),
                };
            }
            return Let::Out(if route == Route::Page {
                let body = page(
                    &self.frame("Log in", Nav::Connections, ""),
                    &views::login_needed(),
                );
                crate::listener::guard::unauthorized(Html(body))
            } else {
                crate::listener::guard::unauthorized(Json(json!({
                    "error": "missing or invalid bearer token (see [admin] auth)"
                })))
            });
        }
        if route.local_only()
            && let Some(peer) = request.extensions().get::<crate::listener::Peer>()
            && !peer.0.is_loopback()
        {
            return Let::Out(refused_page(
                StatusCode::FORBIDDEN,
                &"without [admin] auth, the dashboard answers only this machine",
            ));
        }
        if route != Route::Open
            && (route.takes_cookie() || request.method() == Method::POST)
            && auth::from_browser(headers)
            && let Err(refused) = auth::same_origin(request.method(), headers, &self.process_csrf)
        {
            return Let::Out(refused_page(StatusCode::FORBIDDEN, &refused));
        }
        Let::In(PageCsrf(self.process_csrf.clone()))
    }

    fn frame<'a>(&self, title: &'a str, nav: Nav, csrf: &'a str) -> Frame<'a> {
        Frame {
            title,
            nav,
            csrf,
            now: SystemTime::now(),
            // A session to end (a bearer's request has no CSRF token).
            logout: self.auth && !csrf.is_empty(),
        }
    }
}

use super::server::error as refused_page;

/// The dashboard's routes, merged into the admin API's router (behind its
/// protection).
pub(crate) fn routes<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    Arc<Dashboard>: FromRef<S>,
{
    Router::new()
        .route("/", get(overview))
        .route("/connections/{name}", get(connection))
        .route("/tools", get(tools))
        .route("/fleet", get(fleet))
        .route("/events", get(events))
        .route("/dashboard/api/rows", get(rows))
        .route("/dashboard/login-links", post(login_link))
        .route("/login", get(login))
        .route(
            "/logout",
            post(logout).route_layer(axum::middleware::from_fn(super::server::json_only)),
        )
        .route("/ui/{file}", get(asset))
}

/// Headers on every admin answer: no framing, no sniffing, no cross-origin
/// use, no caching (but for versioned assets), and a CSP that allows only
/// our own script and stylesheet.
pub(crate) async fn headers(request: Request, next: Next) -> Response {
    let asset = request.uri().path().starts_with("/ui/");
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    let set = |headers: &mut HeaderMap, name: header::HeaderName, value: &'static str| {
        headers.insert(name, HeaderValue::from_static(value));
    };
    set(
        headers,
        header::CONTENT_SECURITY_POLICY,
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
         connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    );
    set(headers, header::X_FRAME_OPTIONS, "DENY");
    set(headers, header::X_CONTENT_TYPE_OPTIONS, "nosniff");
    set(headers, header::REFERRER_POLICY, "no-referrer");
    set(
        headers,
        header::HeaderName::from_static("cross-origin-opener-policy"),
        "same-origin",
    );
    set(
        headers,
        header::HeaderName::from_static("cross-origin-resource-policy"),
        "same-origin",
    );
    if !asset {
        set(headers, header::CACHE_CONTROL, "no-store");
    }
    response
}

async fn ask<M>(registry: &Addr<Registry>, message: M) -> Result<M::Result, Response>
where
    M: actix::Message + Send + 'static,
    M::Result: Send,
    Registry: actix::Handler<M>,
{
    match tokio::time::timeout(ASK_TIMEOUT, registry.send(message)).await {
        Ok(Ok(answer)) => Ok(answer),
        _ => Err((
            StatusCode::SERVICE_UNAVAILABLE,
            Html("<p>The supervisor did not answer in time.</p>"),
        )
            .into_response()),
    }
}

fn html_page(
    dashboard: &Dashboard,
    title: &str,
    nav: Nav,
    csrf: &PageCsrf,
    body: &str,
) -> Response {
    Html(page(&dashboard.frame(title, nav, &csrf.0), body)).into_response()
}

async fn overview(
    State(dashboard): State<Arc<Dashboard>>,
    Extension(csrf): Extension<PageCsrf>,
    Query(filter): Query<Filter>,
) -> Response {
    let statuses = match ask(&dashboard.registry, Status).await {
        Ok(statuses) => statuses,
        Err(unavailable) => return unavailable,
    };
    let rows = sorted(&statuses);
    let held: Vec<(&str, &crate::contracts::Seen)> = statuses
        .iter()
        .filter_map(|status| Some((status.name.as_str(), status.contracts.as_deref()?)))
        .flat_map(|(name, judged)| {
            judged
                .items
                .iter()
                .filter(|seen| seen.verdict.holds())
                .map(move |seen| (name, seen))
        })
        .collect();
    let body = views::overview(&rows, &held, &filter, SystemTime::now());
    html_page(&dashboard, "Connections", Nav::Connections, &csrf, &body)
}

async fn connection(
    State(dashboard): State<Arc<Dashboard>>,
    Extension(csrf): Extension<PageCsrf>,
    Path(name): Path<String>,
    Query(filter): Query<Filter>,
) -> Response {
    let registry = &dashboard.registry;
    let (statuses, recent, catalogs) = match tokio::try_join!(
        ask(registry, Status),
        ask(
            registry,
            RecentOf {
                connection: name.clone()
            }
        ),
        ask(registry, LoadedCatalogs),
    ) {
        Ok(answers) => answers,
        Err(unavailable) => return unavailable,
    };
    let (Some(status), Ok(recent)) = (statuses.iter().find(|s| s.name == name), recent) else {
        let body = format!(
            "<h1>Not found</h1><p>{}</p><p><a href=\"/\">All connections</a></p>",
            html::Esc(&UnknownConnection(name).to_string())
        );
        let mut response = html_page(&dashboard, "Not found", Nav::Connections, &csrf, &body);
        *response.status_mut() = StatusCode::NOT_FOUND;
        return response;
    };
    let catalog = catalogs
        .into_iter()
        .find(|(connection, _)| *connection == name)
        .and_then(|(_, catalog)| catalog);
    let row = Row::from_status(status);
    let view = ConnectionView {
        row: &row,
        parks: status.parks,
        restarts: status.restarts,
        recent: &recent,
        tools: catalog.as_ref().map(|catalog| catalog.tools.as_slice()),
        config: dashboard.config.as_deref(),
        contracts: catalog.as_ref().map(|catalog| &*catalog.contracts),
    };
    let body = views::connection(&view, &filter, SystemTime::now());
    html_page(&dashboard, &name, Nav::Connections, &csrf, &body)
}

async fn tools(
    State(dashboard): State<Arc<Dashboard>>,
    Extension(csrf): Extension<PageCsrf>,
    Query(filter): Query<Filter>,
) -> Response {
    let registry = &dashboard.registry;
    let (statuses, catalogs) =
        match tokio::try_join!(ask(registry, Status), ask(registry, LoadedCatalogs)) {
            Ok(answers) => answers,
            Err(unavailable) => return unavailable,
        };
    let rows: std::collections::HashMap<&str, Row> = statuses
        .iter()
        .map(|status| (status.name.as_str(), Row::from_status(status)))
        .collect();
    let search = ToolSearch::new(&filter.q);
    let mut hits = Vec::new();
    let mut unloaded = Vec::new();
    for (connection, catalog) in &catalogs {
        let Some(catalog) = catalog else {
            unloaded.push(connection.clone());
            continue;
        };
        let row = rows.get(connection.as_str());
        hits.extend(
            catalog
                .tools
                .iter()
                .filter(|tool| search.matches(tool))
                .map(|tool| Hit {
                    connection,
                    tool,
                    row,
                }),
        );
    }
    let body = views::tools(&search, &hits, &unloaded, filter.page);
    html_page(&dashboard, "Tools", Nav::Tools, &csrf, &body)
}

async fn fleet(
    State(dashboard): State<Arc<Dashboard>>,
    Extension(csrf): Extension<PageCsrf>,
) -> Response {
    let view = match ask(&dashboard.registry, FleetOverview).await {
        Ok(view) => view,
        Err(unavailable) => return unavailable,
    };
    let body = views::fleet(view.as_ref());
    html_page(&dashboard, "Fleet", Nav::Fleet, &csrf, &body)
}

/// Every row as one frame (what a page that fell behind resyncs from).
async fn rows(State(dashboard): State<Arc<Dashboard>>) -> Response {
    let mut rows = feed::Rows::default();
    let answer = match ask(&dashboard.registry, rows.ask(true)).await {
        Ok(answer) => answer,
        Err(unavailable) => return unavailable,
    };
    let _ = rows.apply(answer, true);
    (
        [(header::CONTENT_TYPE, "application/json")],
        rows.full().to_string(),
    )
        .into_response()
}

/// `/events`: server-sent events, `rows` frames (the first holds every
/// row), `resync` when this listener fell behind.
async fn events(State(dashboard): State<Arc<Dashboard>>) -> Response {
    let Ok(slot) = dashboard.streams.clone().try_acquire_owned() else {
        let mut response = refused_page(
            StatusCode::SERVICE_UNAVAILABLE,
            &"too many live dashboard pages; retry later",
        );
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
        return response;
    };
    let joined = match dashboard.feed() {
        Some(feed) => feed.send(Join).await,
        None => Err(actix::MailboxError::Closed),
    };
    let Ok(Ok((first, rx))) = joined else {
        return refused_page(
            StatusCode::SERVICE_UNAVAILABLE,
            &"the supervisor is shutting down",
        );
    };
    let first = stream::once(async move { Ok::<_, Infallible>(frame_event("rows", &first)) });
    let changes = stream::unfold((rx, slot), |(mut rx, slot)| async move {
        let event = match rx.recv().await {
            Ok(frame) => frame_event("rows", &frame),
            Err(RecvError::Lagged(_)) => Event::default().event("resync").data("{}"),
            Err(RecvError::Closed) => return None,
        };
        Some((Ok(event), (rx, slot)))
    });
    let shutdown = dashboard.shutdown.clone().cancelled_owned();
    Sse::new(first.chain(changes).take_until(shutdown))
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response()
}

fn frame_event(name: &str, frame: &str) -> Event {
    Event::default().event(name).data(frame)
}

/// `POST /dashboard/login-links` (the bearer only): a one-time login link.
async fn login_link(State(dashboard): State<Arc<Dashboard>>) -> Response {
    if !dashboard.auth {
        return Json(json!({ "path": "/", "expires_in_s": null })).into_response();
    }
    let token = dashboard.links.mint();
    Json(json!({
        "path": format!("/login?token={token}"),
        "expires_in_s": auth::LINK_LIFETIME.as_secs(),
    }))
    .into_response()
}

#[derive(Debug, serde::Deserialize)]
struct LoginQuery {
    #[serde(default)]
    token: String,
}

/// `GET /login?token=…`: trades a login link for a session cookie.
async fn login(
    State(dashboard): State<Arc<Dashboard>>,
    headers: HeaderMap,
    Query(query): Query<LoginQuery>,
) -> Response {
    let frame = dashboard.frame("Log in", Nav::Connections, "");
    if !dashboard.auth {
        return Html(page(
            &frame,
            "<p>No login needed: <a href=\"/\">open the dashboard</a>.</p>",
        ))
        .into_response();
    }
    let Some(opened) = dashboard.sessions.open(&dashboard.links, &query.token) else {
        let body = format!(
            "<h1>This login link does not work</h1><p>A link works once, for 5 minutes.</p>{}",
            views::login_needed().trim_start_matches("<h1>Log in</h1>")
        );
        return crate::listener::guard::unauthorized(Html(page(&frame, &body)));
    };
    let cookie = auth::set_cookie(auth::port_of(&headers), &opened.cookie);
    let mut response = Html(views::logged_in()).into_response();
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

/// `POST /logout`: ends this browser's session.
async fn logout(headers: HeaderMap, State(dashboard): State<Arc<Dashboard>>) -> Response {
    if let Some(cookie) = auth::cookie_of(&headers) {
        dashboard.sessions.close(&cookie);
    }
    let mut response = Json(json!({ "logged_out": true })).into_response();
    if let Ok(value) = HeaderValue::from_str(&auth::clear_cookie(auth::port_of(&headers))) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

#[derive(Debug, serde::Deserialize)]
struct AssetQuery {
    #[serde(default)]
    v: String,
}

/// `/ui/{file}`: a compiled-in asset; cached for good when its link names
/// this build's version.
async fn asset(Path(file): Path<String>, Query(query): Query<AssetQuery>) -> Response {
    let Some(asset) = ASSETS.iter().find(|asset| asset.name == file) else {
        return refused_page(StatusCode::NOT_FOUND, &"not found");
    };
    let cache = if query.v == *VERSION {
        "public, max-age=31536000, immutable"
    } else {
        "no-cache"
    };
    (
        [
            (header::CONTENT_TYPE, asset.content_type),
            (header::CACHE_CONTROL, cache),
        ],
        asset.body,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_are_sorted_by_the_rules_they_answer_under() {
        let cases = [
            (Method::GET, "/healthz", Route::Open),
            (Method::GET, "/login", Route::Open),
            (Method::GET, "/ui/app.js", Route::Open),
            (Method::GET, "/", Route::Page),
            (Method::GET, "/tools", Route::Page),
            (Method::GET, "/connections/a", Route::Page),
            (Method::POST, "/connections/a/reset", Route::Change),
            // Approvals are state changes under the same rules as reset.
            (Method::POST, "/connections/a/approve", Route::Change),
            (
                Method::POST,
                "/connections/a/tools/t/approve",
                Route::Change,
            ),
            (Method::GET, "/contracts", Route::Api),
            (Method::GET, "/events", Route::Browser),
            (Method::POST, "/logout", Route::Browser),
            (Method::GET, "/dashboard/api/rows", Route::Browser),
            (Method::POST, "/dashboard/login-links", Route::Api),
            (Method::GET, "/status", Route::Api),
            (Method::GET, "/metrics", Route::Api),
            (Method::POST, "/reload", Route::Api),
        ];
        for (method, path, route) in cases {
            assert_eq!(Route::of(&method, path), route, "{method} {path}");
        }
    }

    #[actix_rt::test]
    async fn without_auth_only_this_machine_sees_the_dashboard() {
        let config =
            crate::config::Config::from_toml_str("", std::path::Path::new("t.toml"), &|_| None)
                .unwrap();
        let registry = Registry::new(config).start();
        let dashboard = Dashboard::new(
            registry,
            Arc::default(),
            false,
            None,
            8,
            CancellationToken::new(),
        );
        let from = |ip: [u8; 4], path: &str| {
            let mut request = Request::builder()
                .uri(path)
                .body(axum::body::Body::empty())
                .unwrap();
            request
                .extensions_mut()
                .insert(crate::listener::Peer(std::net::IpAddr::from(ip)));
            let route = Route::of(request.method(), path);
            matches!(dashboard.admit(route, &request, false), Let::In(_))
        };
        assert!(from([127, 0, 0, 1], "/"));
        assert!(from([127, 0, 0, 1], "/events"));
        assert!(!from([10, 0, 0, 7], "/"), "a page");
        assert!(!from([10, 0, 0, 7], "/events"), "the feed");
        assert!(!from([10, 0, 0, 7], "/dashboard/api/rows"), "the rows");
        // The probes and the API keep their own rules.
        assert!(from([10, 0, 0, 7], "/healthz"));
        assert!(from([10, 0, 0, 7], "/status"));
    }

    #[test]
    fn the_script_builds_no_markup_from_text() {
        let script = html::APP_JS.body;
        for banned in [
            "innerHTML",
            "outerHTML",
            "insertAdjacentHTML",
            "eval(",
            "new Function",
            "document.write",
        ] {
            assert!(!script.contains(banned), "app.js uses {banned}");
        }
    }
}
