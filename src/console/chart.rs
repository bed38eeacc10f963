//! Small server-rendered SVG charts: requests and blocks per time bucket. Colours come from the
//! stylesheet (classes), so the page needs no inline style.

use std::fmt::Write;

use crate::reports::Tally;

/// Refused requests in a bucket: blocked, limited or banned.
fn refused(tally: &Tally) -> u64 {
    tally.blocked + tally.limited + tally.banned
}

/// A bar chart of `series` (bucket start, tally): requests as bars, refusals over them, with
/// the highest count and the range's ends as labels. `label` names it for screen readers.
pub fn bars(series: &[(u64, Tally)], label: &str) -> String {
    const WIDTH: f64 = 720.0;
    const HEIGHT: f64 = 140.0;
    const TOP: f64 = 14.0;
    const BOTTOM: f64 = 18.0;
    let peak = series
        .iter()
        .map(|(_, t)| t.requests)
        .max()
        .unwrap_or(0)
        .max(1);
    let plot = HEIGHT - TOP - BOTTOM;
    let step = WIDTH / series.len().max(1) as f64;
    let bar = (step * 0.8).max(0.5);
    let mut out = format!(
        "<div class=\"chart\"><svg viewBox=\"0 0 {WIDTH} {HEIGHT}\" role=\"img\" aria-label=\"{}\" xmlns=\"http://www.w3.org/2000/svg\">\n",
        super::html::escape(label)
    );
    let _ = writeln!(
        out,
        "<line class=\"axis\" x1=\"0\" y1=\"{y}\" x2=\"{WIDTH}\" y2=\"{y}\"/>",
        y = HEIGHT - BOTTOM
    );
    for (i, (_, tally)) in series.iter().enumerate() {
        let x = i as f64 * step;
        let height = plot * tally.requests as f64 / peak as f64;
        if tally.requests > 0 {
            let _ = writeln!(
                out,
                "<rect class=\"requests\" x=\"{x:.1}\" y=\"{:.1}\" width=\"{bar:.1}\" height=\"{height:.1}\"><title>{} requests</title></rect>",
                HEIGHT - BOTTOM - height,
                tally.requests
            );
        }
        let refused = refused(tally);
        if refused > 0 {
            let height = plot * refused as f64 / peak as f64;
            let _ = writeln!(
                out,
                "<rect class=\"blocks\" x=\"{x:.1}\" y=\"{:.1}\" width=\"{bar:.1}\" height=\"{height:.1}\"><title>{refused} refused</title></rect>",
                HEIGHT - BOTTOM - height
            );
        }
    }
    let _ = writeln!(
        out,
        "<text x=\"2\" y=\"11\">{peak} per bucket at most</text>"
    );
    if let (Some((first, _)), Some((last, _))) = (series.first(), series.last()) {
        let _ = writeln!(
            out,
            "<text x=\"2\" y=\"{}\">{}</text>",
            HEIGHT - 4.0,
            crate::reports::rfc3339(*first)
        );
        let _ = writeln!(
            out,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>",
            WIDTH - 2.0,
            HEIGHT - 4.0,
            crate::reports::rfc3339(*last)
        );
    }
    out.push_str("</svg></div>\n<p class=\"legend\"><span class=\"requests\">■</span> requests <span class=\"blocks\">■</span> refused (blocked, limited, banned)</p>\n");
    out
}

/// A sparkline of `series` for a table cell.
pub fn spark(series: &[(u64, Tally)]) -> String {
    const WIDTH: f64 = 96.0;
    const HEIGHT: f64 = 16.0;
    let peak = series
        .iter()
        .map(|(_, t)| t.requests)
        .max()
        .unwrap_or(0)
        .max(1);
    let step = WIDTH / series.len().max(1) as f64;
    let mut out = format!(
        "<svg class=\"spark\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" aria-hidden=\"true\" xmlns=\"http://www.w3.org/2000/svg\">"
    );
    for (i, (_, tally)) in series.iter().enumerate() {
        let x = i as f64 * step;
        for (class, count) in [("requests", tally.requests), ("blocks", refused(tally))] {
            if count > 0 {
                let height = (HEIGHT * count as f64 / peak as f64).max(1.0);
                let _ = write!(
                    out,
                    "<rect class=\"{class}\" x=\"{x:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{height:.1}\"/>",
                    HEIGHT - height,
                    step.max(0.5)
                );
            }
        }
    }
    out.push_str("</svg>");
    out
}
