#!/usr/bin/env bash
# Builds, with podman, every image deploy/compose/compose.yaml and the Helm chart name, on a
# machine that reaches Debian's package archive but no container registry:
#
# - the base images the Dockerfile and the Compose file start from, made from Debian's packages
#   with mmdebstrap and tagged with the names they have in registries:
#     gcr.io/distroless/cc-debian12:nonroot   Debian minbase + CA certificates (it has a shell;
#                                             the real one does not)
#     haproxy:2.6, redis:7.2-alpine,          Debian's haproxy, redis-server and PostgreSQL 15,
#     postgres:15                             with the entry points and defaults of the official
#                                             images that the Compose file relies on
#   These are stand-ins for tests only; deploy with the real images.
# - toolplane/{control-plane,edge,wiki,demo-executor}:dev (and the chart's
#   localhost/toolplane/…:<appVersion>) from deploy/docker/Dockerfile, with
#   BINARIES=prebuilt: the runtime stages take the binaries `cargo build --workspace --bins` made
#   (debug, same glibc as this host) instead of compiling them again in the build stage.
#
# Podman's settings for this kind of machine (vfs storage, runc, cgroupfs, file ulimits) are
# written to $TOOLPLANE_CONTAINERS (default ~/.cache/toolplane-containers) and used through
# CONTAINERS_CONF and CONTAINERS_STORAGE_CONF; base images are kept there and rebuilt only when
# this script changes.
#
# Usage: scripts/containers.sh env      print the export lines for podman's settings
#        scripts/containers.sh images   build every image (base images only when missing)
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
cache="${TOOLPLANE_CONTAINERS:-$HOME/.cache/toolplane-containers}"
mkdir -p "$cache"

write_settings() {
  cat >"$cache/storage.conf" <<EOF
[storage]
driver = "vfs"
runroot = "$cache/run"
graphroot = "$cache/storage"
EOF
  cat >"$cache/containers.conf" <<'EOF'
[containers]
default_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]
log_driver = "k8s-file"

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
EOF
}

settings() {
  printf 'export CONTAINERS_CONF=%q\nexport CONTAINERS_STORAGE_CONF=%q\n' \
    "$cache/containers.conf" "$cache/storage.conf"
}

write_settings
eval "$(settings)"

case "${1:-}" in
env)
  settings
  exit 0
  ;;
images) ;;
*)
  echo "usage: $0 env|images" >&2
  exit 2
  ;;
esac

# BASES-BEGIN The base images, from Debian bookworm (the release this host and the build stage
# use); rebuilt when this part of the script changes.
stamp="$(sed -n '/^# BASES-BEGIN/,/^# BASES-END/p' "$0" | sha256sum | cut -c1-16)"
if [ "$(cat "$cache/bases.stamp" 2>/dev/null)" != "$stamp" ] ||
  ! podman image exists gcr.io/distroless/cc-debian12:nonroot ||
  ! podman image exists postgres:15; then
  echo "building base images from Debian's packages (mmdebstrap)"
  mmdebstrap --quiet --variant=minbase --include=ca-certificates bookworm "$cache/runtime.tar"
  podman import --quiet \
    --change 'USER=65532:65532' \
    "$cache/runtime.tar" gcr.io/distroless/cc-debian12:nonroot >/dev/null

  # One root file system for the three services the Compose file takes from registries.
  entry="$cache/postgres-entrypoint.sh"
  cat >"$entry" <<'EOF'
#!/bin/sh
# Stand-in for the official postgres image's entry point: POSTGRES_USER, POSTGRES_PASSWORD and
# POSTGRES_DB on first start, data in $PGDATA, the server run as the postgres user.
set -eu
export PGDATA="${PGDATA:-/var/lib/postgresql/data}"
bin=/usr/lib/postgresql/15/bin
as_postgres() { setpriv --reuid=postgres --regid=postgres --init-groups "$@"; }
mkdir -p "$PGDATA" /var/run/postgresql
chown postgres:postgres "$PGDATA" /var/run/postgresql
chmod 700 "$PGDATA"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  user="${POSTGRES_USER:-postgres}"
  printf '%s' "${POSTGRES_PASSWORD:?POSTGRES_PASSWORD is required}" >/tmp/pwfile
  chown postgres /tmp/pwfile
  as_postgres "$bin/initdb" -D "$PGDATA" -U "$user" --pwfile=/tmp/pwfile \
    --auth-local=trust --auth-host=scram-sha-256 >/dev/null
  rm -f /tmp/pwfile
  echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
  echo "listen_addresses = '*'" >>"$PGDATA/postgresql.conf"
  if [ -n "${POSTGRES_DB:-}" ] && [ "$POSTGRES_DB" != postgres ]; then
    echo "CREATE DATABASE \"$POSTGRES_DB\" OWNER \"$user\";" |
      as_postgres "$bin/postgres" --single -D "$PGDATA" -j postgres >/dev/null
  fi
