//! `response_signals`: what a page's own AI preferences, sent in the origin's response head
//! (`Content-Usage`, `X-Robots-Tag: noai` / `noimageai`), do to a crawler's request.

use super::*;

pub(crate) static RESPONSE_SIGNALS: Section = Section {
    id: "response_signals",
    place: "in `response_signals`",
    title: "Response signals",
    doc: "A page's own AI preferences in the origin's response head, judged before any of its body is sent: `Content-Usage` (aipref: `train-ai=n` refuses `training`, `search=n` refuses `search`) and `X-Robots-Tag` `noai` (refuses `training`) and `noimageai` (refuses `training` for `image/*` responses), optionally scoped to a crawler's robots.txt token (`X-Robots-Tag: GPTBot: noai`). A crawler with several purposes is spared as for robots.txt's lines (`content_signals.multi_purpose`; a control token such as `Google-Extended` is named instead).",
    keys: &[
        key("action", Ty::Words(|| names(&RESPONSE_SIGNAL_ACTIONS)), "`report`", "`enforce`: a crawler whose purpose the page refuses gets `status` and none of the origin's body; `report`: the response passes, counted and logged as would_block; `ignore`: the headers are not read."),
        key("status", Ty::Int { min: 402, max: 403 }, "`403`", "The refusal's status under `enforce`: `403`, or `402` with the licence link (`Link: <url>; rel=\"license\"`, from `block.license_url` or robots.txt's `License:` line) as the licence answer has."),
    ],
};

/// `response_signals`: what a page's preferences in the origin's response head do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ResponseSignalsConfig {
    /// What is done with a crawler whose purpose the page refuses.
    pub action: SignalAction,
    /// The refusal's status under `enforce`: 403, or 402 (the licence answer).
    pub status: u16,
}

/// `response_signals.status` when the config leaves it out.
pub(crate) const DEFAULT_RESPONSE_SIGNAL_STATUS: u16 = 403;

impl Default for ResponseSignalsConfig {
    fn default() -> Self {
        ResponseSignalsConfig {
            action: SignalAction::Report,
            status: DEFAULT_RESPONSE_SIGNAL_STATUS,
        }
    }
}

/// The spellings of `response_signals.action` (those of `content_signals.action`).
pub(crate) const RESPONSE_SIGNAL_ACTIONS: [(&str, SignalAction); 3] = SIGNAL_ACTIONS;

/// Reads a `response_signals` section over `base`, key by key.
pub(crate) fn response_signals(
    sink: &mut Sink,
    node: Option<&Node>,
    base: &ResponseSignalsConfig,
) -> ResponseSignalsConfig {
    let mut out = *base;
    let Some(table) =
        node.and_then(|n| Table::read(sink, n, &RESPONSE_SIGNALS, "`response_signals`"))
    else {
        return out;
    };
    if let Some(action) = table
        .get("action")
        .and_then(|n| reader::choice(sink, n, "action", &RESPONSE_SIGNAL_ACTIONS))
    {
        out.action = action;
    }
    if let Some(node) = table.get("status") {
        match &node.value {
            Value::Int(402) => out.status = 402,
            Value::Int(403) => out.status = 403,
            Value::Int(other) => sink.error_hint(
                node.pos,
                format!("`status` must be 403 or 402, not {other}"),
                "e.g. status: 402",
            ),
            other => sink.error(
                node.pos,
                format!("`status` must be 403 or 402, not {}", other.kind()),
            ),
        }
    }
    out
}
