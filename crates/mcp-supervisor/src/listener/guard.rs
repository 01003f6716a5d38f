//! Request checks both HTTP servers share: the bearer token, the JSON
//! content type, and the `Host`/`Origin` allowlist.
//!
//! The admin API runs [`AllowedHosts::check`] itself; on the gateway rmcp
//! checks `Host` and `Origin`, given the same list and
//! [`AllowedHosts::origins`], so both ports accept the same requests.

use axum::{
    http::{HeaderMap, HeaderValue, StatusCode, Uri, header},
    response::{IntoResponse, Response},
};
use subtle::ConstantTimeEq;

use crate::config::BearerToken;

/// Whether `headers` carry `Authorization: Bearer <token>` with our token.
///
/// The scheme is matched case-insensitively (RFC 9110 §11.1: `bearer`,
/// `BEARER`, …); the token is compared in constant time, so the time taken
/// does not reveal how many leading bytes were right. Two `Authorization`
/// headers are ambiguous and match nothing, whatever they hold.
pub(crate) fn bearer_matches(headers: &HeaderMap, token: &BearerToken) -> bool {
    presented_bearer(headers)
        .is_some_and(|presented| presented.as_bytes().ct_eq(token.expose().as_bytes()).into())
}

/// The credential of a request's one `Authorization: Bearer` header;
/// `None` without one, with two, or with another scheme.
pub(crate) fn presented_bearer(headers: &HeaderMap) -> Option<&str> {
    let mut values = headers.get_all(header::AUTHORIZATION).iter();
    let (Some(value), None) = (values.next(), values.next()) else {
        return None;
    };
    value.to_str().ok().and_then(bearer_credentials)
}

/// The token of `Bearer <token>`: the scheme, one or more spaces, the token
/// (RFC 9110 §11.4). `None` for another scheme or no token.
fn bearer_credentials(value: &str) -> Option<&str> {
    let (scheme, rest) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let token = rest.trim_start_matches(' ');
    (!token.is_empty()).then_some(token)
}

/// `401` with a `WWW-Authenticate: Bearer` challenge and `body`.
pub(crate) fn unauthorized(body: impl IntoResponse) -> Response {
    let mut response = (StatusCode::UNAUTHORIZED, body).into_response();
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"mcp-supervisor\""),
    );
    response
}

/// Whether the request body is declared `application/json` (parameters such
/// as `charset` allowed). A web page cannot send that to another site
/// without a CORS preflight, which our servers never approve.
pub(crate) fn is_json(headers: &HeaderMap) -> bool {
    const JSON: &[u8] = b"application/json";
    headers.get(header::CONTENT_TYPE).is_some_and(|value| {
        // The usual value, compared whole first.
        value.as_bytes() == JSON
            || value
                .to_str()
                .is_ok_and(|value| essence(value.as_bytes()).eq_ignore_ascii_case(JSON))
    })
}

/// Whether `Accept` names every one of the media types `media` (parameters
/// allowed; a wildcard does not count, as for rmcp), read once.
pub(crate) fn accepts<const N: usize>(headers: &HeaderMap, media: [&str; N]) -> bool {
    let mut named = [false; N];
    for listed in headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.as_bytes().split(|&byte| byte == b','))
    {
        let listed = essence(listed);
        for (wanted, named) in media.iter().zip(&mut named) {
            *named |= listed.eq_ignore_ascii_case(wanted.as_bytes());
        }
        if named.iter().all(|named| *named) {
            return true;
        }
    }
    false
}

/// A media type without its parameters: `application/json` of
/// `application/json; charset=utf-8`.
///
/// Read as bytes: a header value that is text holds visible ASCII, spaces
/// and tabs only, so ASCII trimming is all the trimming there is.
fn essence(media: &[u8]) -> &[u8] {
    let end = memchr::memchr(b';', media).unwrap_or(media.len());
    media[..end].trim_ascii()
}

/// A `Host` allowlist entry: a host, and a port when the entry names one.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Authority {
    /// Lowercase, IPv6 addresses without brackets.
    host: String,
    /// `None` matches any port.
    port: Option<u16>,
}

impl Authority {
    fn parse(text: &str) -> Option<Authority> {
        let text = text.trim();
        if text.is_empty() {
            return None;
        }
        // A bare IPv6 address (`::1`) is not an authority; take it whole.
        Some(match text.parse::<http::uri::Authority>() {
            Ok(authority) => Authority {
                host: normalize_host(authority.host()),
                port: authority.port_u16(),
            },
            Err(_) => Authority {
                host: normalize_host(text),
                port: None,
            },
        })
    }

