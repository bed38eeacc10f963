# Shared set-up of the proxy benchmarks (bench/proxy-compare.sh, bench/proxy-instructions.sh,
# bench/proxy-tls-h2.sh, bench/proxy-sampled.sh); sourced, not run. Everything listens on
# 127.0.0.1 only.

# need COMMAND PACKAGE: installs the Debian package when the command is missing.
need() { command -v "$1" >/dev/null 2>&1 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null; }; }

# pin_cpus: the proxy under test on PROXY_CPUS (default CPU 0), the load generator and the origin
# on LOAD_CPUS (default the rest); sets pin_proxy and pin_load (taskset prefixes). On a 1-CPU
# machine nothing is pinned and both are "all".
pin_cpus() {
  local cpus
  cpus=$(nproc)
  if [ "$cpus" -ge 2 ]; then
    PROXY_CPUS=${PROXY_CPUS:-0}
    LOAD_CPUS=${LOAD_CPUS:-1-$((cpus - 1))}
    pin_proxy=(taskset -c "$PROXY_CPUS")
    pin_load=(taskset -c "$LOAD_CPUS")
  else
    PROXY_CPUS=all LOAD_CPUS=all pin_proxy=() pin_load=()
  fi
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# write_origin_config DIR PORT: an nginx config in DIR/nginx.conf answering 200 to everything on
# PORT, keep-alive without a request limit, no access log.
write_origin_config() {
  cat >"$1/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $1/nginx.pid;
error_log $1/nginx-error.log;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 1000000;
  server { listen 127.0.0.1:$2; location / { return 200 "origin page\n"; } }
}
CONF
}

# write_guard_config DIR GUARD_PORT ADMIN_PORT ORIGIN_PORT THREADS: DIR/conf/robotsguard.yaml with
# one origin, bench.example, whose robots.txt (from a watched file) is the medium benchmark file
# plus a group that blocks the "blocked" crawler of bench/mix.lua. Config and robots.txt get a
# directory of their own: robotsguard watches it, and logs and results written to DIR must not
# look like robots.txt or config changes.
#
# The operators' IP range lists the catalogue names are mirrored to local files (a
# documentation-range prefix each, none covering loopback, so every crawler claim in
# bench/mix.lua stays `unverified` as it would be with no list at all): a deployment loads each
# list once and refreshes it daily, while a machine without egress would retry every list with
# backoff from 10 s through the whole measurement, a cost per second that the slower the
# machine, the more it adds per request. docs/BENCHMARKS.md (issue 34, step 30) has the figures.
write_guard_config() {
  mkdir -p "$1/conf/lists"
  { cat crates/robotsguard-robots/benches/data/medium.txt; printf '\nUser-agent: CCBot\nDisallow: /\n'; } >"$1/conf/robots.txt"
  cat >"$1/conf/robotsguard.yaml" <<CONF
listen: ["127.0.0.1:$2"]
admin: "127.0.0.1:$3"
threads: $5
shutdown: {grace: 1s}
# The load generator is one client on loopback: it may hold every place (no per-client sharing).
limits: {max_requests_in_flight: 1024, max_requests_in_flight_per_client: 1024}
verify:
  ranges:
    mirrors:
CONF
  local url index=0
  for url in $(grep -oE 'ips: \[[^]]*\]' crates/robotsguard-crawlers/crawlers.yaml | grep -oE 'https://[^"]+' | sort -u); do
    index=$((index + 1))
    printf '{"creationTime": "2026-11-01T00:00:00", "prefixes": [{"ipv4Prefix": "192.0.2.1/32"}]}\n' >"$1/conf/lists/$index.json"
    printf '      "%s": "file:%s"\n' "$url" "$1/conf/lists/$index.json" >>"$1/conf/robotsguard.yaml"
  done
  if [ "$index" -eq 0 ]; then
    echo "bench/common.sh: no range list URL found in crates/robotsguard-crawlers/crawlers.yaml (its 'ips: [...]' form changed?)" >&2
    return 1
  fi
  cat >>"$1/conf/robotsguard.yaml" <<CONF
origins:
  - name: bench
    hosts: [bench.example]
    upstream: "127.0.0.1:$4"
    robots: {source: file, path: robots.txt}
CONF
}

