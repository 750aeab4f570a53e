"""The limits policy, the progress digest and the backoff schedule: pure, on an injected
clock, never sleeping."""

from __future__ import annotations

import doctest
import os
import random
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from interlock.runtime.config.ralph import RalphConfig, RetryPolicy
from interlock.runtime.engine.clock import ManualClock
from interlock.runtime.ralph import limits as limits_module
from interlock.runtime.ralph.limits import (
    FileFacts,
    ProgressSnapshot,
    ProgressWatch,
    SessionLimits,
    StopReason,
    accepted_reviews,
    backoff_ceiling,
    backoff_delay,
    backoff_schedule,
    check,
    done_tasks,
    is_transient,
    progress_digest,
    project_files,
)


def test_each_limit_has_its_stop_reason() -> None:
    clock = ManualClock()
    started = clock.now()
    config = RalphConfig(max_iterations=5, max_runtime=3600, max_cost=2.0, no_progress_limit=3)
    assert check(ProgressSnapshot(4, started, 1.99, 2), config, clock.now()) is None
    assert check(ProgressSnapshot(5, started), config, clock.now()) == StopReason(
        "max_iterations", "reached max_iterations: 5 iterations done, the limit is 5")
    clock.advance(3600)
    reason = check(ProgressSnapshot(1, started), config, clock.now())
    assert reason is not None and reason.kind == "max_runtime"
    assert reason.detail == "reached max_runtime: ran 1h, the limit is 1h"
    assert check(ProgressSnapshot(1, clock.now(), 2.0), config, clock.now()) == StopReason(
        "max_cost", "reached max_cost: spent $2.00, the limit is $2.00")
    reason = check(ProgressSnapshot(1, clock.now(), 0, 3), config, clock.now())
    assert reason is not None and reason.kind == "no_progress"
    assert "3 invocations in a row" in reason.detail
    assert reason.to_json() == {"reason": "no_progress", "detail": reason.detail}


def test_unset_limits_never_stop() -> None:
    config = RalphConfig(max_iterations=None, no_progress_limit=None)
    assert check(ProgressSnapshot(10_000, 0.0, 1e6, 10_000), config, 1e9) is None


def test_the_first_reached_limit_wins() -> None:
    config = RalphConfig(max_iterations=1, max_cost=1.0)
    reason = check(ProgressSnapshot(1, 0.0, 5.0), config, 0.0)
    assert reason is not None and reason.kind == "max_iterations"


def test_a_never_finishing_loop_stops_at_max_iterations() -> None:
    """A loop whose agent always says 'more to do' is ended by the engine, not the agent."""
    config = RalphConfig(max_iterations=3, no_progress_limit=None)
    clock = ManualClock()
    started, done = clock.now(), 0
    while (reason := check(ProgressSnapshot(done, started), config, clock.now())) is None:
        done += 1  # one more iteration of an agent that never finishes
        clock.advance(60)
    assert (done, reason.kind) == (3, "max_iterations")


def test_digest_sees_tasks_done_and_project_changes(tmp_path: Path) -> None:
    progress = tmp_path / ".ralph-sessions" / "s1" / "iterations" / "1" / "progress.md"
    progress.parent.mkdir(parents=True)
    progress.write_text("- [ ] T1: parse\n")
    (tmp_path / "src.py").write_text("x = 1\n")
    first = progress_digest(tmp_path, progress)
    assert progress_digest(tmp_path, progress) == first
    progress.write_text("- [x] T1: parse\n")
    second = progress_digest(tmp_path, progress)
    assert second != first
    (tmp_path / "src.py").write_text("x = 22\n")
    third = progress_digest(tmp_path, progress)
    assert third != second
    # the session folder and interlock's state are not the project's progress
    (progress.parent / "notes.md").write_text("scratch")
    (tmp_path / ".interlock").mkdir()
    (tmp_path / ".interlock" / "db").write_text("state")
    assert progress_digest(tmp_path, progress) == third