    /// `host` without brackets, in any case.
    fn allows(&self, host: &str, port: Option<u16>) -> bool {
        self.host.eq_ignore_ascii_case(host)
            && self.port.is_none_or(|allowed| port == Some(allowed))
    }

    /// `host` as written in a URL: IPv6 addresses in brackets.
    fn url_host(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        }
    }
}

fn normalize_host(host: &str) -> String {
    bare_host(host).to_ascii_lowercase()
}

/// `value` as a `Host` of a name or IPv4 address (letters, digits, `.`,
/// `-`) and optionally a port of one to five digits that fits a `u16`:
/// the host and port `http`'s `Authority` reads from it. `None` for any
/// other `Host` (an IPv6 address, user info, an empty port, anything else),
/// which is read as an authority.
fn plain_host(value: &HeaderValue) -> Option<(&str, Option<u16>)> {
    let bytes = value.as_bytes();
    let (host, port) = match memchr::memchr(b':', bytes) {
        Some(colon) => (&bytes[..colon], Some(&bytes[colon + 1..])),
        None => (bytes, None),
    };
    let name = |byte: &u8| byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'-');
    if host.is_empty() || !host.iter().all(name) {
        return None;
    }
    let port = match port {
        None => None,
        Some(digits)
            if (1..=5).contains(&digits.len()) && digits.iter().all(u8::is_ascii_digit) =>
        {
            // Up to five digits: no overflow of a `u32`.
            let port = digits
                .iter()
                .fold(0u32, |port, digit| port * 10 + u32::from(digit - b'0'));
            Some(u16::try_from(port).ok()?)
        }
        Some(_) => return None,
    };
    Some((std::str::from_utf8(host).ok()?, port))
}

/// `host` without the brackets of an IPv6 address.
fn bare_host(host: &str) -> &str {
    host.trim_start_matches('[').trim_end_matches(']')
}

/// Why [`AllowedHosts::check`] refused a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Refusal {
    /// No `Host` header, or one that is not a host.
    #[error("missing or malformed Host header")]
    BadHost,
    /// A `Host` not on the allowlist (DNS rebinding).
    #[error("Host header is not allowed")]
    HostNotAllowed,
    /// An `Origin` (sent by browsers) that is not an allowed host's.
    #[error("Origin header is not allowed")]
    OriginNotAllowed,
}

impl Refusal {
    pub(crate) fn status(self) -> StatusCode {
        match self {
            Refusal::BadHost => StatusCode::BAD_REQUEST,
            Refusal::HostNotAllowed | Refusal::OriginNotAllowed => StatusCode::FORBIDDEN,
        }
    }
}

/// The hosts a server answers for (`allowed_hosts`).
#[derive(Debug, Clone)]
pub(crate) struct AllowedHosts(Vec<Authority>);

impl AllowedHosts {
    /// From validated `allowed_hosts` entries (`name`, `name:port`, `[v6]`).
    pub(crate) fn new(entries: &[String]) -> Self {
        AllowedHosts(entries.iter().filter_map(|e| Authority::parse(e)).collect())
    }

    /// The same list as rmcp's `allowed_origins` patterns: each host's
    /// `http` and `https` origins, on its port or (`:*`) any port.
    pub(crate) fn origins(&self) -> Vec<String> {
        self.0
            .iter()
            .flat_map(|allowed| {
                let host = allowed.url_host();
                let port = allowed
                    .port
                    .map_or_else(|| ":*".to_owned(), |port| format!(":{port}"));
                ["http", "https"].map(|scheme| format!("{scheme}://{host}{port}"))
            })
            .collect()
    }

    /// `Host` (or, without one, the URI's authority) must be allowed, and an
    /// `Origin`, when present, must be an allowed host's `http`/`https`
    /// origin. Browsers send `Origin` on every cross-site request that could
    /// change state, so a page on another site is refused here.
    pub(crate) fn check(&self, uri: &Uri, headers: &HeaderMap) -> Result<(), Refusal> {
        // The usual `Host`, a name or IPv4 address and a port, is read in
        // place; any other is read as an authority.
        if let Some((host, port)) = headers.get(header::HOST).and_then(plain_host) {
            if !self.allows(host, port) {
                return Err(Refusal::HostNotAllowed);
            }
            return self.check_origin(headers);
        }
        let host = match headers.get(header::HOST) {
            Some(value) => value
                .to_str()
                .ok()
                .and_then(|text| text.parse::<http::uri::Authority>().ok())
                .ok_or(Refusal::BadHost)?,
            None => uri.authority().cloned().ok_or(Refusal::BadHost)?,
        };
        if !self.allows(bare_host(host.host()), host.port_u16()) {
            return Err(Refusal::HostNotAllowed);
        }
        self.check_origin(headers)
    }

