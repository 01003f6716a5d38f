//! The protocol's two generations, one word for the gateway and the
//! session alike (docs/ARCHITECTURE.md, "Two generations").

use rmcp::model::ProtocolVersion;

/// The generation of the protocol a peer speaks, from the version agreed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Generation {
    /// 2025 (through 2025-11-25): a session opened by `initialize`, every
    /// request in it.
    Sessions,
    /// 2026-07-28: no session; every request carries its client's context.
    Stateless,
}

impl Generation {
    pub fn of(version: &ProtocolVersion) -> Self {
        if version.has_initialize() {
            Generation::Sessions
        } else {
            Generation::Stateless
        }
    }

    /// The generation of `version`, where none agreed yet means a 2025
    /// session's (`initialize` is what agrees on one).
    pub fn of_agreed(version: Option<&ProtocolVersion>) -> Self {
        version.map_or(Generation::Sessions, Generation::of)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_2026_07_28_is_stateless() {
        assert_eq!(
            Generation::of(&ProtocolVersion::V_2026_07_28),
            Generation::Stateless
        );
        for version in [
            ProtocolVersion::V_2025_03_26,
            ProtocolVersion::V_2025_06_18,
            ProtocolVersion::V_2025_11_25,
        ] {
            assert_eq!(Generation::of(&version), Generation::Sessions);
        }
        assert_eq!(Generation::of_agreed(None), Generation::Sessions);
    }
}
