//! A call's arguments, checked at the gateway's door: admitted only when
//! every later reading of them finds the same one meaning
//! (docs/RELIABILITY.md, "No client can hurt what others share").
//!
//! The gateway carries a call's arguments as the client wrote them
//! (`crate::call::Arguments`), and each later reader reads them again: serde_json
//! for rmcp's client, the `Mcp-Param-*` headers and a span's captured
//! content; the upstream's own parser for the bytes the direct client sends.
//! RFC 8259 admits JSON that those readers refuse, or read differently. A
//! refusal after admission used to be taken for the upstream's failure
//! (retried, the session disposed, the connection parked for everyone), so
//! such arguments are refused before anything is sent, as the caller's
//! error ([`Unreadable`]):
//!
//! - a `\u` escape of half a surrogate pair, in a key or a string (serde
//!   refuses it as text);
//! - a number no reader holds alike: an integer beyond 64 bits (serde reads
//!   it as the nearest double, Python exactly) or any number beyond a
//!   double's range (serde refuses it);
//! - objects and arrays nested deeper than [`MAX_DEPTH`] (serde refuses a
//!   message nested more than 128 deep, counting the envelope around the
//!   arguments and, in an answer that echoes them, the result's);
//! - a key twice in one object (serde keeps the last value, other parsers
//!   the first, and the `Mcp-Param-*` headers are read from serde's).
//!
//! [`check`] decides in one pass, and is what runs. Its twin [`by_serde`]
//! decides the same by composing serde_json's own readings (the raw text,
//! each object's entries, each string and number); the tests, and the fuzz
//! target `codec`, hold the two to the same verdict on any bytes.

use std::{borrow::Cow, collections::HashSet, fmt};

use serde_json::value::RawValue;

/// The deepest nesting of objects and arrays admitted, the arguments' own
/// object counting as one: half of serde's limit for a whole message,
/// leaving room for every envelope a reader wraps them in. No tool's input
/// comes near it.
pub(crate) const MAX_DEPTH: usize = 64;

/// Why a call's arguments were refused at the door.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Unreadable {
    /// Not JSON.
    Syntax,
    /// JSON, but not an object.
    NotAnObject,
    /// Objects and arrays nested deeper than [`MAX_DEPTH`].
    TooDeep,
    /// A key twice in one object.
    DuplicateKey,
    /// A `\u` escape of half a surrogate pair.
    LoneSurrogate,
    /// An integer beyond 64 bits, or a number beyond a double's range.
    NumberOutOfRange,
}

impl Unreadable {
    /// Every reason, in the order they are documented.
    #[cfg(test)]
    pub(crate) const ALL: [Unreadable; 6] = [
        Unreadable::Syntax,
        Unreadable::NotAnObject,
        Unreadable::TooDeep,
        Unreadable::DuplicateKey,
        Unreadable::LoneSurrogate,
        Unreadable::NumberOutOfRange,
    ];

    /// What the caller is told (never any of its text: the arguments may
    /// hold secrets, and the answer is logged and traced).
    pub(crate) fn reason(self) -> &'static str {
        match self {
            Unreadable::Syntax => "they are not valid JSON",
            Unreadable::NotAnObject => "they must be a JSON object",
            Unreadable::TooDeep => "objects and arrays in them nest deeper than 64 levels",
            Unreadable::DuplicateKey => "an object in them has the same key twice",
            Unreadable::LoneSurrogate => {
                "a string in them has a \\u escape of half a UTF-16 surrogate pair"
            }
            Unreadable::NumberOutOfRange => {
                "a number in them is an integer beyond 64 bits or beyond a double's range"
            }
        }
    }
}

#[cfg(feature = "twins")]
impl Unreadable {
    /// Its name, for the fuzz target.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Unreadable::Syntax => "syntax",
            Unreadable::NotAnObject => "not_an_object",
            Unreadable::TooDeep => "too_deep",
            Unreadable::DuplicateKey => "duplicate_key",
            Unreadable::LoneSurrogate => "lone_surrogate",
            Unreadable::NumberOutOfRange => "number_out_of_range",
        }
    }
}

