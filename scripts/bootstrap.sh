#!/usr/bin/env bash
# System tools the tests use for real: Graphviz `dot` (SVG/PNG diagrams) and a Node-based
# Mermaid parser. Installs what is missing when it can (root + apt, npm); says what is
# missing when it cannot. --quiet: only what the demo needs, no output unless something fails.
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

if [ -x tests/tools/install_mermaid_check.sh ] || [ -f tests/tools/install_mermaid_check.sh ]; then
  if command -v npm >/dev/null 2>&1; then
    bash tests/tools/install_mermaid_check.sh || echo "bootstrap: Mermaid parser not installed; its test will be skipped" >&2
  fi
fi
say "ready"
