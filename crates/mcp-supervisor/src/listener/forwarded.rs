//! Who the client is behind a reverse proxy (`[gateway] trusted_proxies`,
//! docs/CONFIG.md): the per-client session quota keys on the client's
//! address, and behind a proxy every peer address is the proxy's.
//!
//! A peer that is a trusted proxy is believed about who sent it the
//! request, in the one header the proxies write (`forwarded_header`):
//! `X-Forwarded-For`, or `Forwarded` (RFC 7239, its `for=` parameters).
//! The other is never read: a proxy that appends to one passes on whatever
//! a client wrote in the other. The list is read from the right, each hop
//! appending the address it got the request from, and the client is the
//! first address that is not itself a trusted proxy (all trusted: the
//! leftmost). An element that does not read as an address (`unknown`, an
//! obfuscated name, garbage, bytes that are not text) ends the walk at the
//! proxy that wrote it: the request is taken as coming from that proxy.
//! From a peer that is not trusted the header is ignored: anyone can write
//! it.

use std::net::{IpAddr, SocketAddr};

use axum::http::{HeaderMap, HeaderValue, header};
use ipnet::IpNet;

use crate::config::{ForwardedHeader, GatewaySettings};

/// The proxies believed, and the header they write.
#[derive(Debug, Clone)]
pub(crate) struct Proxies {
    trusted: Vec<IpNet>,
    header: ForwardedHeader,
}

impl Proxies {
    pub(crate) fn new(settings: &GatewaySettings) -> Self {
        Proxies {
            trusted: settings.trusted_proxies.clone(),
            header: settings.forwarded_header,
        }
    }

    /// The client of a request from `peer` with `headers`.
    pub(crate) fn client(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        if self.trusted.is_empty() {
            return peer;
        }
        client(peer, headers, &self.trusted, self.header)
    }
}

/// The client of a request from `peer` with `headers`, believing only
/// proxies within `trusted`, in `header`.
fn client(peer: IpAddr, headers: &HeaderMap, trusted: &[IpNet], header: ForwardedHeader) -> IpAddr {
    let is_trusted = |address: IpAddr| trusted.iter().any(|net| net.contains(&address));
    if !is_trusted(peer) {
        return peer;
    }
    let hops = match header {
        ForwardedHeader::Forwarded => forwarded_for(headers),
        ForwardedHeader::XForwardedFor => x_forwarded_for(headers),
    };
    let mut client = peer;
    for hop in hops.iter().rev() {
        match hop {
            Some(address) if is_trusted(*address) => client = *address,
            Some(address) => return *address,
            None => return client,
        }
    }
    client
}

