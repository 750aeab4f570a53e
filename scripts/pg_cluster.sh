#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for the tests, kept in DIR (nothing outside DIR is touched,
# but for a system user when run as root, and /tmp when that user cannot reach DIR).
#   scripts/pg_cluster.sh start DIR    initdb if needed, start, create database interlock_test
#   scripts/pg_cluster.sh url DIR      print its postgresql:// URL (password included)
#   scripts/pg_cluster.sh status DIR   exit 0 if it is running
#   scripts/pg_cluster.sh stop DIR     stop it (rm -rf DIR afterwards to start afresh)
# The server listens on a unix socket in its folder and on 127.0.0.1 at a free port, with
# fsync off (test data only). PostgreSQL refuses to run as root: as root it runs as the
# system user interlock-pg, created if missing. Binaries: PATH, then /usr/lib/postgresql/*/bin;
# as root with apt-get and none found, Debian's postgresql package is installed.
set -euo pipefail

usage() { echo "usage: $0 start|stop|status|url DIR" >&2; exit 2; }
[ $# -eq 2 ] || usage
cmd=$1
mkdir -p "$2"
dir=$(cd "$2" && pwd)
cd /  # the server user may not be able to enter the caller's folder
say() { echo "pg_cluster: $*" >&2; }

find_bindir() {
  local pg_ctl candidate
  if pg_ctl=$(command -v pg_ctl 2>/dev/null); then
    candidate=$(dirname "$(readlink -f "$pg_ctl")")
    [ -x "$candidate/initdb" ] && { echo "$candidate"; return; }
  fi
  for candidate in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    [ -x "$candidate/pg_ctl" ] && [ -x "$candidate/initdb" ] && { echo "$candidate"; return; }
  done
  return 1
}

if ! bindir=$(find_bindir); then
  if [ "$cmd" = start ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "installing PostgreSQL (Debian package postgresql)"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql) \
      >/dev/null
  fi
  bindir=$(find_bindir) || { say "no PostgreSQL server binaries (initdb, pg_ctl) found"; exit 3; }
fi
psql=$bindir/psql; [ -x "$psql" ] || psql=$(command -v psql)

# Who runs the server: ourselves, or (as root) the system user interlock-pg.
if [ "$(id -u)" = 0 ]; then
  pg_user=interlock-pg
  if ! id "$pg_user" >/dev/null 2>&1; then
    useradd --system --user-group --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin "$pg_user"
  fi
  as_pg() { runuser -u "$pg_user" -- "$@"; }
else
  pg_user=$(id -un)
  as_pg() { "$@"; }
fi

# Where the cluster lives: DIR/cluster, or a folder in /tmp if the server user cannot reach
# DIR (a checkout under /root, say). DIR/home remembers which.
home_of() {
  if [ -f "$dir/home" ]; then cat "$dir/home"; else echo "$dir/cluster"; fi
}
home=$(home_of)
data=$home/data
port_file=$dir/port
pw_file=$dir/password

running() { [ -f "$data/PG_VERSION" ] && as_pg "$bindir/pg_ctl" -D "$data" status >/dev/null 2>&1; }

url() {
  printf 'postgresql://postgres:%s@127.0.0.1:%s/interlock_test\n' "$(cat "$pw_file")" \
    "$(cat "$port_file")"
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

init_cluster() {
  mkdir -p "$home"
  chown "$pg_user" "$home" && chmod 700 "$home"
  if ! as_pg test -w "$home"; then
    home=$(mktemp -d /tmp/interlock-pg.XXXXXX)
    chown "$pg_user" "$home"
    echo "$home" > "$dir/home"
    data=$home/data
    say "$pg_user cannot reach $dir; the cluster lives in $home"
  fi
  (umask 077; od -An -N16 -tx1 /dev/urandom | tr -d ' \n' > "$pw_file")
  local pwfile=$home/pwfile
  install -m 600 -o "$pg_user" "$pw_file" "$pwfile"
  as_pg "$bindir/initdb" -D "$data" -U postgres --pwfile="$pwfile" -E UTF8 --locale=C \
    --auth-local=trust --auth-host=scram-sha-256 --no-sync >"$home/initdb.log" 2>&1 \
    || { rm -f "$pwfile"; say "initdb failed:"; cat "$home/initdb.log" >&2; exit 1; }
  rm -f "$pwfile"
}

start() {
  if running; then
    return 0
  fi
  [ -f "$data/PG_VERSION" ] || init_cluster
  local sock=$home/sock attempt port
  mkdir -p "$sock" && chown "$pg_user" "$sock" && chmod 700 "$sock"
  local settings="-c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off"
  settings+=" -c full_page_writes=off -c max_connections=60 -c shared_buffers=32MB"
  for attempt in 1 2 3; do
    port=$(cat "$port_file" 2>/dev/null || free_port)
    if as_pg "$bindir/pg_ctl" -D "$data" -l "$home/server.log" -w -t 60 \
        -o "-p $port -k $sock $settings" start >/dev/null; then
      echo "$port" > "$port_file"
      break
    fi
    rm -f "$port_file"  # the port may have been taken meanwhile: try another
    [ "$attempt" = 3 ] && { say "the server did not start:"; tail -20 "$home/server.log" >&2; exit 1; }
  done
  if [ -z "$(as_pg "$psql" -h "$sock" -p "$port" -U postgres -d postgres -Atqc \
      "SELECT 1 FROM pg_database WHERE datname = 'interlock_test'")" ]; then
    as_pg "$psql" -h "$sock" -p "$port" -U postgres -d postgres -qc \
      "CREATE DATABASE interlock_test" >/dev/null
  fi
  say "running as $pg_user on 127.0.0.1:$port and $sock ($("$bindir/postgres" --version))"
}

stop() {
  if running; then
    as_pg "$bindir/pg_ctl" -D "$data" -m fast -w stop >/dev/null
    say "stopped"
  fi
}

case "$cmd" in
  start) start ;;
  stop) stop ;;
  status) running ;;
  url) [ -f "$pw_file" ] && [ -f "$port_file" ] || { say "no cluster in $dir"; exit 1; }; url ;;
  *) usage ;;
esac
