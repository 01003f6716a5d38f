//! A JSON scanner for the few messages every call carries, read by hand
//! where serde's derived reading costs more than the rest of the work
//! (docs/DECISIONS.md #140, #142).
//!
//! It reads one expected shape and answers only when it is sure: each
//! method answers `None` for anything it does not plainly know (an escape
//! where none is read, a float, a `null`, a malformed body), and its
//! callers then leave the whole message to serde's reading, which decides
//! it. Keys and the literals they are compared with are plain bytes:
//! a key with an escape equals no literal.

use rmcp::model::NumberOrString;
use serde_json::value::RawValue;

/// A position in a body being read.
pub(crate) struct Scan<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Scan<'a> {
    /// At the start of `bytes`.
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Scan { bytes, at: 0 }
    }

    /// Past JSON's whitespace.
    fn skip_blank(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.bytes.get(self.at) {
            self.at += 1;
        }
    }

    /// The next byte after whitespace, not taken.
    fn peek(&mut self) -> Option<u8> {
        self.skip_blank();
        self.bytes.get(self.at).copied()
    }

    /// Takes `byte` if it comes next.
    fn take(&mut self, byte: u8) -> Option<()> {
        (self.peek()? == byte).then(|| self.at += 1)
    }

    /// Only whitespace is left.
    pub(crate) fn end(&mut self) -> Option<()> {
        self.peek().is_none().then_some(())
    }

    /// An object, each of its keys read by `field` (which reads the value;
    /// a key is compared with plain literals only, see [`Self::quoted`]).
    pub(crate) fn object(
        &mut self,
        mut field: impl FnMut(&mut Self, &'a [u8]) -> Option<()>,
    ) -> Option<()> {
        self.take(b'{')?;
        if self.take(b'}').is_some() {
            return Some(());
        }
        loop {
            let key = self.quoted()?;
            self.take(b':')?;
            field(self, key)?;
            if !self.more(b'}')? {
                return Some(());
            }
        }
    }

    /// A string's bytes, up to the first quote: its text if it has no
    /// escape. Only a comparison with a plain literal, or [`Self::plain_str`],
    /// may tell more.
    pub(crate) fn quoted(&mut self) -> Option<&'a [u8]> {
        self.take(b'"')?;
        let rest = &self.bytes[self.at..];
        let len = memchr::memchr(b'"', rest)?;
        self.at += len + 1;
        Some(&rest[..len])
    }

    /// The value of a key that may come once (`seen` marks it), and must be
    /// the plain string `literal`.
    pub(crate) fn literal_once(&mut self, seen: &mut bool, literal: &[u8]) -> Option<()> {
        if std::mem::replace(seen, true) {
            return None;
        }
        (self.quoted()? == literal).then_some(())
    }

    /// A string of printable ASCII with no escapes.
    pub(crate) fn plain_str(&mut self) -> Option<&'a str> {
        plain(self.quoted()?)
    }

    /// An id or a progress token: a plain string, or an integer written as
    /// one that fits `i64`.
    pub(crate) fn id(&mut self) -> Option<NumberOrString> {
        if self.peek()? == b'"' {
            return Some(NumberOrString::String(self.plain_str()?.into()));
        }
        let bytes = self.bytes;
        let negative = bytes[self.at] == b'-';
        let start = self.at + usize::from(negative);
        // Digits and their value in one pass; one beyond `u64` is none.
        let (mut end, mut magnitude) = (start, 0u64);
        while let Some(&digit) = bytes.get(end).filter(|b| b.is_ascii_digit()) {
            magnitude = magnitude
                .checked_mul(10)?
                .checked_add(u64::from(digit - b'0'))?;
            end += 1;
        }
        let digits = end - start;
        // No leading zero (not JSON), no fraction or exponent.
        if digits == 0
            || (digits > 1 && bytes[start] == b'0')
            || matches!(bytes.get(end), Some(b'.' | b'e' | b'E'))
        {
            return None;
        }
        let value = if negative {
            0i64.checked_sub_unsigned(magnitude)?
        } else {
            i64::try_from(magnitude).ok()?
        };
        self.at = end;
        Some(NumberOrString::Number(value))
    }

    /// An array, each of its items read by `item`.
    pub(crate) fn array(&mut self, mut item: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        self.take(b'[')?;
        if self.take(b']').is_some() {
            return Some(());
        }
        loop {
            item(self)?;
            if !self.more(b']')? {
                return Some(());
            }
        }
    }

    /// Past what follows an item: a comma (`true`, another item comes) or
    /// `close` (`false`).
    fn more(&mut self, close: u8) -> Option<bool> {
        let next = self.peek()?;
        self.at += 1;
        match next {
            b',' => Some(true),
            _ => (next == close).then_some(false),
        }
    }

    /// `true` or `false`.
    pub(crate) fn boolean(&mut self) -> Option<bool> {
        self.skip_blank();
        let rest = &self.bytes[self.at..];
        let (value, len) = if rest.starts_with(b"true") {
            (true, 4)
        } else if rest.starts_with(b"false") {
            (false, 5)
        } else {
            return None;
        };
        self.at += len;
        Some(value)
    }

    /// Any string, its escapes read by serde_json.
    pub(crate) fn string(&mut self) -> Option<String> {
        self.take(b'"')?;
        let start = self.at;
        let mut escaped = false;
        let mut at = start;
        loop {
            at += memchr::memchr2(b'"', b'\\', self.bytes.get(at..)?)?;
            if self.bytes[at] == b'"' {
                break;
            }
            escaped = true;
            at += 2;
        }
        // A control byte is not JSON (escaped either: serde refuses it).
        if self.bytes[start..at]
            .iter()
            .fold(false, |control, &b| control | (b < 0x20))
        {
            return None;
        }
        self.at = at + 1;
        if escaped {
            serde_json::from_slice(&self.bytes[start - 1..=at]).ok()
        } else {
            String::from_utf8(self.bytes[start..at].to_vec()).ok()
        }
    }

    /// Takes an empty object (`{}`, whitespace allowed inside) if one comes
    /// next; `false`, and nothing taken, for anything else.
    pub(crate) fn empty_object(&mut self) -> bool {
        let at = self.at;
        if self.take(b'{').is_some() && self.take(b'}').is_some() {
            return true;
        }
        self.at = at;
        false
    }

    /// A JSON object, checked by serde_json, as its text.
    pub(crate) fn raw_object(&mut self) -> Option<Box<RawValue>> {
        self.object_text().map(RawValue::to_owned)
    }

    /// A JSON object, checked by serde_json, as its text in the body.
    pub(crate) fn object_text(&mut self) -> Option<&'a RawValue> {
        if self.peek()? != b'{' {
            return None;
        }
        self.value_text()
    }

    /// Any JSON value, checked by serde_json, as its text in the body; `None`
    /// for one nested deeper than [`NESTING`].
    pub(crate) fn value_text(&mut self) -> Option<&'a RawValue> {
        self.skip_blank();
        let mut values =
            serde_json::Deserializer::from_slice(&self.bytes[self.at..]).into_iter::<&RawValue>();
        let raw = values.next()?.ok()?;
        if !nests_within(raw.get().as_bytes(), NESTING) {
            return None;
        }
        self.at += values.byte_offset();
        Some(raw)
    }
}

