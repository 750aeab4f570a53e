"""A wheel built from the repo installs into a fresh venv and runs with its built-in specs."""

from __future__ import annotations

import subprocess
import sys
import venv
from pathlib import Path

import httpx
import pytest

from support.paths import ROOT

pytestmark = pytest.mark.slow


def test_wheel_installs_and_validates_builtin_specs(tmp_path: Path) -> None:
    # uv, installed beside the tests (make's setup installs the project with it), builds
    # the wheel in an isolated environment as pip would, and installs it in a second.
    uv = Path(sys.executable).with_name("uv")
    dist = tmp_path / "dist"
    built = subprocess.run([str(uv), "build", "--wheel", "--out-dir", str(dist), str(ROOT)],
                           check=True, capture_output=True, text=True)
    # setuptools says nothing: no deprecated field, no folder it would ignore
    assert "Warning" not in built.stderr, built.stderr
    wheel = next(dist.glob("interlock-*.whl"))
    env_dir = tmp_path / "venv"
    # A venv without pip (ensurepip takes seconds); uv installs the wheel and what it needs.
    venv.EnvBuilder(with_pip=False).create(env_dir)
    subprocess.run([str(uv), "pip", "install", "--quiet", "--python",
                    str(env_dir / "bin" / "python"), str(wheel)],
                   check=True, capture_output=True, text=True)
    interlock = env_dir / "bin" / "interlock"
    # Run from an empty folder so nothing from the source tree can be picked up.
    listed = subprocess.run([str(interlock), "specs"], cwd=tmp_path, capture_output=True,
                            text=True, check=True)
    paths = [line.split(maxsplit=1)[1] for line in listed.stdout.splitlines()]
    assert len(paths) >= 6
    assert all("site-packages/interlock/specs/" in p for p in paths), paths
    checked = subprocess.run([str(interlock), "validate", "--strict", *paths], cwd=tmp_path,
                             capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    top_level = {p.name for p in (env_dir / "lib").glob("python*/site-packages/*")}
    assert "machines" not in top_level and "runtime" not in top_level
    # interlock ui ships its page whole: templates, scripts and styles, no CDN
    ui = next((env_dir / "lib").glob("python*/site-packages/interlock/runtime/ui"))
    shipped = {p.relative_to(ui).as_posix() for p in ui.rglob("*") if p.is_file()
               and "__pycache__" not in p.parts}
    sources = ROOT / "runtime" / "ui"
    assert {p.relative_to(sources).as_posix() for p in sources.rglob("*")
            if p.suffix in (".html", ".js", ".css")} <= shipped
    served = subprocess.Popen([str(interlock), "ui", "--port", "0"], cwd=tmp_path, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        assert served.stdout is not None
        url = served.stdout.readline().split(": ", 1)[1].strip()
        for path in ("", "static/app.css", "static/session.js"):
            assert httpx.get(url + path).status_code == 200, path
        assert httpx.get(url + "static/__init__.py").status_code == 404  # no Python served
    finally:
        served.terminate()
        served.wait(15)
