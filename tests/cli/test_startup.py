"""What a command line call loads before it knows its command: each ``interlock`` call is a
process of its own (the tests start hundreds), so the command tree must not bring in what
only some commands use."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("rich.console", "rich.table", "yaml", "interlock.machines.spec",
         "interlock.runtime.config.inbox", "interlock.runtime.engine",
         "interlock.runtime.api.sessions", "jinja2", "statemachine", "watchdog")


def test_the_command_tree_loads_no_command_s_modules() -> None:
    code = ("import json, sys; import interlock.runtime.cli; "
            "print(json.dumps(sorted(sys.modules)))")
    loaded = set(json.loads(subprocess.run([sys.executable, "-c", code], check=True,
                                           capture_output=True, text=True).stdout))
    assert "typer" in loaded  # the check sees the imports
    assert sorted(m for m in HEAVY if m in loaded) == []