# The browser the TLS benchmarks' h2load requests come from (robotsguard decides and passes them).
BROWSER_UA='Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0'

# write_tls_pair DIR: DIR/key.pem and DIR/cert.pem, an ECDSA P-256 certificate for bench.example
# made by openssl, which robotsguard and the pass-throughs all serve.
write_tls_pair() {
  openssl ecparam -name prime256v1 -genkey -noout -out "$1/key.pem" 2>/dev/null
  openssl req -x509 -new -key "$1/key.pem" -days 2 -subj /CN=bench.example \
    -addext subjectAltName=DNS:bench.example -out "$1/cert.pem" 2>/dev/null
}

# listen_with_tls CONFIG GUARD_PORT DIR: robotsguard's listener in CONFIG (from
# write_guard_config) terminates TLS with write_tls_pair's DIR/cert.pem and DIR/key.pem.
listen_with_tls() {
  sed -i "s|^listen: .*|listen: [{address: \"127.0.0.1:$2\", tls: {cert: $3/cert.pem, key: $3/key.pem}}]|" "$1"
}

# One round of robotsguard and the two pass-throughs through the calling script's
# `run LABEL PORT PID [ARGS]`: each labelled KIND-SUFFIX, its line appended to $results. With
# CONCURRENT=1 the three run at once, each with its own load generator, so whatever slows the
# machine in the round slows the three alike; otherwise one after the other. Needs $work,
# $results, $GUARD_PORT/$guard, $PASS_PORT/$pass and $PROD_PORT/$prod.
run_three() { # suffix [args for run...]
  local suffix=$1 proxy kind port pid loads=()
  shift
  local -a proxies=("robotsguard $GUARD_PORT $guard" "passthrough $PASS_PORT $pass" "production $PROD_PORT $prod")
  for proxy in "${proxies[@]}"; do
    read -r kind port pid <<<"$proxy"
    if [ "${CONCURRENT:-0}" = 1 ]; then
      run "$kind-$suffix" "$port" "$pid" "$@" >"$work/round.$kind" & loads+=($!)
    else
      run "$kind-$suffix" "$port" "$pid" "$@" | tee -a "$results"
    fi
  done
  if [ "${CONCURRENT:-0}" = 1 ]; then
    for pid in "${loads[@]}"; do wait "$pid"; done   # each one's status, not just the last's
    for proxy in "${proxies[@]}"; do cat "$work/round.${proxy%% *}"; done | tee -a "$results"
  fi
}

# Sets guard_bin and pass_bin: the profiling build of this checkout (built now), or with
# BINARIES=DIR a build kept aside (DIR/robotsguard and DIR/passthrough), so two builds can be
# compared on the same machine, round by round.
proxy_binaries() {
  if [ -n "${BINARIES:-}" ]; then
    local dir
    dir=$(cd "$BINARIES" && pwd) || { echo "BINARIES=$BINARIES: no such directory" >&2; exit 1; }
    guard_bin=$dir/robotsguard pass_bin=$dir/passthrough
    if [ ! -x "$guard_bin" ] || [ ! -x "$pass_bin" ]; then
      echo "BINARIES=$BINARIES must hold the executables robotsguard and passthrough" >&2
      exit 1
    fi
  else
    cargo build --profile profiling --bin robotsguard --example passthrough >/dev/null
    guard_bin=${CARGO_TARGET_DIR:-target}/profiling/robotsguard
    pass_bin=${CARGO_TARGET_DIR:-target}/profiling/examples/passthrough
  fi
}
