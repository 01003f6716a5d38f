//! Who may see the dashboard (docs/DASHBOARD.md, "Security";
//! docs/DECISIONS.md #102).
//!
//! A browser cannot be handed the admin bearer token, so with `[admin] auth`
//! the bearer mints a **one-time login link** (`POST
//! /dashboard/login-links`: `mcp-supervisor dashboard`, or the line `serve`
//! prints), and opening it sets a **session cookie**: HttpOnly,
//! `SameSite=Strict`, named after the port (cookies ignore ports). A cookie
//! counts only on the dashboard's own routes, only for requests the browser
//! marks same-origin, and a state change also needs the session's CSRF token
//! in `X-CSRF-Token`. Without `auth`, the dashboard answers loopback peers
//! only, and a browser's state change needs the process's CSRF token.
//!
//! Tokens are 32 random bytes; only their SHA-256 is kept. None is ever
//! logged.

use std::{
    collections::HashMap,
    sync::{Mutex, MutexGuard},
    time::Duration,
};

use axum::http::{HeaderMap, HeaderValue, Method, header};
use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tokio::time::Instant;

/// How long a login link may wait to be opened.
pub(crate) const LINK_LIFETIME: Duration = Duration::from_secs(5 * 60);
/// How long a dashboard session lasts.
pub(crate) const SESSION_LIFETIME: Duration = Duration::from_secs(8 * 3600);
/// Login links waiting to be opened; minting more forgets the oldest.
const MAX_LINKS: usize = 16;
/// Live sessions; a new login forgets the oldest.
const MAX_SESSIONS: usize = 64;
/// The header a state change carries its CSRF token in.
pub(crate) const CSRF_HEADER: &str = "x-csrf-token";

type Digested = [u8; 32];

fn random_token() -> String {
    URL_SAFE_NO_PAD.encode(rand::random::<[u8; 32]>())
}

fn digest(token: &str) -> Digested {
    Sha256::digest(token.as_bytes()).into()
}

fn locked<T>(lock: &Mutex<T>) -> MutexGuard<'_, T> {
    lock.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Keeps at most `cap` entries: drops expired ones, then the soonest to expire.
fn make_room<V>(map: &mut HashMap<Digested, V>, cap: usize, expiry: impl Fn(&V) -> Instant) {
    let now = Instant::now();
    map.retain(|_, value| expiry(value) > now);
    while map.len() >= cap {
        let Some(oldest) = map.iter().min_by_key(|(_, v)| expiry(v)).map(|(k, _)| *k) else {
            break;
        };
        map.remove(&oldest);
    }
}

/// One-time login links (hashed), each good for 5 minutes.
#[derive(Debug, Default)]
pub struct LoginLinks {
    waiting: Mutex<HashMap<Digested, Instant>>,
}

impl LoginLinks {
    /// A new link's token (the path to open is `/login?token=…`).
    pub fn mint(&self) -> String {
        let token = random_token();
        let mut waiting = locked(&self.waiting);
        make_room(&mut waiting, MAX_LINKS, |expires| *expires);
        waiting.insert(digest(&token), Instant::now() + LINK_LIFETIME);
        token
    }

    /// Uses up `token`: true if it was minted here, not used yet and not expired.
    fn redeem(&self, token: &str) -> bool {
        locked(&self.waiting)
            .remove(&digest(token))
            .is_some_and(|expires| expires > Instant::now())
    }
}

/// A logged-in browser.
#[derive(Debug, Clone)]
struct Session {
    csrf: String,
    expires: Instant,
}

/// Dashboard sessions, by the SHA-256 of their cookie.
#[derive(Debug, Default)]
pub(crate) struct Sessions {
    live: Mutex<HashMap<Digested, Session>>,
}

/// A session just opened: the cookie's value (sent once, never kept).
#[derive(Debug)]
pub(crate) struct Opened {
    pub(crate) cookie: String,
}

impl Sessions {
    /// Trades a login link's `token` for a session.
    pub(crate) fn open(&self, links: &LoginLinks, token: &str) -> Option<Opened> {
        if !links.redeem(token) {
            return None;
        }
        let cookie = random_token();
        let mut live = locked(&self.live);
        make_room(&mut live, MAX_SESSIONS, |session| session.expires);
        live.insert(
            digest(&cookie),
            Session {
                csrf: random_token(),
                expires: Instant::now() + SESSION_LIFETIME,
            },
        );
        Some(Opened { cookie })
    }

    /// The CSRF token of the live session `cookie` names.
    fn csrf_of(&self, cookie: &str) -> Option<String> {
        let live = locked(&self.live);
        let session = live.get(&digest(cookie))?;
        (session.expires > Instant::now()).then(|| session.csrf.clone())
    }

    pub(crate) fn close(&self, cookie: &str) {
        locked(&self.live).remove(&digest(cookie));
    }
}