def test_failures_replans_and_work_under_way_are_not_progress(tmp_path: Path) -> None:
    """What a loop of failing iterations changes: markers of tasks not done, a planner's new
    words for the same work, a new iteration's empty progress.md."""
    it1 = tmp_path / ".ralph-sessions" / "s1" / "iterations" / "1" / "progress.md"
    it2 = it1.parents[1] / "2" / "progress.md"
    it1.parent.mkdir(parents=True)
    it2.parent.mkdir(parents=True)
    it1.write_text("- [ ] T1: write the parser\n")
    start = progress_digest(tmp_path, it1)
    for text in ("- [/] T1: write the parser\n",
                 "- [F] T1: write the parser (claude: permission denied)\n",
                 "- [ ] T1: write the parser module, with its tests\n"):
        it1.write_text(text)
        assert progress_digest(tmp_path, it1) == start, text
    assert progress_digest(tmp_path, it2) == start  # not written yet
    it2.write_text("- [x] T1: write the parser module\n- [F] T2: test it\n")
    done = progress_digest(tmp_path, it2)
    assert done != start
    assert done_tasks(it2) == ["T1: write the parser module"]


def test_a_review_that_accepts_is_progress_one_that_rejects_is_not(tmp_path: Path) -> None:
    reviews = tmp_path / ".ralph-sessions" / "s1" / "iterations" / "1" / "reviews"
    reviews.mkdir(parents=True)
    before = progress_digest(tmp_path, reviews=reviews)
    (reviews / "T1.md").write_text("verdict: retry\nfindings: [no test]\n")
    assert progress_digest(tmp_path, reviews=reviews) == before
    (reviews / "T2.md").write_text("verdict: accept\ntasks: [T2]\n")
    assert progress_digest(tmp_path, reviews=reviews) != before
    assert accepted_reviews(reviews) == ["T2"]


def test_a_review_rewritten_is_read_again(tmp_path: Path) -> None:
    """The verdicts kept between digests follow the file: a retry rewritten as an accept
    is progress, an unchanged review is not read again."""
    reviews = tmp_path / "reviews"
    reviews.mkdir()
    facts = FileFacts()
    (reviews / "T1.md").write_text("verdict: retry\n")
    before = progress_digest(tmp_path, reviews=reviews, facts=facts)
    assert accepted_reviews(reviews, facts) == []
    (reviews / "T1.md").write_text("verdict: accept\n")
    assert accepted_reviews(reviews, facts) == ["T1"]
    assert progress_digest(tmp_path, reviews=reviews, facts=facts) != before


def test_file_facts_read_a_file_again_only_when_it_changed(tmp_path: Path) -> None:
    path = tmp_path / "f.txt"
    path.write_text("one")
    reads: list[str] = []

    def read(p: Path) -> str:
        reads.append(p.read_text())
        return reads[-1].upper()

    facts = FileFacts()
    assert [facts.get("up", path, read) for _ in range(3)] == ["ONE"] * 3
    os.utime(path, ns=(1, 1))
    assert facts.get("up", path, read) == "ONE" and reads == ["one", "one"]
    assert facts.get("other", path, lambda p: "x") == "x"  # kinds kept apart
    path.unlink()
    with pytest.raises(FileNotFoundError):
        facts.get("up", path, read)


def test_project_files_follow_git_when_present(tmp_path: Path) -> None:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_SYSTEM": "/dev/null"}
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True, env=env)
    (tmp_path / ".gitignore").write_text("build/\n")
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "out.o").write_text("obj")
    (tmp_path / "a.py").write_text("")
    (tmp_path / ".ralph-sessions").mkdir()
    (tmp_path / ".ralph-sessions" / "m.yaml").write_text("")
    assert project_files(tmp_path) == [".gitignore", "a.py"]


