# Sourced by the installers of pinned npm packages (tests/tools/NAME/package.json and its
# package-lock.json): install_agent_clis.sh, install_mermaid_check.sh.
#
#   pinned_npm_begin NAME [DIR]   sets $dir: DIR, else the user's cache
#                                 (${XDG_CACHE_HOME:-~/.cache}/interlock/NAME/<lockfile
#                                 sha256>, linked from <repo>/.cache/NAME, so a fresh clone
#                                 on this machine reuses it); exits 0 when $dir already holds
#                                 this lockfile's install, else copies the manifests there
#   pinned_npm_done NAME          marks $dir as this lockfile's install
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"

pinned_npm_begin() {
  local name="$1" lock="$here/$1/package-lock.json"
  if [ -n "${2:-}" ]; then
    dir="$2"
  else
    dir="${XDG_CACHE_HOME:-$HOME/.cache}/interlock/$name/$(sha256sum "$lock" | cut -c1-16)"
    mkdir -p "$root/.cache"
    ln -sfn "$dir" "$root/.cache/$name"
  fi
  for tool in node npm; do
    command -v "$tool" >/dev/null || { echo "install $name: $tool is not installed" >&2; exit 2; }
  done
  mkdir -p "$dir"
  if [ -f "$dir/.installed" ] && cmp -s "$dir/.installed" "$lock"; then
    exit 0
  fi
  cp "$here/$name/package.json" "$lock" "$dir/"
}

pinned_npm_done() {
  cp "$here/$1/package-lock.json" "$dir/.installed"
}
