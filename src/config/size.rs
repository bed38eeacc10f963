//! Parses byte sizes written as `500KiB`, `1MiB`, `512000B` or `512000`.
//!
//! Units are explicit about their base: `KiB`/`MiB`/`GiB` are powers of 1024
//! and `KB`/`MB`/`GB` powers of 1000. A bare `K` or `M` is refused because
//! either reading is plausible.

use super::error::{quote, Problem};

const UNITS: [(&str, u64); 7] = [
    ("b", 1),
    ("kb", 1000),
    ("kib", 1024),
    ("mb", 1000 * 1000),
    ("mib", 1024 * 1024),
    ("gb", 1000 * 1000 * 1000),
    ("gib", 1024 * 1024 * 1024),
];

const EXAMPLES: &str = "write e.g. 500KiB, 1MiB or 512000";

/// Parses a size string into bytes. Units are case-insensitive (`kib` is
/// `KiB`: no one means bits here); one space may separate number and unit.
pub(crate) fn parse_size(text: &str) -> Result<u64, Problem> {
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return Err(bad(text));
    }
    let (number, rest) = text.split_at(digits);
    if rest.starts_with('.') || rest.starts_with(',') {
        return Err(Problem::new(format!("size {} has a fraction", quote(text)))
            .hint("use a smaller unit, e.g. 1536KiB instead of 1.5MiB"));
    }
    let unit = rest.strip_prefix(' ').unwrap_or(rest);
    let multiplier = if unit.is_empty() {
        1
    } else {
        let lower = unit.to_ascii_lowercase();
        match UNITS.iter().find(|(name, _)| *name == lower) {
            Some((_, m)) => *m,
            None if matches!(lower.as_str(), "k" | "m" | "g") => {
                return Err(
                    Problem::new(format!("size unit {} is ambiguous", quote(unit))).hint(format!(
                        "write {number}{u}iB (powers of 1024) or {number}{u}B (powers of 1000)",
                        u = lower.to_ascii_uppercase()
                    )),
                );
            }
            None => {
                return Err(Problem::new(format!(
                    "unknown unit {} in size {}",
                    quote(unit),
                    quote(text)
                ))
                .hint("units are B, KB, KiB, MB, MiB, GB and GiB"));
            }
        }
    };
    number
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(multiplier))
        .ok_or_else(|| Problem::new(format!("size {} is too large", quote(text))))
}

fn bad(text: &str) -> Problem {
    Problem::new(format!("{} is not a size", quote(text))).hint(EXAMPLES)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(text: &str) -> u64 {
        parse_size(text).unwrap_or_else(|p| panic!("{text}: {p:?}"))
    }

    fn err(text: &str) -> Problem {
        match parse_size(text) {
            Ok(n) => panic!("{text} parsed as {n}"),
            Err(p) => p,
        }
    }

    #[test]
    fn units() {
        assert_eq!(ok("512000"), 512_000);
        assert_eq!(ok("512000B"), 512_000);
        assert_eq!(ok("500KiB"), 512_000);
        assert_eq!(ok("500 KiB"), 512_000);
        assert_eq!(ok("500kib"), 512_000);
        assert_eq!(ok("600KB"), 600_000);
        assert_eq!(ok("1MiB"), 1_048_576);
        assert_eq!(ok("2MB"), 2_000_000);
        assert_eq!(ok("1GiB"), 1_073_741_824);
        assert_eq!(ok("1GB"), 1_000_000_000);
    }

    #[test]
    fn bad_forms() {
        assert!(err("").message.contains("not a size"));
        assert!(err("KiB").message.contains("not a size"));
        assert!(err("-1KiB").message.contains("not a size"));
        assert!(err("1.5MiB").message.contains("fraction"));
        let p = err("500K");
        assert!(p.message.contains("ambiguous"));
        assert_eq!(
            p.hint.as_deref(),
            Some("write 500KiB (powers of 1024) or 500KB (powers of 1000)")
        );
        assert!(err("5TiB").message.contains("unknown unit `TiB`"));
        assert!(err("5  KiB").message.contains("unknown unit"));
        assert!(err("99999999999999999999").message.contains("too large"));
        assert!(err("999999999999GiB").message.contains("too large"));
    }
}