impl fmt::Display for Unreadable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the tool call's arguments were refused: {}",
            self.reason()
        )
    }
}

/// `text` as a call's arguments: one JSON object, read alike by every reader.
pub(crate) fn arguments(text: &str) -> Result<(), Unreadable> {
    value(text)?;
    object_first(text)
}

/// `text` as one JSON value read alike by every reader, as [`arguments`]
/// checks it but for being an object (a tool's structured content, kept as
/// the upstream wrote it: `crate::tool_answer`).
pub(crate) fn value(text: &str) -> Result<(), Unreadable> {
    Checker::whole(text)
}

/// A call's arguments as the client sent them, admitted by [`arguments`]:
/// only this check makes one.
#[derive(Debug)]
pub(crate) struct Checked(Box<RawValue>);

impl Checked {
    /// `raw`, if it is a call's arguments every reader reads alike.
    pub(crate) fn new(raw: Box<RawValue>) -> Result<Checked, Unreadable> {
        arguments(raw.get())?;
        Ok(Checked(raw))
    }

    pub(crate) fn into_raw(self) -> Box<RawValue> {
        self.0
    }
}

impl From<Checked> for crate::call::Arguments {
    /// A client's arguments as they came: only checked ones are held raw.
    fn from(checked: Checked) -> Self {
        crate::call::Arguments::raw(std::sync::Arc::from(checked.into_raw()))
    }
}

/// Whether the value `text` holds (valid JSON) is an object.
fn object_first(text: &str) -> Result<(), Unreadable> {
    match text.trim_start_matches([' ', '\t', '\n', '\r']).as_bytes() {
        [b'{', ..] => Ok(()),
        _ => Err(Unreadable::NotAnObject),
    }
}

/// `bytes` as a call's arguments, decided in one pass ([`arguments`], which
/// is what runs, on bytes).
#[cfg(any(test, feature = "twins"))]
pub(crate) fn check(bytes: &[u8]) -> Result<(), Unreadable> {
    let text = std::str::from_utf8(bytes).map_err(|_| Unreadable::Syntax)?;
    arguments(text)
}

/// The same verdict as [`check`], composed of serde_json's own readings:
/// the text as one JSON value, then each object as its entries (keys read
/// as text), each array as its items, each string as text, each integer as
/// an `i64` or `u64` and each other number as an `f64`. Slow (each level
/// is read again), for the tests and the fuzz target.
#[cfg(any(test, feature = "twins"))]
pub(crate) fn by_serde(bytes: &[u8]) -> Result<(), Unreadable> {
    let raw: &serde_json::value::RawValue =
        serde_json::from_slice(bytes).map_err(|_| Unreadable::Syntax)?;
    twin::value(raw.get(), 0)?;
    object_first(raw.get())
}

/// A one-pass reader of JSON text that checks as it goes.
struct Checker<'a> {
    text: &'a str,
    at: usize,
    /// The keys of the objects being read, outermost first: each object's
    /// from where it started (one stack, not a list per object). A tool's
    /// usual arguments fit in place, with no allocation.
    keys: KeyStack<'a>,
}

impl<'a> Checker<'a> {
    /// `text` as one JSON value and nothing else but whitespace.
    fn whole(text: &'a str) -> Result<(), Unreadable> {
        let mut checker = Checker {
            text,
            at: 0,
            keys: KeyStack::new(),
        };
        checker.value(0)?;
        checker.skip_blank();
        if checker.at == text.len() {
            Ok(())
        } else {
            Err(Unreadable::Syntax)
        }
    }

