//! The dashboard over real loopback HTTP (docs/DASHBOARD.md): a registry
//! supervising a test upstream and the admin server on one actix system, as
//! `serve` runs them, read by a plain HTTP client that sends what a browser
//! would. (The same pages in a real browser: tests/e2e/dashboard.rs.)

mod support;

use std::{path::Path, time::Duration};

use actix::{Actor, Addr};
use mcp_supervisor::{
    CallOutcome,
    admin::{ConfigSource, Reloader, serve_admin_with},
    config::{AdminSettings, BearerToken, Config},
    registry::Registry,
};
use mcp_test_support::{Fault, FaultRule, Match, TestServer, TestServerOptions};
use reqwest::{Method, StatusCode, header};
use serde_json::{Value, json};
use support::*;
use tokio::{net::TcpListener, time::Instant};
use tokio_util::sync::CancellationToken;

/// Planted in an upstream's token and in a tool's arguments: no page, JSON
/// or live frame may show it.
const CANARY: &str = "CANARY-dash-4b1d-SECRET";
/// The admin API's own token in the tests with `auth`.
const ADMIN_TOKEN: &str = "ADMIN-dash-token-9c2e";

struct Admin {
    base: String,
    host: String,
    http: reqwest::Client,
    shutdown: CancellationToken,
    served: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Admin {
    async fn start(registry: Addr<Registry>, file: &Path, settings: AdminSettings) -> Admin {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let host = listener.local_addr().unwrap().to_string();
        let reloader = Reloader::new(ConfigSource::File(file.into()), registry.clone());
        let shutdown = CancellationToken::new();
        let served = actix_rt::spawn(serve_admin_with(
            listener,
            registry,
            reloader,
            settings,
            shutdown.clone(),
        ));
        Admin {
            base: format!("http://{host}"),
            host,
            http: reqwest::Client::builder().no_proxy().build().unwrap(),
            shutdown,
            served,
        }
    }

    fn request(&self, method: Method, path: &str) -> reqwest::RequestBuilder {
        self.http.request(method, format!("{}{path}", self.base))
    }

    /// What the browser adds to a request its own page sends.
    fn same_origin(&self, method: Method, path: &str) -> reqwest::RequestBuilder {
        self.browser(method, path, "same-origin", &self.base)
    }

    /// A request as a browser sends it from a page on `origin` (`site`: how
    /// that page stands to us).
    fn browser(
        &self,
        method: Method,
        path: &str,
        site: &str,
        origin: &str,
    ) -> reqwest::RequestBuilder {
        let request = self
            .request(method.clone(), path)
            .header("sec-fetch-site", site);
        if method == Method::GET {
            request
        } else {
            request
                .header(header::ORIGIN, origin)
                .header(header::CONTENT_TYPE, "application/json")
                .body("{}")
        }
    }

    async fn page(&self, path: &str) -> String {
        let response = self.request(Method::GET, path).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{path}");
        response.text().await.unwrap()
    }
}

async fn send(request: reqwest::RequestBuilder) -> (StatusCode, String) {
    let response = request.send().await.unwrap();
    (response.status(), response.text().await.unwrap())
}

/// The CSRF token a page carries for its script.
fn csrf_of(page: &str) -> String {
    let start = page
        .find("name=\"mcp-csrf\" content=\"")
        .expect("a csrf meta")
        + 25;
    page[start..start + page[start..].find('"').unwrap()].to_owned()
}

/// Reads server-sent events from a streaming answer.
struct Events {
    response: reqwest::Response,
    buffer: String,
}

impl Events {
    async fn open(admin: &Admin, request: reqwest::RequestBuilder) -> Events {
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let content_type = response.headers()[header::CONTENT_TYPE].to_str().unwrap();
        assert!(
            content_type.starts_with("text/event-stream"),
            "{content_type}"
        );
        let _ = admin;
        Events {
            response,
            buffer: String::new(),
        }
    }