def test_walk_skips_ignored_folders(tmp_path: Path) -> None:
    for name in ("a.txt", "sub/b.txt", ".venv/x", ".interlock/y", "node_modules/z"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    assert project_files(tmp_path) == ["a.txt", "sub/b.txt"]


def test_progress_watch_counts_unchanged_invocations() -> None:
    watch = ProgressWatch()
    assert [watch.observe(d) for d in ("a", "a", "a", "b", "b")] == [0, 1, 2, 0, 1]


def test_progress_watch_sees_a_loop_as_no_progress() -> None:
    """Rejected, replanned, redone the same way: the states repeat, nothing is new."""
    watch = ProgressWatch()
    cycle = ["done", "rejected", "replanned"]
    counts = [watch.observe(d) for d in cycle * 3]
    assert counts == [0, 0, 0, 1, 2, 3, 4, 5, 6]
    again = ProgressWatch(watch.digest, count=watch.count, seen=watch.seen)
    assert again.observe("done") == 7 and again.observe("new") == 0  # across a resume


def test_digest_sees_content_not_rewrites(tmp_path: Path) -> None:
    (tmp_path / "src.py").write_text("x = 1\n")
    facts = FileFacts()
    first = progress_digest(tmp_path, facts=facts)
    os.utime(tmp_path / "src.py", ns=(1, 1))  # rewritten the same: not progress
    (tmp_path / "src.py").write_text("x = 1\n")
    assert progress_digest(tmp_path, facts=facts) == first
    (tmp_path / "src.py").write_text("x = 2\n")
    assert progress_digest(tmp_path, facts=facts) != first


def test_transient_classification() -> None:
    policy = RetryPolicy(exit_codes=(75, 143), output_patterns=(r"^No messages returned$",
                                                                r"rate.?limit"))
    assert is_transient(75, "", policy)
    assert is_transient(1, "x\nNo messages returned\n", policy)
    assert is_transient(None, "Rate-limit hit", policy) is False  # patterns are case-sensitive
    assert is_transient(None, "rate limit hit", policy)
    assert not is_transient(2, "boom", policy)
    assert not is_transient(0, "rate limit", policy)


def test_backoff_is_capped_exponential_with_full_jitter() -> None:
    policy = RetryPolicy(attempts=6, base_delay=0.5, max_delay=3)
    assert [backoff_ceiling(n, policy) for n in range(1, 6)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    rng = random.Random(7)
    delays = backoff_schedule(policy, rng)
    assert len(delays) == 5
    assert all(0 <= d <= backoff_ceiling(n, policy) for n, d in enumerate(delays, 1))
    assert delays == backoff_schedule(policy, random.Random(7))  # deterministic per seed

    class Top:
        def uniform(self, a: float, b: float) -> float:
            return b

    assert backoff_delay(30, policy, Top()) == 3.0
    assert backoff_ceiling(10_000, policy) == 3.0
    with pytest.raises(ValueError):
        backoff_ceiling(0, policy)


def test_docstring_examples() -> None:
    result = doctest.testmod(limits_module)
    assert result.attempted > 0 and result.failed == 0


def test_session_limits_track_and_survive_a_resume() -> None:
    clock = ManualClock()
    config = RalphConfig(max_cost=1.0, no_progress_limit=2)
    limits = SessionLimits(config, clock.now(), digest="d0")
    assert limits.invocation_done("d0", 0.25) == 1
    limits.iteration_done()
    saved = limits.to_json()
    resumed = SessionLimits.from_json(config, saved)
    assert resumed.snapshot() == limits.snapshot() == ProgressSnapshot(1, clock.now(), 0.25, 1)
    assert resumed.check(clock.now()) is None
    resumed.invocation_done("d0", 0.8)
    reason = resumed.check(clock.now())
    assert reason is not None and reason.kind == "max_cost"


@settings(max_examples=200, deadline=None)
@given(retry=st.integers(1, 200), base=st.floats(0, 100), extra=st.floats(0, 1000),
       draw=st.floats(0, 1))
def test_backoff_stays_within_its_ceiling(retry: int, base: float, extra: float,
                                          draw: float) -> None:
    policy = RetryPolicy(base_delay=base, max_delay=base + extra)

    class Fixed:
        def uniform(self, a: float, b: float) -> float:
            return a + (b - a) * draw

    delay = backoff_delay(retry, policy, Fixed())
    assert 0 <= delay <= backoff_ceiling(retry, policy) <= policy.max_delay
