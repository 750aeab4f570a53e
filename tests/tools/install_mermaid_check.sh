#!/usr/bin/env bash
# Install the pinned Mermaid parser used by tests/test_mermaid_parse.py.
#
#   tests/tools/install_mermaid_check.sh [DIR]
#
# DIR defaults to $MERMAID_CHECK_DIR, then <repo>/.cache/mermaid-check (gitignored), a link
# to the install kept per lockfile in the user's cache (${XDG_CACHE_HOME:-~/.cache}/
# interlock/mermaid-check/<lockfile sha256>), so a fresh clone on this machine reuses it.
# Needs node >= 18 and npm; fetches from the npm registry only (versions and integrity
# hashes pinned by tests/tools/mermaid-check/package-lock.json). Safe to re-run.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
if [ -n "${1:-${MERMAID_CHECK_DIR:-}}" ]; then
  dir="${1:-$MERMAID_CHECK_DIR}"
else
  lock_sha="$(sha256sum "$here/mermaid-check/package-lock.json" | cut -c1-16)"
  dir="${XDG_CACHE_HOME:-$HOME/.cache}/interlock/mermaid-check/$lock_sha"
  mkdir -p "$root/.cache"
  ln -sfn "$dir" "$root/.cache/mermaid-check"
fi

command -v node >/dev/null || { echo "install_mermaid_check: node is not installed" >&2; exit 2; }
command -v npm >/dev/null || { echo "install_mermaid_check: npm is not installed" >&2; exit 2; }

mkdir -p "$dir"
if [ -f "$dir/.installed" ] && cmp -s "$dir/.installed" "$here/mermaid-check/package-lock.json"; then
  exit 0
fi
cp "$here/mermaid-check/package.json" "$here/mermaid-check/package-lock.json" "$dir/"
cd "$dir"
npm ci --no-audit --no-fund --ignore-scripts --loglevel=error
# Smoke test: one tiny diagram must parse.
printf 'stateDiagram-v2\n  [*] --> a\n  a --> b : go\n' \
  | MERMAID_CHECK_DIR="$dir" node "$here/mermaid_check.mjs" -
cp "$here/mermaid-check/package-lock.json" .installed
echo "mermaid check installed in $dir"