/// The session cookie's name on `port`: cookies ignore ports, so two
/// supervisors on one host must not overwrite each other's.
pub(crate) fn cookie_name(port: u16) -> String {
    format!("mcp_supervisor_{port}")
}

/// `Set-Cookie` for a new session (not `Secure`: the admin listener speaks
/// plain HTTP, where a browser would drop a `Secure` cookie).
pub(crate) fn set_cookie(port: u16, value: &str) -> String {
    format!(
        "{}={value}; HttpOnly; SameSite=Strict; Path=/; Max-Age={}",
        cookie_name(port),
        SESSION_LIFETIME.as_secs()
    )
}

/// `Set-Cookie` that ends the session in the browser.
pub(crate) fn clear_cookie(port: u16) -> String {
    format!(
        "{}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0",
        cookie_name(port)
    )
}

/// The port the browser addressed (`Host`), which names the cookie.
pub(crate) fn port_of(headers: &HeaderMap) -> u16 {
    headers
        .get(header::HOST)
        .and_then(|host| host.to_str().ok())
        .and_then(|host| host.rsplit_once(':'))
        .and_then(|(_, port)| port.parse().ok())
        .unwrap_or(80)
}

/// The value of our session cookie, if the request has exactly one.
pub(crate) fn cookie_of(headers: &HeaderMap) -> Option<String> {
    let name = cookie_name(port_of(headers));
    let mut found = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .filter(|(key, _)| *key == name)
        .map(|(_, value)| value.to_owned());
    match (found.next(), found.next()) {
        (Some(value), None) if !value.is_empty() => Some(value),
        _ => None,
    }
}

/// Why a browser's request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Refusal {
    #[error("the dashboard answers only same-origin requests")]
    CrossOrigin,
    #[error("missing or wrong CSRF token (X-CSRF-Token)")]
    Csrf,
}

/// The rules for a request a browser sent with our cookie (or, without
/// `auth`, any request a browser sent): its `Origin`, if any, must be
/// exactly this listener's (`http://` + `Host`: the `Host` allowlist lets
/// any port of a name through, a page on another port is another origin);
/// its `Sec-Fetch-Site`, if any, must be `same-origin` or `none` (typed or
/// bookmarked); a state change must carry `csrf`.
pub(crate) fn same_origin(method: &Method, headers: &HeaderMap, csrf: &str) -> Result<(), Refusal> {
    // Two values of a header a browser sends once are not a browser's.
    let one = |name: &str| -> Result<Option<&[u8]>, Refusal> {
        let mut values = headers.get_all(name).iter();
        match (values.next(), values.next()) {
            (value, None) => Ok(value.map(HeaderValue::as_bytes)),
            _ => Err(Refusal::CrossOrigin),
        }
    };
    if let Some(origin) = one(header::ORIGIN.as_str())? {
        let host = one(header::HOST.as_str())?.unwrap_or_default();
        if origin.strip_prefix(b"http://") != Some(host) {
            return Err(Refusal::CrossOrigin);
        }
    }
    if let Some(site) = one("sec-fetch-site")?
        && !matches!(site, b"same-origin" | b"none")
    {
        return Err(Refusal::CrossOrigin);
    }
    if method != Method::GET && method != Method::HEAD {
        let matches =
            one(CSRF_HEADER)?.is_some_and(|given| bool::from(given.ct_eq(csrf.as_bytes())));
        if !matches {
            return Err(Refusal::Csrf);
        }
    }
    Ok(())
}

/// Whether a browser sent the request: browsers mark every request they
/// send with `Sec-Fetch-Site`, which a page's script cannot set or remove;
/// a CLI does not send it.
pub(crate) fn from_browser(headers: &HeaderMap) -> bool {
    headers.contains_key("sec-fetch-site")
}

/// What a request's cookie proves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Cookie {
    /// A live session, with its CSRF token.
    Session {
        csrf: String,
    },
    None,
}

impl Sessions {
    pub(crate) fn check(&self, headers: &HeaderMap) -> Cookie {
        match cookie_of(headers).and_then(|cookie| self.csrf_of(&cookie)) {
            Some(csrf) => Cookie::Session { csrf },
            None => Cookie::None,
        }
    }
}

