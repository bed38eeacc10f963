use super::*;

pub(crate) static ADMIN: Section = Section {
    id: "admin",
    place: "in `admin`",
    title: "The admin listener",
    doc: "`admin` written as a mapping.",
    keys: &[
        required("address", Ty::Address, "The admin listener's address."),
        key("token_file", Ty::Path, "none", "A file holding the bearer token every admin request but `/healthz` and `/readyz` must carry (`Authorization: Bearer …`; at least 16 bytes); re-read when it changes."),
        key("read_token_file", Ty::Path, "none", "A read-only token (at least 16 bytes, not the admin token): reports, console pages, `/metrics`, `/explain`, `/bans`, `/robots`, but no action (lifting a ban). Needs `token_file`."),
        key("hosts", Ty::List(&Ty::Str), "none", "Names the admin listener answers to besides its own addresses (an IP literal `Host` naming the listener's address, any address when it listens on `0.0.0.0` or `[::]`; any port) and `localhost` (when it accepts loopback connections): a request naming another host gets 421, token or not, so a DNS-rebinding page cannot read it. List the names clients use, e.g. the admin Service's DNS names or an ingress host."),
    ],
};
