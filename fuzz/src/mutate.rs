//! The short run's input generator: seeded, deterministic mutations of the
//! seed corpus, with each target's dictionary (`dicts/NAME.dict`, the format
//! libFuzzer's `-dict=` reads). No coverage feedback: that is what the long
//! libFuzzer run adds.

/// xorshift64*: small, fast, and the same sequence on every machine.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15 | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform-ish in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    pub fn chance(&mut self, one_in: usize) -> bool {
        self.below(one_in) == 0
    }
}

/// Bytes that matter to JSON, TOML and HTTP-dates.
const INTERESTING_BYTES: &[u8] = b"\0\x01\x7f\x80\xff \t\r\n\"'\\{}[](),:;=.-+_#@/0123456789aeEzZ";

/// Numbers at edges.
const INTERESTING_NUMBERS: &[&str] = &[
    "0",
    "-1",
    "1",
    "255",
    "65535",
    "65536",
    "2147483647",
    "-2147483648",
    "4294967296",
    "9007199254740993",
    "18446744073709551615",
    "18446744073709551616",
    "99999999999999999999999999",
    "1e309",
    "-0",
    "0.5",
    "1.7976931348623157e308",
    "NaN",
    "inf",
];

/// Parses a libFuzzer dictionary: one `"token"` per line (optionally
/// `name="token"`), `\\`, `\"` and `\xNN` escapes, `#` comments.
pub fn parse_dict(text: &str) -> Vec<Vec<u8>> {
    let mut tokens = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some(start) = line.find('"') else {
            continue;
        };
        let Some(end) = line.rfind('"') else {
            continue;
        };
        if end <= start {
            continue;
        }
        let inner = &line.as_bytes()[start + 1..end];
        let mut token = Vec::new();
        let mut i = 0;
        while i < inner.len() {
            match inner[i] {
                b'\\' if i + 1 < inner.len() => match inner[i + 1] {
                    b'x' if i + 3 < inner.len() => {
                        let hex = std::str::from_utf8(&inner[i + 2..i + 4]).unwrap_or("");
                        if let Ok(byte) = u8::from_str_radix(hex, 16) {
                            token.push(byte);
                        }
                        i += 4;
                    }
                    other => {
                        token.push(other);
                        i += 2;
                    }
                },
                byte => {
                    token.push(byte);
                    i += 1;
                }
            }
        }
        tokens.push(token);
    }
    tokens
}

/// What the inputs are, so that most mutations keep them well-formed and
/// reach past the parser into the code behind it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Opaque bytes: byte-level mutations only.
    Bytes,
    /// A JSON document after `prefix` raw bytes (which are mutated as bytes).
    Json { prefix: usize },
    /// A TOML document.
    Toml,
}

/// What the mutator draws on.
#[derive(Debug)]
pub struct Mutator<'a> {
    pub corpus: &'a [Vec<u8>],
    pub dict: &'a [Vec<u8>],
    pub max_len: usize,
    pub format: Format,
}

/// Strings that break things: empty, huge, control characters, paths, the
/// config canary placeholder, numbers as text.
const INTERESTING_STRINGS: &[&str] = &[
    "",
    " ",
    "@SECRET@",
    "\0",
    "\u{0}",
    "\u{202e}",
    "a__b",
    "__",
    "../../../../etc/passwd",
    "http://",
    "-1",
    "99999999999999999999",
    "2026-07-28",
    "2025-11-25",
    "1970-01-01",
    "\r\n",
    "\u{fffd}",
];