/// The `for=` of each element of every `Forwarded` header, in order.
fn forwarded_for(headers: &HeaderMap) -> Vec<Option<IpAddr>> {
    headers
        .get_all(header::FORWARDED)
        .iter()
        .flat_map(|value| {
            text(value)
                .split(',')
                .map(|element| {
                    element.split(';').find_map(|pair| {
                        let (name, value) = pair.split_once('=')?;
                        name.trim()
                            .eq_ignore_ascii_case("for")
                            .then(|| node(value.trim().trim_matches('"')))
                    })
                })
                .map(Option::flatten)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Every address of every `X-Forwarded-For` header, in order.
fn x_forwarded_for(headers: &HeaderMap) -> Vec<Option<IpAddr>> {
    headers
        .get_all("x-forwarded-for")
        .iter()
        .flat_map(|value| {
            text(value)
                .split(',')
                .map(|hop| node(hop.trim()))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// A header's value as text: a byte that is not UTF-8 spoils only the
/// element it is in (a client's, on the left), not the proxy's appended
/// address after it.
fn text(value: &HeaderValue) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(value.as_bytes())
}

/// An address as proxies write it: bare, `v4:port`, `[v6]` or `[v6]:port`.
fn node(text: &str) -> Option<IpAddr> {
    text.parse::<IpAddr>()
        .ok()
        .or_else(|| text.parse::<SocketAddr>().ok().map(|at| at.ip()))
        .or_else(|| {
            text.strip_prefix('[')?
                .strip_suffix(']')?
                .parse::<IpAddr>()
                .ok()
        })
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    const XFF: ForwardedHeader = ForwardedHeader::XForwardedFor;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_static(value));
        }
        map
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    fn nets(list: &[&str]) -> Vec<IpNet> {
        list.iter().map(|net| net.parse().unwrap()).collect()
    }

    #[test]
    fn only_a_trusted_proxy_is_believed() {
        let trusted = nets(&["10.0.0.0/8", "::1/128"]);
        let xff = headers(&[("x-forwarded-for", "203.0.113.7")]);
        assert_eq!(
            client(ip("10.1.2.3"), &xff, &trusted, XFF),
            ip("203.0.113.7")
        );
        assert_eq!(client(ip("::1"), &xff, &trusted, XFF), ip("203.0.113.7"));
        assert_eq!(
            client(ip("198.51.100.9"), &xff, &trusted, XFF),
            ip("198.51.100.9"),
            "anyone else"
        );
        assert_eq!(
            client(ip("10.1.2.3"), &xff, &[], XFF),
            ip("10.1.2.3"),
            "no proxies trusted"
        );
        assert_eq!(
            client(ip("10.1.2.3"), &HeaderMap::new(), &trusted, XFF),
            ip("10.1.2.3")
        );
    }

    #[test]
    fn the_client_is_the_first_untrusted_address_from_the_right() {
        let trusted = nets(&["10.0.0.0/8"]);
        for (value, expected) in [
            // A client that writes its own header cannot choose its address.
            ("1.1.1.1, 203.0.113.7, 10.0.0.2", "203.0.113.7"),
            ("203.0.113.7:4711", "203.0.113.7"),
            ("10.0.0.9, 10.0.0.2", "10.0.0.9"),
            ("[2001:db8::1]:80", "2001:db8::1"),
            ("garbage, 203.0.113.7", "203.0.113.7"),
            // A hop that does not read as an address: its proxy is the client.
            ("203.0.113.7, unknown", "10.1.2.3"),
            ("203.0.113.7, unknown, 10.0.0.4", "10.0.0.4"),
        ] {
            let map = headers(&[(
                "x-forwarded-for",
                Box::leak(value.to_owned().into_boxed_str()),
            )]);
            assert_eq!(
                client(ip("10.1.2.3"), &map, &trusted, XFF),
                ip(expected),
                "{value}"
            );
        }
        let two = headers(&[
            ("x-forwarded-for", "1.1.1.1"),
            ("x-forwarded-for", "203.0.113.7"),
        ]);
        assert_eq!(
            client(ip("10.1.2.3"), &two, &trusted, XFF),
            ip("203.0.113.7"),
            "headers in order"
        );
    }

    #[test]
    fn forwarded_is_read_when_the_proxies_write_it() {
        let trusted = nets(&["10.0.0.0/8"]);
        for (value, expected) in [
            (r#"for=192.0.2.60;proto=http;by=203.0.113.43"#, "192.0.2.60"),
            (r#"for="[2001:db8:cafe::17]:4711""#, "2001:db8:cafe::17"),
            (r#"for=198.51.100.1, For=10.0.0.5"#, "198.51.100.1"),
            (r#"for=unknown"#, "10.1.2.3"),
            (r#"proto=https"#, "10.1.2.3"),
        ] {
            let map = headers(&[
                ("forwarded", Box::leak(value.to_owned().into_boxed_str())),
                ("x-forwarded-for", "9.9.9.9"),
            ]);
            assert_eq!(
                client(ip("10.1.2.3"), &map, &trusted, ForwardedHeader::Forwarded),
                ip(expected),
                "{value}"
            );
        }
    }

    /// A proxy that appends to one header passes the other on as the
    /// client wrote it: only the configured one is read.
    #[test]
    fn the_header_the_proxies_do_not_write_is_never_read() {
        let trusted = nets(&["10.0.0.0/8"]);
        let map = headers(&[
            ("forwarded", "for=1.1.1.1"),
            ("x-forwarded-for", "203.0.113.7"),
        ]);
        assert_eq!(
            client(ip("10.1.2.3"), &map, &trusted, XFF),
            ip("203.0.113.7")
        );
        let map = headers(&[
            ("forwarded", "for=203.0.113.7"),
            ("x-forwarded-for", "1.1.1.1"),
        ]);
        assert_eq!(
            client(ip("10.1.2.3"), &map, &trusted, ForwardedHeader::Forwarded),
            ip("203.0.113.7")
        );
        let only_forwarded = headers(&[("forwarded", "for=1.1.1.1")]);
        assert_eq!(
            client(ip("10.1.2.3"), &only_forwarded, &trusted, XFF),
            ip("10.1.2.3"),
            "no X-Forwarded-For: the proxy"
        );
    }

    /// A byte that is not text in what the client wrote spoils its own
    /// element only: the address the proxy appended after it is read.
    #[test]
    fn bytes_that_are_not_text_spoil_only_their_element() {
        let trusted = nets(&["10.0.0.0/8"]);
        let mut map = HeaderMap::new();
        map.append(
            "x-forwarded-for",
            HeaderValue::from_bytes(b"1.1.1.\xff, 203.0.113.7").unwrap(),
        );
        assert_eq!(
            client(ip("10.1.2.3"), &map, &trusted, XFF),
            ip("203.0.113.7")
        );
        let mut map = HeaderMap::new();
        map.append(
            "forwarded",
            HeaderValue::from_bytes(b"for=\"\xff\", for=203.0.113.7").unwrap(),
        );
        assert_eq!(
            client(ip("10.1.2.3"), &map, &trusted, ForwardedHeader::Forwarded),
            ip("203.0.113.7")
        );
    }
}
