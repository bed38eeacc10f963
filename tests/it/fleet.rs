//! What a fleet of replicas relies on, with real processes on loopback (the fleet of containers
//! itself is scripts/test-fleet.py): the shared store behind Redis Sentinel and as a Redis
//! Cluster, with real `redis-server` processes — two robotsguard processes share bans and
//! Crawl-delay budgets through the primary the sentinels name, before and after that primary is
//! killed and a replica takes over (requests answered from memory meanwhile), and through a
//! three-node cluster with the keys each script uses in one slot; `validate` refuses what `serve`
//! refuses; and a failed proxying answer closes its connection and says so (a load balancer
//! reusing it would fail the next request).

use crate::support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use support::{free_port, metric, Origin, Proxy, Request};

const EXAMPLEBOT: &str = "Mozilla/5.0 (compatible; ExampleBot/1.0)";
const PREFIX: &str = "rg-topology:";

/// A `redis-server` (or a sentinel) on a loopback port, killed on drop.
struct Node {
    child: Option<Child>,
    port: u16,
    dir: tempfile::TempDir,
}

impl Node {
    /// A server with `args` after its port, without persistence.
    fn server(args: &[&str]) -> Node {
        let dir = tempfile::tempdir().expect("temp dir");
        let port = free_port();
        let mut command = support::redis::server_program().command();
        command
            .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(dir.path())
            .args(args);
        Node::spawn(command, port, dir)
    }

    /// A sentinel watching the primary at `primary` under the name `fleet` (two agree on a
    /// failover; a primary silent for a second is down).
    fn sentinel(primary: u16) -> Node {
        let dir = tempfile::tempdir().expect("temp dir");
        let port = free_port();
        let config = dir.path().join("sentinel.conf");
        std::fs::write(
            &config,
            format!(
                "port {port}\nbind 127.0.0.1\ndir {}\n\
                 sentinel monitor fleet 127.0.0.1 {primary} 2\n\
                 sentinel down-after-milliseconds fleet 1000\n\
                 sentinel failover-timeout fleet 10000\n",
                dir.path().display()
            ),
        )
        .expect("sentinel config written");
        let mut command = support::redis::server_program().command();
        command.arg(&config).arg("--sentinel");
        Node::spawn(command, port, dir)
    }

    fn spawn(mut command: Command, port: u16, dir: tempfile::TempDir) -> Node {
        let log = std::fs::File::create(dir.path().join("log")).expect("log file");
        let child = command
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log handle"))
            .stderr(log)
            .spawn()
            .expect("redis-server starts");
        let node = Node {
            child: Some(child),
            port,
            dir,
        };
        assert!(
            wait_for(Duration::from_secs(10), || node
                .try_command(&["PING"])
                .is_ok_and(|r| r == "PONG")),
            "redis on {port} answers PING:\n{}",
            node.log()
        );
        node
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("log")).unwrap_or_default()
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn command(&self, args: &[&str]) -> String {
        self.try_command(args)
            .unwrap_or_else(|e| panic!("{args:?} on {}: {e}", self.port))
    }

    /// One command; the reply as text (an array's items one per line).
    fn try_command(&self, args: &[&str]) -> Result<String, String> {
        let stream = TcpStream::connect_timeout(
            &SocketAddr::from(([127, 0, 0, 1], self.port)),
            Duration::from_millis(500),
        )
        .map_err(|e| e.to_string())?;
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .map_err(|e| e.to_string())?;
        let mut request = format!("*{}\r\n", args.len());
        for arg in args {
            request.push_str(&format!("${}\r\n{arg}\r\n", arg.len()));
        }
        (&stream)
            .write_all(request.as_bytes())
            .map_err(|e| e.to_string())?;
        read_reply(&mut BufReader::new(stream))
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill();
    }
}