    fn check_origin(&self, headers: &HeaderMap) -> Result<(), Refusal> {
        match headers.get(header::ORIGIN) {
            None => Ok(()),
            Some(origin) if self.allows_origin(origin) => Ok(()),
            Some(_) => Err(Refusal::OriginNotAllowed),
        }
    }

    fn allows(&self, host: &str, port: Option<u16>) -> bool {
        self.0.iter().any(|allowed| allowed.allows(host, port))
    }

    /// `scheme://host[:port]` with an allowed host; `null` and other
    /// schemes are not.
    fn allows_origin(&self, origin: &HeaderValue) -> bool {
        let Some(uri) = origin
            .to_str()
            .ok()
            .and_then(|text| text.parse::<Uri>().ok())
        else {
            return false;
        };
        let (Some(scheme), Some(authority)) = (uri.scheme_str(), uri.authority()) else {
            return false;
        };
        let default_port = match scheme.to_ascii_lowercase().as_str() {
            "http" => 80,
            "https" => 443,
            _ => return false,
        };
        let port = authority.port_u16().unwrap_or(default_port);
        self.allows(bare_host(authority.host()), Some(port))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use secrecy::SecretString;

    fn headers(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(name.clone(), HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[test]
    fn accept_must_name_every_media_type_asked_for() {
        let both = ["application/json", "text/event-stream"];
        let accept = |values: &[&str]| {
            let pairs: Vec<_> = values.iter().map(|v| (header::ACCEPT, *v)).collect();
            accepts(&headers(&pairs), both)
        };
        assert!(accept(&["application/json, text/event-stream"]));
        assert!(accept(&[
            "text/event-stream;q=1, APPLICATION/JSON; charset=utf-8"
        ]));
        assert!(accept(&["application/json", "text/event-stream"]));
        assert!(!accept(&["application/json"]));
        assert!(!accept(&["text/event-stream, application/jsonx"]));
        assert!(!accept(&["*/*"]));
        assert!(!accept(&[]));
        assert!(accepts(
            &headers(&[(header::ACCEPT, "text/html")]),
            ["text/html"]
        ));
    }

    #[test]
    fn the_bearer_scheme_is_case_insensitive_and_the_token_exact() {
        let token = BearerToken::new(SecretString::from("s3cret"));
        let with =
            |value: &str| bearer_matches(&headers(&[(header::AUTHORIZATION, value)]), &token);
        for good in [
            "Bearer s3cret",
            "bearer s3cret",
            "BEARER s3cret",
            "Bearer   s3cret",
        ] {
            assert!(with(good), "{good}");
        }
        for bad in [
            "Bearer s3creT",
            "Bearer s3cret2",
            "Bearer ",
            "Bearer",
            "Basic s3cret",
            "Bearers3cret",
            "s3cret",
        ] {
            assert!(!with(bad), "{bad}");
        }
        assert!(!bearer_matches(&HeaderMap::new(), &token));
        // Two headers, in either order: ambiguous, so refused.
        for pair in [
            ["Bearer s3cret", "Bearer wrong"],
            ["Bearer wrong", "Bearer s3cret"],
            ["Bearer s3cret", "Bearer s3cret"],
        ] {
            let two = headers(&[
                (header::AUTHORIZATION, pair[0]),
                (header::AUTHORIZATION, pair[1]),
            ]);
            assert!(!bearer_matches(&two, &token), "{pair:?}");
        }
        // An empty token (only possible when built in code) matches nothing.
        let empty = BearerToken::new(SecretString::from(""));
        assert!(!bearer_matches(
            &headers(&[(header::AUTHORIZATION, "Bearer ")]),
            &empty
        ));
    }

    #[test]
    fn json_content_types() {
        for good in [
            "application/json",
            "Application/JSON; charset=utf-8",
            " application/json ",
        ] {
            assert!(is_json(&headers(&[(header::CONTENT_TYPE, good)])), "{good}");
        }
        for bad in [
            "text/plain",
            "application/x-www-form-urlencoded",
            "application/jsonx",
        ] {
            assert!(!is_json(&headers(&[(header::CONTENT_TYPE, bad)])), "{bad}");
        }
        assert!(!is_json(&HeaderMap::new()));
    }

    fn loopback() -> AllowedHosts {
        AllowedHosts::new(&["localhost".into(), "127.0.0.1".into(), "[::1]".into()])
    }

    fn check(hosts: &AllowedHosts, pairs: &[(header::HeaderName, &str)]) -> Result<(), Refusal> {
        hosts.check(&Uri::from_static("/status"), &headers(pairs))
    }

    #[test]
    fn hosts_are_checked_with_or_without_a_port() {
        let hosts = loopback();
        for good in ["localhost", "LOCALHOST:7301", "127.0.0.1:1", "[::1]:7301"] {
            assert_eq!(check(&hosts, &[(header::HOST, good)]), Ok(()), "{good}");
        }
        for bad in [
            "evil.example",
            "evil.example:7301",
            "localhost.evil.example",
        ] {
            assert_eq!(
                check(&hosts, &[(header::HOST, bad)]),
                Err(Refusal::HostNotAllowed),
                "{bad}"
            );
        }
        assert_eq!(check(&hosts, &[]), Err(Refusal::BadHost));
        assert_eq!(
            check(&hosts, &[(header::HOST, "a b")]),
            Err(Refusal::BadHost)
        );

        let pinned = AllowedHosts::new(&["example.com:8443".into(), "::1".into()]);
        assert_eq!(
            check(&pinned, &[(header::HOST, "example.com:8443")]),
            Ok(())
        );
        assert_eq!(
            check(&pinned, &[(header::HOST, "example.com:80")]),
            Err(Refusal::HostNotAllowed)
        );
        assert_eq!(check(&pinned, &[(header::HOST, "[::1]:9")]), Ok(()));
    }

    /// A `Host` read in place is read as `http`'s `Authority` reads it.
    #[test]
    fn a_plain_host_is_read_as_an_authority_is() {
        let values = [
            "localhost",
            "LOCALHOST:7301",
            "127.0.0.1:1",
            "a-b.example:08",
            "a:0",
            "a:65535",
            "a:65536",
            "a:99999",
            "a:123456",
            "a:",
            ":80",
            "a:1:2",
            "a:+1",
            "[::1]:7301",
            "::1",
            "user@host:1",
            "a b",
            "a_b:1",
            "",
        ];
        for value in values {
            let header = HeaderValue::from_str(value).unwrap();
            let Some((host, port)) = plain_host(&header) else {
                continue;
            };
            let authority: http::uri::Authority = value.parse().unwrap();
            assert_eq!(host, authority.host(), "{value}");
            assert_eq!(port, authority.port_u16(), "{value}");
        }
        let read = |value: &str| {
            plain_host(&HeaderValue::from_str(value).unwrap())
                .map(|(host, port)| (host.to_owned(), port))
        };
        assert_eq!(
            read("LOCALHOST:7301"),
            Some(("LOCALHOST".into(), Some(7301)))
        );
        assert_eq!(read("example.com"), Some(("example.com".into(), None)));
        for other in ["a:", "a:65536", "[::1]:1", "user@host", "a_b", ""] {
            assert_eq!(read(other), None, "{other}");
        }
    }

    #[test]
    fn an_origin_must_be_an_allowed_hosts() {
        let hosts = loopback();
        let with_origin = |origin: &str| {
            check(
                &hosts,
                &[(header::HOST, "127.0.0.1:7301"), (header::ORIGIN, origin)],
            )
        };
        for good in [
            "http://localhost:6274",
            "https://127.0.0.1",
            "http://[::1]:7301",
        ] {
            assert_eq!(with_origin(good), Ok(()), "{good}");
        }
        for bad in [
            "http://evil.example",
            "https://evil.example:7301",
            "null",
            "file://localhost",
            "localhost",
            "",
        ] {
            assert_eq!(with_origin(bad), Err(Refusal::OriginNotAllowed), "{bad:?}");
        }
        let pinned = AllowedHosts::new(&["example.com:8443".into()]);
        let origin = |origin: &str| {
            check(
                &pinned,
                &[(header::HOST, "example.com:8443"), (header::ORIGIN, origin)],
            )
        };
        assert_eq!(origin("https://example.com:8443"), Ok(()));
        assert_eq!(
            origin("https://example.com"),
            Err(Refusal::OriginNotAllowed)
        );
    }

    #[test]
    fn origin_patterns_for_rmcp() {
        let hosts =
            AllowedHosts::new(&["localhost".into(), "[::1]".into(), "a.example:8443".into()]);
        assert_eq!(
            hosts.origins(),
            [
                "http://localhost:*",
                "https://localhost:*",
                "http://[::1]:*",
                "https://[::1]:*",
                "http://a.example:8443",
                "https://a.example:8443",
            ]
        );
    }
}
