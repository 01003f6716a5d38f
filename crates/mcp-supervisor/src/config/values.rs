//! Pure checks of single values. Each returns the problem as a sentence; the
//! caller attaches the file and key path.
//!
//! None of these messages quote the value they reject unless the value is known
//! not to be secret (durations, enum words, numbers).

use std::net::SocketAddr;
use std::time::Duration;

/// Upper bound for every duration: anything longer is a typo, and bounded values
/// keep `Instant + duration` arithmetic elsewhere from overflowing.
pub(crate) const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 60 * 60);

/// A humantime duration (`"30s"`, `"5m"`, `"1h 30m"`), strictly positive and at
/// most [`MAX_DURATION`].
pub(crate) fn duration(text: &str) -> Result<Duration, String> {
    let trimmed = text.trim();
    if trimmed.starts_with('-') {
        return Err(format!(
            "must be a positive duration; negative durations like {} are not allowed",
            short_quote(trimmed)
        ));
    }
    let parsed = humantime::parse_duration(trimmed).map_err(|e| {
        format!(
            "invalid duration {} ({e}); expected a number and a unit, like \"30s\", \"5m\" or \"500ms\"",
            short_quote(trimmed)
        )
    })?;
    if parsed.is_zero() {
        return Err(format!(
            "must be greater than zero, got {}",
            short_quote(trimmed)
        ));
    }
    if parsed > MAX_DURATION {
        return Err("must be at most 365 days".to_owned());
    }
    Ok(parsed)
}

/// An integer in `1..=max`, converted to the target type.
pub(crate) fn positive<T>(value: i64, max: T) -> Result<T, String>
where
    T: TryFrom<i64> + Into<u64> + Copy + std::fmt::Display,
{
    if value <= 0 {
        return Err(format!("must be greater than zero, got {value}"));
    }
    match T::try_from(value) {
        Ok(v) if v.into() <= max.into() => Ok(v),
        _ => Err(format!("must be at most {max}, got {value}")),
    }
}

/// Like [`positive`] for `usize` values (which do not implement `Into<u64>`).
pub(crate) fn positive_usize(value: i64, max: usize) -> Result<usize, String> {
    let max_u32 = u32::try_from(max).unwrap_or(u32::MAX);
    positive::<u32>(value, max_u32).map(|v| v as usize)
}

/// An IP socket address such as `127.0.0.1:7300` or `[::1]:7300`. Port 0 is
/// allowed (bind an ephemeral port; tests rely on it).
pub(crate) fn socket_addr(text: &str) -> Result<SocketAddr, String> {
    text.trim().parse().map_err(|_| {
        "expected an IP address and port, like \"127.0.0.1:7300\" or \"[::1]:7300\" \
         (host names are not accepted)"
            .to_owned()
    })
}

