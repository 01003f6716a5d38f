use proptest::prelude::*;

use super::*;

/// The verdict on `text`, which both readings must give (the kind too).
fn verdict(text: &str) -> Result<(), Unreadable> {
    let hand = check(text.as_bytes());
    assert_eq!(
        hand,
        by_serde(text.as_bytes()),
        "the readings differ on {text:?}"
    );
    hand
}

/// Whether both readings admit `bytes`: they must agree (on the verdict,
/// not the kind: with two faults each may name the one it meets first).
fn admitted(bytes: &[u8]) -> bool {
    let (hand, serde) = (check(bytes), by_serde(bytes));
    assert_eq!(
        hand.is_ok(),
        serde.is_ok(),
        "the readings differ on {:?}: {hand:?} by hand, {serde:?} by serde",
        String::from_utf8_lossy(bytes)
    );
    hand.is_ok()
}

fn nested(levels: usize) -> String {
    format!(
        "{{\"a\":{}1{}}}",
        "[".repeat(levels - 1),
        "]".repeat(levels - 1)
    )
}

#[test]
fn usual_arguments_are_admitted() {
    for text in [
        r#"{}"#,
        r#"{"text":"hi"}"#,
        r#" { "text" : "héllo \"q\"\n\t\\ \/ \b\f\r", "n": [1, -2, 2.5, -0, 0.0, 1e-400, {"z": null}], "t": true, "f": false } "#,
        r#"{"emoji":"\ud83d\ude00","plain":"😀","a":"\u0061"}"#,
        r#"{"max":18446744073709551615,"min":-9223372036854775808,"big":1.7976931348623157e308}"#,
        r#"{"a":1,"A":2,"a ":3,"\u00e9":4,"é ":5}"#,
    ] {
        assert_eq!(verdict(text), Ok(()), "{text}");
    }
    assert_eq!(verdict(&nested(MAX_DEPTH)), Ok(()), "{MAX_DEPTH} levels");
}

