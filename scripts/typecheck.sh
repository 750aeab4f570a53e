#!/usr/bin/env bash
# mypy --strict over the interlock.* namespace. The source folders (machines/, runtime/,
# testing/) are mapped to interlock.* by packaging, so mypy gets the same view through a
# tree of links.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
tree="$root/build/typecheck"
rm -rf "$tree" && mkdir -p "$tree/interlock"
ln -sfn "$root/machines" "$tree/interlock/machines"
ln -sfn "$root/runtime" "$tree/interlock/runtime"
ln -sfn "$root/testing" "$tree/interlock/testing"
cd "$tree"
"$root/.venv/bin/mypy" --config-file "$root/pyproject.toml" -p interlock.machines -p interlock.runtime \
  -p interlock.testing
# The benchmarks import interlock.* like any user would.
ln -sfn "$root/bench" "$tree/bench"
"$root/.venv/bin/mypy" --config-file "$root/pyproject.toml" bench