/// An IP address (one host) or a CIDR range, as `trusted_proxies` lists them.
pub(crate) fn ip_net(text: &str) -> Result<ipnet::IpNet, String> {
    let text = text.trim();
    text.parse::<ipnet::IpNet>()
        .or_else(|_| text.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
        .map_err(|_| {
            "expected an IP address or a CIDR range, like \"10.0.0.5\", \"10.0.0.0/8\" or \"::1\" \
             (host names are not accepted)"
                .to_owned()
        })
}

/// `^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$` and no `__` (the separator of namespaced tool
/// names, `{connection}__{tool}`).
pub(crate) fn connection_name(name: &str) -> Result<(), String> {
    let bytes = name.as_bytes();
    let first_ok = bytes.first().is_some_and(u8::is_ascii_alphanumeric);
    let rest_ok = bytes
        .iter()
        .all(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'-');
    if !first_ok || !rest_ok || bytes.len() > 64 {
        return Err(
            "invalid connection name: use 1 to 64 letters, digits, '_' or '-', \
             starting with a letter or digit"
                .to_owned(),
        );
    }
    // A name ending in '_' would make `a_` + `x` and `a` + `_x` both
    // `a___x`: without it, the first '__' of a namespaced name ends the
    // connection's name, so every name has one owner.
    if name.contains("__") || name.ends_with('_') {
        return Err(
            "invalid connection name: '__' is reserved as the separator of \
             namespaced tool names ({connection}__{tool}), so a name may not \
             contain '__' or end with '_'"
                .to_owned(),
        );
    }
    Ok(())
}

/// An absolute `http`/`https` URL with a host and without credentials.
///
/// Credentials in the URL are refused rather than stored: they would travel into
/// every log line and status page that shows the URL. Use `auth` or `headers`.
pub(crate) fn http_url(text: &str) -> Result<(), String> {
    if text.is_empty() {
        return Err("must not be empty".to_owned());
    }
    if text.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("must not contain whitespace or control characters".to_owned());
    }
    // `url` lowercases the scheme and accepts "http:host"; insist on the usual form.
    let lower = text.get(..8).unwrap_or(text).to_ascii_lowercase();
    if !(lower.starts_with("http://") || lower.starts_with("https://")) {
        return Err("must be an absolute URL starting with http:// or https://".to_owned());
    }
    // The parse error's Display never includes the input.
    let url = url::Url::parse(text).map_err(|e| format!("invalid URL: {e}"))?;
    if url.host_str().is_none_or(str::is_empty) {
        return Err("the URL must name a host".to_owned());
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(
            "the URL must not contain credentials (user:password@); use 'auth' or 'headers'"
                .to_owned(),
        );
    }
    Ok(())
}

/// A `redis://` or `rediss://` URL with a host and without a password.
///
/// A password in the URL is refused: the URL is shown by `check` and in
/// logs. A user name (a Redis ACL user) is allowed.
pub(crate) fn redis_url(text: &str) -> Result<url::Url, String> {
    if text.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("must not contain whitespace or control characters".to_owned());
    }
    let url = url::Url::parse(text).map_err(|e| format!("invalid URL: {e}"))?;
    if !matches!(url.scheme(), "redis" | "rediss") {
        return Err(
            "must be a URL starting with redis:// or rediss:// (TLS), like \"redis://127.0.0.1:6379\""
                .to_owned(),
        );
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err("the URL must name a host".to_owned());
    }
    if url.password().is_some() {
        return Err(
            "the URL must not contain a password; use 'password_env' or 'password_file'".to_owned(),
        );
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err("the URL must not have a query or fragment".to_owned());
    }
    Ok(url)
}

/// `fleet.key_env` / `key_file`: 32 bytes in standard base64. The message
/// never quotes the value.
pub(crate) fn fleet_key(text: &str) -> Result<super::model::FleetKey, String> {
    use base64::Engine;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .map_err(|_| "the fleet key is not base64 (make one with `openssl rand -base64 32`)")?;
    let bytes: [u8; 32] = bytes.try_into().map_err(|bytes: Vec<u8>| {
        format!(
            "the fleet key must be 32 bytes, it is {} (make one with `openssl rand -base64 32`)",
            bytes.len()
        )
    })?;
    Ok(super::model::FleetKey::new(bytes))
}

/// A fleet node name or namespace: 1 to 64 letters, digits, '.', '_' or
/// '-' (it is part of Redis keys and shown in `/status`).
pub(crate) fn fleet_name(name: String) -> Result<String, String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(name)
    } else {
        Err("use 1 to 64 letters, digits, '.', '_' or '-'".to_owned())
    }
}