fn read_reply(reader: &mut impl BufRead) -> Result<String, String> {
    let mut line = String::new();
    reader.read_line(&mut line).map_err(|e| e.to_string())?;
    let line = line.trim_end_matches("\r\n");
    if line.is_empty() {
        return Err("connection closed".into());
    }
    let (kind, rest) = line.split_at(1);
    match kind {
        "+" | ":" => Ok(rest.to_owned()),
        "-" => Err(rest.to_owned()),
        "$" if rest == "-1" => Ok("(nil)".to_owned()),
        "$" => {
            let mut bulk = String::new();
            reader.read_line(&mut bulk).map_err(|e| e.to_string())?;
            Ok(bulk.trim_end_matches("\r\n").to_owned())
        }
        "*" if rest == "-1" => Ok("(nil)".to_owned()),
        "*" => {
            let count: usize = rest.parse().map_err(|_| format!("bad array {rest}"))?;
            let mut items = Vec::with_capacity(count.min(1024));
            for _ in 0..count {
                items.push(read_reply(reader)?);
            }
            Ok(items.join("\n"))
        }
        other => Err(format!("unexpected reply kind {other}")),
    }
}

/// Polls `check` every 50 ms until it holds or `within` passes.
fn wait_for(within: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    for _ in 0..100_000 {
        if check() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(50));
    }
    false
}

/// A proxy of `origin` with `state` (the `state.redis` mapping's inner keys, one line), a 2 s
/// Crawl-delay and bans after 3 strikes, once the store is up.
fn start(origin: &Origin, redis: &str) -> Proxy {
    let body = format!(
        "trusted_proxies: [\"127.0.0.1/32\"]\n\
         state:\n  backend: redis\n  redis: {{{redis}, prefix: \"{PREFIX}\", timeout: 1s}}\n\
         defaults:\n  crawl_delay: {{action: enforce, max: 60s}}\n  \
         offenders: {{action: ban, strikes: 3, window: 10m, ban: 10m}}\n\
         crawlers:\n  extra:\n    - {{name: ExampleBot, tokens: [examplebot], pattern: ExampleBot, category: ai-training}}\n\
         origins:\n  - name: shop\n    hosts: [\"shop.example\"]\n    upstream: \"{}\"\n    \
         robots: {{source: inline, text: \"User-agent: *\\nCrawl-delay: 2\\nDisallow: /private\\n\"}}\n",
        origin.addr()
    );
    let proxy = Proxy::start(&body);
    assert!(
        wait_up(&proxy, 1.0, Duration::from_secs(15)),
        "the store is reachable: {}",
        proxy.stderr()
    );
    proxy
}

fn wait_up(proxy: &Proxy, want: f64, within: Duration) -> bool {
    wait_for(within, || {
        metric(&proxy.metrics(), "robotsguard_state_backend_up", &[]) == want
    })
}

fn from(proxy: &Proxy, client: &str, path: &str) -> support::Response {
    proxy.send(
        &Request::get(path)
            .host("shop.example")
            .ua(EXAMPLEBOT)
            .header("X-Forwarded-For", client),
    )
}

/// Bans `client` through `through` (three disallowed requests) and checks that `other` refuses
/// it within a second of the ban.
fn ban_is_shared(through: &Proxy, other: &Proxy, client: &str) {
    for n in 0..3 {
        assert_eq!(from(through, client, &format!("/private/{n}")).status, 403);
    }
    let banned = from(through, client, "/page");
    assert_eq!(banned.status, 403, "{}", banned.text());
    assert!(banned.text().contains("banned"), "{}", banned.text());
    let started = Instant::now();
    let mirrored = wait_for(Duration::from_secs(1), || {
        other.admin_get("/bans?origin=shop").json()["bans"]
            .as_array()
            .is_some_and(|bans| bans.iter().any(|ban| ban["client"] == client))
    });
    assert!(
        mirrored,
        "the other process refuses {client} within a second (waited {:?})",
        started.elapsed()
    );
    let refused = from(other, client, "/page");
    assert_eq!(refused.status, 403, "{}", refused.text());
}

/// The Crawl-delay budget of `client` spent through `first` is spent for `second` too.
fn budget_is_shared(first: &Proxy, second: &Proxy, client: &str) {
    assert_eq!(from(first, client, "/page").status, 200);
    let limited = from(second, client, "/page");
    assert_eq!(limited.status, 429, "{}", limited.text());
}

