//! Talking to a running process's admin API (`status`, `reset`): where it is,
//! its token, and one small HTTP client on a current-thread runtime.
//!
//! Every request is sent as the admin API requires (docs/CONFIG.md
//! `[admin]`): a POST as `Content-Type: application/json`, and with the
//! bearer token of `[admin] auth` when the `--config` file has one.

use std::{cell::Cell, future::Future, net::SocketAddr, path::Path, time::Duration};

use mcp_supervisor::config::{AdminSettings, BearerToken, Config};
use reqwest::{Method, StatusCode, Url, header};
use serde_json::Value;

use super::serve::EMBEDDED_DEFAULT;
use crate::{cli::AdminTarget, exit::Exit};

/// A local admin API answers at once; anything slower is as good as down.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);

/// Stands in for a `token_env` variable this shell does not set, so the
/// rest of the file still validates (finding the admin API needs no secret).
/// It passes token validation; it is never sent.
const UNSET_VARIABLE: &str = "mcp-supervisor-cli-unset-variable";

/// The admin API of one running process.
#[derive(Debug)]
pub(crate) struct AdminClient {
    /// `http://HOST:PORT/`.
    base: Url,
    /// `[admin] auth` of the `--config` file, sent as `Authorization: Bearer`.
    token: Option<BearerToken>,
    http: reqwest::Client,
}

/// An answer: status code and body (JSON when the API sent JSON).
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) status: StatusCode,
    pub(crate) body: Value,
}

impl Answer {
    /// The `{"error": "…"}` message, or the status line when there is none.
    pub(crate) fn error_message(&self) -> String {
        match self.body["error"].as_str() {
            Some(message) => message.to_owned(),
            None => format!("the admin API answered {}", self.status),
        }
    }
}

impl AdminClient {
    /// The client for `--admin HOST:PORT`, `--config FILE`, or the embedded
    /// default config's address. Bad input is a usage error.
    pub(crate) fn new(target: AdminTarget) -> Result<Self, Exit> {
        let (base, token) = match (target.admin, target.config) {
            (Some(address), _) => (base_url(&address)?, None),
            (None, Some(path)) => {
                let (listen, token) = admin_in(&path)?;
                (base_url(&listen.to_string())?, token)
            }
            (None, None) => (base_url(&default_admin_listen().to_string())?, None),
        };
        let http = reqwest::Client::builder()
            // The admin API is local; an HTTP proxy from the environment must
            // not get in between.
            .no_proxy()
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(REQUEST_TIMEOUT)
            .build()
            .map_err(|error| Exit::Failed(format!("cannot build an HTTP client: {error}")))?;
        Ok(AdminClient { base, token, http })
    }

    /// `http://HOST:PORT/` of the admin API.
    pub(crate) fn base(&self) -> &Url {
        &self.base
    }

    /// The base URL with `segments` appended, each percent-encoded (a
    /// connection name typed by a user may hold anything).
    fn url(&self, segments: &[&str]) -> Url {
        let mut url = self.base.clone();
        // An `http://host:port/` URL always has path segments.
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty().extend(segments);
        }
        url
    }

    /// `method` `path_segments` (each percent-encoded) and its answer.
    /// Unreachable, or an answer that is not JSON, is a failure naming where
    /// it tried.
    pub(crate) async fn request(&self, method: Method, segments: &[&str]) -> Result<Answer, Exit> {
        self.request_with(method, segments, "{}").await
    }

    /// [`AdminClient::request`] with `body` (JSON) as a `POST`'s body.
    pub(crate) async fn request_with(
        &self,
        method: Method,
        segments: &[&str],
        body: &str,
    ) -> Result<Answer, Exit> {
        let url = self.url(segments);
        let mut request = self
            .http
            .request(method.clone(), url.clone())
            .header(header::ACCEPT, "application/json");
        if method == Method::POST {
            // The admin API takes state changes as JSON only (a web page
            // cannot send that cross-site); the body itself is unused.
            request = request
                .header(header::CONTENT_TYPE, "application/json")
                .body(body.to_owned());
        }
        if let Some(token) = &self.token {
            request = request.bearer_auth(token.expose());
        }
        let response = request.send().await.map_err(|error| {
            Exit::Failed(format!(
                "cannot reach the admin API at {} ({}); is `mcp-supervisor serve` running there?",
                self.base.as_str().trim_end_matches('/'),
                root_cause(&error)
            ))
        })?;
        let status = response.status();
        let text = response.text().await.map_err(|error| {
            Exit::Failed(format!(
                "reading the answer of {url} failed: {}",
                root_cause(&error)
            ))
        })?;
        let body = serde_json::from_str(&text).map_err(|_| {
            Exit::Failed(format!(
                "{url} answered {status} with something that is not the admin API's JSON"
            ))
        })?;
        Ok(Answer { status, body })
    }
}