    /// The next event's name and data; `None` when the stream ends.
    async fn next(&mut self) -> Option<(String, String)> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let (mut name, mut data) = (String::new(), String::new());
                for line in block.lines() {
                    if let Some(value) = line.strip_prefix("event: ") {
                        name = value.to_owned();
                    } else if let Some(value) = line.strip_prefix("data: ") {
                        data.push_str(value);
                    }
                }
                if name.is_empty() {
                    continue; // a keep-alive comment
                }
                return Some((name, data));
            }
            let chunk = self.response.chunk().await.ok()??;
            self.buffer.push_str(&String::from_utf8_lossy(&chunk));
        }
    }

    /// The first `rows` frame that holds `connection` in `state`.
    async fn until_state(&mut self, connection: &str, state: &str) -> Value {
        self.until_row(connection, |row| row["state"] == state)
            .await
    }

    /// The first row of `connection` that `wanted` accepts.
    async fn until_row(&mut self, connection: &str, wanted: impl Fn(&Value) -> bool) -> Value {
        loop {
            let (name, data) = self.next().await.expect("the stream stays open");
            assert!(!data.contains(CANARY), "a frame shows the canary: {data}");
            if name != "rows" {
                continue;
            }
            let frame: Value = serde_json::from_str(&data).unwrap();
            let found = frame["rows"]
                .as_array()
                .unwrap()
                .iter()
                .find(|row| row["name"] == connection && wanted(row));
            if let Some(row) = found {
                return row.clone();
            }
        }
    }
}

fn config_text(url: &str) -> String {
    http_connection(
        "a",
        url,
        &format!("headers = {{ Authorization = \"Bearer {CANARY}\" }}"),
    ) + &http_connection("b", url, "")
}

async fn setup() -> (
    TestServer,
    Addr<Registry>,
    tempfile::TempDir,
    std::path::PathBuf,
) {
    let upstream = TestServer::start(TestServerOptions::default())
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("supervisor.toml");
    std::fs::write(&file, config_text(&upstream.url())).unwrap();
    let registry = Registry::new(Config::from_file(&file).unwrap()).start();
    (upstream, registry, dir, file)
}

