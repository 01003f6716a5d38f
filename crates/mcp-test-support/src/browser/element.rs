//! Elements found on a page, and the keys a test can press.

use std::fmt;

use anyhow::Context as _;
use serde_json::{Value, json};

use super::wire::Wire;

/// The key under which WebDriver names an element in JSON.
const ELEMENT_KEY: &str = "element-6066-11e4-a52e-4f735466cecf";

/// An element of the current page, as WebDriver references it. Stale once
/// the page navigates away or removes it (commands then fail with `stale
/// element reference`).
#[derive(Debug, Clone)]
pub struct Element {
    wire: Wire,
    id: String,
}

impl Element {
    /// The element a WebDriver answer references.
    pub(super) fn from_value(wire: &Wire, value: &Value) -> anyhow::Result<Self> {
        let id = value[ELEMENT_KEY]
            .as_str()
            .with_context(|| format!("not an element reference: {value}"))?;
        Ok(Self {
            wire: wire.clone(),
            id: id.to_owned(),
        })
    }

    /// This element as an argument of [`Browser::execute`](super::Browser::execute)
    /// (the script gets the DOM element).
    pub fn as_arg(&self) -> Value {
        json!({ ELEMENT_KEY: self.id })
    }

    /// Clicks its centre, scrolling it into view first (fails with
    /// `element click intercepted` when something covers it).
    pub async fn click(&self) -> anyhow::Result<()> {
        self.wire.post(&self.path("/click"), json!({})).await?;
        Ok(())
    }

    /// Its rendered text (`innerText`: hidden parts left out).
    pub async fn text(&self) -> anyhow::Result<String> {
        let text = self.wire.get(&self.path("/text")).await?;
        Ok(text.as_str().unwrap_or_default().to_owned())
    }

    /// Focuses it and types `text` (which may hold [`Key`]s).
    pub async fn send_keys(&self, text: &str) -> anyhow::Result<()> {
        self.wire
            .post(&self.path("/value"), json!({ "text": text }))
            .await?;
        Ok(())
    }

    /// An attribute as written in the markup, or `None` without it.
    pub async fn attribute(&self, name: &str) -> anyhow::Result<Option<String>> {
        let value = self
            .wire
            .get(&self.path(&format!("/attribute/{name}")))
            .await?;
        Ok(value.as_str().map(str::to_owned))
    }

    /// A DOM property (e.g. `value`, `checked`), as JSON.
    pub async fn property(&self, name: &str) -> anyhow::Result<Value> {
        self.wire
            .get(&self.path(&format!("/property/{name}")))
            .await
    }

    /// Whether it is rendered visibly (WebDriver's "element displayedness").
    pub async fn is_displayed(&self) -> anyhow::Result<bool> {
        let shown = self.wire.get(&self.path("/displayed")).await?;
        Ok(shown.as_bool().unwrap_or(false))
    }

    fn path(&self, command: &str) -> String {
        format!("/element/{}{command}", self.id)
    }
}

/// A key that is not a character, for [`Browser::press_keys`](super::Browser::press_keys),
/// [`Browser::press_chord`](super::Browser::press_chord) and
/// [`Element::send_keys`]. Formats (`{}`) as its WebDriver code point, so
/// it can be mixed into typed text: `format!("abc{}", Key::Enter)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    Backspace,
    Tab,
    Enter,
    Shift,
    Control,
    Escape,
    Space,
    End,
    Home,
    ArrowLeft,
    ArrowUp,
    ArrowRight,
    ArrowDown,
}

impl Key {
    /// Every key, in the order of their codes.
    pub const ALL: [Key; 13] = [
        Key::Backspace,
        Key::Tab,
        Key::Enter,
        Key::Shift,
        Key::Control,
        Key::Escape,
        Key::Space,
        Key::End,
        Key::Home,
        Key::ArrowLeft,
        Key::ArrowUp,
        Key::ArrowRight,
        Key::ArrowDown,
    ];

    /// The code point WebDriver's "keys" table gives it.
    pub const fn code(self) -> char {
        match self {
            Key::Backspace => '\u{E003}',
            Key::Tab => '\u{E004}',
            Key::Enter => '\u{E007}',
            Key::Shift => '\u{E008}',
            Key::Control => '\u{E009}',
            Key::Escape => '\u{E00C}',
            Key::Space => '\u{E00D}',
            Key::End => '\u{E010}',
            Key::Home => '\u{E011}',
            Key::ArrowLeft => '\u{E012}',
            Key::ArrowUp => '\u{E013}',
            Key::ArrowRight => '\u{E014}',
            Key::ArrowDown => '\u{E015}',
        }
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.code())
    }
}

/// One Actions API key sequence: `down` pressed in order, then released in
/// reverse order (a chord when several), for each group of `groups`.
pub(super) fn key_actions<'a>(groups: impl IntoIterator<Item = &'a [char]>) -> Value {
    let mut actions = Vec::new();
    for group in groups {
        for key in group {
            actions.push(json!({ "type": "keyDown", "value": key.to_string() }));
        }
        for key in group.iter().rev() {
            actions.push(json!({ "type": "keyUp", "value": key.to_string() }));
        }
    }
    json!({ "actions": [{ "type": "key", "id": "keyboard", "actions": actions }] })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_codes_are_distinct_and_in_the_private_use_range() {
        let codes: std::collections::BTreeSet<char> = Key::ALL.iter().map(|k| k.code()).collect();
        assert_eq!(codes.len(), Key::ALL.len());
        assert!(codes.iter().all(|c| ('\u{E000}'..='\u{E05D}').contains(c)));
        assert_eq!(format!("a{}", Key::Tab), "a\u{E004}");
    }

    #[test]
    fn a_chord_is_released_in_reverse() {
        let shift_tab = [Key::Shift.code(), Key::Tab.code()];
        let enter = [Key::Enter.code()];
        let sequence = key_actions([&shift_tab[..], &enter[..]]);
        let steps: Vec<(String, String)> = sequence["actions"][0]["actions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|step| {
                let key = Key::ALL
                    .into_iter()
                    .find(|key| step["value"] == key.code().to_string())
                    .unwrap();
                (
                    step["type"].as_str().unwrap().to_owned(),
                    format!("{key:?}"),
                )
            })
            .collect();
        let expected = [
            ("keyDown", "Shift"),
            ("keyDown", "Tab"),
            ("keyUp", "Tab"),
            ("keyUp", "Shift"),
            ("keyDown", "Enter"),
            ("keyUp", "Enter"),
        ];
        let expected: Vec<(String, String)> = expected
            .iter()
            .map(|(kind, key)| ((*kind).to_owned(), (*key).to_owned()))
            .collect();
        assert_eq!(steps, expected);
    }
}
