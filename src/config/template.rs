//! Checks `block.body` templates: only the documented placeholders may
//! appear, so a typo like `{crawlr}` is caught at load time instead of being
//! sent to crawlers verbatim.

use super::error::{did_you_mean, one_of, quote, Problem};

/// Placeholders a block body may use, filled in per blocked request.
pub const BODY_PLACEHOLDERS: [&str; 7] = [
    "crawler",
    "path",
    "line",
    "rule",
    "robots_url",
    "origin",
    "client",
];

/// Checks a body template. A placeholder is an opening brace, lower-case
/// letters or `_`, and a closing brace; any other brace is literal text, so
/// HTML or CSS such as `p { color: red }` needs no escaping.
pub(crate) fn check_body(body: &str) -> Result<(), Problem> {
    for name in placeholders(body) {
        if !BODY_PLACEHOLDERS.contains(&name) {
            return Err(Problem::new(format!(
                "unknown placeholder {} in `body`{}",
                quote(&format!("{{{name}}}")),
                did_you_mean(name, &BODY_PLACEHOLDERS)
            ))
            .hint(one_of(&BODY_PLACEHOLDERS)));
        }
    }
    Ok(())
}

/// The names of the `{name}` placeholders in `text`, in order.
fn placeholders(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || loop {
        let open = rest.find('{')?;
        let after = &rest[open + 1..];
        let len = after
            .bytes()
            .take_while(|b| b.is_ascii_lowercase() || *b == b'_')
            .count();
        if len > 0 && after[len..].starts_with('}') {
            rest = &after[len + 1..];
            return Some(&after[..len]);
        }
        rest = after;
    })
}

/// Expands a checked template in one pass: each `{name}` placeholder is replaced by
/// `value(name)`, and nothing a value contains is expanded again (a request path may well
/// contain `{origin}`). Placeholders `value` does not know, and every other brace, stay as
/// written.
pub fn render_body<'v>(template: &str, value: impl Fn(&str) -> Option<&'v str>) -> String {
    let mut out = String::with_capacity(template.len() + 64);
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        let len = after
            .bytes()
            .take_while(|b| b.is_ascii_lowercase() || *b == b'_')
            .count();
        let replacement = (len > 0 && after[len..].starts_with('}'))
            .then(|| value(&after[..len]))
            .flatten();
        match replacement {
            Some(text) => {
                out.push_str(&rest[..open]);
                out.push_str(text);
                rest = &after[len + 1..];
            }
            None => {
                out.push_str(&rest[..=open]);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_in_one_pass() {
        let value = |name: &str| match name {
            "path" => Some("/{origin}/{path}"),
            "origin" => Some("shop"),
            _ => None,
        };
        assert_eq!(
            render_body("{origin}: {path} {unknown} p { x } {{path}}", value),
            "shop: /{origin}/{path} {unknown} p { x } {/{origin}/{path}}"
        );
    }

    #[test]
    fn finds_placeholders_and_ignores_other_braces() {
        let found: Vec<&str> =
            placeholders("{crawler} x {{path}} {Rule} { line } p { color: red } {origin").collect();
        assert_eq!(found, ["crawler", "path"]);
    }

    #[test]
    fn accepts_known_and_rejects_unknown() {
        assert!(check_body(
            "Blocked {crawler} on {origin}{path}: {robots_url} line {line}: {rule}"
        )
        .is_ok());
        assert!(check_body("<style>p { color: red }</style>").is_ok());
        let p = check_body("Hello {crawlr}")
            .err()
            .unwrap_or_else(|| Problem::new(""));
        assert_eq!(
            p.message,
            "unknown placeholder `{crawlr}` in `body`; did you mean `crawler`?"
        );
        assert_eq!(
            p.hint.as_deref(),
            Some("expected one of: crawler, path, line, rule, robots_url, origin, client")
        );
    }
}
