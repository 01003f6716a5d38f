//! `parse_retry_after` on arbitrary header values and clocks, and the policy
//! that consumes its result.
//!
//! Input: 8 bytes of "now" (seconds since the epoch, kept within what
//! `SystemTime` and HTTP dates can hold), 8 bytes of policy knobs, then the
//! header value (lossy UTF-8).
//!
//! Invariants:
//! - `parse_retry_after` never panics;
//! - delay-seconds (ASCII digits, surrounding whitespace allowed) give exactly
//!   that many seconds, saturating at `u64::MAX`;
//! - anything else gives `Some` only for a valid HTTP-date, and then exactly the
//!   time from `now` to that date, or zero for a date in the past; a later `now`
//!   never gives a longer wait;
//! - the policy caps what it gets at `max_cooldown` (docs/CONFIG.md): a 429's
//!   retry waits and parks, and any failure's retry wait, never exceed it, and a
//!   retry never waits past the operation's deadline. Nothing panics, whatever
//!   the header said (`u64::MAX` seconds included).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use arbitrary::Unstructured;
use mcp_supervisor::{
    Failure, FailureKind,
    failure::parse_retry_after,
    policy::{Cooldowns, Decision, Phase, PolicySettings, RetryBackoff, Situation, decide},
};

/// The latest "now" tried: 9999-12-31, the last day an HTTP-date can name.
const MAX_NOW_SECS: u64 = 253_402_300_799;
/// The longest duration the config accepts (365 days).
const MAX_CONFIG_SECS: u64 = 365 * 24 * 60 * 60;

pub fn run(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let now_secs = u.arbitrary::<u64>().unwrap_or(0) % (MAX_NOW_SECS + 1);
    let now = UNIX_EPOCH + Duration::from_secs(now_secs);
    let knobs: [u8; 8] = u.arbitrary().unwrap_or_default();
    let value = String::from_utf8_lossy(u.take_rest()).into_owned();

    let parsed = parse_retry_after(&value, now);
    check_parse(&value, now, parsed);
    check_policy(parsed, knobs);
}

fn check_parse(value: &str, now: SystemTime, parsed: Option<Duration>) {
    let trimmed = value.trim();
    if !trimmed.is_empty() && trimmed.bytes().all(|b| b.is_ascii_digit()) {
        let expected = trimmed.parse::<u64>().unwrap_or(u64::MAX);
        assert_eq!(
            parsed,
            Some(Duration::from_secs(expected)),
            "delay-seconds {value:?} must parse to {expected} s"
        );
        return;
    }
    match (parsed, httpdate::parse_http_date(trimmed)) {
        (None, Err(_)) => {}
        (Some(wait), Ok(date)) => {
            let expected = date.duration_since(now).unwrap_or(Duration::ZERO);
            assert_eq!(wait, expected, "HTTP-date {value:?} at {now:?}");
            // A later clock never means a longer wait.
            if let Some(later) = now.checked_add(Duration::from_secs(1)) {
                let again = parse_retry_after(value, later).expect("still a date");
                assert!(again <= wait, "{value:?}: {again:?} later > {wait:?} now");
            }
        }
        (parsed, date) => {
            panic!("{value:?}: parse_retry_after gave {parsed:?} but the value is {date:?}")
        }
    }
}

fn check_policy(retry_after: Option<Duration>, knobs: [u8; 8]) {
    let [
        base,
        spread,
        attempt,
        max_attempts,
        parks,
        remaining,
        flags,
        jitter,
    ] = knobs;
    // Cooldowns as the config allows them: 1 ms ..= 365 days, max >= base.
    let base = Duration::from_millis(1 + u64::from(base) * u64::from(base) * 1_000)
        .min(Duration::from_secs(MAX_CONFIG_SECS));
    let max = base
        .saturating_mul(1 + u32::from(spread))
        .min(Duration::from_secs(MAX_CONFIG_SECS))
        .max(base);
    let settings = PolicySettings {
        backoff: RetryBackoff::defaults(),
        cooldowns: Cooldowns::try_new(base, max, 1 + u32::from(flags >> 4))
            .expect("a valid schedule"),
    };
    let remaining = Duration::from_millis(u64::from(remaining).pow(3));
    for kind in [FailureKind::RateLimit, FailureKind::Server] {
        let mut failure = Failure::from_status(
            if kind == FailureKind::RateLimit {
                429
            } else {
                503
            },
            retry_after,
        );
        failure.not_run = flags & 1 == 1;
        let situation = Situation {
            failure: &failure,
            phase: if flags & 2 == 2 {
                Phase::Call
            } else {
                Phase::Connect
            },
            attempt: 1 + u32::from(attempt % 100),
            max_attempts: 1 + u32::from(max_attempts % 100),
            call_retry_allowed: flags & 4 == 4,
            parks: u32::from(parks),
            remaining,
            guard_active: flags & 8 == 8,
            jitter_unit: f64::from(jitter) / 256.0,
        };
        let decision = decide(&settings, &situation);
        match decision {
            Decision::Retry { after } => {
                assert!(
                    after < remaining,
                    "{kind}: a retry after {after:?} waits past the deadline ({remaining:?} left)"
                );
                if retry_after.is_some() {
                    assert!(
                        after <= max,
                        "{kind}: Retry-After {retry_after:?} gave a retry after {after:?}, above max_cooldown {max:?}"
                    );
                }
            }
            Decision::Park { cooldown, counts } => {
                assert!(
                    cooldown <= max,
                    "{kind}: park of {cooldown:?} above max_cooldown {max:?} (Retry-After {retry_after:?})"
                );
                if kind == FailureKind::RateLimit {
                    assert!(!counts, "a 429 park must not count toward retirement");
                }
            }
            Decision::GiveUp | Decision::Retire | Decision::Reject => {}
        }
    }
}
