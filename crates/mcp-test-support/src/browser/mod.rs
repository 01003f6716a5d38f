//! A real headless Chromium, driven over W3C WebDriver, for end-to-end
//! tests of web pages (the supervisor's dashboard).
//!
//! [`Browser::start`] runs Debian's `chromedriver` on a free loopback port
//! and opens one session of `chromium --headless=new` with a throwaway
//! profile; commands are plain HTTP requests to the driver. Before any
//! script of a page runs, a hook records uncaught errors, unhandled
//! rejections, Content-Security-Policy violations and `console.error`
//! calls, which [`Browser::console_errors`] returns together with the
//! browser's own log.
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use std::time::Duration;
//! use mcp_test_support::browser::{Browser, Key, serve_page};
//!
//! let page = serve_page("<button onclick=\"this.textContent='hi'\">go</button>".into()).await?;
//! let browser = Browser::start().await?;
//! browser.goto(&page.url()).await?;
//! browser.press_keys(&format!("{}{}", Key::Tab, Key::Enter)).await?;
//! browser.wait_for("document.querySelector('button').textContent === 'hi'", Duration::from_secs(5)).await?;
//! assert_eq!(browser.console_errors().await?, Vec::<String>::new());
//! browser.quit().await?;
//! # Ok(()) }
//! ```
//!
//! Why a client of our own rather than `fantoccini` or `chromiumoxide`:
//! WebDriver is one small standard (a dozen commands cover what the tests
//! do) over the HTTP client the workspace already has, so it costs no new
//! crate; and it drives the `chromedriver` Debian ships with its
//! `chromium`, always the matching version, where a CDP client pins a
//! protocol revision of its own. The few things WebDriver lacks (a hook on
//! every new document, colour-scheme emulation) go through chromedriver's
//! CDP pass-through ([`Browser::cdp`]).
//!
//! Every process is ended when the [`Browser`] is dropped, even on a panic
//! (see `driver`); [`Browser::quit`] first closes the session politely.
//! Linux only: the browser's processes are found through `/proc`.
//!
//! # Layout
//!
//! - `driver`: finding the programs, chromedriver's process and the sweep
//!   of the browser's processes.
//! - `wire`: one command, one HTTP request; the answer envelope and
//!   [`WebDriverError`].
//! - `element`: [`Element`] and [`Key`].
//! - `page`: [`serve_page`], a page on an origin of the test's own.
//! - `hook.js`: the error recorder every document gets.

mod driver;
mod element;
mod page;
mod wire;

use std::{
    path::Path,
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};
use base64::Engine as _;
use serde::Deserialize;
use serde_json::{Value, json};

pub use element::{Element, Key};
pub use page::{ServedPage, serve_page, serve_page_on};
pub use wire::WebDriverError;

use driver::{Binaries, Processes};
use wire::Wire;

/// The recorder of page errors installed into every new document.
const HOOK: &str = include_str!("hook.js");

/// How often [`Browser::wait_for`] evaluates its expression.
const POLL_EVERY: Duration = Duration::from_millis(50);

/// Chromium's flags, the profile's aside: headless without a sandbox (CI
/// runs as root in a container), nothing that reaches the network on its
/// own, nothing that waits on a first-run dialog, `/tmp` rather than a
/// small `/dev/shm`, and a fixed window size so screenshots compare.
const CHROMIUM_ARGS: [&str; 11] = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1280,900",
    "--no-proxy-server",
];

/// One headless Chromium with one WebDriver session. Dropping it ends the
/// browser and chromedriver (see [`quit`](Self::quit) for the polite way).
#[derive(Debug)]
pub struct Browser {
    wire: Wire,
    /// Declared after `wire`, dropped last: ends the processes.
    processes: Processes,
}

/// A cookie as the browser holds it (WebDriver's cookie object).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Cookie {
    pub name: String,
    pub value: String,
    pub path: Option<String>,
    pub domain: Option<String>,
    #[serde(default)]
    pub secure: bool,
    #[serde(default)]
    pub http_only: bool,
    /// `Strict`, `Lax` or `None`.
    pub same_site: Option<String>,
    /// Seconds since the epoch; `None` for a session cookie.
    pub expiry: Option<u64>,
}

