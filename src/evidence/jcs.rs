//! RFC 8785 (JSON Canonicalization Scheme) for the values evidence records hold: what a
//! record's signature covers.
//!
//! Written here rather than taken from a crate: the one on offer (`serde_jcs`) has had no
//! release in years and carries its own float formatter, while records hold only strings,
//! booleans, nulls and integers. For those JCS is short: object members sorted by their names'
//! UTF-16 code units, no whitespace, strings escaped as ECMAScript's `JSON.stringify` does (which
//! is serde_json's escaping: `\"`, `\\`, `\b \f \n \r \t`, other controls as `\u00xx`, all else
//! as is), integers in their shortest decimal form. A number JCS would write differently from its
//! integer form (a fraction, an integer beyond 2^53) is refused, not guessed at.

use serde_json::Value;

/// The largest integer an IEEE double holds exactly: beyond it JCS's number form is not the
/// integer's decimal digits.
const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// A value JCS cannot be written for here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotCanonical(pub String);

impl std::fmt::Display for NotCanonical {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// `value` as RFC 8785 canonical JSON.
pub fn canonical(value: &Value) -> Result<String, NotCanonical> {
    let mut out = String::new();
    write(value, &mut out)?;
    Ok(out)
}

fn write(value: &Value, out: &mut String) -> Result<(), NotCanonical> {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(number) => {
            if let Some(n) = number.as_u64() {
                if n > MAX_SAFE_INTEGER {
                    return Err(NotCanonical(format!("the integer {n} is beyond 2^53")));
                }
                out.push_str(&n.to_string());
            } else if let Some(n) = number.as_i64() {
                if n.unsigned_abs() > MAX_SAFE_INTEGER {
                    return Err(NotCanonical(format!("the integer {n} is beyond 2^53")));
                }
                out.push_str(&n.to_string());
            } else {
                return Err(NotCanonical(format!(
                    "the number {number} is not an integer"
                )));
            }
        }
        Value::String(text) => string(text, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write(item, out)?;
            }
            out.push(']');
        }
        Value::Object(members) => {
            let mut names: Vec<&String> = members.keys().collect();
            names.sort_by(|a, b| a.encode_utf16().cmp(b.encode_utf16()));
            out.push('{');
            for (i, name) in names.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                string(name, out);
                out.push(':');
                if let Some(member) = members.get(name) {
                    write(member, out)?;
                }
            }
            out.push('}');
        }
    }
    Ok(())
}

fn string(text: &str, out: &mut String) {
    // serde_json escapes exactly what JSON.stringify does (see the module's comment).
    match serde_json::to_string(text) {
        Ok(quoted) => out.push_str(&quoted),
        // Serialising a `str` cannot fail; an empty string is still a string.
        Err(_) => out.push_str("\"\""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn members_are_sorted_by_utf16_and_nothing_else_is_added() {
        // RFC 8785 section 3.2.3's order: by UTF-16 code units, so U+1F600 (a surrogate pair,
        // 0xD83D...) sorts before U+FB33 although its code point is larger.
        let value =
            json!({"\u{fb33}": 1, "\u{1f600}": 2, "b": [true, null, "x"], "a": {"z": 0, "y": -3}});
        assert_eq!(
            canonical(&value).expect("canonical"),
            "{\"a\":{\"y\":-3,\"z\":0},\"b\":[true,null,\"x\"],\"\u{1f600}\":2,\"\u{fb33}\":1}"
        );
    }

    #[test]
    fn strings_are_escaped_as_json_stringify_does() {
        let value = json!("\u{0}\u{8}\t\n\u{c}\r\u{1f}\"\\/\u{7f}\u{2028}é");
        assert_eq!(
            canonical(&value).expect("canonical"),
            "\"\\u0000\\b\\t\\n\\f\\r\\u001f\\\"\\\\/\u{7f}\u{2028}é\""
        );
    }

    #[test]
    fn numbers_other_than_safe_integers_are_refused() {
        assert_eq!(
            canonical(&json!(9007199254740991u64)).expect("safe"),
            "9007199254740991"
        );
        assert!(canonical(&json!(9007199254740992u64)).is_err());
        assert!(canonical(&json!(1.5)).is_err());
        assert!(canonical(&json!(-9007199254740992i64)).is_err());
    }
}