impl Mutator<'_> {
    /// A new input: a corpus entry with stacked mutations (mostly few, so
    /// that most inputs stay close to something meaningful).
    pub fn generate(&self, rng: &mut Rng) -> Vec<u8> {
        let mut data = if self.corpus.is_empty() {
            Vec::new()
        } else {
            self.corpus[rng.below(self.corpus.len())].clone()
        };
        let rounds = if rng.chance(4) {
            1 + rng.below(8)
        } else {
            1 + rng.below(2)
        };
        for _ in 0..rounds {
            let structured = self.format != Format::Bytes && !rng.chance(4);
            if !(structured && self.mutate_structure(&mut data, rng)) {
                self.mutate(&mut data, rng);
            }
        }
        data.truncate(self.max_len);
        data
    }

    /// A mutation of the parsed document; false when it does not parse (the
    /// caller then mutates bytes).
    fn mutate_structure(&self, data: &mut Vec<u8>, rng: &mut Rng) -> bool {
        match self.format {
            Format::Bytes => false,
            Format::Json { prefix } => {
                let prefix = prefix.min(data.len());
                if prefix > 0 && rng.chance(8) {
                    let i = rng.below(prefix);
                    data[i] = rng.next_u64() as u8;
                    return true;
                }
                let Ok(mut value) = serde_json::from_slice::<serde_json::Value>(&data[prefix..])
                else {
                    return false;
                };
                let donor = self.donor_json(rng, prefix);
                json::mutate(&mut value, rng, self, donor.as_ref());
                let Ok(mut text) = serde_json::to_vec(&value) else {
                    return false;
                };
                // A parsed document holds each key once: some keys are
                // written twice after it is written out again.
                if rng.chance(6) {
                    repeat_a_member(&mut text, rng);
                }
                data.truncate(prefix);
                data.extend_from_slice(&text);
                true
            }
            Format::Toml => {
                let Ok(text) = std::str::from_utf8(data) else {
                    return false;
                };
                let Ok(mut table) = text.parse::<toml::Table>() else {
                    return false;
                };
                let donor = self.donor_toml(rng);
                toml_tree::mutate(&mut table, rng, self, donor.as_ref());
                let Ok(text) = toml::to_string(&table) else {
                    return false;
                };
                *data = text.into_bytes();
                true
            }
        }
    }

    fn donor_json(&self, rng: &mut Rng, prefix: usize) -> Option<serde_json::Value> {
        let entry = self.corpus.get(rng.below(self.corpus.len().max(1)))?;
        serde_json::from_slice(entry.get(prefix..)?).ok()
    }

    fn donor_toml(&self, rng: &mut Rng) -> Option<toml::Table> {
        let entry = self.corpus.get(rng.below(self.corpus.len().max(1)))?;
        std::str::from_utf8(entry).ok()?.parse().ok()
    }

    /// A key or string value: a dictionary word (quotes stripped), an
    /// interesting string, or random letters.
    fn word(&self, rng: &mut Rng) -> String {
        match rng.below(3) {
            0 if !self.dict.is_empty() => {
                let token = &self.dict[rng.below(self.dict.len())];
                String::from_utf8_lossy(token).trim_matches('"').to_owned()
            }
            1 => {
                let text = INTERESTING_STRINGS[rng.below(INTERESTING_STRINGS.len())];
                unescape(text)
            }
            _ => {
                let len = rng.below(12);
                let mut word: String = (0..len)
                    .map(|_| char::from(b'a' + (rng.below(26) as u8)))
                    .collect();
                if rng.chance(16) {
                    word = word.repeat(200);
                }
                word
            }
        }
    }

    fn integer(&self, rng: &mut Rng) -> i64 {
        const EDGES: &[i64] = &[
            0,
            1,
            -1,
            2,
            3,
            255,
            65_535,
            65_536,
            i32::MAX as i64,
            u32::MAX as i64,
            i64::MAX,
            i64::MIN,
        ];
        if rng.chance(2) {
            EDGES[rng.below(EDGES.len())]
        } else {
            rng.next_u64() as i64 >> rng.below(64)
        }
    }

    fn mutate(&self, data: &mut Vec<u8>, rng: &mut Rng) {
        let len = data.len();
        match rng.below(11) {
            // Flip one bit.
            0 if len > 0 => {
                let i = rng.below(len);
                data[i] ^= 1 << rng.below(8);
            }
            // Overwrite one byte with an interesting one.
            1 if len > 0 => {
                let i = rng.below(len);
                data[i] = INTERESTING_BYTES[rng.below(INTERESTING_BYTES.len())];
            }
            // Insert a few random bytes.
            2 => {
                let at = rng.below(len + 1);
                let n = 1 + rng.below(8);
                let bytes: Vec<u8> = (0..n).map(|_| rng.next_u64() as u8).collect();
                data.splice(at..at, bytes);
            }
            // Delete a range.
            3 if len > 0 => {
                let at = rng.below(len);
                let n = 1 + rng.below((len - at).min(32));
                data.drain(at..at + n);
            }
            // Copy a range somewhere else.
            4 if len > 0 => {
                let from = rng.below(len);
                let n = 1 + rng.below((len - from).min(64));
                let chunk = data[from..from + n].to_vec();
                let at = rng.below(len + 1);
                data.splice(at..at, chunk);
            }
            // Insert or overwrite with a dictionary token.
            5 | 6 if !self.dict.is_empty() => {
                let token = self.dict[rng.below(self.dict.len())].clone();
                let at = rng.below(len + 1);
                if rng.chance(2) || at == len {
                    data.splice(at..at, token);
                } else {
                    let end = (at + token.len()).min(len);
                    data.splice(at..end, token);
                }
            }
            // Replace a run of digits (or insert) with an edge number.
            7 => {
                let number = INTERESTING_NUMBERS[rng.below(INTERESTING_NUMBERS.len())].as_bytes();
                let at = rng.below(len + 1);
                let mut end = at;
                while end < len && data[end].is_ascii_digit() {
                    end += 1;
                }
                data.splice(at..end, number.iter().copied());
            }
            // Splice: a prefix of this one and a suffix of another entry.
            8 if !self.corpus.is_empty() => {
                let other = &self.corpus[rng.below(self.corpus.len())];
                let cut = rng.below(len + 1);
                let from = rng.below(other.len() + 1);
                data.truncate(cut);
                data.extend_from_slice(&other[from..]);
            }
            // Truncate.
            9 if len > 0 => data.truncate(rng.below(len)),
            // Repeat a chunk many times (deep nesting, long strings).
            _ if len > 0 => {
                let from = rng.below(len);
                let n = 1 + rng.below((len - from).min(8));
                let chunk = data[from..from + n].to_vec();
                let times = 2 + rng.below(64);
                let at = from + n;
                let repeated: Vec<u8> = chunk.iter().copied().cycle().take(n * times).collect();
                data.splice(at..at, repeated);
            }
            _ => data.push(rng.next_u64() as u8),
        }
    }
}

