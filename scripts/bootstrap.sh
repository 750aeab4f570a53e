#!/usr/bin/env bash
# System tools the tests use for real: Graphviz `dot` (SVG/PNG diagrams), Debian's
# Chromium (the browser tests of `interlock ui`, driven by Playwright), Node.js and npm, a
# Node-based Mermaid parser, and the real agent CLIs (claude, codex, gemini, opencode;
# pinned in tests/tools/agent-clis). Installs what is missing when it can (root + apt,
# npm); says what is missing when it cannot. --quiet: only what the demo needs, no output
# unless something fails.
set -euo pipefail
cd "$(dirname "$0")/.."
quiet=false; [ "${1:-}" = "--quiet" ] && quiet=true
say() { $quiet || echo "bootstrap: $*"; }

# apt_need COMMAND "PACKAGES" WHY: install PACKAGES when COMMAND is missing (as root, with
# apt), else say what is missing and what for.
apt_need() {
  command -v "$1" >/dev/null 2>&1 && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "installing $2 ($3)"
    # shellcheck disable=SC2086  # the packages are words
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $2) >/dev/null
  else
    echo "bootstrap: '$1' is missing; install it (apt-get install $2) for $3" >&2
  fi
}

apt_need dot graphviz "SVG/PNG diagrams"

$quiet && exit 0

apt_need chromium chromium "the browser tests of interlock ui"
apt_need npm "nodejs npm" "the Mermaid parser and the real-CLI tests (Node.js >= 20)"

if command -v npm >/dev/null 2>&1; then
  bash tests/tools/install_mermaid_check.sh || echo "bootstrap: Mermaid parser not installed; its test will be skipped" >&2
  bash tests/tools/install_agent_clis.sh || echo "bootstrap: the agent CLIs are not installed; the real-CLI tests will be skipped (they fail in CI)" >&2
fi
say "ready"