impl Browser {
    /// Starts chromedriver and a headless Chromium session. Fails, naming
    /// the Debian packages to install, when either program is missing
    /// (`$CHROMEDRIVER` and `$CHROMIUM` override where they are looked for).
    pub async fn start() -> anyhow::Result<Self> {
        let binaries = Binaries::locate()?;
        let (processes, mut wire) = Processes::start(&binaries.chromedriver).await?;
        let capabilities = capabilities(&binaries.chromium, processes.profile());
        let id = wire.new_session(capabilities).await.with_context(|| {
            format!(
                "starting {} through {}",
                binaries.chromium.display(),
                binaries.chromedriver.display()
            )
        })?;
        wire.bind(&id);
        let browser = Self { wire, processes };
        browser
            .cdp(
                "Page.addScriptToEvaluateOnNewDocument",
                json!({ "source": HOOK }),
            )
            .await
            .context("installing the page error hook")?;
        Ok(browser)
    }

    /// Closes the session (chromedriver closes the browser), then ends
    /// whatever is left as dropping does. An error says the session could
    /// not be closed; the processes are ended all the same.
    pub async fn quit(self) -> anyhow::Result<()> {
        self.wire.delete("").await.map(drop)
    }

    /// The browser's profile directory (`--user-data-dir`), which every
    /// process of this browser has on its command line.
    pub fn profile_dir(&self) -> &Path {
        self.processes.profile()
    }

    /// Loads `url` and waits for its `load` event.
    pub async fn goto(&self, url: &str) -> anyhow::Result<()> {
        self.wire.post("/url", json!({ "url": url })).await?;
        Ok(())
    }

    /// The URL of the current page.
    pub async fn current_url(&self) -> anyhow::Result<String> {
        Ok(string(self.wire.get("/url").await?))
    }

    /// The current page's `document.title`.
    pub async fn title(&self) -> anyhow::Result<String> {
        Ok(string(self.wire.get("/title").await?))
    }

    /// The current DOM, serialized (not the bytes the server sent).
    pub async fn source(&self) -> anyhow::Result<String> {
        Ok(string(self.wire.get("/source").await?))
    }

    /// Runs `script` as the body of a function (`return` gives the value;
    /// `arguments[i]` are `args`, [`Element::as_arg`] for elements).
    pub async fn execute(&self, script: &str, args: Vec<Value>) -> anyhow::Result<Value> {
        let body = json!({ "script": script, "args": args });
        self.wire.post("/execute/sync", body).await
    }

    /// Like [`execute`](Self::execute), but the value is what the script
    /// passes to its last argument, a callback (within 30 s).
    pub async fn execute_async(&self, script: &str, args: Vec<Value>) -> anyhow::Result<Value> {
        let body = json!({ "script": script, "args": args });
        self.wire.post("/execute/async", body).await
    }

    /// The first element matching the CSS selector; `no such element`
    /// ([`WebDriverError`]) when none does.
    pub async fn find(&self, css: &str) -> anyhow::Result<Element> {
        let found = self.wire.post("/element", by_css(css)).await?;
        Element::from_value(&self.wire, &found)
    }

    /// Every element matching the CSS selector, in document order.
    pub async fn find_all(&self, css: &str) -> anyhow::Result<Vec<Element>> {
        let found = self.wire.post("/elements", by_css(css)).await?;
        found
            .as_array()
            .into_iter()
            .flatten()
            .map(|value| Element::from_value(&self.wire, value))
            .collect()
    }

    /// Clicks the first element matching `css`.
    pub async fn click(&self, css: &str) -> anyhow::Result<()> {
        self.find(css).await?.click().await
    }

    /// The rendered text of the first element matching `css`.
    pub async fn text(&self, css: &str) -> anyhow::Result<String> {
        self.find(css).await?.text().await
    }

    /// Types `text` into the first element matching `css`.
    pub async fn send_keys(&self, css: &str, text: &str) -> anyhow::Result<()> {
        self.find(css).await?.send_keys(text).await
    }

    /// Presses and releases each character of `keys` in turn, as a
    /// keyboard would, on whatever has the focus (`Tab` moves it):
    /// `format!("{}{}", Key::Tab, Key::Enter)`.
    pub async fn press_keys(&self, keys: &str) -> anyhow::Result<()> {
        let keys: Vec<char> = keys.chars().collect();
        self.perform(element::key_actions(keys.chunks(1))).await
    }

    /// Presses `keys` together, e.g. `[Key::Shift, Key::Tab]`, and
    /// releases them.
    pub async fn press_chord(&self, keys: &[Key]) -> anyhow::Result<()> {
        let keys: Vec<char> = keys.iter().map(|key| key.code()).collect();
        self.perform(element::key_actions([keys.as_slice()])).await
    }

    async fn perform(&self, actions: Value) -> anyhow::Result<()> {
        self.wire.post("/actions", actions).await?;
        Ok(())
    }