/// How deep a value read whole ([`Scan::value_text`]) may nest. serde counts
/// its recursion limit (128) from the top of the whole message, and passes
/// over a value it ignores at any depth: a value nested deeper than this is
/// left to the full reading, which decides it as rmcp would.
const NESTING: usize = 64;

/// Whether the JSON `text` nests at most `most` arrays and objects deep.
fn nests_within(text: &[u8], most: usize) -> bool {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for &byte in text {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > most {
                    return false;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    true
}

/// A string's bytes (as [`Scan::quoted`] gives them, a key's too) as its
/// text, when they are printable ASCII with no escapes.
pub(crate) fn plain(text: &[u8]) -> Option<&str> {
    // Without an early exit, so that it runs many bytes at a time.
    let plain = text.iter().fold(true, |plain, &b| {
        plain & (0x20..0x80).contains(&b) & (b != b'\\')
    });
    if !plain {
        return None;
    }
    std::str::from_utf8(text).ok()
}

/// Every single-byte change to `body`: each byte dropped, doubled, and
/// replaced by one of JSON's meaningful bytes, a control byte or a UTF-8
/// lead byte (for tests holding a scanner to serde's reading).
#[cfg(test)]
pub(crate) fn mutations(body: &[u8]) -> impl Iterator<Item = Vec<u8>> + '_ {
    const BYTES: &[u8] = b"\"\\,:{}[] 0-9.eEn\x1f\xc3tf";
    (0..body.len()).flat_map(move |at| {
        let dropped = [&body[..at], &body[at + 1..]].concat();
        let doubled = [&body[..=at], &body[at..]].concat();
        let replaced = BYTES.iter().map(move |&byte| {
            let mut changed = body.to_vec();
            changed[at] = byte;
            changed
        });
        [dropped, doubled].into_iter().chain(replaced)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An integer id is read as rmcp's id reads it, at the edges of `i64`
    /// and past them; whatever is no such integer is not read.
    #[test]
    fn an_integer_id_is_read_as_rmcp_reads_it() {
        for text in [
            "0",
            "7",
            "-0",
            "-12",
            "9223372036854775807",
            "9223372036854775808",
            "-9223372036854775808",
            "-9223372036854775809",
            "18446744073709551615",
            "18446744073709551616",
            "123456789012345678901234567890",
            "01",
            "-",
            "1.0",
            "1e3",
            "-01",
        ] {
            let read = Scan::new(text.as_bytes()).id();
            let serde = serde_json::from_str::<NumberOrString>(text).ok();
            // Read here as rmcp reads it, or left to the full reading.
            assert!(
                read.is_none() || read == serde,
                "{text}: {read:?} {serde:?}"
            );
        }
        for (text, value) in [
            ("0", 0),
            ("-12", -12),
            ("9223372036854775807", i64::MAX),
            ("-9223372036854775808", i64::MIN),
        ] {
            let read = Scan::new(text.as_bytes()).id();
            assert_eq!(read, Some(NumberOrString::Number(value)), "{text}");
        }
    }
}
