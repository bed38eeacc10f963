//! HTML and the console's answers: escaping, the page frame, and the security headers every
//! answer carries.

use std::fmt::Write;

use http::Response;

/// Nothing from elsewhere, no script at all, no inline style: the console's own stylesheet and
/// its server-rendered SVG only.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; style-src 'self'; img-src 'self'; \
     form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// The stylesheet, inside the binary.
pub const STYLESHEET: &str = include_str!("console.css");

/// Text escaped for HTML element content and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control() && c != '\n' && c != '\t' => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

/// Text escaped for a URL's query value.
pub fn url_value(text: &str) -> String {
    form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

/// An answer with the console's security headers.
pub fn reply(status: u16, content_type: &str, body: Vec<u8>) -> Response<Vec<u8>> {
    Response::builder()
        .status(status)
        .header("content-type", content_type)
        .header("cache-control", "no-store")
        .header("content-security-policy", CONTENT_SECURITY_POLICY)
        .header("x-content-type-options", "nosniff")
        .header("x-frame-options", "DENY")
        .header("referrer-policy", "same-origin")
        .header("content-length", body.len())
        .body(body)
        .unwrap_or_else(|_| Response::new(Vec::new()))
}

/// Plain text.
pub fn text(status: u16, body: &str) -> Response<Vec<u8>> {
    reply(
        status,
        "text/plain; charset=utf-8",
        body.as_bytes().to_vec(),
    )
}

/// JSON.
pub fn json(status: u16, value: &impl serde::Serialize) -> Response<Vec<u8>> {
    let mut body = serde_json::to_vec_pretty(value).unwrap_or_default();
    body.push(b'\n');
    reply(status, "application/json", body)
}

/// CSV, offered as a download named `filename`.
pub fn csv(body: Vec<u8>, filename: &str) -> Response<Vec<u8>> {
    let mut answer = reply(200, "text/csv; charset=utf-8", body);
    if let Ok(value) = http::HeaderValue::from_str(&format!("attachment; filename=\"{filename}\""))
    {
        answer.headers_mut().insert("content-disposition", value);
    }
    answer
}

/// `answer` with an `Allow` header.
pub fn with_allow(mut answer: Response<Vec<u8>>, allow: &'static str) -> Response<Vec<u8>> {
    answer
        .headers_mut()
        .insert("allow", http::HeaderValue::from_static(allow));
    answer
}

/// 401 for an API request without a valid token.
pub fn unauthorized() -> Response<Vec<u8>> {
    let mut answer = text(401, "a bearer token is required\n");
    answer.headers_mut().insert(
        "www-authenticate",
        http::HeaderValue::from_static("Bearer realm=\"robotsguard admin\""),
    );
    answer
}

/// A redirect (303: the browser follows it with a GET).
pub fn see_other(location: &str) -> Response<Vec<u8>> {
    let mut answer = text(303, "see other\n");
    if let Ok(value) = http::HeaderValue::from_str(location) {
        answer.headers_mut().insert("location", value);
    }
    answer
}

/// Where a page sits in the navigation.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Section {
    Overview,
    Origin,
    Bans,
    Explain,
    Login,
}

/// The console's icon: a small SVG inside the binary.
pub const ICON: &str = "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 16 16\"><rect width=\"16\" height=\"16\" rx=\"3\" fill=\"#1d232b\"/><path d=\"M5 12V4h3.5a2.2 2.2 0 0 1 0 4.4H5m3.5 0L11 12\" stroke=\"#fff\" stroke-width=\"1.6\" fill=\"none\"/></svg>";

/// A whole page: `title`, the navigation, and `body` (HTML already escaped). `signed_in`: the
/// session's CSRF token for the sign-out form, when a token signed the viewer in.
pub fn page(
    status: u16,
    title: &str,
    section: Section,
    signed_in: Option<&str>,
    body: &str,
) -> Response<Vec<u8>> {
    let mut out = String::with_capacity(body.len() + 2048);
    out.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    out.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    let _ = writeln!(out, "<title>{} · robotsguard</title>", escape(title));
    out.push_str("<link rel=\"stylesheet\" href=\"/ui/console.css\">\n");
    out.push_str("<link rel=\"icon\" href=\"/ui/icon.svg\" type=\"image/svg+xml\">\n</head>\n<body>\n<header class=\"top\">\n");
    out.push_str("<a class=\"brand\" href=\"/ui/\">robotsguard</a>\n<nav>\n");
    for (link, name, this) in [
        ("/ui/", "Overview", Section::Overview),
        ("/ui/bans", "Bans", Section::Bans),
        ("/ui/explain", "Explain", Section::Explain),
    ] {
        let current = if this == section {
            " aria-current=\"page\""
        } else {
            ""
        };
        let _ = writeln!(out, "<a href=\"{link}\"{current}>{name}</a>");
    }
    out.push_str("</nav>\n");
    if let Some(csrf) = signed_in {
        let _ = writeln!(
            out,
            "<form method=\"post\" action=\"/ui/logout\" class=\"logout\"><input type=\"hidden\" name=\"csrf\" value=\"{}\"><button type=\"submit\">Sign out</button></form>",
            escape(csrf)
        );
    }
    out.push_str("</header>\n<main>\n");
    out.push_str(body);
    out.push_str("</main>\n</body>\n</html>\n");
    reply(status, "text/html; charset=utf-8", out.into_bytes())
}

/// A table: a header row and rows of cells (HTML already escaped), or `empty` when none.
pub fn table(id: &str, header: &[&str], rows: &[Vec<String>], empty: &str) -> String {
    if rows.is_empty() {
        return format!(
            "<p class=\"empty\" id=\"{id}-empty\">{}</p>\n",
            escape(empty)
        );
    }
    let mut out = format!("<div class=\"scroll\"><table id=\"{id}\">\n<thead><tr>");
    for cell in header {
        let _ = write!(out, "<th scope=\"col\">{}</th>", escape(cell));
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    for row in rows {
        out.push_str("<tr>");
        for cell in row {
            let _ = write!(out, "<td>{cell}</td>");
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody></table></div>\n");
    out
}

/// A whole number with thin separators (`12 345`).
pub fn number(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push('\u{202f}');
        }
        out.push(c);
    }
    out
}

/// Bytes as `12.3 MB`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "kB", "MB", "GB", "TB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1000.0 && unit + 1 < UNITS.len() {
        value /= 1000.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// `3 h 5 min ago`-style age of a time `seconds` ago.
pub fn ago(seconds: u64) -> String {
    format!("{} ago", span(seconds))
}

/// A duration in words: `45 s`, `12 min`, `3 h 5 min`, `2 d 4 h`.
pub fn span(seconds: u64) -> String {
    match seconds {
        0..60 => format!("{seconds} s"),
        60..3600 => format!("{} min", seconds / 60),
        3600..86_400 => format!("{} h {} min", seconds / 3600, seconds % 3600 / 60),
        _ => format!("{} d {} h", seconds / 86_400, seconds % 86_400 / 3600),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_leaves_no_markup() {
        assert_eq!(
            escape("<script>alert('x')</script>&\"\u{7}"),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;&quot;\u{fffd}"
        );
        assert_eq!(url_value("a b&c=/"), "a+b%26c%3D%2F");
    }

    #[test]
    fn figures_read_well() {
        assert_eq!(number(1234567), "1\u{202f}234\u{202f}567");
        assert_eq!(number(999), "999");
        assert_eq!(bytes(999), "999 B");
        assert_eq!(bytes(12_345_678), "12.3 MB");
        assert_eq!(span(3725), "1 h 2 min");
        assert_eq!(span(200_000), "2 d 7 h");
    }
}
