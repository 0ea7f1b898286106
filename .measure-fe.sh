#!/usr/bin/env bash
# gpufleet's developer commands. See README.md.
#
#   ./dev run [--port N] [--cluster]
#                          install what is missing, build, start PostgreSQL if none is
#                          configured, migrate, load the demo fleet, serve the console (with
#                          --cluster: against a real kube-apiserver and Kueue started here)
#   ./dev test             the same set-up, then every check CI runs
#   ./dev cluster          start a real kube-apiserver, etcd and Kueue on loopback (built once
#                          from Go modules) and print its kubeconfig; Ctrl-C stops it
#   ./dev build            only build the console (public/ and target/release/gpufleet)
#   ./dev sqlx-prepare     refresh .sqlx/ (the query data that lets builds run offline)
#
# PostgreSQL: DATABASE_URL when set; otherwise a private cluster in .pgdata/ (git-ignored),
# started from the system's binaries on a free loopback port and stopped on exit.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$ROOT"

say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }
die() { printf '\033[31merror:\033[0m %s\n' "$*" >&2; exit 1; }
is_root() { [ "$(id -u)" = 0 ]; }

APT_UPDATED=
apt_install() { # apt_install PACKAGE... (root only)
  if [ -z "$APT_UPDATED" ]; then
    say "apt-get update"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    APT_UPDATED=1
  fi
  say "apt-get install $*"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# need_packages "what for" CHECK_CMD PACKAGE... : installs as root, otherwise says what to install
need_packages() {
  local why=$1 check=$2
  shift 2
  if eval "$check" >/dev/null 2>&1; then return 0; fi
  if is_root && command -v apt-get >/dev/null; then
    apt_install "$@"
    eval "$check" >/dev/null 2>&1 || die "installed $* but $why is still missing"
  else
    die "$why is missing: install the Debian/Ubuntu packages: sudo apt-get install $*"
  fi
}

lock_version() { # the version of a crate in Cargo.lock
  awk -v name="$1" '$0 == "name = \"" name "\"" { getline; gsub(/version = |"/, ""); print; exit }' Cargo.lock
}

# ---------------------------------------------------------------------------------------------
# Tools

setup_rust() {
  command -v cargo >/dev/null || die "cargo is missing: install Rust with rustup (https://rustup.rs)"
  if ! rustup target list --installed 2>/dev/null | grep -qx wasm32-unknown-unknown; then
    say "rustup target add wasm32-unknown-unknown"
    rustup target add wasm32-unknown-unknown
  fi
  # The two tools the wasm build runs after cargo, installed in the background: they compile
  # while cargo builds the wasm, which needs them only afterwards.
  local installs=() want have
  want=$(lock_version wasm-bindgen)
  have=$(wasm-bindgen --version 2>/dev/null | awk '{print $2}' || true)
  if [ "$have" != "$want" ]; then
    # Without --locked: the CLI's own lockfile does not build on every toolchain. Only the one
    # binary the build runs, without the TLS stack its test runner downloads drivers with.
    say "cargo install wasm-bindgen-cli --version $want (found: ${have:-none}; a few minutes once, beside the build)"
    installs+=("cargo install -q wasm-bindgen-cli --version $want --no-default-features --bin wasm-bindgen --force")
  fi
  if ! cargo install --list | grep -qx "wasm_split_cli_support v$WASM_SPLIT_VERSION:"; then
    # The splitter that reads the markers leptos's lazy routes leave (wasm_split_helpers).
    say "cargo install wasm_split_cli_support --version $WASM_SPLIT_VERSION (a few minutes once, beside the build)"
    installs+=("cargo install -q --locked wasm_split_cli_support --version $WASM_SPLIT_VERSION --features build-binary --force")
  fi
  if [ ${#installs[@]} -gt 0 ]; then
    local install
    (for install in "${installs[@]}"; do $install || exit 1; done) >"${TMPDIR:-/tmp}/gpufleet-wasm-tools-install.log" 2>&1 &
    WASM_TOOLS_INSTALL=$!
  fi
}

# The wasm-split-cli that splits the console at its lazy routes (the version whose markers the
# locked wasm_split_helpers writes).
WASM_SPLIT_VERSION=0.2.4
WASM_TOOLS_INSTALL=
wait_for_wasm_tools() {
  [ -n "$WASM_TOOLS_INSTALL" ] || return 0
  wait "$WASM_TOOLS_INSTALL" || { cat "${TMPDIR:-/tmp}/gpufleet-wasm-tools-install.log" >&2; die "installing the wasm tools failed (log above)"; }
  WASM_TOOLS_INSTALL=
}

# gz_copy FILE [OUT]: the gzip copy the server sends for FILE (OUT, or FILE.gz). zopfli writes
# the same gzip format every browser reads, 4-14% smaller than gzip -9 (docs/performance.md).
gz_copy() {
  zopfli -c "$1" > "${2:-$1.gz}"
}

setup_node() {
  need_packages "Node.js and npm (for binaryen, esbuild and plotly.js)" \
    "command -v node && command -v npm" nodejs npm
  need_packages "zopfli (for the gzip copies the server sends)" "command -v zopfli" zopfli
  if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
    say "npm ci (binaryen, esbuild, plotly.js)"
    npm ci --no-audit --no-fund --loglevel=error
  fi
  mkdir -p public/vendor
  rm -f public/vendor/plotly-cartesian.min.js # the bundle before 2026-12-05
  if [ ! -f public/vendor/plotly-basic.min.js.gz ] || \
     [ node_modules/plotly.js-basic-dist-min/plotly-basic.min.js -nt public/vendor/plotly-basic.min.js.gz ]; then
    cp -p node_modules/plotly.js-basic-dist-min/plotly-basic.min.js public/vendor/
    gz_copy public/vendor/plotly-basic.min.js
  fi
  [ -f node_modules/binaryen/package.json ] || die "node_modules/binaryen is missing after npm ci"
}

setup_browser() {
  need_packages "Chromium and ChromeDriver (for the browser tests)" \
    "command -v chromium && command -v chromedriver" chromium chromium-driver
}

# Prometheus and promtool: the usage ingest tests read metrics from a real Prometheus.
setup_prometheus() {
  need_packages "Prometheus and promtool (for the usage ingest tests)" \
    "command -v prometheus && command -v promtool" prometheus
}

# kubectl: the second client that proves the Kubernetes API double speaks the real protocol.
setup_kubectl() {
  need_packages "kubectl (for the Kubernetes API double's protocol test)" \
    "command -v kubectl" kubernetes-client
}


# ---------------------------------------------------------------------------------------------
# Builds

# The frontend: cargo (size profile) -> wasm-split-cli -> wasm-bindgen -> wasm-opt -Oz ->
# public/pkg/. Two bundles: the console (gpufleet: the module every page starts from, and the
# chunks wasm-split-cli cuts off at its split points, the lazy routes and the Plan page's rarer
# steps, each fetched the first time it is needed) and the planner its pages run in Web Workers
# (planner: a module of its own, so its simulation's calls stay inside one module).
# Skipped entirely when nothing they are built from changed since the last build.
# The wasm builds' own target directory: a native build can run beside them (cargo locks its
# target directory for the whole of a build).
WASM_TARGET_DIR=target/wasm
build_frontend() {
  local out=public/pkg/gpufleet_bg.wasm
  if [ -f "$out" ] && [ -f public/pkg/planner_bg.wasm ] && \
     [ -z "$(find frontend shared Cargo.toml Cargo.lock rust-toolchain.toml .cargo package-lock.json \
        -newer "$out" -type f -print -quit)" ]; then
    say "frontend is up to date ($out)"
    wait_for_wasm_tools
    if [ -n "${LINT:-}" ] && [ ! public/pkg/.linted -nt "$out" ]; then
      say "cargo clippy (wasm32: the bundles were last built without it)"
      cargo clippy -p gpufleet-console -p gpufleet-plan -p gpufleet-web -p gpufleet-planner -p gpufleet-shared --target wasm32-unknown-unknown --target-dir "$WASM_TARGET_DIR" -- -D warnings
    fi
    return
  fi
  say "building the frontend (wasm32, release: the console and the planner)"
  local build=(cargo build -p gpufleet-console -p gpufleet-planner --lib --target wasm32-unknown-unknown --profile wasm-release --target-dir "$WASM_TARGET_DIR")
  # ./dev test lints the wasm crates (the console, its pages, their widgets, the planner,
  # shared) as they build for wasm32.
  if [ -n "${LINT:-}" ]; then linted "${build[@]}"; else "${build[@]}"; fi
  wait_for_wasm_tools
  rm -rf target/wasm-split target/wasm-bindgen public/pkg && mkdir -p target/wasm-split target/wasm-bindgen public/pkg
  say "wasm-split-cli (the console's module and its chunks, cut at its split points)"
  wasm-split-cli --target web --out-name gpufleet \
    $WASM_TARGET_DIR/wasm32-unknown-unknown/wasm-release/gpufleet_console.wasm target/wasm-split
  # The modules and the chunks side by side: wasm-opt runs on one core.
  local jobs=()
  finish_module & jobs+=($!)
  finish_planner & jobs+=($!)
  finish_chunks & jobs+=($!)
  local job
  for job in "${jobs[@]}"; do wait "$job" || die "the wasm failed to build (above)"; done
  minify_js target/wasm-split/__wasm_split.js public/pkg/__wasm_split.js
  gz_copy public/pkg/__wasm_split.js
  # The console's wasm last: its time stamp is what the up-to-date check compares with.
  mv target/wasm-bindgen/opt/gpufleet_bg.wasm "$out"
  if [ -n "${LINT:-}" ]; then touch public/pkg/.linted; fi
  say "wasm (raw, gzip as served): the console's module $(stat -c %s "$out"), $(stat -c %s "$out.gz"); its chunks $(cat public/pkg/{split,chunk}_*.wasm | wc -c), $(cat public/pkg/{split,chunk}_*.wasm.gz | wc -c); the planner $(stat -c %s public/pkg/planner_bg.wasm), $(stat -c %s public/pkg/planner_bg.wasm.gz)"
}

# wasm_opt [--converge] OUT_DIR IN.wasm...: binaryen's size optimisation (wasm-opt -Oz), each
# IN written to OUT_DIR under its own name (frontend/optimize-wasm.mjs).
wasm_opt() {
  node "$ROOT/frontend/optimize-wasm.mjs" "$@"
}

# minify_js IN OUT: wasm-bindgen's and wasm-split-cli's JS, minified by esbuild (from npm).
minify_js() {
  "$ROOT/node_modules/.bin/esbuild" "$1" --minify --format=esm --log-level=error --outfile="$2"
}

# finish_module: the console's module: wasm-bindgen (with the names the linker gave what its
# chunks import), wasm-opt -Oz, and gzip copies, into public/pkg/.
finish_module() {
  wasm-bindgen --target web --no-typescript --keep-lld-exports --no-demangle \
    --out-dir target/wasm-bindgen --out-name gpufleet target/wasm-split/gpufleet.wasm
  say "wasm-opt -Oz (the console's module)"
  mkdir -p target/wasm-bindgen/opt
  wasm_opt target/wasm-bindgen/opt target/wasm-bindgen/gpufleet_bg.wasm
  minify_js target/wasm-bindgen/gpufleet.js public/pkg/gpufleet.js
  gz_copy public/pkg/gpufleet.js
  gz_copy target/wasm-bindgen/opt/gpufleet_bg.wasm public/pkg/gpufleet_bg.wasm.gz
}

# finish_planner: the planner's bundle (wasm-bindgen, wasm-opt, gzip copies) into public/pkg/.
finish_planner() {
  wasm-bindgen --target web --no-typescript --out-dir target/wasm-bindgen --out-name planner \
    $WASM_TARGET_DIR/wasm32-unknown-unknown/wasm-release/gpufleet_planner.wasm
  say "wasm-opt -Oz (the planner)"
  # The bundle nearest its budget: wasm-opt repeats its passes until they gain nothing more
  # (--converge: ~1.2 KB gzip less, seconds on its 0.4 MB).
  wasm_opt --converge public/pkg target/wasm-bindgen/planner_bg.wasm
  minify_js target/wasm-bindgen/planner.js public/pkg/planner.js
  gz_copy public/pkg/planner.js
  gz_copy public/pkg/planner_bg.wasm
}

# finish_chunks: the console's chunks, wasm_opt, into public/pkg/ with their gzip copies: two
# processes, the chunks dealt out largest first.
finish_chunks() {
  local chunks i even=() odd=()
  mapfile -t chunks < <(ls -S target/wasm-split/{split,chunk}_*.wasm)
  for i in "${!chunks[@]}"; do
    if ((i % 2)); then odd+=("${chunks[$i]}"); else even+=("${chunks[$i]}"); fi
  done
  optimize_chunks target/wasm-split/optimize-1.log "${even[@]}" &
  local first=$!
  optimize_chunks target/wasm-split/optimize-2.log "${odd[@]}" || die "optimising the console's chunks failed (above)"
  wait "$first" || die "optimising the console's chunks failed (above)"
}

# optimize_chunks LOG CHUNK...: one process's share. What it says (warnings about the name
# section wasm-split-cli writes, every time) is kept in LOG and shown when it fails.
optimize_chunks() {
  local log=$1 chunk
  shift
  wasm_opt public/pkg "$@" 2>"$log" || { cat "$log" >&2; return 1; }
  for chunk in "$@"; do gz_copy "public/pkg/$(basename "$chunk")"; done
}

# ---------------------------------------------------------------------------------------------
# PostgreSQL

PG_STARTED=
PG_BIN=
PG_DATA=
PG_PORT=

find_pg_bin() {
  if command -v initdb >/dev/null && command -v pg_ctl >/dev/null; then
    PG_BIN=$(dirname "$(readlink -f "$(command -v initdb)")")
  else
    PG_BIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
  fi
  [ -n "$PG_BIN" ] && [ -x "$PG_BIN/initdb" ]
}

as_pg() { # runs a PostgreSQL binary; initdb refuses root, so root runs it as `postgres`
  # From /: the checkout may be a folder the postgres user cannot enter.
  if is_root; then (cd / && runuser -u postgres -- "$@"); else "$@"; fi
}

free_port() { # free_port [FROM TO]: the first loopback port nothing listens on
  local port from=${1:-54330} to=${2:-54399}
  for port in $(seq "$from" "$to"); do
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then echo "$port"; return; fi
  done
  die "no free port in $from-$to"
}

# Jobs ./dev test runs beside its foreground work; stopped with everything under them when it
# stops early.
BACKGROUND=()
kill_tree() { # kill_tree PID: the process and all its descendants
  local child
  for child in $(pgrep -P "$1" 2>/dev/null); do kill_tree "$child"; done
  kill "$1" 2>/dev/null || true
}

# Everything ./dev started, stopped on exit whichever way it comes.
cleanup() {
  local pid
  for pid in "${BACKGROUND[@]}"; do kill_tree "$pid"; done
  BACKGROUND=()
  stop_cluster
  stop_private_prometheus
  stop_private_pg
}

start_private_pg() {
  if ! find_pg_bin; then
    need_packages "PostgreSQL's initdb and pg_ctl (or set DATABASE_URL)" find_pg_bin postgresql
  fi
  PG_DATA="$ROOT/.pgdata"
  if is_root && ! runuser -u postgres -- test -x "$ROOT"; then
    # The postgres user cannot reach this checkout (e.g. under /root): keep the data beside it.
    PG_DATA="/var/lib/gpufleet/$(printf %s "$ROOT" | md5sum | cut -c1-12)/pgdata"
  fi
  if [ ! -f "$PG_DATA/PG_VERSION" ]; then
    say "creating a private PostgreSQL cluster in $PG_DATA"
    mkdir -p "$PG_DATA"
    is_root && chown postgres:postgres "$PG_DATA"
    chmod 700 "$PG_DATA"
    local log="${TMPDIR:-/tmp}/gpufleet-initdb.log"
    as_pg "$PG_BIN/initdb" -D "$PG_DATA" -U postgres --auth=trust -E UTF8 --no-locale >"$log" 2>&1 \
      || { cat "$log" >&2; die "initdb failed (log above)"; }
  fi
  if as_pg "$PG_BIN/pg_ctl" -D "$PG_DATA" status >/dev/null 2>&1; then
    PG_PORT=$(sed -n 4p "$PG_DATA/postmaster.pid")
    say "reusing the private PostgreSQL already running on port $PG_PORT"
  else
    PG_PORT=$(free_port)
    # setsid: Ctrl-C in the terminal must reach the server first, not the database under it.
    as_pg setsid "$PG_BIN/pg_ctl" -D "$PG_DATA" -l "$PG_DATA/server.log" -w -t 60 \
      -o "-p $PG_PORT -c listen_addresses=127.0.0.1 -k $PG_DATA -c max_connections=200 -c fsync=off" start >/dev/null \
      || { tail -n 20 "$PG_DATA/server.log" >&2; die "PostgreSQL did not start (log above: $PG_DATA/server.log)"; }
    PG_STARTED=1
    trap cleanup EXIT
  fi
  if ! as_pg "$PG_BIN/psql" -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres -Atqc \
      "select 1 from pg_database where datname = 'gpufleet'" | grep -q 1; then
    as_pg "$PG_BIN/createdb" -h 127.0.0.1 -p "$PG_PORT" -U postgres gpufleet
  fi
}

stop_private_pg() {
  if [ -n "$PG_STARTED" ]; then
    say "stopping the private PostgreSQL"
    as_pg "$PG_BIN/pg_ctl" -D "$PG_DATA" -m fast -w stop >/dev/null 2>&1 || true
    PG_STARTED=
  fi
}

# Sets DATABASE_URL (the app's database) and PG_SERVER_URL (for tests that create databases).
setup_database() {
  if [ -n "${DATABASE_URL:-}" ]; then
    say "using DATABASE_URL from the environment"
    PG_SERVER_URL=$DATABASE_URL
    return
  fi
  start_private_pg
  DATABASE_URL="postgres://postgres@127.0.0.1:$PG_PORT/gpufleet"
  PG_SERVER_URL="postgres://postgres@127.0.0.1:$PG_PORT/postgres"
  export DATABASE_URL
}

# ---------------------------------------------------------------------------------------------
# Prometheus (./dev run without GPUFLEET_PROMETHEUS_URL): a private one in .gpufleet/prometheus/,
# scraping the demo exporter that gpufleet serves, seeded once with a day of its history, so the
# usage ingest runs the real path (exporter → Prometheus → ingest) on demo data.

PROM_PID=

start_private_prometheus() {
  local bin=$1
  setup_prometheus
  local dir="$ROOT/.gpufleet/prometheus" prom_port exporter_port
  mkdir -p "$dir"
  prom_port=$(free_port 59090 59189)
  exporter_port=$(free_port 59400 59499)
  cat >"$dir/prometheus.yml" <<YAML
# written by ./dev run: scrapes gpufleet's demo exporter (demo data)
global:
  scrape_interval: 15s
scrape_configs:
  - job_name: gpufleet-demo-exporter
    static_configs:
      - targets: ['127.0.0.1:$exporter_port']
YAML
  if [ ! -d "$dir/data" ]; then
    # Eight days, so the last whole week's DCGM use is measured on every day (the planner's
    # replay); a day at a time, so at most a day's file (~170 MB) is on disk.
    say "seeding the private Prometheus with eight days of demo history (once, a minute or two)"
    local ago end
    end=$(date -u +%Y-%m-%dT%H:%M:00Z)
    rm -rf "$dir/data.new"
    for ago in 168 144 120 96 72 48 24 0; do
      "$bin" usage demo-history --hours 24 --end "$(date -u -d "$end - $ago hours" +%Y-%m-%dT%H:%M:00Z)" \
        --out "$dir/history.om"
      promtool tsdb create-blocks-from openmetrics "$dir/history.om" "$dir/data.new" >/dev/null
      rm -f "$dir/history.om"
    done
    mv "$dir/data.new" "$dir/data"
  fi
  # The console's first ingest reads what was seeded.
  export GPUFLEET_USAGE_BACKFILL_HOURS=${GPUFLEET_USAGE_BACKFILL_HOURS:-192}
  prometheus --config.file="$dir/prometheus.yml" --storage.tsdb.path="$dir/data" \
    --web.listen-address="127.0.0.1:$prom_port" --storage.tsdb.retention.time=15d \
    >"$dir/prometheus.log" 2>&1 &
  PROM_PID=$!
  trap cleanup EXIT
  # The console's first ingest run starts at once: let it find Prometheus ready (its TSDB loads).
  local tries=0
  until prometheus_ready "$prom_port"; do
    tries=$((tries + 1))
    kill -0 "$PROM_PID" 2>/dev/null || { tail -n 20 "$dir/prometheus.log" >&2; die "Prometheus did not start (log above)"; }
    [ "$tries" -lt 150 ] || die "Prometheus is not ready after 30 s ($dir/prometheus.log)"
    sleep 0.2
  done
  export GPUFLEET_PROMETHEUS_URL="http://127.0.0.1:$prom_port"
  export GPUFLEET_DEMO_EXPORTER_LISTEN="127.0.0.1:$exporter_port"
  say "usage: a private Prometheus on $GPUFLEET_PROMETHEUS_URL scrapes the demo exporter on $GPUFLEET_DEMO_EXPORTER_LISTEN (demo data; $dir)"
}

prometheus_ready() { # prometheus_ready PORT: its /-/ready answers 200
  local status
  status=$( (exec 3<>"/dev/tcp/127.0.0.1/$1" && printf 'GET /-/ready HTTP/1.0\r\n\r\n' >&3 && head -n 1 <&3) 2>/dev/null || true)
  [[ $status == *" 200 "* ]]
}

stop_private_prometheus() {
  if [ -n "$PROM_PID" ]; then
    kill -TERM "$PROM_PID" 2>/dev/null || true
    wait "$PROM_PID" 2>/dev/null || true
    PROM_PID=
  fi
}

# ---------------------------------------------------------------------------------------------
# A real cluster: etcd, kube-apiserver and Kueue built from the Go modules pinned under
# tests/cluster/ into a cache outside the checkout (once; tests/cluster/cluster says how), and
# started on loopback ports with their state in a folder of their own.

CLUSTER=tests/cluster/cluster
CLUSTER_DIR=

setup_go() { # Debian's golang-go is too old for Kubernetes 1.36
  command -v go >/dev/null || die "Go 1.26 is missing: it builds kube-apiserver, etcd and Kueue (tests/cluster/)"
}

# start_cluster DIR: a real cluster with its state in DIR; returns once Kueue is ready.
start_cluster() {
  setup_go
  setup_kubectl
  CLUSTER_DIR=$1
  trap cleanup EXIT
  "$CLUSTER" up "$CLUSTER_DIR"
}

CLUSTER_UP=
DRIVE_PID=
stop_cluster() {
  local pid
  for pid in "$DRIVE_PID" "$CLUSTER_UP"; do
    if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  done
  DRIVE_PID=
  CLUSTER_UP=
  if [ -n "$CLUSTER_DIR" ]; then
    "$CLUSTER" down "$CLUSTER_DIR" || true
    CLUSTER_DIR=
  fi
}

# start_demo_cluster BIN (./dev run --cluster): a real cluster, the teams' namespaces, and the
# driver that submits their Jobs into their LocalQueues and completes them
# (tests/cluster/drive); the console applies the approved quota to it and records its Workloads.
start_demo_cluster() {
  local bin=$1 teams queues=() ns lq
  start_cluster "$ROOT/.gpufleet/cluster"
  export GPUFLEET_KUBECONFIG="$CLUSTER_DIR/kubeconfig"
  teams=$("$bin" fleet export --format json | node -e '
    const inv = JSON.parse(require("fs").readFileSync(0, "utf8"));
    for (const t of inv.teams) console.log(t.namespace, t.local_queue || t.name);')
  while read -r ns lq; do
    kubectl --kubeconfig "$GPUFLEET_KUBECONFIG" create namespace "$ns" >/dev/null
    queues+=("$ns/$lq")
  done <<<"$teams"
  "$ROOT/tests/cluster/drive" "$GPUFLEET_KUBECONFIG" "${queues[@]}" >"$CLUSTER_DIR/drive.log" 2>&1 &
  DRIVE_PID=$!
  say "a real cluster: Kueue admits the demo teams' Jobs (${queues[*]}), a driver completes them ($CLUSTER_DIR/drive.log); KUBECONFIG=$GPUFLEET_KUBECONFIG"
}

cmd_cluster() {
  [ $# -eq 0 ] || die "unknown option $1 (./dev cluster)"
  start_cluster "$ROOT/.gpufleet/cluster"
  say "KUBECONFIG=$CLUSTER_DIR/kubeconfig (kubectl --kubeconfig $CLUSTER_DIR/kubeconfig get clusterqueues)"
  say "Ctrl-C stops it"
  trap 'exit 0' INT TERM
  while true; do sleep 3600 & wait $!; done
}

# ---------------------------------------------------------------------------------------------
# Commands

# The console in release: public/ (with pkg/ and vendor/) and target/release/gpufleet.
cmd_build() {
  setup_rust
  setup_node
  build_frontend
  say "building the server (release)"
  cargo build -p gpufleet-backend --release --bin gpufleet
}

cmd_run() {
  local port= with_cluster=
  while [ $# -gt 0 ]; do
    case $1 in
      --port) port=${2:?--port needs a number}; shift 2 ;;
      --port=*) port=${1#--port=}; shift ;;
      --cluster) with_cluster=1; shift ;;
      *) die "unknown option $1 (./dev run [--port N] [--cluster])" ;;
    esac
  done
  if [ -n "$with_cluster" ] && { [ -n "${GPUFLEET_KUBECONFIG:-}" ] || [ -n "${GPUFLEET_IN_CLUSTER:-}" ]; }; then
    die "--cluster starts a cluster of its own: unset GPUFLEET_KUBECONFIG and GPUFLEET_IN_CLUSTER"
  fi
  [ -n "$port" ] && export GPUFLEET_LISTEN="127.0.0.1:$port"
  export GPUFLEET_LISTEN=${GPUFLEET_LISTEN:-127.0.0.1:8080}

  cmd_build
  setup_database
  local bin=target/release/gpufleet
  # The demo users' passwords are random, made once per database, and kept here to show again.
  mkdir -p .gpufleet
  local credentials=".gpufleet/demo-users-$(printf %s "$DATABASE_URL" | md5sum | cut -c1-12).txt"
  # With a real cluster, Kueue records the workload history; without, the demo writes one.
  "$bin" demo --credentials-file "$credentials" ${with_cluster:+--without-workload-history} >/dev/null
  if [ -f "$credentials" ]; then
    say "demo users (username, password):"
    cat "$credentials" >&2
  fi
  # Without a Prometheus, usage comes from the demo exporter through a private one.
  if [ -z "${GPUFLEET_PROMETHEUS_URL:-}" ]; then
    start_private_prometheus "$bin"
  fi
  if [ -n "$with_cluster" ]; then
    start_demo_cluster "$bin"
  fi
  # Without a cluster, approved quota goes to GitOps files the Cluster page shows and zips.
  if [ -z "${GPUFLEET_KUBECONFIG:-}" ] && [ -z "${GPUFLEET_IN_CLUSTER:-}" ]; then
    export GPUFLEET_GITOPS_DIR=${GPUFLEET_GITOPS_DIR:-$ROOT/.gpufleet/gitops}
    say "no cluster configured (GPUFLEET_KUBECONFIG): approved quota is written to $GPUFLEET_GITOPS_DIR"
  fi
  say "console: http://$GPUFLEET_LISTEN"
  [ -n "$PG_DATA" ] && say "PostgreSQL data: $PG_DATA (port $PG_PORT); delete it to start afresh"
  say "Ctrl-C stops everything"
  "$bin" serve &
  local server=$!
  trap 'kill -TERM "$server" 2>/dev/null || true' INT TERM
  local status=0
  wait "$server" || status=$?
  # A signal interrupts `wait`; wait again for the server's graceful shutdown.
  while kill -0 "$server" 2>/dev/null; do wait "$server" || status=$?; done
  cleanup
  exit "$status"
}

cmd_test() {
  local started=$SECONDS
  setup_node
  setup_browser
  setup_kubectl
  setup_prometheus
  setup_go
  say "cargo fmt --check"
  cargo fmt --all -- --check
  # Three things at once, since each leaves a core idle for long stretches (a wasm link that
  # runs on one core, a test binary linking, Go compiling): the real cluster (its binaries built
  # first when not cached), the frontend and the native build. The native build runs at the
  # normal priority, so the tests on the real clock start as soon as it is done; the frontend
  # takes what the other leaves (docs/development.md, "The test loop").
  local cluster_log="${TMPDIR:-/tmp}/gpufleet-test-cluster.log"
  local frontend_log="${TMPDIR:-/tmp}/gpufleet-test-frontend.log"
  CLUSTER_DIR="$ROOT/target/test-cluster"
  trap cleanup EXIT
  "$CLUSTER" up "$CLUSTER_DIR" >"$cluster_log" 2>&1 &
  CLUSTER_UP=$!
  say "building the frontend beside the native build (its log: $frontend_log)"
  (renice -n 10 -p "$BASHPID" >/dev/null; setup_rust; LINT=1 build_frontend) >"$frontend_log" 2>&1 &
  local frontend=$!
  BACKGROUND+=("$frontend")
  setup_database
  say "building every native target, linted by clippy as it compiles; sqlx's macros check each query against a scratch database and write its data afresh"
  sqlx_scratch_database
  rm -rf target/sqlx-check && mkdir -p target/sqlx-check
  touch backend/src/lib.rs # the macros run again, so they write every query's data
  SQLX_OFFLINE=false SQLX_OFFLINE_DIR="$ROOT/target/sqlx-check" DATABASE_URL=$SQLX_SCRATCH_URL \
    linted cargo test "${NATIVE[@]}" --all-targets --no-run
  check_sqlx_data "$ROOT/target/sqlx-check"
  check_shared_is_pure
  wait "$CLUSTER_UP" || { CLUSTER_UP=; cat "$cluster_log" >&2; die "the real cluster did not start (above)"; }
  CLUSTER_UP=
  grep -h '==>' "$cluster_log" >&2 || true
  export DATABASE_URL=$PG_SERVER_URL GPUFLEET_TEST_CLUSTER=$CLUSTER_DIR
  local real_clock_log="${TMPDIR:-/tmp}/gpufleet-test-real-clock.log"
  say "cargo test: the ${#REAL_CLOCK_TESTS[@]} tests on the real clock (their log: $real_clock_log)"
  # The binary itself, as cargo runs it (from its package's directory): a cargo command that
  # selected fewer packages would unify other features and build it again.
  local it
  it=$(linted cargo test "${NATIVE[@]}" --no-run --message-format=json 2>/dev/null \
    | grep -o '"executable":"[^"]*/deps/it-[^"]*"' | cut -d'"' -f4)
  [ -n "$it" ] || die "cargo built no integration test binary (backend/tests/it)"
  (cd backend && exec "$it" --exact "${REAL_CLOCK_TESTS[@]}") >"$real_clock_log" 2>&1 &
  local real_clock=$!
  BACKGROUND+=("$real_clock")
  wait "$frontend" || { cat "$frontend_log" >&2; die "the frontend did not build (above)"; }
  grep -h '==>' "$frontend_log" >&2 || true
  check_download_budgets
  say "cargo test (unit, PostgreSQL, Prometheus, the real cluster, browser end-to-end), at a lower priority than the tests on the real clock"
  local skip=() name
  for name in "${REAL_CLOCK_TESTS[@]}"; do skip+=(--skip "$name"); done
  linted nice -n 10 cargo test "${NATIVE[@]}" -- "${skip[@]}"
  wait "$real_clock" || { cat "$real_clock_log" >&2; die "a test on the real clock failed (above)"; }
  grep -q "test result: ok. ${#REAL_CLOCK_TESTS[@]} passed" "$real_clock_log" \
    || { cat "$real_clock_log" >&2; die "the tests on the real clock did not all run (above)"; }
  grep -h "test result" "$real_clock_log" >&2
  BACKGROUND=()
  say "all checks passed in $((SECONDS - started)) s; screenshots in target/e2e/"
}

# The tests that wait on the real clock, with real Kueue admitting and a driver completing jobs
# at their durations: a process of their own at the normal priority, beside everything else
# (which starves them of the CPU when it runs beside them at the same priority).
REAL_CLOCK_TESTS=(
  conformance::the_week_admits_evicts_and_finishes_jobs_as_real_kueue_does
  day_on_kueue::a_day_real_kueue_ran_replays_close_to_what_it_measured
)

# Every native crate (the wasm-only ones are built and linted by build_frontend).
NATIVE=(--workspace --exclude gpufleet-console --exclude gpufleet-plan --exclude gpufleet-web)

# linted CMD...: runs a cargo build with clippy as the compiler of the workspace's own crates
# (what `cargo clippy` does, but producing the build: one compile instead of a check and a
# build), every warning an error.
linted() {
  RUSTC_WORKSPACE_WRAPPER="$(rustup which clippy-driver)" \
    CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__" "$@"
}

# The shared crate runs in the browser and must stay pure: none of these in its dependencies,
# on either target (clippy.toml in shared/ forbids clocks, environment and files in its code).
check_shared_is_pure() {
  say "shared's dependency tree holds no I/O crate"
  local target found
  for target in x86_64-unknown-linux-gnu wasm32-unknown-unknown; do
    found=$(cargo tree -p gpufleet-shared -e normal --prefix none --target "$target" \
      | awk '{print $1}' | grep -xE 'tokio|sqlx.*|axum.*|reqwest|hyper|kube.*|getrandom|rand|mio' || true)
    [ -z "$found" ] || die "gpufleet-shared depends on $(echo $found) ($target): it must stay free of I/O"
  done
}

# What a browser downloads (gzip, as served), against budgets set from measured sizes. The
# budgets only go down; the current sizes are in docs/performance.md ("Download sizes"),
# their history in git.
FIRST_LOAD_BUDGET_BYTES=228000   # the console's module and its JS: where every page starts
PLAN_PAGE_BUDGET_BYTES=265000    # the chunks the Plan page loads when a manager opens it
PLANNER_BUDGET_BYTES=168000      # the planner's wasm and JS, in the Plan page's Web Workers
PLOTLY_BUDGET_BYTES=342000       # plotly.js, for the first chart
MANAGER_BUDGET_BYTES=1000000     # all four: what a manager downloads to see a plan's results
check_download_budgets() {
  local first page planner plotly manager
  first=$(gz_bytes public/pkg/gpufleet_bg.wasm public/pkg/gpufleet.js public/pkg/__wasm_split.js)
  page=$(gz_bytes $(chunks_of __plan_route_view))
  planner=$(gz_bytes public/pkg/planner_bg.wasm public/pkg/planner.js)
  plotly=$(gz_bytes public/vendor/plotly-basic.min.js)
  manager=$((first + page + planner + plotly))
  say "downloads (gzip, as served): first load $first bytes (budget $FIRST_LOAD_BUDGET_BYTES); the Plan page's chunks $page ($PLAN_PAGE_BUDGET_BYTES); its planner $planner ($PLANNER_BUDGET_BYTES); plotly.js $plotly ($PLOTLY_BUDGET_BYTES); a manager's path to a plan's results $manager ($MANAGER_BUDGET_BYTES)"
  [ "$first" -le $FIRST_LOAD_BUDGET_BYTES ] || die "the console's first load grew past its budget"
  [ "$page" -le $PLAN_PAGE_BUDGET_BYTES ] || die "the Plan page's chunks grew past their budget"
  [ "$planner" -le $PLANNER_BUDGET_BYTES ] || die "the planner's wasm + JS grew past its budget"
  [ "$plotly" -le $PLOTLY_BUDGET_BYTES ] || die "the plotly.js bundle grew past its budget"
  [ "$manager" -le $MANAGER_BUDGET_BYTES ] || die "a manager's path to a plan's results grew past its budget"
}

gz_bytes() { # gz_bytes FILE...: the sizes of their gzip copies (what the server sends), summed
  local file total=0
  for file in "$@"; do total=$((total + $(stat -c %s "$file.gz"))); done
  echo "$total"
}

chunks_of() { # chunks_of SPLIT: the console's chunks a split point loads (its own, those it shares)
  local split
  split=$(ls public/pkg/split_"$1".wasm public/pkg/split_"$1"_[0-9]*.wasm 2>/dev/null || true)
  [ -n "$split" ] || die "no chunk for the split point $1"
  echo "$split"
  # __wasm_split.js (as wasm-split-cli wrote it) names, above each shared chunk, the split
  # points that load it.
  grep -E -A2 "^/\* (.*, )?$1(_[0-9]+)?(, .*)? \*/$" target/wasm-split/__wasm_split.js \
    | grep -o 'chunk_[0-9]*\.wasm' | sed 's#^#public/pkg/#'
}

# A scratch database with the migrations applied, for sqlx's macros to check the queries against:
# sets SQLX_SCRATCH_URL. Plain SQL plus sqlx's bookkeeping table, which is all the macros read,
# so nothing has to be built first.
sqlx_scratch_database() {
  find_pg_bin && PATH="$PG_BIN:$PATH"
  local scratch=gpufleet_sqlx_prepare
  psql "$PG_SERVER_URL" -qc "drop database if exists $scratch" -c "create database $scratch"
  SQLX_SCRATCH_URL="${PG_SERVER_URL%/*}/$scratch"
  apply_migrations_with_psql "$SQLX_SCRATCH_URL"
}

cmd_sqlx_prepare() {
  setup_database
  sqlx_scratch_database
  rm -rf "$ROOT/.sqlx" && mkdir -p "$ROOT/.sqlx"
  touch backend/src/lib.rs
  SQLX_OFFLINE=false SQLX_OFFLINE_DIR="$ROOT/.sqlx" DATABASE_URL=$SQLX_SCRATCH_URL \
    cargo check -q -p gpufleet-backend --all-targets
  touch backend/src/lib.rs
  say ".sqlx/ holds $(ls .sqlx | wc -l) queries; commit it"
}

# What `cargo sqlx prepare --check` checks, without installing sqlx-cli (a few minutes of
# compiling on a fresh machine): the committed .sqlx/ is exactly the query data that the macros
# wrote into $1 during clippy, against the migrated schema.
check_sqlx_data() {
  local fresh=$1
  say "the committed .sqlx/ matches the queries and migrations"
  [ -n "$(ls -A "$fresh" 2>/dev/null)" ] || die "sqlx's macros wrote no query data into $fresh"
  diff -r "$ROOT/.sqlx" "$fresh" >/dev/null \
    || die ".sqlx/ is stale: run ./dev sqlx-prepare and commit it ($(diff -rq "$ROOT/.sqlx" "$fresh" | head -3 | tr '\n' ' '))"
}

# Used when the binary cannot build yet (a new query without data): plain SQL plus sqlx's
# bookkeeping table, which is all the macros look at.
apply_migrations_with_psql() {
  local url=$1 file
  psql "$url" -qc "create table if not exists _sqlx_migrations (version bigint primary key,
    description text not null, installed_on timestamptz not null default now(), success boolean not null,
    checksum bytea not null, execution_time bigint not null)"
  for file in migrations/*.sql; do
    psql "$url" -q -v ON_ERROR_STOP=1 -f "$file"
    psql "$url" -qc "insert into _sqlx_migrations values ($(basename "$file" | cut -d_ -f1), '', now(), true, '', 0)"
  done
}