/// Quotes a non-secret value for a message, cut short so a pasted blob stays short.
pub(crate) fn short_quote(text: &str) -> String {
    const MAX: usize = 40;
    if text.chars().count() <= MAX {
        format!("{text:?}")
    } else {
        let cut: String = text.chars().take(MAX).collect();
        format!("{:?}…", cut)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn durations() {
        assert_eq!(duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(duration("1h 30m"), Ok(Duration::from_secs(5400)));
        assert!(duration("0s").unwrap_err().contains("greater than zero"));
        assert!(duration("-5s").unwrap_err().contains("negative"));
        assert!(duration("abc").unwrap_err().contains("invalid duration"));
        assert!(duration("").unwrap_err().contains("invalid duration"));
        assert!(duration("400days").unwrap_err().contains("at most"));
    }

    #[test]
    fn numbers() {
        assert_eq!(positive::<u32>(3, 100), Ok(3));
        assert!(
            positive::<u32>(0, 100)
                .unwrap_err()
                .contains("greater than zero")
        );
        assert!(
            positive::<u32>(-1, 100)
                .unwrap_err()
                .contains("greater than zero")
        );
        assert!(
            positive::<u32>(101, 100)
                .unwrap_err()
                .contains("at most 100")
        );
        assert!(positive::<u32>(i64::MAX, u32::MAX).is_err());
        assert_eq!(positive_usize(64, 1_000_000), Ok(64));
        assert!(positive_usize(2_000_000, 1_000_000).is_err());
    }

    #[test]
    fn names() {
        for ok in ["a", "github", "GitHub-2", "a_b", "0", &"x".repeat(64)] {
            assert_eq!(connection_name(ok), Ok(()), "{ok}");
        }
        for bad in [
            "",
            "_a",
            "-a",
            "a b",
            "a.b",
            "a__b",
            "a_",
            "é",
            &"x".repeat(65),
        ] {
            assert!(connection_name(bad).is_err(), "{bad}");
        }
        assert!(connection_name("a__b").unwrap_err().contains("'__'"));
        // `a_` + `x` would be `a___x`, the name of `a` + `_x`.
        assert!(connection_name("a_").unwrap_err().contains("end with '_'"));
    }

    #[test]
    fn urls() {
        assert_eq!(http_url("https://example.com/mcp"), Ok(()));
        assert_eq!(http_url("http://127.0.0.1:8080/mcp?x=1"), Ok(()));
        assert_eq!(http_url("HTTP://example.com"), Ok(()));
        for bad in [
            "",
            "example.com/mcp",
            "ftp://example.com",
            "http:example.com",
            "http://",
            "https://user:pw@example.com/",
            "https://user@example.com/",
            "https://exa mple.com/",
            "http://[::1/",
        ] {
            assert!(http_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn ip_nets() {
        assert_eq!(ip_net("10.0.0.0/8").unwrap().to_string(), "10.0.0.0/8");
        assert_eq!(ip_net(" 10.0.0.5 ").unwrap().to_string(), "10.0.0.5/32");
        assert_eq!(ip_net("::1").unwrap().to_string(), "::1/128");
        assert!(ip_net("proxy.local").is_err());
        assert!(ip_net("10.0.0.0/33").is_err());
    }

    #[test]
    fn socket_addrs() {
        assert!(socket_addr("127.0.0.1:7300").is_ok());
        assert!(socket_addr("[::1]:0").is_ok());
        assert!(socket_addr("localhost:7300").is_err());
        assert!(socket_addr("127.0.0.1").is_err());
    }

    proptest! {
        /// Every accepted name is safe to namespace: bare TOML key, no separator.
        #[test]
        fn accepted_names_are_namespace_safe(name in "[A-Za-z0-9_-]{0,70}") {
            if connection_name(&name).is_ok() {
                prop_assert!(!name.is_empty() && name.len() <= 64);
                prop_assert!(!name.contains("__"));
                prop_assert!(name.as_bytes()[0].is_ascii_alphanumeric());
            }
        }

        /// Accepted durations are positive and bounded whatever the input.
        #[test]
        fn accepted_durations_are_bounded(text in "-?[0-9]{1,12}(ns|ms|s|m|h|d|y)") {
            if let Ok(d) = duration(&text) {
                prop_assert!(!d.is_zero() && d <= MAX_DURATION);
            }
        }
    }
}
