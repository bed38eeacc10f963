use super::*;

pub(crate) static STATE: Section = Section {
    id: "state",
    place: "in `state`",
    title: "Shared state",
    doc: "Where Crawl-delay budgets, strike counts, bans and robots.txt reads are kept.",
    keys: &[
        key(
            "backend",
            Ty::Words(crate::config::state::backend_words),
            "`memory`",
            "This process's memory, or a Redis/Valkey server every replica shares.",
        ),
        key(
            "redis",
            Ty::Section(&STATE_REDIS),
            "",
            "The store, with `backend: redis`.",
        ),
        key(
            "dir",
            Ty::Str,
            "`$STATE_DIRECTORY`, else `/var/lib/robotsguard`, else `$XDG_STATE_HOME/robotsguard`: the first that can be written",
            "Where this process keeps the generated trap secret (file `trap-secret`, mode 0600) without a shared store.",
        ),
    ],
};

pub(crate) static STATE_REDIS: Section = Section {
    id: "state_redis",
    place: "in `state.redis`",
    title: "The Redis/Valkey store",
    doc: "One of `url`, `url_file`, `sentinel`, `cluster`. When the store is slow or down, decisions fall back to this process's memory until it answers again.",
    keys: &[
        key("url", Ty::Str, "", "`redis://[user:password@]host:port/db`, `redis+sentinel://…/MASTER[/DB]`, `redis+cluster://NODE,...`, `rediss://…` for TLS, or `unix:///path`."),
        key("url_file", Ty::Path, "", "A file holding the URL (a mounted Secret), read at start."),
        key("sentinel", Ty::Section(&STATE_REDIS_SENTINEL), "", "The primary that these sentinels name."),
        key("cluster", Ty::Section(&STATE_REDIS_CLUSTER), "", "A Redis or Valkey Cluster."),
        key("prefix", Ty::Str, "`robotsguard:`", "Put before every key, so several deployments can share one server."),
        key("timeout", Ty::Duration, "`50ms`", "The longest a request waits for the store (at most `5s`)."),
        key("tls", Ty::Section(&STATE_REDIS_TLS), "none", "TLS material for `rediss://` (or, present, TLS to sentinels and cluster nodes)."),
    ],
};

pub(crate) static STATE_REDIS_SENTINEL: Section = Section {
    id: "state_redis_sentinel",
    place: "in `state.redis.sentinel`",
    title: "Redis Sentinel",
    doc: "",
    keys: &[
        required(
            "master",
            Ty::Str,
            "The name the sentinels know the primary by.",
        ),
        required(
            "nodes",
            Ty::List(&Ty::HostPort),
            "1 to 32 sentinels, `host[:port]` (26379 by default).",
        ),
        key(
            "db",
            Ty::Int {
                min: 0,
                max: i32::MAX as i128,
            },
            "`0`",
            "The database number.",
        ),
        key("username", Ty::Str, "none", "The primary's user."),
        key(
            "password_file",
            Ty::Path,
            "none",
            "A file holding the primary's password, read at start.",
        ),
    ],
};

pub(crate) static STATE_REDIS_CLUSTER: Section = Section {
    id: "state_redis_cluster",
    place: "in `state.redis.cluster`",
    title: "Redis Cluster",
    doc: "",
    keys: &[
        required(
            "nodes",
            Ty::List(&Ty::HostPort),
            "1 to 32 nodes, `host[:port]` (6379 by default), from which the cluster is discovered.",
        ),
        key("username", Ty::Str, "none", "The user."),
        key(
            "password_file",
            Ty::Path,
            "none",
            "A file holding the password, read at start.",
        ),
    ],
};

pub(crate) static STATE_REDIS_TLS: Section = Section {
    id: "state_redis_tls",
    place: "in `state.redis.tls`",
    title: "The store's TLS",
    doc: "",
    keys: &[
        key(
            "ca",
            Ty::Path,
            "the system's roots",
            "PEM CA certificates the store's certificate is checked against.",
        ),
        key(
            "client_cert",
            Ty::Path,
            "none",
            "PEM certificate chain presented to a store that asks for one; with `client_key`.",
        ),
        key(
            "client_key",
            Ty::Path,
            "none",
            "Private key of `client_cert`.",
        ),
    ],
};