    /// Evaluates the JavaScript expression `expression` every 50 ms until
    /// it is truthy, and returns its value; an expression that throws
    /// counts as not yet. After `within`, an error naming the expression
    /// and its last value (or what it threw).
    pub async fn wait_for(&self, expression: &str, within: Duration) -> anyhow::Result<Value> {
        let script = format!(
            "try {{ const value = ({expression}); \
             return [!!value, value === undefined ? null : value]; }} \
             catch (error) {{ return [false, 'threw ' + error]; }}"
        );
        let deadline = Instant::now() + within;
        loop {
            let mut answer = self
                .execute(&script, Vec::new())
                .await
                .with_context(|| format!("evaluating `{expression}`"))?;
            let value = answer[1].take();
            if answer[0] == Value::Bool(true) {
                return Ok(value);
            }
            if Instant::now() >= deadline {
                bail!("`{expression}` was not truthy within {within:?}; its last value: {value}");
            }
            tokio::time::sleep(POLL_EVERY).await;
        }
    }

    /// Saves a PNG of the viewport to `path`, creating its directories.
    pub async fn screenshot(&self, path: impl AsRef<Path>) -> anyhow::Result<()> {
        let path = path.as_ref();
        let encoded = self.wire.get("/screenshot").await?;
        let png = base64::engine::general_purpose::STANDARD
            .decode(encoded.as_str().unwrap_or_default())
            .context("decoding the screenshot")?;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        std::fs::write(path, png).with_context(|| format!("writing {}", path.display()))
    }

    /// What went wrong since the last call: the browser log's `SEVERE`
    /// entries (`log: …`: uncaught errors, failed loads, CSP refusals,
    /// `console.error`), then what the hook recorded on the current page
    /// (`page: …`). Both are emptied by reading, so a `console.error` seen
    /// now is listed twice (once from each) and never again. The hook's
    /// record of a page navigated away from is lost; the log's is not.
    pub async fn console_errors(&self) -> anyhow::Result<Vec<String>> {
        let logged = self
            .wire
            .post("/se/log", json!({ "type": "browser" }))
            .await?;
        let recorded = self
            .execute("return (window.__mcpErrors || []).splice(0);", Vec::new())
            .await?;
        let severe = logged
            .as_array()
            .into_iter()
            .flatten()
            .filter(|entry| entry["level"] == "SEVERE")
            .map(|entry| format!("log: {}", string(entry["message"].clone())));
        let recorded = recorded
            .as_array()
            .into_iter()
            .flatten()
            .map(|entry| format!("page: {}", string(entry.clone())));
        Ok(severe.chain(recorded).collect())
    }

    /// Emulates `prefers-color-scheme: dark` (or `light`) for the page.
    pub async fn set_color_scheme(&self, dark: bool) -> anyhow::Result<()> {
        let scheme = if dark { "dark" } else { "light" };
        let features = json!([{ "name": "prefers-color-scheme", "value": scheme }]);
        self.cdp(
            "Emulation.setEmulatedMedia",
            json!({ "features": features }),
        )
        .await
        .map(drop)
    }

    /// The cookies visible to the current page.
    pub async fn cookies(&self) -> anyhow::Result<Vec<Cookie>> {
        let cookies = self.wire.get("/cookie").await?;
        serde_json::from_value(cookies.clone())
            .with_context(|| format!("reading the cookies: {cookies}"))
    }

    /// Sends a Chrome DevTools Protocol command to the current page
    /// through chromedriver, for what WebDriver has no command for.
    pub async fn cdp(&self, command: &str, params: Value) -> anyhow::Result<Value> {
        let body = json!({ "cmd": command, "params": params });
        self.wire.post("/goog/cdp/execute", body).await
    }
}

fn capabilities(chromium: &Path, profile: &Path) -> Value {
    let mut args: Vec<String> = CHROMIUM_ARGS.iter().map(|&arg| arg.to_owned()).collect();
    args.push(format!("--user-data-dir={}", profile.display()));
    json!({
        "alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": { "binary": chromium, "args": args },
            "goog:loggingPrefs": { "browser": "ALL" },
            "timeouts": { "script": 30_000, "pageLoad": 30_000, "implicit": 0 },
        }
    })
}

fn by_css(css: &str) -> Value {
    json!({ "using": "css selector", "value": css })
}

/// A string value as is, anything else as JSON.
fn string(value: Value) -> String {
    match value {
        Value::String(text) => text,
        other => other.to_string(),
    }
}