#[test]
fn bans_and_budgets_stay_shared_through_a_sentinel_failover() {
    let mut primary = Node::server(&[]);
    let replica = Node::server(&["--replicaof", "127.0.0.1", &primary.port.to_string()]);
    let sentinels: Vec<Node> = (0..3).map(|_| Node::sentinel(primary.port)).collect();
    // Every sentinel knows the replica and the other sentinels before anything fails.
    assert!(
        wait_for(Duration::from_secs(30), || sentinels.iter().all(|s| {
            s.try_command(&["SENTINEL", "REPLICAS", "fleet"])
                .is_ok_and(|r| r.contains(&replica.port.to_string()))
                && s.try_command(&["SENTINEL", "SENTINELS", "fleet"])
                    .is_ok_and(|r| r.matches("runid").count() == 2)
        })),
        "sentinels settled:\n{}",
        sentinels[0].log()
    );
    let url = format!(
        "redis+sentinel://{}/fleet/0",
        sentinels
            .iter()
            .map(|s| format!("127.0.0.1:{}", s.port))
            .collect::<Vec<_>>()
            .join(",")
    );
    let origin = Origin::start();
    let a = start(&origin, &format!("url: \"{url}\""));
    let b = start(&origin, &format!("url: \"{url}\""));

    ban_is_shared(&a, &b, "198.51.100.1");
    budget_is_shared(&a, &b, "198.51.100.2");
    // The ban has reached the replica before its primary dies.
    assert!(wait_for(Duration::from_secs(5), || replica.command(&[
        "HEXISTS",
        &format!("{PREFIX}bans"),
        "198.51.100.1 shop"
    ]) == "1"));

    primary.kill();
    // Until a replica is promoted, requests are decided from memory: whatever should pass
    // passes, and the ban made before holds.
    let mut round: u32 = 0;
    let promoted = wait_for(Duration::from_secs(30), || {
        round += 1;
        for (i, proxy) in [&a, &b].into_iter().enumerate() {
            // A fresh address per process and round (reused 250 rounds later, long after its
            // 2 s budget): its request is within its budget whoever decides it.
            let fresh = format!("203.0.{i}.{}", round % 250 + 1);
            let answer = from(proxy, &fresh, "/page");
            assert_eq!(answer.status, 200, "{fresh}: {}", answer.text());
            assert_eq!(from(proxy, "198.51.100.1", "/page").status, 403);
        }
        sentinels[0]
            .try_command(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", "fleet"])
            .is_ok_and(|addr| addr.ends_with(&replica.port.to_string()))
    });
    assert!(
        promoted,
        "the replica was promoted:\n{}",
        sentinels[0].log()
    );
    for proxy in [&a, &b] {
        assert!(
            wait_up(proxy, 1.0, Duration::from_secs(20)),
            "shared again after the failover: {}",
            proxy.stderr()
        );
    }
    assert_eq!(
        from(&b, "198.51.100.1", "/page").status,
        403,
        "the ban survived"
    );
    ban_is_shared(&b, &a, "198.51.100.3");
    budget_is_shared(&b, &a, "198.51.100.4");
    assert_eq!(
        replica.command(&["HEXISTS", &format!("{PREFIX}bans"), "198.51.100.3 shop"]),
        "1",
        "the new primary holds the new ban"
    );
}

/// Three cluster nodes with the 16,384 slots split between them, joined, until every node says
/// the cluster is ok.
fn cluster() -> Vec<Node> {
    let nodes: Vec<Node> = (0..3)
        .map(|_| Node::server(&["--cluster-enabled", "yes", "--cluster-node-timeout", "2000"]))
        .collect();
    for (i, node) in nodes.iter().enumerate() {
        let first = i * 16384 / 3;
        let last = (i + 1) * 16384 / 3 - 1;
        node.command(&[
            "CLUSTER",
            "ADDSLOTSRANGE",
            &first.to_string(),
            &last.to_string(),
        ]);
    }
    for node in &nodes[1..] {
        nodes[0].command(&["CLUSTER", "MEET", "127.0.0.1", &node.port.to_string()]);
    }
    assert!(
        wait_for(Duration::from_secs(30), || nodes.iter().all(|n| n
            .try_command(&["CLUSTER", "INFO"])
            .is_ok_and(|info| info.contains("cluster_state:ok")))),
        "the cluster formed:\n{}",
        nodes[0].log()
    );
    nodes
}

/// Every key in the cluster.
fn cluster_keys(nodes: &[Node]) -> Vec<String> {
    let mut keys: Vec<String> = nodes
        .iter()
        .flat_map(|n| {
            n.command(&["KEYS", "*"])
                .lines()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .filter(|k| !k.is_empty())
        .collect();
    keys.sort();
    keys
}

#[test]
fn a_cluster_shares_bans_and_budgets_with_each_scripts_keys_in_one_slot() {
    let nodes = cluster();
    let listed = nodes
        .iter()
        .map(|n| format!("\"127.0.0.1:{}\"", n.port))
        .collect::<Vec<_>>()
        .join(", ");
    let origin = Origin::start();
    // The block form here; the URL form is the same client (validate's test below).
    let a = start(&origin, &format!("cluster: {{nodes: [{listed}]}}"));
    let b = start(&origin, &format!("cluster: {{nodes: [{listed}]}}"));

    ban_is_shared(&a, &b, "198.51.100.21");
    budget_is_shared(&a, &b, "198.51.100.22");
    let keys = cluster_keys(&nodes);
    // Whatever a script or pipeline uses together carries the prefix as its hash tag; the
    // budgets, each a key on its own, do not, so that they spread over the nodes.
    let tagged = format!("{{{PREFIX}}}");
    assert!(
        keys.contains(&format!("{tagged}bans")),
        "the bans are tagged: {keys:?}"
    );
    assert!(
        keys.contains(&format!("{PREFIX}delay:shop:examplebot:198.51.100.22")),
        "the budget is not: {keys:?}"
    );
    let slots: Vec<String> = keys
        .iter()
        .filter(|k| k.starts_with(&tagged))
        .map(|k| nodes[0].command(&["CLUSTER", "KEYSLOT", k]))
        .collect();
    assert!(
        slots.len() >= 2 && slots.iter().all(|s| *s == slots[0]),
        "one slot for the scripts' keys: {keys:?} {slots:?}"
    );
}

/// Runs `robotsguard validate` on `config` (written to a temp dir); exit code and stderr.
fn validate(config: &str) -> (i32, String) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("robotsguard.yaml");
    std::fs::write(&path, config).expect("config written");
    let output = Command::new(env!("CARGO_BIN_EXE_robotsguard"))
        .arg("validate")
        .arg("--config")
        .arg(&path)
        .output()
        .expect("robotsguard runs");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn state_config(redis: &str) -> String {
    format!(
        "state:\n  backend: redis\n  redis:\n{redis}\norigins:\n  - name: shop\n    hosts: [shop.example]\n    upstream: \"127.0.0.1:9\"\n"
    )
}

#[test]
fn validate_refuses_bad_sentinel_and_cluster_settings_where_they_are_written() {
    for good in [
        "    url: \"redis+sentinel://s1:26379,s2/fleet/1\"",
        "    url: \"redis+cluster://:pw@n1:7000,n2:7001\"",
        "    sentinel: {master: fleet, nodes: [\"s1:26379\", \"[2001:db8::1]\"], db: 2}",
        "    cluster: {nodes: [\"n1:7000\"], username: edge}",
    ] {
        let (code, stderr) = validate(&state_config(good));
        assert_eq!(code, 0, "{good}: {stderr}");
    }
    for (bad, line, column, message) in [
        (
            "    url: \"redis+sentinel://s1:26379\"",
            4,
            10,
            "the primary's name is missing",
        ),
        (
            "    url: \"redis+cluster://n1:7000/2\"",
            4,
            10,
            "a cluster has only database 0",
        ),
        ("    sentinel: {nodes: [\"s1\"]}", 4, 15, "missing `master`"),
        (
            "    sentinel: {master: fleet, nodes: [\"s1:0\"]}",
            4,
            39,
            "is not a port",
        ),
        ("    cluster: {nodes: []}", 4, 22, "lists 1 to 32"),
        (
            "    cluster: {nodes: [\"n1\"], master: x}",
            4,
            30,
            "unknown key `master` in `state.redis.cluster`",
        ),
        (
            "    url: \"redis://127.0.0.1/0\"\n    cluster: {nodes: [\"n1\"]}",
            5,
            14,
            "not both `url` and `cluster`",
        ),
        (
            "    url: \"redis+sentinel://s1/fleet\"\n    tls: {}",
            5,
            10,
            "needs a `rediss://` URL",
        ),
        (
            "    sentinel: {master: fleet, nodes: [\"s1\"], password_file: nowhere}",
            4,
            61,
            "cannot read",
        ),
    ] {
        let (code, stderr) = validate(&state_config(bad));
        assert_eq!(code, 1, "{bad}: {stderr}");
        let place = format!(":{line}:{column}:");
        assert!(
            stderr.contains(&place) && stderr.contains(message),
            "{bad}: expected {place} {message} in\n{stderr}"
        );
    }
}

#[test]
fn a_failed_proxying_answer_says_connection_close_and_closes() {
    // Nothing listens on the upstream's port: every request fails to connect.
    let closed = free_port();
    let proxy = Proxy::start(&format!(
        "origins:\n  - name: shop\n    hosts: [\"shop.example\"]\n    upstream: \"127.0.0.1:{closed}\"\n    \
         robots: {{source: inline, text: \"User-agent: *\\nDisallow: /private\\n\"}}\n"
    ));
    let stream = TcpStream::connect(proxy.addr).expect("connects");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout set");
    (&stream)
        .write_all(b"GET /page HTTP/1.1\r\nHost: shop.example\r\nUser-Agent: Mozilla/5.0 Firefox/128.0\r\n\r\n")
        .expect("request sent");
    let mut answer = Vec::new();
    // The whole answer, then the end of the connection (a read of 0), within the timeout.
    let closed_by_proxy = (&stream).read_to_end(&mut answer).is_ok();
    let text = String::from_utf8_lossy(&answer).to_ascii_lowercase();
    assert!(text.starts_with("http/1.1 502"), "{text}");
    assert!(text.contains("\r\nconnection: close\r\n"), "{text}");
    assert!(
        closed_by_proxy,
        "the proxy closed the connection after its answer: {text}"
    );
}

#[test]
fn healthcheck_exits_0_for_a_live_admin_listener_and_1_otherwise() {
    let origin = Origin::start();
    let proxy = Proxy::start(&support::site(&origin, "shop.example", ""));
    let run = |address: String, path: &str| {
        Command::new(env!("CARGO_BIN_EXE_robotsguard"))
            .args([
                "healthcheck",
                "--address",
                &address,
                "--path",
                path,
                "--timeout",
                "2s",
            ])
            .output()
            .expect("robotsguard runs")
    };
    let healthy = run(proxy.admin.to_string(), "/healthz");
    assert_eq!(healthy.status.code(), Some(0), "{healthy:?}");
    let ready = run(proxy.admin.to_string(), "/readyz");
    assert_eq!(ready.status.code(), Some(0), "{ready:?}");
    let missing = run(proxy.admin.to_string(), "/nowhere");
    assert_eq!(missing.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&missing.stderr).contains("404"),
        "{missing:?}"
    );
    let nobody = run(format!("127.0.0.1:{}", free_port()), "/healthz");
    assert_eq!(nobody.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&nobody.stderr).starts_with("unhealthy:"));
}

#[test]
fn version_names_the_package_version_a_commit_and_the_release_tag() {
    let output = Command::new(env!("CARGO_BIN_EXE_robotsguard"))
        .arg("--version")
        .output()
        .expect("robotsguard runs");
    let line = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    let expected = format!("robotsguard {} (commit ", env!("CARGO_PKG_VERSION"));
    assert!(line.starts_with(&expected), "{line}");
    let (commit, describe) = line[expected.len()..]
        .split_once(')')
        .expect("the commit in parentheses");
    assert!(
        commit == "unknown" || (commit.len() >= 7 && commit.bytes().all(|b| b.is_ascii_hexdigit())),
        "{line}"
    );
    // After the commit, `git describe`'s name of the nearest release tag, when the build had
    // git and tags (a clone without tags names the commit alone).
    let describe = describe.trim();
    let tagged = std::process::Command::new("git")
        .args(["describe", "--tags", "--match", "v[0-9]*"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .is_ok_and(|o| o.status.success());
    if tagged {
        assert!(
            describe.starts_with("v0.") || describe.starts_with('v'),
            "{line}"
        );
        assert!(
            describe
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'+')),
            "{line}"
        );
    } else {
        assert!(describe.is_empty() || describe.starts_with('v'), "{line}");
    }
}