/// The process's CSRF token when there is no `auth` (and so no session).
pub(crate) fn process_csrf() -> String {
    random_token()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[tokio::test(start_paused = true)]
    async fn a_login_link_works_once_and_only_in_time() {
        let (links, sessions) = (LoginLinks::default(), Sessions::default());
        let token = links.mint();
        let opened = sessions.open(&links, &token).expect("a fresh link opens");
        assert!(sessions.open(&links, &token).is_none(), "used twice");
        let late = links.mint();
        tokio::time::advance(LINK_LIFETIME + Duration::from_secs(1)).await;
        assert!(sessions.open(&links, &late).is_none(), "expired");
        assert!(sessions.open(&links, "made-up").is_none());
        // The session outlives the link, and ends after its own lifetime.
        let cookie = headers(&[("host", "127.0.0.1:9000")]);
        let mut with = cookie.clone();
        with.append(
            header::COOKIE,
            HeaderValue::from_str(&format!("mcp_supervisor_9000={}", opened.cookie)).unwrap(),
        );
        assert!(matches!(sessions.check(&with), Cookie::Session { .. }));
        assert_eq!(sessions.check(&cookie), Cookie::None);
        tokio::time::advance(SESSION_LIFETIME).await;
        assert_eq!(sessions.check(&with), Cookie::None);
    }

    #[tokio::test(start_paused = true)]
    async fn links_and_sessions_are_capped() {
        let (links, sessions) = (LoginLinks::default(), Sessions::default());
        let first = links.mint();
        for _ in 0..MAX_LINKS {
            tokio::time::advance(Duration::from_millis(1)).await;
            links.mint();
        }
        assert!(
            sessions.open(&links, &first).is_none(),
            "the oldest link is forgotten"
        );
        assert!(locked(&links.waiting).len() <= MAX_LINKS);
        for _ in 0..MAX_SESSIONS + 5 {
            tokio::time::advance(Duration::from_millis(1)).await;
            let token = links.mint();
            sessions.open(&links, &token).unwrap();
        }
        assert_eq!(locked(&sessions.live).len(), MAX_SESSIONS);
    }

    #[test]
    fn a_cookie_for_another_port_is_not_ours() {
        let sessions = Sessions::default();
        let links = LoginLinks::default();
        let opened = sessions.open(&links, &links.mint()).unwrap();
        let other = headers(&[
            ("host", "127.0.0.1:9001"),
            ("cookie", &format!("mcp_supervisor_9000={}", opened.cookie)),
        ]);
        assert_eq!(sessions.check(&other), Cookie::None);
        let ours = headers(&[
            ("host", "127.0.0.1:9000"),
            (
                "cookie",
                &format!("a=b; mcp_supervisor_9000={}; c=d", opened.cookie),
            ),
        ]);
        assert!(matches!(sessions.check(&ours), Cookie::Session { .. }));
    }

    #[test]
    fn browser_requests_must_be_same_origin_and_state_changes_carry_the_token() {
        let get = Method::GET;
        let post = Method::POST;
        let host = ("host", "127.0.0.1:9000");
        let ok = |m: &Method, h: &[(&'static str, &str)]| same_origin(m, &headers(h), "tok");
        assert_eq!(ok(&get, &[host]), Ok(()));
        assert_eq!(ok(&get, &[host, ("sec-fetch-site", "same-origin")]), Ok(()));
        assert_eq!(ok(&get, &[host, ("sec-fetch-site", "none")]), Ok(()));
        for site in ["same-site", "cross-site"] {
            assert_eq!(
                ok(&get, &[host, ("sec-fetch-site", site)]),
                Err(Refusal::CrossOrigin)
            );
        }
        // Same host name, another port: another origin, though the Host
        // allowlist accepts it.
        assert_eq!(
            ok(
                &post,
                &[
                    host,
                    ("origin", "http://127.0.0.1:9999"),
                    ("x-csrf-token", "tok")
                ]
            ),
            Err(Refusal::CrossOrigin)
        );
        let same = ("origin", "http://127.0.0.1:9000");
        assert_eq!(ok(&post, &[host, same]), Err(Refusal::Csrf));
        assert_eq!(
            ok(&post, &[host, same, ("x-csrf-token", "tak")]),
            Err(Refusal::Csrf)
        );
        assert_eq!(ok(&post, &[host, same, ("x-csrf-token", "tok")]), Ok(()));
    }

    #[test]
    fn a_header_sent_twice_is_refused() {
        let host = ("host", "127.0.0.1:9000");
        let same = ("origin", "http://127.0.0.1:9000");
        for extra in [
            ("origin", "http://127.0.0.1:9999"),
            ("sec-fetch-site", "cross-site"),
            ("x-csrf-token", "tok"),
        ] {
            let twice = headers(&[
                host,
                same,
                ("sec-fetch-site", "same-origin"),
                ("x-csrf-token", "tok"),
                extra,
            ]);
            assert_eq!(
                same_origin(&Method::POST, &twice, "tok"),
                Err(Refusal::CrossOrigin),
                "{extra:?}"
            );
        }
    }

    #[test]
    fn the_cookie_is_http_only_strict_and_named_after_the_port() {
        let cookie = set_cookie(9000, "v");
        assert!(cookie.starts_with("mcp_supervisor_9000=v;"), "{cookie}");
        for part in ["HttpOnly", "SameSite=Strict", "Path=/"] {
            assert!(cookie.contains(part), "{cookie}");
        }
        assert!(clear_cookie(9000).contains("Max-Age=0"));
    }
}