/// `\0`, `\u{…}` and `\r\n` in [`INTERESTING_STRINGS`], written out.
fn unescape(text: &str) -> String {
    match text {
        "\\0" => "\0".to_owned(),
        "\\u{0}" => "\u{0}".to_owned(),
        "\\u{202e}" => "\u{202e}".to_owned(),
        "\\r\\n" => "\r\n".to_owned(),
        "\\u{fffd}" => "\u{fffd}".to_owned(),
        other => other.to_owned(),
    }
}

/// Documents bigger than this are only mutated as bytes (picking a node is
/// quadratic in the nesting depth).
const MAX_NODES: usize = 2_000;

/// Structural mutations of a JSON document.
mod json {
    use serde_json::{Value, json};

    use super::{MAX_NODES, Mutator, Rng};

    fn count(value: &Value) -> usize {
        1 + match value {
            Value::Array(items) => items.iter().map(count).sum(),
            Value::Object(map) => map.values().map(count).sum(),
            _ => 0,
        }
    }

    /// The `n`-th node in pre-order.
    fn nth(value: &mut Value, mut n: usize) -> &mut Value {
        if n == 0 {
            return value;
        }
        n -= 1;
        let children: Vec<&mut Value> = match value {
            Value::Array(items) => items.iter_mut().collect(),
            Value::Object(map) => map.values_mut().collect(),
            _ => return value,
        };
        for child in children {
            let size = count(child);
            if n < size {
                return nth(child, n);
            }
            n -= size;
        }
        unreachable!("n is below the node count")
    }

    fn any_node(value: &mut Value, rng: &mut Rng) -> Value {
        let total = count(value);
        nth(value, rng.below(total)).clone()
    }

    fn scalar(rng: &mut Rng, m: &Mutator<'_>) -> Value {
        match rng.below(8) {
            0 => Value::Null,
            1 => Value::Bool(rng.chance(2)),
            2 => json!(m.integer(rng)),
            3 => json!([1e308, -0.0, 0.5, 1e-310, 1.8e19][rng.below(5)]),
            4 => json!({}),
            5 => json!([]),
            _ => Value::String(m.word(rng)),
        }
    }

