"""Run the child-machine test parent in its own process until it is final (the crash
tests SIGKILL it while the child's agent runs). Usage: run_parent.py STORE_DB FOLDER
ON_RESUME AGENT_ARG..."""

from __future__ import annotations

import sys
from pathlib import Path

from interlock.runtime.store.sqlite import SqliteStore

from support.invoke_helpers import agent_argv, run_to_the_end
from support.machine_helpers import Machines, child_spec, open_parent

store_path, folder, on_resume, *agent_args = sys.argv[1:]
store = SqliteStore(store_path)
runner = open_parent(store, Path(folder), Machines(child_spec(agent_argv(*agent_args))),
                     on_resume=on_resume)
run_to_the_end(runner, store)
