"""Run one invoking session in its own process until it is final (the crash tests
SIGKILL it mid-invoke). Usage: run_session.py STORE_DB SPEC_FILE SESSION_FOLDER."""

from __future__ import annotations

import sys
from pathlib import Path

from interlock.runtime.agents.invoke import process_handlers
from interlock.runtime.engine.runner import Runner
from interlock.runtime.store.sqlite import SqliteStore

from support.invoke_helpers import BINDINGS, run_to_the_end

store_path, spec_path, folder = sys.argv[1:4]
store = SqliteStore(store_path)
runner, _ = Runner.open(store, Path(spec_path).read_text(), spec_path, session_id="s1",
                        bindings=BINDINGS, folder=Path(folder),
                        invokers=process_handlers())
run_to_the_end(runner, store)
