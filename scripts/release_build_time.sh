#!/usr/bin/env bash
# Release build times of one commit, from nothing: the admin CLI alone (`cargo build --release
# -p tp-ctl`), then every binary (`cargo build --release --bins`, the rest after the CLI). Each
# commit builds in a work tree and a target folder of its own, both removed afterwards, so two
# commits compare on one machine (issue 33: the CLI stopped linking the services at 2fe2289;
# `bash scripts/release_build_time.sh 2fe2289^ HEAD`).
#
# Usage: bash scripts/release_build_time.sh [COMMIT...]   (default: HEAD)
# Takes 10-25 minutes per commit on two cores; run it on an otherwise idle machine.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
[ $# -gt 0 ] || set -- HEAD

seconds() {
  local started=$SECONDS
  "$@" > /dev/null 2>&1
  echo $((SECONDS - started))
}

for commit in "$@"; do
  rev=$(git -C "$root" rev-parse --short "$commit")
  work=$(mktemp -d)
  trap 'git -C "$root" worktree remove --force "$work/tree" 2>/dev/null || true; rm -rf "$work"' EXIT
  git -C "$root" worktree add --detach --quiet "$work/tree" "$rev"
  export CARGO_TARGET_DIR="$work/target"
  (cd "$work/tree" && cargo fetch --quiet)
  cli=$(cd "$work/tree" && seconds cargo build --release -p tp-ctl)
  rest=$(cd "$work/tree" && seconds cargo build --release --bins)
  crates=$(cd "$work/tree" && cargo tree -p tp-ctl -e normal --prefix none | sed "s/ (\*)$//" | sort -u | wc -l)
  printf '%s  tp-ctl alone: %d s (%d crates in its tree)  then every binary: +%d s  (total %d s)\n' \
    "$rev" "$cli" "$crates" "$rest" $((cli + rest))
  git -C "$root" worktree remove --force "$work/tree"
  rm -rf "$work"
  trap - EXIT
done