    fn bytes(&self) -> &'a [u8] {
        self.text.as_bytes()
    }

    fn skip_blank(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.bytes().get(self.at) {
            self.at += 1;
        }
    }

    /// The next byte after whitespace, taken.
    fn next(&mut self) -> Result<u8, Unreadable> {
        self.skip_blank();
        let byte = *self.bytes().get(self.at).ok_or(Unreadable::Syntax)?;
        self.at += 1;
        Ok(byte)
    }

    /// One value, inside `depth` objects and arrays.
    fn value(&mut self, depth: usize) -> Result<(), Unreadable> {
        match self.next()? {
            b'{' => self.object(depth + 1),
            b'[' => self.array(depth + 1),
            b'"' => self.string().map(drop),
            b't' => self.literal(b"rue"),
            b'f' => self.literal(b"alse"),
            b'n' => self.literal(b"ull"),
            b'-' | b'0'..=b'9' => {
                self.at -= 1;
                self.number()
            }
            _ => Err(Unreadable::Syntax),
        }
    }

    fn literal(&mut self, rest: &[u8]) -> Result<(), Unreadable> {
        if self.bytes()[self.at..].starts_with(rest) {
            self.at += rest.len();
            Ok(())
        } else {
            Err(Unreadable::Syntax)
        }
    }

    /// An object's entries, its `{` taken; it is the `depth`-th level.
    fn object(&mut self, depth: usize) -> Result<(), Unreadable> {
        if depth > MAX_DEPTH {
            return Err(Unreadable::TooDeep);
        }
        self.skip_blank();
        if self.bytes().get(self.at) == Some(&b'}') {
            self.at += 1;
            return Ok(());
        }
        let mut keys = Keys {
            from: self.keys.len(),
            many: None,
        };
        loop {
            if self.next()? != b'"' {
                return Err(Unreadable::Syntax);
            }
            let key = self.key()?;
            keys.insert(&mut self.keys, key)?;
            if self.next()? != b':' {
                return Err(Unreadable::Syntax);
            }
            self.value(depth)?;
            match self.next()? {
                b',' => {}
                b'}' => {
                    self.keys.truncate(keys.from);
                    return Ok(());
                }
                _ => return Err(Unreadable::Syntax),
            }
        }
    }

    /// An array's items, its `[` taken; it is the `depth`-th level.
    fn array(&mut self, depth: usize) -> Result<(), Unreadable> {
        if depth > MAX_DEPTH {
            return Err(Unreadable::TooDeep);
        }
        self.skip_blank();
        if self.bytes().get(self.at) == Some(&b']') {
            self.at += 1;
            return Ok(());
        }
        loop {
            self.value(depth)?;
            match self.next()? {
                b',' => {}
                b']' => return Ok(()),
                _ => return Err(Unreadable::Syntax),
            }
        }
    }

    /// A string, its opening quote taken: its quoted text, and whether it
    /// has an escape.
    fn string(&mut self) -> Result<(&'a str, bool), Unreadable> {
        let start = self.at - 1;
        let mut escaped = false;
        loop {
            let byte = *self.bytes().get(self.at).ok_or(Unreadable::Syntax)?;
            self.at += 1;
            match byte {
                b'"' => return Ok((&self.text[start..self.at], escaped)),
                b'\\' => {
                    escaped = true;
                    self.escape()?;
                }
                0..0x20 => return Err(Unreadable::Syntax),
                _ => {}
            }
        }
    }

    /// A key, its opening quote taken: its text, unescaped (by serde_json,
    /// which reads it as every reader does) only when it has an escape.
    fn key(&mut self) -> Result<Cow<'a, str>, Unreadable> {
        let (quoted, escaped) = self.string()?;
        if !escaped {
            return Ok(Cow::Borrowed(&quoted[1..quoted.len() - 1]));
        }
        // Checked by `string`: every escape is whole and every surrogate
        // paired.
        serde_json::from_str(quoted)
            .map(Cow::Owned)
            .map_err(|_| Unreadable::Syntax)
    }

    /// An escape, its `\` taken: a `\u` escape of a surrogate must be the
    /// first half of a pair whose second half follows at once.
    fn escape(&mut self) -> Result<(), Unreadable> {
        let byte = *self.bytes().get(self.at).ok_or(Unreadable::Syntax)?;
        self.at += 1;
        match byte {
            b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => Ok(()),
            b'u' => match self.hex()? {
                0xD800..=0xDBFF => {
                    if !self.bytes()[self.at..].starts_with(b"\\u") {
                        return Err(Unreadable::LoneSurrogate);
                    }
                    self.at += 2;
                    match self.hex()? {
                        0xDC00..=0xDFFF => Ok(()),
                        _ => Err(Unreadable::LoneSurrogate),
                    }
                }
                0xDC00..=0xDFFF => Err(Unreadable::LoneSurrogate),
                _ => Ok(()),
            },
            _ => Err(Unreadable::Syntax),
        }
    }

    /// Four hex digits.
    fn hex(&mut self) -> Result<u16, Unreadable> {
        let digits = self
            .text
            .get(self.at..self.at + 4)
            .filter(|digits| digits.bytes().all(|b| b.is_ascii_hexdigit()))
            .ok_or(Unreadable::Syntax)?;
        self.at += 4;
        u16::from_str_radix(digits, 16).map_err(|_| Unreadable::Syntax)
    }

    /// A number: JSON's grammar, then whether it is held alike (see
    /// [`held`]).
    fn number(&mut self) -> Result<(), Unreadable> {
        let start = self.at;
        let bytes = self.bytes();
        let digits = |at: usize| {
            bytes[at..]
                .iter()
                .take_while(|b| b.is_ascii_digit())
                .count()
        };
        let mut at = start + usize::from(bytes[start] == b'-');
        match bytes.get(at) {
            Some(b'0') => at += 1,
            Some(b'1'..=b'9') => at += digits(at),
            _ => return Err(Unreadable::Syntax),
        }
        let mut integer = true;
        if bytes.get(at) == Some(&b'.') {
            integer = false;
            let fraction = digits(at + 1);
            if fraction == 0 {
                return Err(Unreadable::Syntax);
            }
            at += 1 + fraction;
        }
        if let Some(b'e' | b'E') = bytes.get(at) {
            integer = false;
            at += 1;
            if let Some(b'+' | b'-') = bytes.get(at) {
                at += 1;
            }
            let exponent = digits(at);
            if exponent == 0 {
                return Err(Unreadable::Syntax);
            }
            at += exponent;
        }
        self.at = at;
        held(&self.text[start..at], integer)
    }
}

