//! `access_log`: one line per request.

use super::*;

pub(crate) static ACCESS_LOG: Section = Section {
    id: "access_log",
    place: "in `access_log`",
    title: "The access log",
    doc: "One line per request: time, client, host, method, path, status, bytes, duration, User-Agent, origin, crawler, decision, upstream, request id.",
    keys: &[
        key("format", Ty::Words(|| names(&ACCESS_LOG_FORMATS)), "`json`", "The line's form."),
        key("path", Ty::Str, "stderr, beside the other lines", "`stdout`, or a file (appended to, opened again on `SIGHUP` or `SIGUSR1` after rotation; its directory must exist)."),
    ],
};

/// `access_log`: one line per request.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AccessLog {
    /// How lines are written.
    pub format: AccessLogFormat,
    /// Where: `None` beside the other log lines (stderr), else apart from them.
    pub path: Option<AccessLogPath>,
}

/// Where access lines go when they are kept apart from the other log lines.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum AccessLogPath {
    /// Standard output (`path: stdout`).
    Stdout,
    /// A file, appended to and opened again on SIGHUP or SIGUSR1 (for log rotation); absolute.
    File(PathBuf),
}

/// How access log lines are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AccessLogFormat {
    /// One JSON object per line.
    Json,
    /// `key=value` pairs, like the text log.
    Text,
}

pub(crate) const ACCESS_LOG_FORMATS: [(&str, AccessLogFormat); 2] = [
    ("json", AccessLogFormat::Json),
    ("text", AccessLogFormat::Text),
];

/// `access_log`: one line per request, in `format`, to `path` (stderr when absent).
pub(crate) fn access_log(sink: &mut Sink, node: &Node, base_dir: &Path) -> Option<AccessLog> {
    let table = Table::read(sink, node, &ACCESS_LOG, "`access_log`")?;
    let format = table
        .get("format")
        .and_then(|n| reader::choice(sink, n, "format", &ACCESS_LOG_FORMATS))
        .unwrap_or(AccessLogFormat::Json);
    let path = table
        .get("path")
        .and_then(|n| reader::nonempty_string(sink, n, "path"))
        .map(|text| match text {
            "stdout" => AccessLogPath::Stdout,
            file => AccessLogPath::File(base_dir.join(file)),
        });
    Some(AccessLog { format, path })
}
