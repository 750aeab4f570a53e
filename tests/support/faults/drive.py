"""Run a session in this process, as `interlock run` does, for the lifecycle tests.

    python drive.py STORE_DB SPEC SESSION_ID [--retry] [--fixed]

Prints ``ready`` once the runner holds the session, then runs it; prints the outcome
(``finished | stopped | failed | cancelled | removed``) and exits 1 for ``failed`` with
the one-line message on stderr, 0 otherwise.
"""

import asyncio
import signal
import sys
from pathlib import Path

from interlock.runtime.engine.runner import Runner
from interlock.runtime.store.sqlite import SqliteStore

sys.path.insert(0, str(Path(__file__).parent))
import faults_bindings


def main(argv: list[str]) -> int:
    db, spec, session_id, *flags = argv
    store = SqliteStore(db)
    bindings = faults_bindings.FIXED if "--fixed" in flags else faults_bindings.BINDINGS
    text = Path(spec).read_text(encoding="utf-8")
    runner, _ = Runner.open(store, text, spec, session_id=session_id, bindings=bindings,
                            retry="--retry" in flags)
    print("ready", flush=True)
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    try:
        outcome = loop.run_until_complete(runner.run(stop))
    finally:
        runner.close()
        loop.close()
    print(outcome.kind, flush=True)
    if outcome.failure is not None:
        print(outcome.failure, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
