//! Parses durations written as `250ms`, `30s`, `5m`, `24h`, `1d`, or a
//! combination such as `1m30s`.
//!
//! A unit is always required: a bare `30` could mean seconds or
//! milliseconds, and guessing wrong makes a timeout 1000 times off.

use std::time::Duration;

use super::error::{quote, Problem};

/// Units from largest to smallest; a combined duration must use them in
/// this order, each at most once, so `1m1m` or `30s1m` are refused.
const UNITS: [(&str, u64); 5] = [
    ("d", 24 * 60 * 60 * 1000),
    ("h", 60 * 60 * 1000),
    ("m", 60 * 1000),
    ("s", 1000),
    ("ms", 1),
];

const EXAMPLES: &str = "write e.g. 250ms, 30s, 5m, 24h, 1d or 1m30s";

/// Parses a duration string. Millisecond precision; sub-millisecond units
/// are not offered because nothing in the proxy needs them.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, Problem> {
    if text.is_empty() {
        return Err(Problem::new("the duration is empty").hint(EXAMPLES));
    }
    if text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(
            Problem::new(format!("duration {} has no unit", quote(text)))
                .hint(format!("write {text}s")),
        );
    }
    let mut total_ms: u64 = 0;
    // Index into UNITS of the last unit used; the next must come after it.
    let mut last_unit: Option<usize> = None;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(bad(text));
        }
        let (number, after) = rest.split_at(digits);
        let unit_len = after.bytes().take_while(u8::is_ascii_alphabetic).count();
        let (unit, after) = after.split_at(unit_len);
        if after.starts_with('.') || after.starts_with(',') {
            return Err(
                Problem::new(format!("duration {} has a fraction", quote(text)))
                    .hint("use a smaller unit, e.g. 1500ms instead of 1.5s"),
            );
        }
        if unit.is_empty() {
            return Err(bad(text));
        }
        let Some(index) = UNITS.iter().position(|(name, _)| *name == unit) else {
            return Err(Problem::new(format!(
                "unknown unit {} in duration {}",
                quote(unit),
                quote(text)
            ))
            .hint("units are ms, s, m, h and d"));
        };
        if last_unit.is_some_and(|last| index <= last) {
            return Err(Problem::new(format!(
                "duration {} repeats a unit or has them out of order",
                quote(text)
            ))
            .hint("write units largest first, each once, e.g. 1h30m"));
        }
        last_unit = Some(index);
        let ms = number
            .parse::<u64>()
            .ok()
            .and_then(|n| n.checked_mul(UNITS[index].1))
            .and_then(|ms| total_ms.checked_add(ms));
        match ms {
            Some(ms) => total_ms = ms,
            None => {
                return Err(Problem::new(format!(
                    "duration {} is too long",
                    quote(text)
                )))
            }
        }
        rest = after;
    }
    Ok(Duration::from_millis(total_ms))
}

fn bad(text: &str) -> Problem {
    Problem::new(format!("{} is not a duration", quote(text))).hint(EXAMPLES)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(text: &str) -> Duration {
        parse_duration(text).unwrap_or_else(|p| panic!("{text}: {p:?}"))
    }

    fn err(text: &str) -> Problem {
        match parse_duration(text) {
            Ok(d) => panic!("{text} parsed as {d:?}"),
            Err(p) => p,
        }
    }

    #[test]
    fn single_units() {
        assert_eq!(ok("250ms"), Duration::from_millis(250));
        assert_eq!(ok("30s"), Duration::from_secs(30));
        assert_eq!(ok("5m"), Duration::from_secs(300));
        assert_eq!(ok("24h"), Duration::from_secs(86_400));
        assert_eq!(ok("1d"), Duration::from_secs(86_400));
        assert_eq!(ok("0s"), Duration::ZERO);
    }

    #[test]
    fn combined_units() {
        assert_eq!(ok("1m30s"), Duration::from_secs(90));
        assert_eq!(ok("1d2h3m4s5ms"), Duration::from_millis(93_784_005));
        assert_eq!(ok("1s500ms"), Duration::from_millis(1500));
    }

    #[test]
    fn bare_number_asks_for_a_unit() {
        let p = err("30");
        assert_eq!(p.message, "duration `30` has no unit");
        assert_eq!(p.hint.as_deref(), Some("write 30s"));
    }

    #[test]
    fn bad_forms() {
        assert!(err("").message.contains("empty"));
        assert!(err("1.5s").message.contains("fraction"));
        assert!(err("5min").message.contains("unknown unit `min`"));
        assert!(err("5S").message.contains("unknown unit `S`"));
        assert!(err("30s1m").message.contains("out of order"));
        assert!(err("1m1m").message.contains("repeats"));
        assert!(err("s").message.contains("not a duration"));
        assert!(err("-5s").message.contains("not a duration"));
        assert!(err("5 s").message.contains("not a duration"));
        assert!(err(" 5s").message.contains("not a duration"));
        assert!(err("5s ").message.contains("not a duration"));
        assert!(err("99999999999999999999d").message.contains("too long"));
        assert!(err("213503982335d").message.contains("too long"));
    }
}