/// Runs `future` on a current-thread runtime (the commands are one request each).
pub(crate) fn block_on<F: Future>(future: F) -> Result<F::Output, Exit> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|error| Exit::Failed(format!("cannot start the async runtime: {error}")))?;
    Ok(runtime.block_on(future))
}

/// `http://{address}/`, where `address` must be `HOST:PORT`.
fn base_url(address: &str) -> Result<Url, Exit> {
    let usage = || {
        Exit::Usage(format!(
            "--admin expects HOST:PORT, e.g. 127.0.0.1:7301 (got '{address}')"
        ))
    };
    if address.contains('/') || !address.contains(':') {
        return Err(usage());
    }
    let url = Url::parse(&format!("http://{address}/")).map_err(|_| usage())?;
    let plain = url.username().is_empty()
        && url.password().is_none()
        && url.path() == "/"
        && url.query().is_none()
        && url.fragment().is_none();
    if !plain || url.host().is_none() {
        return Err(usage());
    }
    Ok(url)
}

/// `admin.listen` and the `[admin] auth` token of the config at `path`. The
/// whole file is validated (an invalid one is a usage error), but `token_env`
/// variables need not be set: finding the admin API needs no secret, and the
/// shell running `status` is often not the service's. The admin token's own
/// variable must be set when there is one, since every request needs it.
fn admin_in(path: &Path) -> Result<(SocketAddr, Option<BearerToken>), Exit> {
    let text = std::fs::read_to_string(path).map_err(|error| {
        Exit::Usage(format!(
            "{}: cannot read config file: {error}",
            path.display()
        ))
    })?;
    let unset = Cell::new(false);
    let config = Config::from_toml_str(&text, path, &|name| {
        Some(std::env::var(name).unwrap_or_else(|_| {
            unset.set(true);
            UNSET_VARIABLE.to_owned()
        }))
    })
    .map_err(|error| Exit::Usage(error.to_string()))?;
    let token = config.admin.auth;
    if unset.get() && token.as_ref().is_some_and(|t| t.expose() == UNSET_VARIABLE) {
        return Err(Exit::Usage(format!(
            "{}: admin.auth.token_env: the variable holding the admin API's token is not set \
             in this environment; set it to reach the admin API",
            path.display()
        )));
    }
    Ok((config.admin.listen, token))
}

/// The embedded default config's `admin.listen` (what `serve` with no
/// `--config` listens on).
fn default_admin_listen() -> std::net::SocketAddr {
    Config::from_toml_str(
        EMBEDDED_DEFAULT,
        Path::new("<embedded config/default.toml>"),
        &|name| std::env::var(name).ok(),
    )
    .map(|config| config.admin.listen)
    .unwrap_or_else(|_| AdminSettings::default().listen)
}