    pub(super) fn mutate(value: &mut Value, rng: &mut Rng, m: &Mutator<'_>, donor: Option<&Value>) {
        let total = count(value);
        if total > MAX_NODES {
            return;
        }
        let node = nth(value, rng.below(total));
        match rng.below(7) {
            0 => *node = scalar(rng, m),
            1 => {
                if let Value::Object(map) = node {
                    let key = m.word(rng);
                    let new = match donor {
                        Some(donor) if rng.chance(2) => any_node(&mut donor.clone(), rng),
                        _ => scalar(rng, m),
                    };
                    map.insert(key, new);
                } else if let Value::Array(items) = node {
                    items.push(scalar(rng, m));
                } else {
                    *node = scalar(rng, m);
                }
            }
            2 => match node {
                Value::Object(map) if !map.is_empty() => {
                    let key = map.keys().nth(rng.below(map.len())).cloned();
                    if let Some(key) = key {
                        map.remove(&key);
                    }
                }
                Value::Array(items) if !items.is_empty() => {
                    items.remove(rng.below(items.len()));
                }
                _ => *node = Value::Null,
            },
            3 => {
                if let Some(donor) = donor {
                    *node = any_node(&mut donor.clone(), rng);
                }
            }
            4 => {
                let inner = node.take();
                *node = if rng.chance(2) {
                    json!([inner])
                } else {
                    json!({ m.word(rng): inner })
                };
            }
            5 => match node {
                Value::Array(items) if !items.is_empty() => {
                    let item = items[rng.below(items.len())].clone();
                    let times = 1 + rng.below(64);
                    items.extend(std::iter::repeat_n(item, times));
                }
                Value::Number(_) => *node = json!(m.integer(rng)),
                _ => *node = Value::String(m.word(rng)),
            },
            // Deep nesting.
            _ => {
                let depth = 1 + rng.below(64);
                let mut nested = node.take();
                for _ in 0..depth {
                    nested = json!([nested]);
                }
                *node = nested;
            }
        }
    }
}

/// Structural mutations of a TOML document.
mod toml_tree {
    use toml::{Table, Value};

    use super::{MAX_NODES, Mutator, Rng};

    fn count(value: &Value) -> usize {
        1 + match value {
            Value::Array(items) => items.iter().map(count).sum(),
            Value::Table(map) => map.values().map(count).sum(),
            _ => 0,
        }
    }

    fn nth(value: &mut Value, mut n: usize) -> &mut Value {
        if n == 0 {
            return value;
        }
        n -= 1;
        let children: Vec<&mut Value> = match value {
            Value::Array(items) => items.iter_mut().collect(),
            Value::Table(map) => map.iter_mut().map(|(_, v)| v).collect(),
            _ => return value,
        };
        for child in children {
            let size = count(child);
            if n < size {
                return nth(child, n);
            }
            n -= size;
        }
        unreachable!("n is below the node count")
    }

    fn any_node(value: &mut Value, rng: &mut Rng) -> Value {
        let total = count(value);
        nth(value, rng.below(total)).clone()
    }

    fn scalar(rng: &mut Rng, m: &Mutator<'_>) -> Value {
        match rng.below(7) {
            0 => Value::Boolean(rng.chance(2)),
            1 => Value::Integer(m.integer(rng)),
            2 => Value::Float([f64::INFINITY, f64::NAN, -0.0, 0.5, 1e300][rng.below(5)]),
            3 => Value::Table(Table::new()),
            4 => Value::Array(Vec::new()),
            5 => Value::String(
                [
                    "1s", "0s", "500ms", "366d", "-1s", "1h 30m", "http", "stdio", "both", "auto",
                    "bearer",
                ][rng.below(11)]
                .to_owned(),
            ),
            _ => Value::String(m.word(rng)),
        }
    }

    pub(super) fn mutate(table: &mut Table, rng: &mut Rng, m: &Mutator<'_>, donor: Option<&Table>) {
        let mut root = Value::Table(std::mem::take(table));
        let total = count(&root);
        if total > MAX_NODES {
            if let Value::Table(map) = root {
                *table = map;
            }
            return;
        }
        let node = nth(&mut root, rng.below(total));
        match rng.below(6) {
            0 => *node = scalar(rng, m),
            1 => {
                if let Value::Table(map) = node {
                    let new = match donor {
                        Some(donor) if rng.chance(2) => {
                            any_node(&mut Value::Table(donor.clone()), rng)
                        }
                        _ => scalar(rng, m),
                    };
                    map.insert(m.word(rng), new);
                } else if let Value::Array(items) = node {
                    items.push(scalar(rng, m));
                } else {
                    *node = scalar(rng, m);
                }
            }
            2 => match node {
                Value::Table(map) if !map.is_empty() => {
                    let key = map.keys().nth(rng.below(map.len())).cloned();
                    if let Some(key) = key {
                        map.remove(&key);
                    }
                }
                Value::Array(items) if !items.is_empty() => {
                    items.remove(rng.below(items.len()));
                }
                _ => *node = scalar(rng, m),
            },
            3 => {
                if let Some(donor) = donor {
                    *node = any_node(&mut Value::Table(donor.clone()), rng);
                }
            }
            4 => {
                // Rename a key (a typo, a duplicate connection, a canary key).
                if let Value::Table(map) = node
                    && !map.is_empty()
                {
                    let key = map.keys().nth(rng.below(map.len())).cloned();
                    if let Some(key) = key
                        && let Some(value) = map.remove(&key)
                    {
                        map.insert(m.word(rng), value);
                    }
                }
            }
            _ => {
                if let Value::Array(items) = node
                    && !items.is_empty()
                {
                    let item = items[rng.below(items.len())].clone();
                    items.extend(std::iter::repeat_n(item, 1 + rng.below(16)));
                } else {
                    *node = Value::String(m.word(rng));
                }
            }
        }
        if let Value::Table(map) = root {
            *table = map;
        }
    }
}

