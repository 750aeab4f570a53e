"""The README and docs/ cannot go stale: every Python block runs, top to bottom, in a
fresh folder (one namespace per page, so later blocks use what earlier ones defined);
every `interlock` command and option a shell block shows exists; every whole spec and
project file a YAML block shows loads; every `interlock.x.y` name a page mentions
exists."""

from __future__ import annotations

import importlib
import re
import shlex
from pathlib import Path
from typing import Any

import pytest

from support.paths import ROOT

PAGES = ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^```python\n(.*?)^```$", re.S | re.M)


def python_blocks(doc: str) -> list[str]:
    return BLOCK.findall((ROOT / doc).read_text(encoding="utf-8"))


DOCS = [page for page in PAGES if python_blocks(page)]  # every page with a Python block


@pytest.mark.parametrize("doc", DOCS)
def test_every_python_block_runs(doc: str, tmp_path: Path,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = python_blocks(doc)
    monkeypatch.chdir(tmp_path)
    if doc == "docs/agents.md":  # its interlock.testing example runs the real claude
        from support.real_clis import cli_path, require_cli

        require_cli("claude")
        monkeypatch.setenv("PATH", cli_path())
    namespace: dict[str, object] = {"__name__": f"doc_{Path(doc).stem}"}
    for number, block in enumerate(blocks, 1):
        code = compile(block, f"{doc} (python block {number})", "exec")
        exec(code, namespace)  # the documentation's own code, as a reader would run it


DOTTED = re.compile(r"interlock\.(?:machines|runtime|testing)(?:\.[A-Za-z_]\w*)+")


def _resolves(dotted: str) -> bool:
    """Whether ``dotted`` names a module, or an attribute path under the longest module."""
    parts = dotted.split(".")
    for cut in range(len(parts), 1, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for part in parts[cut:]:
            if not hasattr(found, part):
                return False
            found = getattr(found, part)
        return True
    return False


@pytest.mark.parametrize("doc", PAGES)
def test_every_interlock_name_a_page_mentions_exists(doc: str) -> None:
    """A module, class or function named in the docs (interlock.runtime.x.y) that was
    renamed or deleted fails here, not in a reader's hands."""
    text = (ROOT / doc).read_text(encoding="utf-8")
    missing = sorted({n for n in DOTTED.findall(text) if not _resolves(n)})
    assert not missing, f"{doc} names what does not exist: {', '.join(missing)}"


SHELL_BLOCK = re.compile(r"^```(?:sh|console|bash)\n(.*?)^```$", re.S | re.M)


def _interlock_lines(doc: str) -> list[str]:
    """The `interlock ...` command lines of a page's shell blocks (continuations joined,
    prompts, comments and brackets around optional parts dropped)."""
    lines: list[str] = []
    for block in SHELL_BLOCK.findall((ROOT / doc).read_text(encoding="utf-8")):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split("  #")[0].strip().removeprefix("$ ").removeprefix(".venv/bin/")
            if line.startswith("interlock "):
                lines.append(line.replace("[", " ").replace("]", " "))
    return lines


@pytest.mark.parametrize("doc", PAGES)
def test_every_command_and_option_a_shell_block_shows_exists(doc: str) -> None:
    """The shell blocks are synopses and sessions with placeholders (ID, N); what they
    name must be real: each `interlock` subcommand, and each option of that subcommand."""
    import typer
    from typer._click import Context  # typer vendors click

    from interlock.runtime.cli.app import app

    root = typer.main.get_command(app)
    for line in _interlock_lines(doc):
        command: Any = root
        for word in shlex.split(line)[1:]:
            if hasattr(command, "get_command") and not word.startswith("-"):
                found = command.get_command(Context(command), word)
                assert found is not None, f"{doc}: `{line}`: no command {word!r}"
                command = found
            elif word.startswith("-"):
                option = word.split("=")[0]
                names = {o for p in command.params for o in (*p.opts, *p.secondary_opts)}
                assert option in names | {"--help", "-h"}, (
                    f"{doc}: `{line}`: {command.name} has no option {option}")


YAML_BLOCK = re.compile(r"^```yaml\n(.*?)^```$", re.S | re.M)
SECTIONS = ("agents", "ralph", "inbox")  # interlock.yaml's sections with a loader


def _yaml_blocks(doc: str) -> list[str]:
    return YAML_BLOCK.findall((ROOT / doc).read_text(encoding="utf-8"))


@pytest.mark.parametrize("doc", [d for d in PAGES if _yaml_blocks(d)])
def test_every_whole_spec_and_project_file_a_page_shows_loads(doc: str, tmp_path: Path) -> None:
    """A YAML block that is a whole spec (`machine:`) passes lint; one that is an
    interlock.yaml (its `agents:`, `ralph:`, `inbox:` sections) loads with the runtime's
    own loaders. The other blocks are fragments of a spec, shown in context."""
    import yaml

    from interlock.machines import load_checked
    from interlock.runtime.config.agents import load_agents
    from interlock.runtime.config.inbox import load_poller_config
    from interlock.runtime.config.ralph import load_ralph_config

    for number, block in enumerate(_yaml_blocks(doc), 1):
        where = f"{doc} (yaml block {number})"
        data = yaml.safe_load(block)
        if not isinstance(data, dict):
            continue
        if "machine" in data:
            load_checked(block, file=where)
        elif set(data) & set(SECTIONS) and set(data) <= set(SECTIONS):
            project = tmp_path / str(number) / "interlock.yaml"
            project.parent.mkdir()
            project.write_text(block, encoding="utf-8")
            load_agents(project)
            load_ralph_config(project)
            load_poller_config(project)