/// Each object's keys are its own, however deep its neighbours go: a key
/// twice in one object is refused, a key in two objects is not.
#[test]
fn each_object_keeps_its_own_keys() {
    let many = |prefix: &str| {
        (0..20)
            .map(|i| format!(r#""{prefix}{i}":{{"{prefix}{i}":[{{"x":1}},{{"x":2}}]}}"#))
            .collect::<Vec<_>>()
            .join(",")
    };
    for text in [
        r#"{"a":{"a":1,"b":{"a":2}},"b":{"a":3},"c":[{"a":1},{"a":1}]}"#.to_owned(),
        format!("{{{},\"z\":{{{}}}}}", many("k"), many("k")),
    ] {
        assert_eq!(verdict(&text), Ok(()), "{text}");
    }
    for text in [
        r#"{"a":{"b":1},"a":2}"#.to_owned(),
        r#"{"a":{"b":{"c":1,"c":2}}}"#.to_owned(),
        r#"{"a":[{"x":1},{"x":1,"y":2,"x":3}]}"#.to_owned(),
        format!("{{{},\"k3\":1}}", many("k")),
        format!("{{\"z\":{{{},\"k19\":1}}}}", many("k")),
    ] {
        assert_eq!(verdict(&text), Err(Unreadable::DuplicateKey), "{text}");
    }
}

#[test]
fn each_fault_is_refused_for_what_it_is() {
    let wide: String = format!(
        "{{{},\"k7\":0}}",
        (0..40)
            .map(|i| format!("\"k{i}\":0"))
            .collect::<Vec<_>>()
            .join(",")
    );
    for (text, why) in [
        (r#"{"text":"\ud800"}"#, Unreadable::LoneSurrogate),
        (r#"{"text":"\udc00"}"#, Unreadable::LoneSurrogate),
        (r#"{"text":"\ud800\u0041"}"#, Unreadable::LoneSurrogate),
        (r#"{"text":"\ud800x"}"#, Unreadable::LoneSurrogate),
        (r#"{"\udbff":1}"#, Unreadable::LoneSurrogate),
        (r#"{"n":1e400}"#, Unreadable::NumberOutOfRange),
        (r#"{"n":-1.8e308}"#, Unreadable::NumberOutOfRange),
        (
            r#"{"n":18446744073709551616}"#,
            Unreadable::NumberOutOfRange,
        ),
        (
            r#"{"n":-9223372036854775809}"#,
            Unreadable::NumberOutOfRange,
        ),
        (r#"{"text":"a","text":"b"}"#, Unreadable::DuplicateKey),
        (r#"{"a":1,"\u0061":2}"#, Unreadable::DuplicateKey),
        (
            r#"{"o":{"x":1,"y":{"x":2},"x":3}}"#,
            Unreadable::DuplicateKey,
        ),
        (&wide, Unreadable::DuplicateKey),
        (&nested(MAX_DEPTH + 1), Unreadable::TooDeep),
        (r#"[1]"#, Unreadable::NotAnObject),
        (r#""text""#, Unreadable::NotAnObject),
        (r#"null"#, Unreadable::NotAnObject),
        (r#"{"a":01}"#, Unreadable::Syntax),
        (r#"{"a":"\x"}"#, Unreadable::Syntax),
        (r#"{"a":"tab	in"}"#, Unreadable::Syntax),
        (r#"{"a":1,}"#, Unreadable::Syntax),
        (r#"{"a":1} {}"#, Unreadable::Syntax),
        (r#"{"a":tru}"#, Unreadable::Syntax),
        ("", Unreadable::Syntax),
    ] {
        assert_eq!(verdict(text), Err(why), "{text}");
    }
    let deep = format!("{{\"a\":{}", "[".repeat(100_000));
    assert_eq!(
        check(deep.as_bytes()),
        Err(Unreadable::TooDeep),
        "no stack blown"
    );
    assert!(!admitted(b"{\"a\":\"\xff\"}"), "not UTF-8");
}

/// The four bodies of the issue that parked a shared upstream are refused
/// for what they are.
#[test]
fn the_bodies_that_parked_an_upstream_are_refused() {
    let four_hundred_digits = format!("{{\"n\":{}}}", "9".repeat(400));
    let two_hundred_deep = format!("{{\"d\":{}{}}}", "[".repeat(200), "]".repeat(200));
    for (text, why) in [
        (r#"{"text":"\ud800"}"#.to_owned(), Unreadable::LoneSurrogate),
        (
            r#"{"text":"x","n":1e400}"#.to_owned(),
            Unreadable::NumberOutOfRange,
        ),
        (four_hundred_digits, Unreadable::NumberOutOfRange),
        (two_hundred_deep, Unreadable::TooDeep),
        (
            r#"{"text":"a","text":"b"}"#.to_owned(),
            Unreadable::DuplicateKey,
        ),
    ] {
        assert_eq!(verdict(&text), Err(why));
    }
}

/// What is admitted is what serde reads, whole, as a call's arguments.
#[test]
fn what_is_admitted_is_read_by_serde() {
    for text in [
        r#"{"emoji":"\ud83d\ude00","n":[18446744073709551615,-9223372036854775808,1e308]}"#,
        &nested(MAX_DEPTH),
    ] {
        assert_eq!(verdict(text), Ok(()));
        let message = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"t","arguments":{text}}}}}"#
        );
        serde_json::from_str::<rmcp::model::ClientJsonRpcMessage>(&message)
            .unwrap_or_else(|error| panic!("{error}: {text}"));
    }
}

#[test]
fn every_reason_says_what_without_quoting_the_arguments() {
    for why in Unreadable::ALL {
        let said = why.to_string();
        assert!(
            said.starts_with("the tool call's arguments were refused: "),
            "{said}"
        );
        assert!(!said.contains('{'), "{said}");
    }
}

/// Every single-byte change to documents that hold each kind of thing
/// (keys that differ by one byte, escapes, numbers at their bounds) gets
/// the same verdict from both readings.
#[test]
fn mutated_documents_get_the_same_verdict() {
    let mut refused = 0;
    let mut mutants = 0;
    for body in [
        r#"{"a":1,"b":{"a":"\ud83d\ude00","c":[18446744073709551615,-9223372036854775808]},"d":1.5e308}"#,
        r#"{"ab":"x\u0041","aa":[true,false,null],"b\u0061":{}}"#,
    ] {
        for variant in crate::codec::json_scan::mutations(body.as_bytes()) {
            mutants += 1;
            refused += usize::from(!admitted(&variant));
        }
    }
    assert!(refused > 100 && refused < mutants, "{refused} of {mutants}");
}

/// JSON-like text from a grammar that reaches every fault, each rarely
/// enough that most documents have none or one: keys that repeat (also
/// written with an escape), every kind of escape, numbers on both sides of
/// their bounds, nesting on both sides of the limit.
fn document() -> impl Strategy<Value = String> {
    let fine = prop::sample::select(vec![
        "0",
        "-0",
        "1",
        "-1",
        "1.5",
        "2.5E+3",
        "1e-400",
        "1e308",
        "-0.0",
        "18446744073709551615",
        "-9223372036854775808",
        r#""a""#,
        r#""\u0061""#,
        r#""\ud83d\ude00""#,
        r#""é""#,
        r#""\n\"""#,
        "true",
        "false",
        "null",
    ]);
    let faulty = prop::sample::select(vec![
        "1e309",
        "-1e400",
        "18446744073709551616",
        "-9223372036854775809",
        "01",
        "1.",
        "-",
        r#""\ud800""#,
        r#""\udc00""#,
        r#""\ud800\u0041""#,
        r#""\q""#,
        "nul",
    ]);
    let leaf = prop_oneof![30 => fine, 1 => faulty].prop_map(str::to_owned);
    let key = prop_oneof![
        30 => prop::sample::select(vec![
            "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p",
        ]),
        1 => prop::sample::select(vec!["\\u0061", "\\ud800", "é", "\\u00e9"]),
    ];
    let tree = leaf.prop_recursive(4, 48, 6, move |inner| {
        prop_oneof![
            prop::collection::vec((key.clone(), inner.clone()), 0..6).prop_map(|entries| {
                let entries: Vec<String> = entries
                    .iter()
                    .map(|(k, v)| format!("\"{k}\":{v}"))
                    .collect();
                format!("{{{}}}", entries.join(","))
            }),
            prop::collection::vec(inner, 0..6).prop_map(|items| format!("[{}]", items.join(","))),
        ]
    });
    // Mostly shallow; sometimes wrapped to just under or over the limit.
    let wrap = prop_oneof![8 => Just(0), 1 => MAX_DEPTH - 6..MAX_DEPTH + 1];
    (tree, wrap).prop_map(|(tree, levels)| {
        format!(
            "{{\"v\":{}{tree}{}}}",
            "[".repeat(levels),
            "]".repeat(levels)
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn both_readings_agree_on_generated_documents(text in document()) {
        admitted(text.as_bytes());
    }
}

/// The grammar above reaches every verdict, admitted ones most often (a
/// generator whose every document is refused would hold the readings to
/// nothing).
#[test]
fn generated_documents_reach_every_verdict() {
    use proptest::{strategy::ValueTree, test_runner::TestRunner};
    let mut runner = TestRunner::deterministic();
    let mut seen = std::collections::HashMap::new();
    for _ in 0..3000 {
        let text = document().new_tree(&mut runner).unwrap().current();
        *seen.entry(verdict_of(&text)).or_insert(0) += 1;
    }
    let admitted = seen.get(&Ok(())).copied().unwrap_or(0);
    assert!(admitted > 1000, "{seen:?}");
    for why in Unreadable::ALL
        .into_iter()
        .filter(|why| *why != Unreadable::NotAnObject)
    {
        assert!(seen.contains_key(&Err(why)), "never {why:?}: {seen:?}");
    }
}

fn verdict_of(text: &str) -> Result<(), Unreadable> {
    admitted(text.as_bytes());
    check(text.as_bytes())
}
