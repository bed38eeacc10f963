//! The console's preview page (`/ui/preview?origin=NAME`): paste a candidate robots.txt, see
//! which recent crawler requests it would flip and its warnings ([`crate::preview`]); and
//! "what changed" for the copy in force: its diff with the copy before it, and which crawlers
//! and paths that change flipped. No JavaScript; the form is a POST carrying the session's CSRF
//! token (checked before this runs); the read-only token may use it, as it changes nothing.

use std::fmt::Write;

use super::html::{escape, number, url_value};
use super::Console;
use crate::preview::body::Candidate;
use crate::preview::PreviewAnswer;

/// The page's body for `origin`: the form (holding `robots`, or the copy in force), and the
/// answer when one was asked for. `None` when the config in force has no such origin.
pub(crate) async fn body(
    console: &Console,
    origin: &str,
    csrf: &str,
    submitted: Option<(&str, &str)>,
) -> Option<String> {
    let snapshot = console.live.load();
    let live = snapshot.origin_named(origin)?;
    let current = live.robots.current();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "<h1>Preview a robots.txt for {}</h1>\n<p class=\"note\">The origin's recent crawler requests judged again with the candidate in force, as the proxy would judge them; nothing live changes. <a href=\"/ui/origin?origin={}\">Back to the origin</a></p>",
        escape(origin),
        url_value(origin)
    );
    let (robots_text, config_text) = match submitted {
        Some((robots, config)) => (robots.to_string(), config.to_string()),
        None => (
            String::from_utf8_lossy(&current.body).into_owned(),
            String::new(),
        ),
    };
    let _ = writeln!(
        out,
        "<form method=\"post\" action=\"/ui/preview\" class=\"preview\"><input type=\"hidden\" name=\"csrf\" value=\"{}\"><input type=\"hidden\" name=\"origin\" value=\"{}\"><label>Candidate robots.txt<textarea name=\"robots\" rows=\"16\" cols=\"80\">{}</textarea></label><label>Config fragment (optional: origin keys in YAML, e.g. <code>policy: {{purposes: {{training: block}}}}</code>)<textarea name=\"config\" rows=\"4\" cols=\"80\">{}</textarea></label><button type=\"submit\">Preview</button></form>",
        escape(csrf),
        escape(origin),
        escape(&robots_text),
        escape(&config_text)
    );
    if let Some((robots, config)) = submitted {
        let candidate = Candidate {
            robots: Some(robots.replace("\r\n", "\n")).filter(|r| !r.trim().is_empty()),
            config: Some(config.to_string()).filter(|c| !c.trim().is_empty()),
        };
        if let Some(robots) = &candidate.robots {
            if let Err(problem) = crate::preview::body::check_robots(robots.as_bytes()) {
                let _ = writeln!(
                    out,
                    "<div class=\"card warn\"><p>{}</p></div>",
                    escape(&problem.to_string())
                );
                return Some(out);
            }
        }
        match run(console, origin, &candidate).await {
            Ok(answer) => out.push_str(&answer_html(&answer, false)),
            Err(problem) => {
                let _ = writeln!(
                    out,
                    "<div class=\"card warn\"><p>{}</p></div>",
                    escape(&problem.to_string())
                );
            }
        }
        return Some(out);
    }
    // What the last change of the copy in force flipped: the copy before it, previewed.
    let timeline = live.robots.timeline();
    let previous = timeline
        .iter()
        .rev()
        .map(|(copy, _)| copy)
        .find(|copy| copy.body != current.body && copy.has_rules());
    out.push_str("<h2>What changed</h2>\n");
    match previous {
        None => out
            .push_str("<p class=\"note\">No earlier robots.txt copy is known in this process.</p>"),
        Some(previous) => {
            let diff =
                crate::reports::robots_diff(&previous.body, &current.body, "before", "in force");
            let _ = writeln!(out, "<pre class=\"diff\">{}</pre>", escape(&diff));
            let candidate = Candidate {
                robots: Some(String::from_utf8_lossy(&previous.body).into_owned()),
                config: None,
            };
            match run(console, origin, &candidate).await {
                Ok(answer) => out.push_str(&answer_html(&answer, true)),
                Err(problem) => {
                    let _ = writeln!(out, "<p>{}</p>", escape(&problem.to_string()));
                }
            }
        }
    }
    Some(out)
}

async fn run(
    console: &Console,
    origin: &str,
    candidate: &Candidate,
) -> Result<PreviewAnswer, crate::preview::PreviewError> {
    let snapshot = console.live.load();
    crate::preview::preview(
        &snapshot,
        &console.verifier,
        &console.store,
        &console.reports,
        origin,
        candidate,
    )
    .await
}

/// The changes table and the warnings. `reversed`: the candidate was the copy before the one
/// in force, so a row's `after` is what the requests got before the change.
fn answer_html(answer: &PreviewAnswer, reversed: bool) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "<p>{} requests replayed from {} to {} ({} not replayable).</p>",
        number(answer.window.requests_replayed),
        escape(&answer.window.since),
        escape(&answer.window.until),
        number(answer.window.requests_not_replayable)
    );
    match answer.window.coverage {
        "fleet" => {
            let _ = writeln!(
                out,
                "<p>The traffic of every replica ({} within the window).</p>",
                answer.window.replicas
            );
        }
        "store_down" => {
            let _ = writeln!(
                out,
                "<p>The traffic of this replica only: the shared store could not be read.</p>"
            );
        }
        _ => {}
    }
    if !reversed {
        for warning in &answer.warnings {
            let _ = writeln!(
                out,
                "<div class=\"card warn\"><p><strong>{}</strong>{} {}</p></div>",
                escape(warning.kind),
                warning
                    .crawler
                    .as_deref()
                    .map(|c| format!(" {}:", escape(c)))
                    .unwrap_or_default(),
                escape(&warning.message)
            );
        }
    }
    if answer.changes.is_empty() {
        out.push_str(if reversed {
            "<p>The change flipped none of the recent requests.</p>\n"
        } else {
            "<p>No recent request would change.</p>\n"
        });
        return out;
    }
    out.push_str("<table class=\"changes\"><thead><tr><th>Crawler</th><th>Before</th><th>After</th><th class=\"num\">Requests</th><th class=\"num\">Paths</th><th>Purposes</th><th class=\"num\">Verified</th><th>Sample paths</th></tr></thead><tbody>\n");
    for row in &answer.changes {
        let (before, after) = if reversed {
            (row.after, row.before)
        } else {
            (row.before, row.after)
        };
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td>{}</td><td class=\"num\">{:.0}%</td><td>{}</td></tr>",
            escape(&row.crawler),
            before,
            after,
            number(row.requests),
            number(row.paths),
            escape(&row.purposes.join(", ")),
            row.verified * 100.0,
            row.sample_paths
                .iter()
                .map(|p| format!("<code>{}</code>", escape(p)))
                .collect::<Vec<_>>()
                .join(" ")
        );
    }
    out.push_str("</tbody></table>\n");
    out
}
