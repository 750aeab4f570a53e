"""What a command line call loads before it knows its command: each ``interlock`` call is a
process of its own (the tests start hundreds), so the command tree must not bring in what
only some commands use."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from support.cli import Cli

HEAVY = ("rich.console", "rich.table", "yaml", "interlock.machines.spec",
         "interlock.runtime.config.inbox", "interlock.runtime.engine",
         "interlock.runtime.api.sessions", "jinja2", "statemachine", "watchdog", "asyncio")


def test_the_command_tree_loads_no_command_s_modules() -> None:
    code = ("import json, sys; import interlock.runtime.cli; "
            "print(json.dumps(sorted(sys.modules)))")
    loaded = set(json.loads(subprocess.run([sys.executable, "-c", code], check=True,
                                           capture_output=True, text=True).stdout))
    assert "typer" in loaded  # the check sees the imports
    assert sorted(m for m in HEAVY if m in loaded) == []


def test_a_call_builds_only_the_command_it_names() -> None:
    """typer builds every command's options from its signature; a call that names its
    command gets a tree with that one (help, --version and a mistyped name get them all,
    so that click can list them or suggest one)."""
    from interlock.runtime.cli.app import _command_tree

    def names(args: list[str]) -> list[str]:
        tree = _command_tree(args)
        return sorted(getattr(tree, "commands", {}))

    everything = names([])
    assert {"status", "ralph", "demo-agent", "rm"} <= set(everything)
    assert names(["status", "s1", "--json"]) == ["status"]
    assert names(["demo-agent", "--role", "planner"]) == ["demo-agent"]
    assert names(["ralph", "run", "s"]) == ["ralph"]
    assert names(["stauts", "s1"]) == everything
    assert names(["--version"]) == names(["-h"]) == everything


def test_a_mistake_after_a_named_command_is_answered_as_usual(cli: Cli) -> None:
    whole = cli("status", "--bogus")  # answered by the tree of one command
    assert whole.returncode == 2
    assert whole.stderr.startswith("error: interlock status: ")
    assert "--bogus" in whole.stderr


def _call(args: list[str], cwd: Path) -> tuple[int, list[str], str]:
    """``main(args)`` in a fresh interpreter: its exit code, the modules it had loaded by
    then, and its stderr."""
    code = ("import json, sys\n"
            "from interlock.runtime.cli.app import main\n"
            "try:\n"
            f"    main({args!r})\n"
            "except SystemExit as exc:\n"
            "    print(json.dumps([exc.code, sorted(sys.modules)]))\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True,
                          text=True, check=True)
    exit_code, loaded = json.loads(done.stdout)
    return exit_code, loaded, done.stderr


def test_checking_a_spec_file_loads_no_session_machinery(tmp_path: Path) -> None:
    """`validate` (and `diagram` of a file) is the call a user makes most while writing a
    spec: it needs the spec models and the linter, not the engine, the store or asyncio."""
    (tmp_path / "door.yaml").write_text(
        "machine: door\ninitial: closed\nstates:\n  closed: {on: {open: opened}}\n"
        "  opened: {on: {close: closed}}\n")
    code, loaded, _ = _call(["validate", "door.yaml"], tmp_path)
    assert code == 0 and "interlock.machines.lint" in loaded
    assert [m for m in ("asyncio", "interlock.runtime.engine.runner", "interlock.runtime.store",
                        "interlock.runtime.api.sessions", "rich.console") if m in loaded] == []


def test_reading_a_session_loads_no_runner(tmp_path: Path) -> None:
    """`status`, `log`, `send`, `cancel` and `rm` read and steer a session through the
    store: the runner, the session host and the inbox poller are for running one."""
    code, loaded, stderr = _call(["status", "nosuch"], tmp_path)
    assert code == 1 and "no session 'nosuch'" in stderr
    assert "interlock.runtime.api.sessions" in loaded
    assert [m for m in ("interlock.runtime.engine.runner", "interlock.runtime.engine.host",
                        "interlock.runtime.inbox.session", "interlock.runtime.api.running")
            if m in loaded] == []
