//! Writing HTML by hand: escaping, the page frame, and the compiled-in assets.
//!
//! Every text that reaches a page from outside the code (an upstream's tool
//! names, descriptions and schemas, connection and node names, failure
//! reasons) goes through [`Esc`]; links go through [`Segment`]. The CSP
//! (`script-src 'self'`, no inline script or style) is the second net.

use std::{
    fmt::{self, Display, Write},
    sync::LazyLock,
    time::{SystemTime, UNIX_EPOCH},
};

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use sha2::{Digest, Sha256};

/// Text escaped for HTML content and quoted attribute values.
pub(crate) struct Esc<'a>(pub(crate) &'a str);

impl Display for Esc<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut rest = self.0;
        while let Some(at) = rest.find(['&', '<', '>', '"', '\'']) {
            f.write_str(&rest[..at])?;
            f.write_str(match rest.as_bytes()[at] {
                b'&' => "&amp;",
                b'<' => "&lt;",
                b'>' => "&gt;",
                b'"' => "&quot;",
                _ => "&#39;",
            })?;
            rest = &rest[at + 1..];
        }
        f.write_str(rest)
    }
}

/// What a path segment or query value keeps unencoded.
const KEPT: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'_').remove(b'.');

/// Text percent-encoded for one path segment or query value (then safe in an
/// attribute too).
pub(crate) struct Segment<'a>(pub(crate) &'a str);

impl Display for Segment<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", utf8_percent_encode(self.0, KEPT))
    }
}

/// A compiled-in file, served under `/ui/` with a version in its link.
#[derive(Debug)]
pub(crate) struct Asset {
    pub(crate) name: &'static str,
    pub(crate) content_type: &'static str,
    pub(crate) body: &'static str,
}

pub(crate) const APP_JS: Asset = Asset {
    name: "app.js",
    content_type: "text/javascript; charset=utf-8",
    body: include_str!("assets/app.js"),
};
pub(crate) const STYLE_CSS: Asset = Asset {
    name: "style.css",
    content_type: "text/css; charset=utf-8",
    body: include_str!("assets/style.css"),
};
pub(crate) const FAVICON: Asset = Asset {
    name: "favicon.svg",
    content_type: "image/svg+xml",
    body: include_str!("assets/favicon.svg"),
};
pub(crate) const ASSETS: [Asset; 3] = [APP_JS, STYLE_CSS, FAVICON];

/// A short hash of every asset: links change when an asset does, so assets
/// can be cached for good.
pub(crate) static VERSION: LazyLock<String> = LazyLock::new(|| {
    let mut hash = Sha256::new();
    for asset in ASSETS {
        hash.update(asset.body.as_bytes());
    }
    hash.finalize()[..6]
        .iter()
        .fold(String::new(), |mut out, byte| {
            let _ = write!(out, "{byte:02x}");
            out
        })
});

/// Milliseconds since the epoch (what the page's script counts down with).
pub(crate) fn epoch_ms(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH).map_or(0, |since| {
        u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
    })
}

/// The dashboard's pages, for the navigation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Nav {
    Connections,
    Tools,
    Fleet,
}

impl Nav {
    const ALL: [(Nav, &'static str, &'static str); 3] = [
        (Nav::Connections, "/", "Connections"),
        (Nav::Tools, "/tools", "Tools"),
        (Nav::Fleet, "/fleet", "Fleet"),
    ];
}

/// What every page has besides its body.
#[derive(Debug)]
pub(crate) struct Frame<'a> {
    pub(crate) title: &'a str,
    pub(crate) nav: Nav,
    /// The token a state change must carry (`<meta name="mcp-csrf">`).
    pub(crate) csrf: &'a str,
    /// When the page was made (the script's clock offset).
    pub(crate) now: SystemTime,
    /// Show a "Log out" button (a browser's session with `auth`).
    pub(crate) logout: bool,
}

/// The whole page around `body`.
pub(crate) fn page(frame: &Frame<'_>, body: &str) -> String {
    let mut out = String::with_capacity(body.len() + 1400);
    let version = &*VERSION;
    let _ = write!(
        out,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <meta name=\"color-scheme\" content=\"light dark\">\
         <title>{title} · mcp-supervisor</title>\
         <link rel=\"stylesheet\" href=\"/ui/style.css?v={version}\">\
         <link rel=\"icon\" href=\"/ui/favicon.svg?v={version}\" type=\"image/svg+xml\">\
         <meta name=\"mcp-csrf\" content=\"{csrf}\">\
         <script src=\"/ui/app.js?v={version}\" defer></script></head>\
         <body data-now=\"{now}\">\
         <a class=\"skip\" href=\"#main\">Skip to content</a>\
         <header><p class=\"brand\">mcp-supervisor</p><nav aria-label=\"Dashboard\"><ul>",
        title = Esc(frame.title),
        csrf = Esc(frame.csrf),
        now = epoch_ms(frame.now),
    );
    for (nav, href, label) in Nav::ALL {
        let current = if nav == frame.nav {
            " aria-current=\"page\""
        } else {
            ""
        };
        let _ = write!(out, "<li><a href=\"{href}\"{current}>{label}</a></li>");
    }
    out.push_str(
        "</ul></nav><p id=\"live\" class=\"live\" role=\"status\" aria-live=\"polite\" \
         data-live=\"off\">Live updates need JavaScript.</p>",
    );
    if frame.logout {
        out.push_str(
            "<button type=\"button\" class=\"logout\" data-logout hidden>Log out</button>",
        );
    }
    out.push_str("</header><main id=\"main\">");
    out.push_str(body);
    out.push_str("</main></body></html>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_special_character_is_escaped() {
        assert_eq!(
            Esc(r#"<a href="x" title='y'>&</a>"#).to_string(),
            "&lt;a href=&quot;x&quot; title=&#39;y&#39;&gt;&amp;&lt;/a&gt;"
        );
        assert_eq!(Esc("plain — ünïcode").to_string(), "plain — ünïcode");
        assert_eq!(Segment("a b/c?d=é").to_string(), "a%20b%2Fc%3Fd%3D%C3%A9");
    }

    #[test]
    fn the_page_links_versioned_assets_and_no_inline_script() {
        let frame = Frame {
            title: "<t>",
            nav: Nav::Tools,
            csrf: "c\"",
            now: UNIX_EPOCH,
            logout: true,
        };
        let html = page(&frame, "<p>body</p>");
        assert!(html.contains(&format!("/ui/app.js?v={}", *VERSION)));
        assert!(html.contains("<title>&lt;t&gt; · mcp-supervisor</title>"));
        assert!(html.contains("content=\"c&quot;\""));
        assert!(html.contains("<a href=\"/tools\" aria-current=\"page\">Tools</a>"));
        assert_eq!(html.matches("<script").count(), 1);
        assert!(!html.contains("style="));
        assert!(html.contains("data-logout hidden>Log out</button>"));
    }
}