#[test]
fn pages_show_connections_calls_and_decisions_and_never_connect() {
    run(|| async {
        let (upstream, registry, _dir, file) = setup().await;
        let admin = Admin::start(registry.clone(), &file, AdminSettings::default()).await;

        let response = admin.request(Method::GET, "/").send().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let headers = response.headers().clone();
        let overview = response.text().await.unwrap();
        assert!(
            headers[header::CONTENT_TYPE]
                .to_str()
                .unwrap()
                .starts_with("text/html")
        );
        let csp = headers[header::CONTENT_SECURITY_POLICY].to_str().unwrap();
        assert!(
            csp.contains("script-src 'self'") && csp.contains("frame-ancestors 'none'"),
            "{csp}"
        );
        assert_eq!(headers[header::X_FRAME_OPTIONS], "DENY");
        assert_eq!(headers[header::CACHE_CONTROL], "no-store");
        assert!(headers.get(header::ACCESS_CONTROL_ALLOW_ORIGIN).is_none());
        for name in ["a", "b"] {
            assert!(
                overview.contains(&format!("<tr data-conn=\"{name}\">")),
                "{overview}"
            );
        }
        // The script and stylesheet are compiled in, cached for good under
        // this build's version.
        let version = overview.split("/ui/app.js?v=").nth(1).unwrap();
        let version = &version[..version.find('"').unwrap()];
        let script = admin
            .request(Method::GET, &format!("/ui/app.js?v={version}"))
            .send()
            .await
            .unwrap();
        assert_eq!(script.status(), StatusCode::OK);
        assert!(
            script.headers()[header::CACHE_CONTROL]
                .to_str()
                .unwrap()
                .contains("immutable")
        );
        assert!(script.text().await.unwrap().contains("EventSource"));
        assert_eq!(
            admin
                .request(Method::GET, "/ui/nope.js")
                .send()
                .await
                .unwrap()
                .status(),
            404
        );

        // Looking never connects: no catalog is loaded by a page.
        let tools = admin.page("/tools?q=echo").await;
        let fleet = admin.page("/fleet").await;
        let b = admin.page("/connections/b").await;
        assert!(
            tools.contains("Not loaded yet") && tools.contains("0 tools match"),
            "{tools}"
        );
        assert!(fleet.contains("not in a fleet"), "{fleet}");
        assert!(b.contains("Not loaded yet"), "{b}");
        assert_eq!(
            upstream.connections_accepted(),
            0,
            "a page made the supervisor connect"
        );

        // A call, then a read-only call failing 503 until the connection parks.
        let ok = call(&registry, "a", "echo", args(&[("text", json!(CANARY))])).await;
        assert_eq!(text_of(&ok), CANARY);
        upstream
            .faults()
            .push(FaultRule::always(Match::tool("lookup"), Fault::status(503)));
        let parked = call(&registry, "a", "lookup", args(&[("key", json!("k"))])).await;
        assert!(
            matches!(parked, CallOutcome::Unavailable { .. }),
            "{parked:?}"
        );

        let a = admin.page("/connections/a").await;
        assert!(a.contains("data-state=\"parked\""), "{a}");
        assert!(
            a.contains("data-until=\"1"),
            "a countdown to the park's end: {a}"
        );
        assert!(
            a.contains(
                "<td>echo</td><td>—</td><td><span class=\"outcome\" data-kind=\"ok\">ok</span></td><td>1</td>"
            ),
            "the call, its outcome and attempts: {a}"
        );
        assert!(
            a.contains(
                "<td>lookup</td><td>—</td><td><span class=\"outcome\" data-kind=\"unavailable\">"
            ),
            "{a}"
        );
        assert!(
            a.contains("<td>server</td><td>503</td><td>call</td>"),
            "{a}"
        );
        assert!(
            a.contains("retry after") && a.contains("park for"),
            "the policy's decisions: {a}"
        );
        assert!(
            a.contains("<code>echo</code>"),
            "the catalog, loaded by the call: {a}"
        );
        let tools = admin.page("/tools?q=echo").await;
        assert!(tools.contains("<code>echo</code>"), "{tools}");
        assert!(
            tools.contains("data-state=\"parked\""),
            "each tool shows its connection's state: {tools}"
        );

        let (code, rows) = send(admin.same_origin(Method::GET, "/dashboard/api/rows")).await;
        assert_eq!(code, StatusCode::OK);
        let rows: Value = serde_json::from_str(&rows).unwrap();
        let row = rows["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == "a")
            .unwrap();
        assert_eq!((&row["state"], &row["ok"]), (&json!("parked"), &json!(1)));
        assert!(row["p50"].as_str().unwrap().ends_with('s'), "{row}");

        for page in [&overview, &a, &tools, &b, &rows.to_string()] {
            assert!(!page.contains(CANARY), "the canary leaked: {page}");
        }
        assert_eq!(
            admin
                .request(Method::GET, "/connections/nope")
                .send()
                .await
                .unwrap()
                .status(),
            404
        );
        admin.shutdown.cancel();
        let _ = admin.served.await;
    });
}

#[test]
fn a_browser_resets_only_from_its_own_page_with_the_token() {
    run(|| async {
        let (upstream, registry, _dir, file) = setup().await;
        let admin = Admin::start(registry.clone(), &file, AdminSettings::default()).await;
        upstream
            .faults()
            .push(FaultRule::always(Match::tool("lookup"), Fault::status(503)));
        let _ = call(&registry, "a", "lookup", args(&[("key", json!("k"))])).await;
        let page = admin.page("/connections/a").await;
        let csrf = csrf_of(&page);
        assert!(csrf.len() >= 40, "{csrf}");
        let reset = "/connections/a/reset";

        let refused = [
            // No token.
            admin.same_origin(Method::POST, reset),
            // A wrong one.
            admin
                .same_origin(Method::POST, reset)
                .header("x-csrf-token", "nope"),
            // Another site, even with the token.
            admin
                .browser(Method::POST, reset, "cross-site", "http://evil.example")
                .header("x-csrf-token", &csrf),
            // The same site on another port is another origin.
            admin
                .browser(Method::POST, reset, "same-site", "http://127.0.0.1:9999")
                .header("x-csrf-token", &csrf),
        ];
        for request in refused {
            let (code, body) = send(request).await;
            assert_eq!(code, StatusCode::FORBIDDEN, "{body}");
        }
        let still = admin.page("/connections/a").await;
        assert!(
            still.contains("data-state=\"parked\""),
            "nothing was reset: {still}"
        );
        // A same-site page cannot read state either.
        let (code, _) =
            send(admin.browser(Method::GET, "/dashboard/api/rows", "same-site", "")).await;
        assert_eq!(code, StatusCode::FORBIDDEN);

        let (code, body) = send(
            admin
                .same_origin(Method::POST, reset)
                .header("x-csrf-token", &csrf),
        )
        .await;
        assert_eq!((code, body.as_str()), (StatusCode::OK, r#"{"reset":"a"}"#));
        let after = admin.page("/connections/a").await;
        assert!(after.contains("data-state=\"idle\""), "{after}");
        // The CLI (no browser headers) keeps today's rules.
        let (code, _) = send(
            admin
                .request(Method::POST, reset)
                .header(header::CONTENT_TYPE, "application/json"),
        )
        .await;
        assert_eq!(code, StatusCode::OK);
        admin.shutdown.cancel();
        let _ = admin.served.await;
    });
}

/// On the paused clock (every party is in this process, on this runtime):
/// the second the docs promise, and the tick, are exact, whatever the load.
#[test]
fn the_live_feed_shows_a_park_within_a_second_and_ends_at_shutdown() {
    run_paused(|| async {
        let (upstream, registry, _dir, file) = setup().await;
        let settings = AdminSettings {
            // A quarter of them may stream: one.
            max_connections: 4,
            ..AdminSettings::default()
        };
        let admin = Admin::start(registry.clone(), &file, settings).await;
        let mut events = Events::open(&admin, admin.same_origin(Method::GET, "/events")).await;
        let (name, first) = events.next().await.unwrap();
        assert_eq!(name, "rows");
        let first: Value = serde_json::from_str(&first).unwrap();
        assert_eq!(
            first["rows"].as_array().unwrap().len(),
            2,
            "every row first: {first}"
        );

        // Only one stream at a time here: the next is told to come back.
        let second = admin
            .same_origin(Method::GET, "/events")
            .send()
            .await
            .unwrap();
        assert_eq!(second.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(second.headers()[header::RETRY_AFTER], "5");

        upstream
            .faults()
            .push(FaultRule::always(Match::tool("lookup"), Fault::status(503)));
        let _ = call(&registry, "a", "lookup", args(&[("key", json!("k"))])).await;
        let answered = Instant::now();
        let row = events.until_state("a", "parked").await;
        let shown = answered.elapsed();
        assert!(
            shown < Duration::from_secs(1),
            "the park showed after {shown:?}"
        );
        assert!(row["until"].as_u64().is_some(), "{row}");
        assert_eq!(row["badge"], "parked");

        // Counts change without an event: the tick sends them (a row sent
        // while the call was still being counted may come first).
        let ok = call(&registry, "b", "echo", echo_args()).await;
        assert_eq!(ok.kind(), mcp_supervisor::OutcomeKind::Ok, "{ok:?}");
        let row = tokio::time::timeout(
            Duration::from_secs(3),
            events.until_row("b", |row| row["ok"] == 1),
        )
        .await
        .expect("the tick shows the call within 3 s");
        assert_eq!(row["state"], "ready", "{row}");
        assert_eq!(row["in_flight"], 0, "{row}");

        admin.shutdown.cancel();
        let ended = tokio::time::timeout(Duration::from_secs(1), async {
            while events.next().await.is_some() {}
        })
        .await;
        assert!(ended.is_ok(), "the stream ends at shutdown");
        tokio::time::timeout(Duration::from_secs(5), admin.served)
            .await
            .expect("the admin server stops with a page listening")
            .unwrap()
            .unwrap();
    });
}

#[test]
fn with_auth_a_browser_logs_in_once_and_its_cookie_opens_only_the_dashboard() {
    run(|| async {
        let (_upstream, registry, _dir, file) = setup().await;
        let settings = AdminSettings {
            auth: Some(BearerToken::new(ADMIN_TOKEN.to_owned().into())),
            ..AdminSettings::default()
        };
        let admin = Admin::start(registry.clone(), &file, settings).await;

        let (code, page) = send(admin.request(Method::GET, "/")).await;
        assert_eq!(code, StatusCode::UNAUTHORIZED);
        assert!(
            page.contains("mcp-supervisor dashboard --config FILE"),
            "{page}"
        );
        let (code, _) = send(admin.same_origin(Method::POST, "/dashboard/login-links")).await;
        assert_eq!(
            code,
            StatusCode::UNAUTHORIZED,
            "minting a link needs the bearer"
        );

        let mint = || {
            admin
                .request(Method::POST, "/dashboard/login-links")
                .bearer_auth(ADMIN_TOKEN)
                .header(header::CONTENT_TYPE, "application/json")
        };
        let (code, link) = send(mint()).await;
        assert_eq!(code, StatusCode::OK);
        let link: Value = serde_json::from_str(&link).unwrap();
        assert_eq!(link["expires_in_s"], 300);
        let path = link["path"].as_str().unwrap().to_owned();
        assert!(path.starts_with("/login?token="), "{path}");

        let response = admin
            .request(Method::GET, &path)
            .header("sec-fetch-site", "none")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let set_cookie = response.headers()[header::SET_COOKIE]
            .to_str()
            .unwrap()
            .to_owned();
        let port = admin.host.rsplit(':').next().unwrap();
        assert!(
            set_cookie.starts_with(&format!("mcp_supervisor_{port}=")),
            "{set_cookie}"
        );
        for part in ["HttpOnly", "SameSite=Strict", "Path=/"] {
            assert!(set_cookie.contains(part), "{set_cookie}");
        }
        assert!(!set_cookie.contains(ADMIN_TOKEN));
        let cookie = set_cookie.split(';').next().unwrap().to_owned();
        let (code, _) = send(admin.request(Method::GET, &path)).await;
        assert_eq!(code, StatusCode::UNAUTHORIZED, "a link works once");

        let with_cookie = |method: Method, path: &str| {
            admin
                .same_origin(method, path)
                .header(header::COOKIE, &cookie)
        };
        let (code, page) = send(with_cookie(Method::GET, "/")).await;
        assert_eq!(code, StatusCode::OK);
        assert!(page.contains("<tr data-conn=\"a\">"));
        assert!(!page.contains(ADMIN_TOKEN) && !page.contains(CANARY));
        let csrf = csrf_of(&page);

        // The cookie is not the admin token: the API stays bearer-only.
        for (method, path) in [
            (Method::GET, "/status"),
            (Method::GET, "/metrics"),
            (Method::POST, "/reload"),
        ] {
            let (code, _) =
                send(with_cookie(method.clone(), path).header("x-csrf-token", &csrf)).await;
            assert_eq!(code, StatusCode::UNAUTHORIZED, "{method} {path}");
        }
        let (code, _) = send(with_cookie(Method::POST, "/connections/a/reset")).await;
        assert_eq!(code, StatusCode::FORBIDDEN, "no CSRF token");
        let (code, _) = send(
            admin
                .browser(
                    Method::POST,
                    "/connections/a/reset",
                    "same-site",
                    "http://127.0.0.1:9999",
                )
                .header(header::COOKIE, &cookie)
                .header("x-csrf-token", &csrf),
        )
        .await;
        assert_eq!(code, StatusCode::FORBIDDEN, "another origin");
        let (code, body) =
            send(with_cookie(Method::POST, "/connections/a/reset").header("x-csrf-token", &csrf))
                .await;
        assert_eq!((code, body.as_str()), (StatusCode::OK, r#"{"reset":"a"}"#));

        // Logging out ends the session.
        let (code, _) =
            send(with_cookie(Method::POST, "/logout").header("x-csrf-token", &csrf)).await;
        assert_eq!(code, StatusCode::OK);
        let (code, _) = send(with_cookie(Method::GET, "/")).await;
        assert_eq!(code, StatusCode::UNAUTHORIZED);
        admin.shutdown.cancel();
        let _ = admin.served.await;
    });
}

#[test]
fn the_feed_asks_only_for_connections_that_moved() {
    use mcp_supervisor::registry::StatusMoved;
    run(|| async {
        let (_upstream, registry, _dir, _file) = setup().await;
        let all = registry.send(StatusMoved::default()).await.unwrap();
        let names: Vec<&str> = all.moved.iter().map(|(s, _)| s.name.as_str()).collect();
        assert_eq!(names, ["a", "b"], "an empty `seen` reports everyone");
        let seen: std::collections::HashMap<String, u64> = all
            .moved
            .iter()
            .map(|(status, generation)| (status.name.clone(), *generation))
            .collect();
        let still = registry
            .send(StatusMoved { seen: seen.clone() })
            .await
            .unwrap();
        assert!(
            still.moved.is_empty() && still.removed.is_empty(),
            "{still:?}"
        );

        let ok = call(&registry, "a", "echo", echo_args()).await;
        assert_eq!(ok.kind(), mcp_supervisor::OutcomeKind::Ok, "{ok:?}");
        let after = registry
            .send(StatusMoved { seen: seen.clone() })
            .await
            .unwrap();
        let moved: Vec<&str> = after.moved.iter().map(|(s, _)| s.name.as_str()).collect();
        assert_eq!(moved, ["a"], "only the connection that was called");
        let (status, generation) = &after.moved[0];
        assert_eq!(status.calls.ok, 1);
        assert!(*generation > seen["a"]);

        let mut gone = seen;
        gone.insert("z".to_owned(), 1);
        let answer = registry.send(StatusMoved { seen: gone }).await.unwrap();
        assert_eq!(answer.removed, ["z"]);
    });
}
