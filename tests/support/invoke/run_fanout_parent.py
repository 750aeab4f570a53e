"""Run a fan-out parent of the child-machine test spec in its own process until it is
final (the crash tests SIGKILL it while its children's agents run). Usage:
run_fanout_parent.py STORE_DB FOLDER SPEC_FILE AGENT_ARGV_ITEM..."""

from __future__ import annotations

import sys
from pathlib import Path

from interlock.runtime.store.sqlite import SqliteStore

from support.invoke_helpers import run_to_the_end
from support.machine_helpers import Machines, child_spec, open_parent

store_path, folder, spec_file, *argv = sys.argv[1:]
store = SqliteStore(store_path)
runner = open_parent(store, Path(folder), Machines(child_spec(argv)),
                     spec=Path(spec_file).read_text())
run_to_the_end(runner, store)
