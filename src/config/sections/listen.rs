use super::*;

pub(crate) static LISTENER: Section = Section {
    id: "listener",
    place: "in listener",
    title: "A listener",
    doc: "A `listen` entry written as a mapping.",
    keys: &[
        required("address", Ty::Address, "The listener's address."),
        key("tls", Ty::Section(&LISTENER_TLS), "none (plain HTTP)", "Terminate TLS here: one certificate (`cert`, `key`) or several chosen by SNI (`certs`)."),
        key("proxy_protocol", Ty::Bool, "`false`", "Every connection starts with a PROXY protocol header (v1 or v2), believed only from a peer in `trusted_proxies`: a connection from any other peer is closed before anything is read, one without a valid header too."),
        key("http2", Ty::Bool, "`true` with TLS, `false` without", "HTTP/2 beside HTTP/1.1: by ALPN on TLS, with prior knowledge (h2c) on plain listeners. Same as `tls.http2`; both must agree."),
    ],
};

pub(crate) static LISTENER_TLS: Section = Section {
    id: "listener_tls",
    place: "in listener `tls`",
    title: "A listener's TLS",
    doc: "`cert` and `key`, or `certs`.",
    keys: &[
        key("cert", Ty::Path, "", "PEM certificate chain, leaf first (with `key`)."),
        key("key", Ty::Path, "", "PEM private key of `cert`."),
        key("certs", Ty::List(&Ty::Section(&LISTENER_CERT)), "", "Several sites' certificates: each connection gets the one whose names match its SNI (an exact name before a wildcard, an earlier certificate before a later one); no name, or an unknown one, gets the first."),
        key("http2", Ty::Bool, "`true`", "Offer HTTP/2 by ALPN (`h2`, then `http/1.1`)."),
    ],
};

pub(crate) static LISTENER_CERT: Section = Section {
    id: "listener_cert",
    place: "in a `tls.certs` entry",
    title: "A certificate of `tls.certs`",
    doc: "One site's certificate and key.",
    keys: &[
        required("cert", Ty::Path, "PEM certificate chain, leaf first."),
        required("key", Ty::Path, "PEM private key."),
    ],
};
