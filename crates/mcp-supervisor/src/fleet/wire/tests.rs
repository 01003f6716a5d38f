use super::*;

/// Computed outside this code: see [`a_known_message_has_a_known_mac`].
const KNOWN_MAC: &str = "L2siMnPBlZL46Z55_qcJyg";

fn far() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(4_000_000_000)
}

fn park() -> Message {
    let mut failure = Failure::new(FailureKind::RateLimit, "HTTP 429");
    failure.status = Some(429);
    Message {
        node: "gw-1".into(),
        at: UNIX_EPOCH + Duration::from_millis(1_799_999_999_000),
        seq: 1_799_999_990_000_001,
        told: Told::Standing {
            connection: "github".into(),
            shared: Shared::Parked {
                until: UNIX_EPOCH + Duration::from_millis(1_800_000_000_123),
                failure,
                strikes: 2,
            },
        },
    }
}

/// The wire form is a contract between builds: written out here.
#[test]
fn a_park_is_written_as_documented() {
    assert_eq!(
        park().json(),
        r#"{"v":2,"node":"gw-1","at":1799999999000,"seq":1799999990000001,"kind":"parked","connection":"github","until_ms":1800000000123,"failure":{"kind":"rate_limit","status":429,"reason":"HTTP 429"},"strikes":2}"#
    );
}

#[test]
fn every_message_reads_back_as_written() {
    let furthest = UNIX_EPOCH + Duration::from_millis(1_800_000_000_123);
    let retired = Message {
        node: "a.b_c-1".into(),
        at: UNIX_EPOCH + Duration::from_millis(1_799_999_999_999),
        seq: 42,
        told: Told::Standing {
            connection: "x".into(),
            shared: Shared::Retired {
                reason: RetireReason::Failure(FailureKind::NeedsLogin),
                failure: None,
            },
        },
    };
    let held = Message {
        node: "n".into(),
        at: UNIX_EPOCH + Duration::from_millis(1_799_999_999_999),
        seq: 42,
        told: Told::Standing {
            connection: "x".into(),
            shared: Shared::Held {
                until: furthest,
                failure: Failure::new(FailureKind::RateLimit, "HTTP 429"),
            },
        },
    };
    let crash = Message {
        node: "n".into(),
        at: UNIX_EPOCH + Duration::from_millis(1_799_999_999_999),
        seq: 42,
        told: Told::Standing {
            connection: "x".into(),
            shared: Shared::Retired {
                reason: RetireReason::CrashLoop,
                failure: Some(Failure::new(FailureKind::Auth, "HTTP 401")),
            },
        },
    };
    let reset = Message {
        node: "n".into(),
        at: UNIX_EPOCH + Duration::from_millis(1_799_999_999_999),
        seq: 42,
        told: Told::Reset {
            connection: "x".into(),
        },
    };
    let revived = Message {
        node: "n".into(),
        at: UNIX_EPOCH + Duration::from_millis(1_799_999_999_999),
        seq: 42,
        told: Told::Revived {
            connection: "x".into(),
        },
    };
    let alive = Message {
        node: "n".into(),
        at: UNIX_EPOCH + Duration::from_millis(1_799_999_999_999),
        seq: 42,
        told: Told::Alive {
            parked: 3,
            retired: 1,
            gateway: Some(url::Url::parse("http://10.0.0.5:7300/").unwrap()),
        },
    };
    let reload = Message {
        node: "n".into(),
        at: UNIX_EPOCH + Duration::from_millis(1_799_999_999_999),
        seq: 42,
        told: Told::Reload,
    };
    let changed = Message {
        node: "n".into(),
        at: UNIX_EPOCH + Duration::from_millis(1_799_999_999_999),
        seq: 42,
        told: Told::ContractsChanged {
            connection: "x".into(),
        },
    };
    let seal = Seal::new(&FleetKey::new([7; 32]), "t");
    for message in [
        park(),
        retired,
        held,
        crash,
        reset,
        revived,
        reload,
        alive,
        changed,
        approval(),
    ] {
        let read = Message::decode(message.encode(&seal).as_bytes(), furthest, &seal);
        assert_eq!(read, Ok(message));
    }
}