fi
exec setpriv --reuid=postgres --regid=postgres --init-groups "$bin/postgres" -D "$PGDATA" "$@"
EOF
  redis_entry="$cache/redis-entrypoint.sh"
  cat >"$redis_entry" <<'EOF'
#!/bin/sh
# Stand-in for the official redis image's entry point: arguments starting with "-" are
# redis-server's (a chart's `args`), and protected mode is off (the official image builds it
# off: only its network reaches it).
set -eu
case "${1:-}" in -*) set -- redis-server "$@" ;; esac
if [ "${1:-}" = redis-server ]; then
  shift
  set -- redis-server --protected-mode no "$@"
fi
exec "$@"
EOF
  mmdebstrap --quiet --variant=minbase --include=ca-certificates,haproxy,redis-server,postgresql-15 \
    --customize-hook="copy-in $entry /usr/local/bin" \
    --customize-hook="copy-in $redis_entry /usr/local/bin" \
    --customize-hook='chmod 755 "$1/usr/local/bin/postgres-entrypoint.sh" "$1/usr/local/bin/redis-entrypoint.sh"' \
    --customize-hook='mkdir -p "$1/usr/local/etc/haproxy"' \
    bookworm "$cache/services.tar"
  podman import --quiet \
    --change 'CMD ["haproxy", "-W", "-db", "-f", "/usr/local/etc/haproxy/haproxy.cfg"]' \
    --change 'USER=haproxy' \
    --change 'STOPSIGNAL=SIGUSR1' \
    "$cache/services.tar" haproxy:2.6 >/dev/null
  podman import --quiet \
    --change 'ENTRYPOINT ["/usr/local/bin/redis-entrypoint.sh"]' \
    --change 'CMD ["redis-server"]' \
    "$cache/services.tar" redis:7.2-alpine >/dev/null
  podman import --quiet \
    --change 'ENV PATH=/usr/lib/postgresql/15/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV PGDATA=/var/lib/postgresql/data' \
    --change 'ENTRYPOINT ["/usr/local/bin/postgres-entrypoint.sh"]' \
    --change 'STOPSIGNAL=SIGINT' \
    "$cache/services.tar" postgres:15 >/dev/null
  rm -f "$cache/runtime.tar" "$cache/services.tar"
  echo "$stamp" >"$cache/bases.stamp"
fi
# BASES-END

# The project's images, from the binaries cargo built on this host.
target="${CARGO_TARGET_DIR:-$HOME/.cache/toolplane-target}/${TOOLPLANE_PROFILE:-debug}"
binaries="$cache/host-binaries"
rm -rf "$binaries"
mkdir -p "$binaries/bin" "$binaries/data/audit"
for bin in tp-control-plane tp-edge tp-wiki tp-demo-executor toolplanectl; do
  [ -x "$target/$bin" ] || {
    echo "$target/$bin is missing: run cargo build --workspace --bins first" >&2
    exit 1
  }
  cp "$target/$bin" "$binaries/bin/"
done
for service in control-plane edge wiki demo-executor; do
  podman build --quiet -f deploy/docker/Dockerfile --target "$service" \
    --build-arg BINARIES=prebuilt --build-context host-binaries="$binaries" \
    -t "toolplane/$service:dev" "$root" >/dev/null
  echo "built toolplane/$service:dev"
done
# The chart's names for the same images (image.registry `localhost/`, the tag its appVersion).
version="$(sed -n 's/^appVersion: "\(.*\)"$/\1/p' deploy/helm/toolplane/Chart.yaml)"
for service in control-plane edge wiki demo-executor; do
  podman tag "toolplane/$service:dev" "localhost/toolplane/$service:$version"
done
podman tag redis:7.2-alpine docker.io/library/redis:7.2-alpine
podman image prune --force >/dev/null
