#!/usr/bin/env bash
# Install the pinned real agent CLIs (claude, codex, gemini, opencode) that the real-CLI
# tests run against the scripted model server (interlock.testing).
#
#   tests/tools/install_agent_clis.sh [DIR]
#
# DIR defaults to $INTERLOCK_AGENT_CLIS, then <repo>/.cache/agent-clis (gitignored), a
# link to the install kept per lockfile in the user's cache
# (${XDG_CACHE_HOME:-~/.cache}/interlock/agent-clis/<lockfile sha256>, about 1 GB), so a
# fresh clone on the same machine reuses it. Needs node >= 20 and npm (bootstrap.sh
# installs Debian's when missing); fetches from the npm registry only, versions and
# integrity hashes pinned by tests/tools/agent-clis/package-lock.json. Does nothing when
# DIR already holds this lockfile's install.
set -euo pipefail

# shellcheck source=tests/tools/pinned_npm.sh
source "$(dirname "${BASH_SOURCE[0]}")/pinned_npm.sh"
pinned_npm_begin agent-clis "${1:-${INTERLOCK_AGENT_CLIS:-}}"
cd "$dir"
# `npm install` with the lockfile, not `npm ci`: opencode-ai lists its other platforms'
# binaries as optional dependencies the lockfile cannot hold, which `npm ci` refuses.
npm install --no-audit --no-fund --no-save --loglevel=error
for cli in claude codex gemini opencode; do
  "node_modules/.bin/$cli" --version >/dev/null 2>&1 \
    || { echo "install_agent_clis: $cli does not run after install" >&2; exit 1; }
done
pinned_npm_done agent-clis
echo "agent CLIs installed in $dir: $(cd node_modules/.bin && echo claude codex gemini opencode)"
