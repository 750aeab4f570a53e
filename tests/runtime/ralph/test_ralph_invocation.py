"""The engine's per-invocation timeout and transient-failure retries, on real agent
processes run by the real dispatcher; backoff waits go through a recording ``sleep``."""

from __future__ import annotations

import asyncio
import random
import sys
import time
from pathlib import Path

from interlock.runtime.dispatch import AgentCommand
from interlock.runtime.dispatch.config import PollingConfiguration
from interlock.runtime.ralph.config import RalphConfig, RetryPolicy
from interlock.runtime.ralph.invocation import invoke

POLLING = PollingConfiguration.model_validate({"minOutputLength": 0})

FLAKY = """\
import pathlib, sys
counter = pathlib.Path(sys.argv[1])
n = int(counter.read_text()) + 1 if counter.exists() else 1
counter.write_text(str(n))
if n <= int(sys.argv[2]):
    print("Error: No messages returned", file=sys.stderr)
    sys.exit(1)
print("v: done")
"""


def _flaky(tmp_path: Path, failures: int) -> AgentCommand:
    script = tmp_path / "flaky.py"
    script.write_text(FLAKY)
    return AgentCommand((sys.executable, str(script), str(tmp_path / "count"), str(failures)),
                        name="executor")


class Sleeps:
    """An injected sleep: records each wait, waits for nothing."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


RETRY = RetryPolicy(output_patterns=("No messages returned",), attempts=3, base_delay=2,
                    max_delay=10)


def test_transient_failure_twice_then_success_is_retried(tmp_path: Path) -> None:
    sleeps = Sleeps()
    config = RalphConfig(retry=RETRY)
    outcome = asyncio.run(invoke(_flaky(tmp_path, 2), POLLING, config, sleep=sleeps,
                                 rng=random.Random(1)))
    assert outcome.ok and outcome.failure is None
    assert [a.transient for a in outcome.attempts] == [True, True, False]
    assert outcome.result.polling.stdout == "v: done\n"
    assert outcome.result.polling.exit_code == 0
    assert len(sleeps.waits) == 2
    assert 0 <= sleeps.waits[0] <= 2 and 0 <= sleeps.waits[1] <= 4
    assert [a.delay_after for a in outcome.attempts[:2]] == sleeps.waits


def test_a_transient_failure_that_persists_fails_after_the_attempts(tmp_path: Path) -> None:
    sleeps = Sleeps()
    outcome = asyncio.run(invoke(_flaky(tmp_path, 5), POLLING, RalphConfig(retry=RETRY),
                                 sleep=sleeps))
    assert not outcome.ok and len(outcome.attempts) == 3 and len(sleeps.waits) == 2
    assert outcome.failure == "transient failure (exit 1) persisted after 3 attempts"


def test_a_plain_failure_is_not_retried(tmp_path: Path) -> None:
    command = AgentCommand((sys.executable, "-c", "import sys; print('bad'); sys.exit(2)"))
    sleeps = Sleeps()
    outcome = asyncio.run(invoke(command, POLLING, RalphConfig(retry=RETRY), sleep=sleeps))
    assert (len(outcome.attempts), sleeps.waits) == (1, [])
    assert outcome.failure == "agent failed (exit 2)"


def test_a_hanging_agent_is_killed_by_the_invocation_timeout(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    hang = (f"import os, time; open({str(pidfile)!r}, 'w').write(str(os.getpid())); "
            "print('thinking...', flush=True); time.sleep(300)")
    command = AgentCommand((sys.executable, "-c", hang), name="executor")
    config = RalphConfig(invocation_timeout=0.5, retry=RETRY)
    began = time.monotonic()
    outcome = asyncio.run(invoke(command, POLLING, config, sleep=Sleeps()))
    assert time.monotonic() - began < 15
    assert outcome.timed_out and not outcome.ok and len(outcome.attempts) == 1
    assert outcome.failure == "killed by the invocation timeout (500ms)"
    polling = outcome.result.polling
    assert (polling.status, polling.completion_method) == ("timeout", "timeout")
    assert "thinking..." in polling.stdout
    pid = int(pidfile.read_text())
    stat = Path(f"/proc/{pid}/stat")
    assert not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] == "Z"
