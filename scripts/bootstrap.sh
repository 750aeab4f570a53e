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

if ! command -v dot >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "installing graphviz (dot)"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq graphviz) >/dev/null
  else
    echo "bootstrap: Graphviz 'dot' is missing; install it (apt-get install graphviz) for SVG/PNG" >&2
  fi
fi

$quiet && exit 0

if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "installing chromium (the browser tests of interlock ui)"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >/dev/null
  else
    echo "bootstrap: chromium is missing; install it (apt-get install chromium) for the browser tests" >&2
  fi
fi

if ! command -v npm >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "installing nodejs and npm"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm) >/dev/null
  else
    echo "bootstrap: npm is missing; install Node.js >= 20 and npm for the real-CLI tests" >&2
  fi
fi

if command -v npm >/dev/null 2>&1; then
  bash tests/tools/install_mermaid_check.sh || echo "bootstrap: Mermaid parser not installed; its test will be skipped" >&2
  bash tests/tools/install_agent_clis.sh || echo "bootstrap: the agent CLIs are not installed; the real-CLI tests will be skipped (they fail in CI)" >&2
fi
say "ready"
