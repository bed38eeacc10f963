use super::*;

pub(crate) static ACCESS_LOG: Section = Section {
    id: "access_log",
    place: "in `access_log`",
    title: "The access log",
    doc: "One line per request: time, client, host, method, path, status, bytes, duration, User-Agent, origin, crawler, decision, upstream, request id.",
    keys: &[
        key("format", Ty::Words(|| names(&crate::config::validate::ACCESS_LOG_FORMATS)), "`json`", "The line's form."),
        key("path", Ty::Str, "stderr, beside the other lines", "`stdout`, or a file (appended to, opened again on `SIGHUP` or `SIGUSR1` after rotation; its directory must exist)."),
    ],
};
