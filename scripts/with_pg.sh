#!/usr/bin/env bash
# scripts/with_pg.sh CMD...: run CMD with a throwaway PostgreSQL cluster under .cache/pg.
# Starts it (scripts/pg_cluster.sh), exports INTERLOCK_TEST_PG_URL, runs CMD, stops the
# cluster again (on failure and interruption too; one that was already running is left
# running) and exits with CMD's status. With INTERLOCK_TEST_PG_URL already set, only runs CMD.
# If the cluster cannot start, CMD runs without the URL: the PostgreSQL tests then skip,
# or fail in CI (CI=true).
set -uo pipefail
[ $# -gt 0 ] || { echo "usage: $0 CMD..." >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
cluster="$root/scripts/pg_cluster.sh"
dir=${INTERLOCK_PG_DIR:-$root/.cache/pg}

if [ -z "${INTERLOCK_TEST_PG_URL:-}" ]; then
  started=false
  bash "$cluster" status "$dir" 2>/dev/null || started=true
  if bash "$cluster" start "$dir"; then
    INTERLOCK_TEST_PG_URL=$(bash "$cluster" url "$dir")
    export INTERLOCK_TEST_PG_URL
    if $started; then
      trap 'bash "$cluster" stop "$dir" || true' EXIT
      trap 'exit 130' INT
      trap 'exit 143' TERM
    fi
  else
    echo "with_pg: PostgreSQL did not start; its tests will be skipped (failed under CI=true)" >&2
  fi
fi

"$@"