/// Repeats one member of one object of `text` (compact JSON, as serde
/// writes it), with its own value or another member's: `{"a":1,"b":2}`
/// becomes `{"a":1,"a":2,"b":2}` or `{"a":1,"b":2,"a":1}`.
fn repeat_a_member(text: &mut Vec<u8>, rng: &mut Rng) {
    let members: Vec<usize> = text
        .windows(2)
        .enumerate()
        .filter(|(_, pair)| matches!(pair, [b'{' | b',', b'"']))
        .map(|(at, _)| at + 1)
        .collect();
    if members.is_empty() {
        return;
    }
    let start = members[rng.below(members.len())];
    let member = |start: usize| -> Option<(usize, usize)> {
        // `"key":value`: the key, then the value, each read as JSON.
        let mut items = serde_json::Deserializer::from_slice(&text[start..])
            .into_iter::<&serde_json::value::RawValue>();
        items.next()?.ok()?;
        let colon = start + items.byte_offset();
        if text.get(colon) != Some(&b':') {
            return None;
        }
        let mut value = serde_json::Deserializer::from_slice(&text[colon + 1..])
            .into_iter::<&serde_json::value::RawValue>();
        value.next()?.ok()?;
        Some((colon, colon + 1 + value.byte_offset()))
    };
    let Some((colon, end)) = member(start) else {
        return;
    };
    let key = text[start..colon].to_vec();
    let value = match members
        .get(rng.below(members.len()))
        .and_then(|&other| member(other))
    {
        Some((other_colon, other_end)) if rng.chance(2) => {
            text[other_colon + 1..other_end].to_vec()
        }
        _ => text[colon + 1..end].to_vec(),
    };
    let repeated = [b",".as_slice(), &key, b":", &value].concat();
    text.splice(end..end, repeated);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dictionaries_parse() {
        let tokens = parse_dict("# c\n\"a\\\"b\"\nkw=\"\\x41\\\\\"\n\n");
        assert_eq!(tokens, vec![b"a\"b".to_vec(), b"A\\".to_vec()]);
    }

    #[test]
    fn generation_is_deterministic() {
        let corpus = vec![b"{\"a\": 1}".to_vec(), b"x = 1".to_vec()];
        let dict = vec![b"true".to_vec()];
        let mutator = Mutator {
            corpus: &corpus,
            dict: &dict,
            max_len: 1024,
            format: Format::Bytes,
        };
        let run = |seed| {
            let mut rng = Rng::new(seed);
            (0..50)
                .map(|_| mutator.generate(&mut rng))
                .collect::<Vec<_>>()
        };
        assert_eq!(run(7), run(7));
        assert_ne!(run(7), run(8));
    }

    #[test]
    fn a_member_is_repeated_with_its_key() {
        let mut rng = Rng::new(3);
        let mut repeated = 0;
        for _ in 0..200 {
            let mut text = br#"{"a":1,"b":{"c":[1,2],"d":"x"}}"#.to_vec();
            repeat_a_member(&mut text, &mut rng);
            let text = String::from_utf8(text).unwrap();
            serde_json::from_str::<serde_json::Value>(&text).unwrap();
            let twice = ["\"a\":", "\"b\":", "\"c\":", "\"d\":"]
                .iter()
                .any(|key| text.matches(key).count() == 2);
            assert!(twice, "{text}");
            repeated += 1;
        }
        assert_eq!(repeated, 200);
    }
}