/// Whether a number (`token`, valid JSON) is held alike by every reader:
/// an integer fits 64 bits (`i64` when negative, `u64` otherwise), any
/// other number a double, as serde_json reads it.
fn held(token: &str, integer: bool) -> Result<(), Unreadable> {
    let fits = if !integer {
        serde_json::from_str::<f64>(token).is_ok()
    } else if token.starts_with('-') {
        token.parse::<i64>().is_ok()
    } else {
        token.parse::<u64>().is_ok()
    };
    fits.then_some(()).ok_or(Unreadable::NumberOutOfRange)
}

/// An object's keys so far: on the checker's stack from `from`. Most
/// objects have a few: those are compared one by one; past [`Keys::FEW`]
/// they are hashed.
/// The keys of the objects being read ([`Checker`]'s `keys`).
type KeyStack<'a> = smallvec::SmallVec<[Cow<'a, str>; 8]>;

struct Keys<'a> {
    from: usize,
    many: Option<HashSet<Cow<'a, str>>>,
}

impl<'a> Keys<'a> {
    const FEW: usize = 16;

    fn insert(&mut self, stack: &mut KeyStack<'a>, key: Cow<'a, str>) -> Result<(), Unreadable> {
        let few = &stack[self.from..];
        let fresh = match &mut self.many {
            None if few.len() < Self::FEW => {
                let fresh = !few.contains(&key);
                stack.push(key);
                fresh
            }
            None => self.many.insert(few.iter().cloned().collect()).insert(key),
            Some(many) => many.insert(key),
        };
        fresh.then_some(()).ok_or(Unreadable::DuplicateKey)
    }
}