/// The MAC of a known message under a known key and namespace,
/// computed outside this code (Python: `hmac.new(hmac.new(key,
/// b"mcp-supervisor/fleet-messages/v2\0t", sha256).digest(), json,
/// sha256).digest()[:16]`, base64url without padding): a change of the
/// derivation, the truncation or the encoding fails here.
#[test]
fn a_known_message_has_a_known_mac() {
    let seal = Seal::new(&FleetKey::new([7; 32]), "t");
    let sealed = park().encode(&seal);
    let (mac, json) = sealed.split_once('.').unwrap();
    assert_eq!(json, park().json());
    assert_eq!(mac, KNOWN_MAC);
}

/// Only the fleet's key, in its namespace, makes a MAC its nodes
/// accept, and the MAC covers every byte.
#[test]
fn a_message_without_this_fleets_mac_is_refused() {
    let seal = Seal::new(&FleetKey::new([7; 32]), "t");
    let other = Seal::new(&FleetKey::new([8; 32]), "t");
    let sealed = park().encode(&seal);
    assert_eq!(Message::decode(sealed.as_bytes(), far(), &seal), Ok(park()));
    let tampered = sealed.replace(r#""strikes":2"#, r#""strikes":0"#);
    let unsealed = park().json();
    let other_namespace = Seal::new(&FleetKey::new([7; 32]), "u");
    for text in [
        park().encode(&other),
        park().encode(&other_namespace),
        tampered,
        unsealed,
        String::new(),
        "x".repeat(23),
    ] {
        assert_eq!(
            Message::decode(text.as_bytes(), far(), &seal),
            Err(Refusal::Unauthenticated),
            "{text}"
        );
    }
}

fn approval() -> Message {
    let tool = serde_json::from_value(serde_json::json!({
        "name": "echo", "description": "Echo.", "inputSchema": {"type": "object"},
    }))
    .unwrap();
    Message {
        node: "n".into(),
        at: UNIX_EPOCH + Duration::from_millis(1_799_999_999_999),
        seq: 43,
        told: Told::ContractsApproved {
            connection: "x".into(),
            approved: vec![crate::contracts::Contract::of_tool(&tool)],
        },
    }
}

/// An approval carries the fields, never a hash to trust: one that
/// claims a hash, names an unknown kind or a bad connection is refused.
#[test]
fn an_approval_from_the_store_is_checked() {
    let ok = approval().json();
    assert!(!ok.contains("sha256"), "{ok}");
    for (text, refusal) in [
        (
            ok.replace(r#""kind":"tool""#, r#""kind":"widget""#),
            Refusal::UnknownName,
        ),
        (
            ok.replace(r#""connection":"x""#, r#""connection":"a__b""#),
            Refusal::UnknownName,
        ),
        (
            ok.replace(
                r#""name":"echo","contract""#,
                r#""sha256":"00","name":"echo","contract""#,
            ),
            Refusal::Malformed,
        ),
    ] {
        assert_eq!(
            Message::decode_json(text.as_bytes(), far()),
            Err(refusal),
            "{text}"
        );
    }
}

#[test]
fn bad_input_is_refused_with_its_reason() {
    let ok = park().json();
    let cases: [(String, Refusal); 9] = [
        ("not json".into(), Refusal::Malformed),
        ("{}".into(), Refusal::Malformed),
        (ok.replace(r#""v":2"#, r#""v":1"#), Refusal::UnknownVersion),
        (ok.replace(r#""parked""#, r#""frozen""#), Refusal::Malformed),
        (ok.replace("rate_limit", "meteor"), Refusal::UnknownName),
        (ok.replace(r#""github""#, r#""a__b""#), Refusal::UnknownName),
        (ok.replace(r#""gw-1""#, r#""a b""#), Refusal::UnknownName),
        (ok.replace("HTTP 429", "a\\nb"), Refusal::Malformed),
        (
            ok.replace(r#""strikes":2"#, r#""strikes":2,"extra":1"#),
            Refusal::Malformed,
        ),
    ];
    for (text, refusal) in cases {
        assert_eq!(
            Message::decode_json(text.as_bytes(), far()),
            Err(refusal),
            "{text}"
        );
    }
    // Further out than the furthest window this fleet can set.
    let near = UNIX_EPOCH + Duration::from_millis(1_800_000_000_000);
    assert_eq!(
        Message::decode_json(ok.as_bytes(), near),
        Err(Refusal::TooFar)
    );
}