/// The innermost cause (`Connection refused (os error 111)`), which is what a
/// user needs; reqwest's outer layers only repeat the URL.
fn root_cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = error;
    while let Some(source) = cause.source() {
        cause = source;
    }
    cause.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(admin: Option<&str>, config: Option<&Path>) -> AdminTarget {
        AdminTarget {
            admin: admin.map(str::to_owned),
            config: config.map(Path::to_path_buf),
        }
    }

    #[test]
    fn the_default_is_the_embedded_configs_admin_address() {
        let client = AdminClient::new(target(None, None)).unwrap();
        assert_eq!(client.base.as_str(), "http://127.0.0.1:7301/");
    }

    #[test]
    fn admin_takes_host_and_port_only() {
        for good in ["127.0.0.1:9", "localhost:7301", "[::1]:7301"] {
            let client = AdminClient::new(target(Some(good), None)).unwrap();
            assert_eq!(client.base.as_str(), format!("http://{good}/"));
        }
        for bad in [
            "127.0.0.1",
            "http://127.0.0.1:7301",
            "a:b:c",
            "host:7301/x",
            "user@host:1",
            ":7301",
            "host:99999",
        ] {
            let error = AdminClient::new(target(Some(bad), None)).unwrap_err();
            assert!(
                matches!(error, Exit::Usage(ref m) if m.contains("HOST:PORT")),
                "{bad}: {error:?}"
            );
        }
    }

    #[test]
    fn config_gives_its_admin_listen_without_needing_token_variables() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        std::fs::write(
            &path,
            "[admin]\nlisten = \"127.0.0.1:7555\"\n\n[connections.a]\ntransport = \"http\"\n\
             url = \"http://127.0.0.1:1/mcp\"\nauth = { kind = \"bearer\", token_env = \"MCP_SUPERVISOR_TEST_UNSET_VARIABLE\" }\n",
        )
        .unwrap();
        let client = AdminClient::new(target(None, Some(&path))).unwrap();
        assert_eq!(client.base.as_str(), "http://127.0.0.1:7555/");

        std::fs::write(&path, "[admin]\nlisten = 7\n").unwrap();
        let error = AdminClient::new(target(None, Some(&path))).unwrap_err();
        assert!(
            matches!(error, Exit::Usage(ref m) if m.contains("admin.listen")),
            "{error:?}"
        );

        let missing = dir.path().join("missing.toml");
        let error = AdminClient::new(target(None, Some(&missing))).unwrap_err();
        assert!(
            matches!(error, Exit::Usage(ref m) if m.contains("missing.toml")),
            "{error:?}"
        );
    }

    #[test]
    fn config_gives_the_admin_token_and_needs_its_variable() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        std::fs::write(
            &path,
            "[admin]\nlisten = \"127.0.0.1:7555\"\nauth = { kind = \"bearer\", token = \"adm1n\" }\n",
        )
        .unwrap();
        let client = AdminClient::new(target(None, Some(&path))).unwrap();
        assert_eq!(
            client.token.as_ref().map(BearerToken::expose),
            Some("adm1n")
        );
        assert!(!format!("{client:?}").contains("adm1n"));

        std::fs::write(
            &path,
            "[admin]\nauth = { kind = \"bearer\", token_env = \"MCP_SUPERVISOR_TEST_UNSET_ADMIN\" }\n",
        )
        .unwrap();
        let error = AdminClient::new(target(None, Some(&path))).unwrap_err();
        assert!(
            matches!(error, Exit::Usage(ref m) if m.contains("admin.auth.token_env") && m.contains("not set")),
            "{error:?}"
        );

        // `--admin` alone sends no token.
        let client = AdminClient::new(target(Some("127.0.0.1:9"), None)).unwrap();
        assert!(client.token.is_none());
    }

    #[test]
    fn segments_are_percent_encoded() {
        let client = AdminClient::new(target(Some("127.0.0.1:9"), None)).unwrap();
        let url = client.url(&["connections", "a/b c", "reset"]);
        assert_eq!(
            url.as_str(),
            "http://127.0.0.1:9/connections/a%2Fb%20c/reset"
        );
    }
}
