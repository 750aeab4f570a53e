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

# shellcheck source=tests/tools/pinned_npm.sh
source "$(dirname "${BASH_SOURCE[0]}")/pinned_npm.sh"
pinned_npm_begin mermaid-check "${1:-${MERMAID_CHECK_DIR:-}}"
cd "$dir"
npm ci --no-audit --no-fund --ignore-scripts --loglevel=error
# Smoke test: one tiny diagram must parse.
printf 'stateDiagram-v2\n  [*] --> a\n  a --> b : go\n' \
  | MERMAID_CHECK_DIR="$dir" node "$here/mermaid_check.mjs" -
pinned_npm_done mermaid-check
echo "mermaid check installed in $dir"
