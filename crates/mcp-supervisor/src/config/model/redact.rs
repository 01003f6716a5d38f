//! What `Debug` shows of a secret: header and variable names without their
//! values, URLs without userinfo or query; and secret pairs compared by value.

use std::fmt;

use secrecy::{ExposeSecret, SecretString};

/// Whether two lists of named secrets hold the same names and values, in
/// the same order.
pub(super) fn secret_pairs_eq(a: &[(String, SecretString)], b: &[(String, SecretString)]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|((ka, va), (kb, vb))| ka == kb && va.expose_secret() == vb.expose_secret())
}

/// Shows `{name: [REDACTED], …}`.
pub(super) struct RedactedPairs<'a>(pub(super) &'a [(String, SecretString)]);

impl fmt::Debug for RedactedPairs<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.0.iter().map(|(k, _)| (k, format_args!("[REDACTED]"))))
            .finish()
    }
}

/// Shows a URL without userinfo and with its query replaced by `[REDACTED]`.
pub(super) struct RedactedUrl<'a>(pub(super) &'a str);

impl fmt::Debug for RedactedUrl<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "\"{}\"", redact_url(self.0))
    }
}

/// `url` without userinfo, with any query shown as `?[REDACTED]` and no fragment.
///
/// Validation already refuses userinfo; this strips it anyway so a hand-built
/// [`HttpTransport`](super::HttpTransport) cannot leak one either.
pub(crate) fn redact_url(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(parsed) => {
            let host = parsed.host_str().unwrap_or_default();
            let port = parsed.port().map(|p| format!(":{p}")).unwrap_or_default();
            let query = if parsed.query().is_some() {
                "?[REDACTED]"
            } else {
                ""
            };
            format!("{}://{host}{port}{}{query}", parsed.scheme(), parsed.path())
        }
        Err(_) => "[unparsable url]".to_owned(),
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redact_url_drops_userinfo_query_and_fragment() {
        assert_eq!(
            redact_url("https://u:p@example.com:8443/mcp?key=s3cret#frag"),
            "https://example.com:8443/mcp?[REDACTED]"
        );
        assert_eq!(redact_url("http://127.0.0.1/mcp"), "http://127.0.0.1/mcp");
        assert_eq!(redact_url("not a url"), "[unparsable url]");
    }
}
