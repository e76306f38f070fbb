#!/usr/bin/env bash
# The load benchmark: builds the release binaries, then runs tp-bench, which starts what it
# needs on loopback (control plane, two edges, Redis, the demo executor, a bare baseline
# server), drives load with wrk (installed from Debian's packages when missing), prints the
# table and stops everything. Not part of .ci/run. Options: --quick, --tenants N, --seconds S,
# --only SCENARIO,... (warm-list, call-overhead, propagation, catalogue-growth, search, cold-paths, scale, wiki).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/toolplane-target}"
command -v redis-server >/dev/null || { apt-get update -qq && apt-get install -y -qq redis-server; }
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }
cargo build --release --bins --quiet
# Every server runs on one pinned core: one runtime worker each (tp-bench sets its own).
export TOKIO_WORKER_THREADS=1
exec "$CARGO_TARGET_DIR/release/tp-bench" "$@"
