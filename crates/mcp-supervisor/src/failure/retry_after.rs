//! `Retry-After` in both RFC 9110 forms.

use std::time::{Duration, SystemTime};

/// Parses a `Retry-After` value: delay-seconds (`"120"`) or an HTTP-date
/// (`"Wed, 21 Oct 2015 07:28:00 GMT"`, and the obsolete forms httpdate accepts).
///
/// A date in the past gives zero; garbage gives `None` (the header is ignored,
/// never an error). Capping at `max_cooldown` is the policy's job, not this one's.
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        // Huge digit strings saturate instead of failing: "wait very long" is the meaning.
        let secs = value.parse::<u64>().unwrap_or(u64::MAX);
        return Some(Duration::from_secs(secs));
    }
    let date = httpdate::parse_http_date(value).ok()?;
    Some(date.duration_since(now).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn delay_seconds() {
        let now = at(1_000_000);
        assert_eq!(parse_retry_after("0", now), Some(Duration::ZERO));
        assert_eq!(
            parse_retry_after(" 120 ", now),
            Some(Duration::from_secs(120))
        );
        assert_eq!(
            parse_retry_after("99999999999999999999999", now),
            Some(Duration::from_secs(u64::MAX))
        );
    }

    #[test]
    fn http_date_in_future_and_past() {
        // 1445412480 = Wed, 21 Oct 2015 07:28:00 GMT
        let date = "Wed, 21 Oct 2015 07:28:00 GMT";
        assert_eq!(
            parse_retry_after(date, at(1_445_412_480 - 90)),
            Some(Duration::from_secs(90))
        );
        assert_eq!(
            parse_retry_after(date, at(1_445_412_480 + 5)),
            Some(Duration::ZERO)
        );
    }

    #[test]
    fn garbage_is_ignored() {
        let now = at(0);
        for value in ["", "soon", "-5", "1.5", "12s", "Wed, 32 Foo 2015"] {
            assert_eq!(parse_retry_after(value, now), None, "{value:?}");
        }
    }
}