/// [`by_serde`]'s steps.
#[cfg(any(test, feature = "twins"))]
mod twin {
    use std::{borrow::Cow, collections::HashSet, fmt};

    use serde::de::{Deserializer, MapAccess, Visitor};
    use serde_json::value::RawValue;

    use super::{MAX_DEPTH, Unreadable};

    /// The value `text` (valid JSON, read by serde as one), inside `depth`
    /// objects and arrays.
    pub(super) fn value(text: &str, depth: usize) -> Result<(), Unreadable> {
        match text.as_bytes()[0] {
            b'{' | b'[' if depth + 1 > MAX_DEPTH => Err(Unreadable::TooDeep),
            b'{' => {
                let mut deserializer = serde_json::Deserializer::from_str(text);
                let entries = deserializer
                    .deserialize_map(Entries)
                    // The entries' values are only skipped here: a key is
                    // the only text read as a string, so its escape is why.
                    .map_err(|_| Unreadable::LoneSurrogate)?;
                let mut keys = HashSet::new();
                if !entries.iter().all(|(key, _)| keys.insert(key)) {
                    return Err(Unreadable::DuplicateKey);
                }
                entries
                    .iter()
                    .try_for_each(|(_, item)| value(item.get(), depth + 1))
            }
            b'[' => {
                let items: Vec<&RawValue> =
                    serde_json::from_str(text).map_err(|_| Unreadable::Syntax)?;
                items
                    .iter()
                    .try_for_each(|item| value(item.get(), depth + 1))
            }
            b'"' => serde_json::from_str::<String>(text)
                .map(drop)
                .map_err(|_| Unreadable::LoneSurrogate),
            b'-' | b'0'..=b'9' if text.contains(['.', 'e', 'E']) => {
                serde_json::from_str::<f64>(text)
                    .map(drop)
                    .map_err(|_| Unreadable::NumberOutOfRange)
            }
            // An integer: held as one only if serde holds it as one (a
            // longer one it reads as a double), but for `-0`, which serde
            // reads as the double -0.0 to keep its sign.
            b'-' | b'0'..=b'9' => {
                let number: serde_json::Number =
                    serde_json::from_str(text).map_err(|_| Unreadable::NumberOutOfRange)?;
                let integer = number.is_i64() || number.is_u64();
                let negative_zero = number.as_f64() == Some(0.0) && text.starts_with('-');
                (integer || negative_zero)
                    .then_some(())
                    .ok_or(Unreadable::NumberOutOfRange)
            }
            _ => Ok(()),
        }
    }

    /// An object's entries in order, each key read as text and each value
    /// kept as it is.
    struct Entries;

    impl<'de> Visitor<'de> for Entries {
        type Value = Vec<(Cow<'de, str>, &'de RawValue)>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an object")
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut entries = Vec::new();
            while let Some(key) = map.next_key::<Key<'de>>()? {
                entries.push((key.0, map.next_value()?));
            }
            Ok(entries)
        }
    }

    /// A key, borrowed when it has no escape.
    struct Key<'de>(Cow<'de, str>);

    impl<'de> serde::Deserialize<'de> for Key<'de> {
        fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            deserializer.deserialize_str(KeyVisitor)
        }
    }

    struct KeyVisitor;

    impl<'de> Visitor<'de> for KeyVisitor {
        type Value = Key<'de>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a key")
        }

        fn visit_borrowed_str<E>(self, key: &'de str) -> Result<Self::Value, E> {
            Ok(Key(Cow::Borrowed(key)))
        }

        fn visit_str<E>(self, key: &str) -> Result<Self::Value, E> {
            Ok(Key(Cow::Owned(key.to_owned())))
        }
    }
}

#[cfg(test)]
mod tests;
