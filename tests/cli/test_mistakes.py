"""A corpus of user mistakes through the installed CLI (issue 9, "Mistakes get a clear answer").

Each mistake runs ``python -m interlock.runtime.cli ...`` as a real process in a scratch
folder and must: exit non-zero with the right code (2: usage, 1: error), print exactly one
line on stderr that says what is wrong (naming FILE:LINE:COL, the option or the field),
never a ``Traceback``, and lose or create nothing where that matters (no session made by
a refused start, a live session unchanged by a rejected event, no folder for a refused
signal).

Cases the command line does not handle yet are kept, marked ``xfail(strict=True)`` with
the expected answer as the reason, so they flip to failures (to un-mark) once it does.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from interlock import runtime

from support.cli import Cli, wait_for_status
from support.paths import ROOT

CRASHY = ROOT / "tests" / "support" / "crash" / "crashy.yaml"
CRASHY_BINDINGS = ROOT / "tests" / "support" / "crash" / "crashy_bindings.py"
ROOT_USER = os.geteuid() == 0  # root reads and writes through any permission bits

FILES = {
    # A typed context; it finishes at once, so a wrongly accepted --context does not hang.
    "typed.yaml": "machine: typed\ninitial: a\ncontext:\n  retries: {type: int, default: 0}\n"
                  "  timeout: {type: duration, default: 3m}\nstates:\n  a: {always: b}\n"
                  "  b: {type: final}\n",
    "door.yaml": "machine: door\ninitial: closed\nstates:\n  closed: {on: {open: opened}}\n"
                 "  opened: {on: {close: closed}}\n",
    "quick.yaml": "machine: quick\ninitial: a\nstates:\n  a: {always: b}\n  b: {type: final}\n",
    "broken.yaml": "machine: bad\ninitial: a\nstates:\n  a: {on: {go: nowhere}}\n",
    "interlock.yaml": "dispatch:\n  dispatchTimeout: 30\n",
    "boom.py": "raise RuntimeError('no database')\n",
    "nob.py": "X = 1\n",
    "syn.py": "BINDINGS = {'a': }\n",
    "adir/notes.txt": "not a spec\n",
}


# -- scenes: what the folder holds before the mistake ------------------------------------


def _files(root: Path) -> None:
    for name, text in FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def _cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "interlock.runtime.cli", *args], cwd=root,
                          capture_output=True, text=True, timeout=60)


def _finished(root: Path) -> None:
    """The files, and session f1 run to its final state."""
    _files(root)
    done = _cli(root, "run", "quick.yaml", "--session", "f1", "--no-signals")
    assert done.returncode == 0, done.stderr


def _stopped(root: Path) -> None:
    """The files, and session st1 of door.yaml created and left stopped."""
    _files(root)
    asyncio.run(runtime.create(root / "door.yaml", session_id="st1", root=root))


def _locked(root: Path) -> None:
    """The files, a spec nobody may read and a folder nobody may write."""
    _files(root)
    (root / "locked.yaml").write_text(FILES["door.yaml"])
    (root / "locked.yaml").chmod(0)
    (root / "ro").mkdir()
    (root / "ro").chmod(0o500)


SCENES: dict[str, Callable[[Path], None]] = {
    "empty": lambda root: None,
    "files": _files,
    "finished": _finished,
    "stopped": _stopped,
    "locked": _locked,
}


@dataclass(frozen=True)
class Mistake:
    """One mistake: in ``scene``, ``args`` exits ``code`` with one stderr line matching
    ``says`` (a regex, matched in full). ``stdout``: the one stdout line, when the command
    prints its findings there (validate). ``keeps``: nothing is created or removed in the
    folder. ``todo``: not handled yet (strict xfail; the reason says what is expected)."""

    name: str
    scene: str
    args: tuple[str, ...]
    code: int
    says: str
    stdout: str | None = None
    keeps: bool = False
    todo: str | None = None
    marks: tuple[Any, ...] = field(default=())


MISTAKES: list[Mistake] = [
    # -- session ids ---------------------------------------------------------------------
    Mistake("status of an unknown session", "finished", ("status", "nope"), 1,
            r"error: no session 'nope'.*"),
    Mistake("log of an unknown session", "finished", ("log", "nope"), 1,
            r"error: no session 'nope'.*"),
    Mistake("log with no store at all", "empty", ("log", "nope"), 1,
            r"error: no session 'nope': no session store at .*", keeps=True),
    Mistake("resume of an unknown session", "finished", ("resume", "nope"), 1,
            r"error: no session 'nope'.*"),
    Mistake("send to an unknown session", "finished", ("send", "nope", "go"), 1,
            r"error: no session 'nope'.*"),
    Mistake("an unsafe session id to send", "finished", ("send", "../x", "go"), 2,
            r"error: session id '\.\./x' is not a valid name: .*"),
    Mistake("an unsafe session id to run", "files", ("run", "door.yaml", "--session", "a/b"), 2,
            r"error: session id 'a/b' is not a valid name: .*", keeps=True),
    Mistake("diagram of an unknown session", "finished", ("diagram", "--session", "nope"), 1,
            r"error: no session 'nope'.*"),
    # -- JSON ----------------------------------------------------------------------------
    Mistake("--context that is not JSON", "files", ("run", "typed.yaml", "--context", "{oops"),
            2, r"error: --context is not JSON: .* at column 2", keeps=True),
    Mistake("--context that is not an object", "files", ("run", "typed.yaml", "--context",
                                                          "[1]"),
            2, r"error: --context must be a JSON object.*", keeps=True),
    Mistake("--data that is not JSON", "stopped", ("send", "st1", "open", "--data", "{oops"),
            2, r"error: --data is not JSON: .*", keeps=True),
    Mistake("--data that is not an object", "stopped", ("send", "st1", "open", "--data", "5"),
            2, r"error: --data must be a JSON object.*", keeps=True),
    # -- context types -------------------------------------------------------------------
    Mistake("true is not an int", "files",
            ("run", "typed.yaml", "--context", '{"retries": true}', "--no-signals"), 2,
            r"error: --context: context field 'retries' must be an int, got a bool: true .*",
            keeps=True),
    Mistake("an unknown context key", "files",
            ("run", "typed.yaml", "--context", '{"retry": 1}', "--no-signals"), 2,
            r"error: --context: unknown context field 'retry' \(did you mean 'retries'\?.*",
            keeps=True),
    Mistake("a duration that is not one", "files",
            ("run", "typed.yaml", "--context", '{"timeout": "soon"}', "--no-signals"), 2,
            r"error: --context: context field 'timeout' must be a duration, got text: \"soon\".*",
            keeps=True),
    # -- spec files ----------------------------------------------------------------------
    Mistake("run a missing spec", "files", ("run", "missing.yaml"), 2,
            r"error: no spec file missing\.yaml \(nor a built-in spec of that name.*",
            keeps=True),
    Mistake("run a mistyped built-in spec", "files", ("run", "polling_stat"), 2,
            r"error: no spec file polling_stat .*did you mean 'polling_state'\?\)", keeps=True),
    Mistake("run a YAML file that is not a spec", "files", ("run", "interlock.yaml"), 1,
            r"interlock\.yaml:1:1: error S107: not a spec: no `machine:` key .*", keeps=True),
    Mistake("run a spec with errors", "files", ("run", "broken.yaml"), 1,
            r"broken\.yaml:4:16: error M201: target 'nowhere' .*", keeps=True),
    Mistake("run a folder as a spec", "files", ("run", "adir"), 2,
            r"error: cannot read spec adir: .*[Ii]s a directory.*", keeps=True),
    Mistake("run an unreadable spec", "locked", ("run", "locked.yaml"), 2,
            r"error: cannot read spec locked\.yaml: .*Permission denied.*", keeps=True,
            marks=(pytest.mark.skipif(ROOT_USER, reason="root reads any file"),)),
    Mistake("draw a spec with errors", "files", ("diagram", "broken.yaml"), 1,
            r"broken\.yaml:4:16: error M201: target 'nowhere' .*", keeps=True),
    Mistake("draw a mistyped built-in spec", "files", ("diagram", "polling_stat"), 2,
            r"error: no spec file polling_stat \(nor a built-in spec of that name; did you "
            r"mean 'polling_state'\?\)", keeps=True),
    Mistake("validate a YAML file that is not a spec", "files", ("validate", "interlock.yaml"),
            1, r"checked 1 spec: 1 error\(s\), 0 warning\(s\)",
            stdout=r"interlock\.yaml:1:1: error S107: not a spec: no `machine:` key .*",
            keeps=True),
    Mistake("validate a missing path", "files", ("validate", "nope.yaml"), 2,
            r"error: no such file or directory: nope\.yaml", keeps=True),
    Mistake("validate a folder without specs", "files", ("validate", "adir"), 2,
            r"error: no spec files \(\*\.yaml, \*\.yml\) found in: adir", keeps=True),
    # -- options -------------------------------------------------------------------------
    Mistake("a diagram format that does not exist", "files",
            ("diagram", "door.yaml", "-f", "jpg"), 2,
            r"error: interlock diagram: invalid value for '-f' / '--format': 'jpg' is not one "
            r"of 'mermaid', 'dot', 'svg', 'png' \(see: interlock diagram -h\)", keeps=True),
    Mistake("a diagram written where it cannot be", "files",
            ("diagram", "door.yaml", "-o", "door.yaml/x.mmd"), 1,
            r"error: -o door\.yaml/x\.mmd: cannot write: .*", keeps=True),
    Mistake("a schema written where it cannot be", "files",
            ("schema", "-o", "adir/notes.txt/x.json"), 1,
            r"error: -o adir/notes\.txt/x\.json: cannot write: .*", keeps=True),
    Mistake("a mistyped command", "files", ("sned", "f1", "go"), 2,
            r"error: interlock: no such command 'sned'\. Did you mean 'send'(, '\w+')*\? "
            r"\(see: interlock -h\)", keeps=True),
    Mistake("a mistyped option", "files", ("run", "quick.yaml", "--sesion", "x"), 2,
            r"error: interlock run: no such option: --sesion .*\(see: interlock run -h\)",
            keeps=True),
    Mistake("a missing argument", "files", ("validate",), 2,
            r"error: interlock validate: missing argument 'paths' \(see: interlock validate "
            r"-h\)", keeps=True),
    Mistake("demo into a file", "files", ("demo", "--dir", "door.yaml"), 2,
            r"error: --dir door\.yaml: not a folder", keeps=True),
    # -- events --------------------------------------------------------------------------
    Mistake("a reserved event name", "stopped", ("send", "st1", "after.closed.0"), 2,
            r"error: 'after\.closed\.0' is reserved for the engine: .*", keeps=True),
    Mistake("a mistyped event to a stopped session", "stopped", ("send", "st1", "opne"), 1,
            r"error: event 'opne' is not an event of machine 'door' \(did you mean 'open'\?\)"
            r".*", keeps=True),
    Mistake("send to a finished session", "finished", ("send", "f1", "go"), 1,
            r"error: session f1 is finished; it takes no events", keeps=True),
    Mistake("resume a finished session", "finished", ("resume", "f1"), 1,
            r"error: session 'f1' is finished.*", keeps=True),
    # -- cancel / rm ---------------------------------------------------------------------
    Mistake("cancel an unknown session", "finished", ("cancel", "nope"), 1,
            r"error: no session 'nope'.*", keeps=True),
    Mistake("rm an unknown session", "finished", ("rm", "nope"), 1,
            r"error: no session 'nope'.*", keeps=True),
    Mistake("cancel a finished session", "finished", ("cancel", "f1"), 1,
            r"error: session 'f1' is finished; there is nothing to cancel", keeps=True),
    Mistake("cancel with an unsafe id", "finished", ("cancel", "../f1"), 2,
            r"error: session id '\.\./f1' is not a valid name: .*", keeps=True),
    Mistake("sessions of a store of an unknown scheme", "files",
            ("sessions", "--store", "redis://x"), 2,
            r"error: unknown store 'redis://x' \(--store\); accepted stores: .*", keeps=True),
    # -- stores --------------------------------------------------------------------------
    Mistake("a store URL of an unknown scheme", "files", ("status", "--store", "mysql://x"), 2,
            r"error: unknown store 'mysql://x' \(--store\); accepted stores: .*", keeps=True),
    Mistake("a relative sqlite:// URL", "files", ("status", "--store", "sqlite://x.db"), 2,
            r"error: a sqlite:// URL takes an absolute path: 'sqlite://x\.db' \(--store\); .*",
            keeps=True),
    Mistake("a file in the way of the store folder", "files",
            ("run", "quick.yaml", "--store", "door.yaml/state.db"), 1,
            r"error: cannot create the folder for .*/door\.yaml/state\.db: a file is in the way",
            keeps=True),
    Mistake("an unwritable store folder", "locked",
            ("run", "quick.yaml", "--store", "ro/sub/state.db"), 1,
            r"error: cannot create the folder for .*/ro/sub/state\.db: .*Permission denied.*",
            keeps=True, marks=(pytest.mark.skipif(ROOT_USER, reason="root writes anywhere"),)),
    # -- bindings ------------------------------------------------------------------------
    Mistake("a bindings module that does not exist", "files",
            ("run", "quick.yaml", "--bindings", "no_such_mod"), 2,
            r"error: bindings module 'no_such_mod' not found \(looked in .*\)", keeps=True),
    Mistake("bindings that raise on import", "files",
            ("run", "quick.yaml", "--bindings", "boom.py"), 2,
            r"error: importing bindings boom\.py failed: RuntimeError: no database", keeps=True),
    Mistake("bindings without BINDINGS", "files", ("run", "quick.yaml", "--bindings", "nob"), 2,
            r"error: bindings nob define none of: BINDINGS, bindings .*", keeps=True),
    Mistake("bindings with a syntax error", "files",
            ("run", "quick.yaml", "--bindings", "syn.py"), 2,
            r"error: .*syn\.py:1:\d+: syntax error in the bindings: .*", keeps=True),
    # -- signals -------------------------------------------------------------------------
    Mistake("a signal type that does not exist", "finished", ("signal", "f1", "LAUNCH"), 2,
            r"error: unknown signal type 'LAUNCH'; one of STEER, INFO, PAUSE, ABORT, APPROVE, "
            r"SKIP", keeps=True),
    Mistake("a signal to an unknown session", "finished", ("signal", "nope", "INFO", "hi"), 1,
            r"error: unknown session 'nope'; known sessions: f1 \(use --create to make its "
            r"mailbox anyway\)", keeps=True),
    Mistake("a signal to a folder without a mailbox", "files", ("signal", "./adir", "INFO", "x"),
            1, r"error: \./adir is not a session folder \(no signals/ mailbox in it\); .*",
            keeps=True),
    Mistake("a STEER without a message", "finished", ("signal", "f1", "STEER"), 2,
            r"error: a STEER signal needs a message", keeps=True),
    Mistake("consume a folder that does not exist", "files", ("mailbox", "consume", "nope/"),
            2, r"error: no session folder nope", keeps=True),
    # -- dispatch ------------------------------------------------------------------------
    Mistake("dispatch with no command", "files", ("dispatch",), 2,
            r"error: interlock dispatch: missing argument .*", keeps=True),
    Mistake("dispatch with an empty command", "files", ("dispatch", "--", "true", ":::"), 2,
            r"error: an empty command .*", keeps=True),
    Mistake("dispatch with a timeout that is not one", "files",
            ("dispatch", "--timeout", "soon", "--", "true"), 2,
            r"error: --timeout soon: invalid duration for dispatchTimeout: 'soon' is not a "
            r"duration; .*", keeps=True),
    Mistake("dispatch with a zero timeout", "files", ("dispatch", "--timeout", "0", "--", "true"),
            2, r"error: --timeout 0: dispatchTimeout must be more than 0 s, got 0", keeps=True),
    Mistake("dispatch with a config file that does not exist", "files",
            ("dispatch", "--config", "nope.yaml", "--", "true"), 2,
            r"error: --config nope\.yaml: no such file", keeps=True),
    Mistake("dispatch with a prompt file that does not exist", "files",
            ("dispatch", "--prompt-file", "nope.txt", "--", "true"), 2,
            r"error: --prompt-file nope\.txt: cannot read it: No such file or directory",
            keeps=True),
    Mistake("dispatch of a program that does not exist", "files",
            ("dispatch", "--timeout", "5", "--no-store", "--", "no-such-agent-x"), 1,
            r"error by spawn in [\d.]+s \(command not found: 'no-such-agent-x'\)", keeps=True),
]


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def _check(result: subprocess.CompletedProcess[str], mistake: Mistake) -> None:
    everything = result.stdout + result.stderr
    assert "Traceback" not in everything, everything
    assert result.returncode == mistake.code, (result.returncode, everything)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got:\n{result.stderr}"
    assert re.fullmatch(mistake.says, lines[0]), lines[0]
    if mistake.stdout is not None:
        [line] = result.stdout.splitlines()
        assert re.fullmatch(mistake.stdout, line), line


def _param(mistake: Mistake) -> Any:
    marks = list(mistake.marks)
    if mistake.todo:
        marks.append(pytest.mark.xfail(strict=True, reason=mistake.todo))
    return pytest.param(mistake, id=mistake.name.replace(" ", "-"), marks=marks)


def test_the_corpus_is_big_enough() -> None:
    assert len(MISTAKES) >= 30
    assert len({m.name for m in MISTAKES}) == len(MISTAKES)


@pytest.fixture(scope="module")
def finished_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The "finished" scene, made once (an `interlock run`) and copied for each mistake."""
    root = tmp_path_factory.mktemp("finished")
    _finished(root)
    return root


def _scene(request: pytest.FixtureRequest, name: str, root: Path) -> None:
    if name == "finished":
        shutil.copytree(request.getfixturevalue("finished_folder"), root, dirs_exist_ok=True)
    else:
        SCENES[name](root)


@pytest.mark.parametrize("mistake", [_param(m) for m in MISTAKES])
def test_a_mistake_gets_one_clear_line(cli: Cli, tmp_path: Path, mistake: Mistake,
                                       request: pytest.FixtureRequest) -> None:
    _scene(request, mistake.scene, tmp_path)
    before = _tree(tmp_path)
    try:
        result = cli(*mistake.args, cwd=tmp_path, timeout=60)
    finally:
        for locked in (tmp_path / "ro", tmp_path / "locked.yaml"):
            if locked.exists():
                locked.chmod(0o700)
    _check(result, mistake)
    if mistake.keeps:
        assert _tree(tmp_path) == before


def _sessions_in(root: Path) -> list[str]:
    db = root / ".interlock" / "state.db"
    if not db.exists():
        return []
    with sqlite3.connect(db) as conn:
        return [row[0] for row in conn.execute("SELECT id FROM sessions")]


def test_a_refused_context_creates_no_session_even_with_a_store(
        cli: Cli, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    _scene(request, "finished", tmp_path)
    result = cli("run", "typed.yaml", "--session", "c1", "--context", '{"retries": "2"}',
                 "--no-signals", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert _sessions_in(tmp_path) == ["f1"]
    assert not (tmp_path / ".interlock" / "sessions" / "c1").exists()


# -- a live runner ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A folder where session s1 (crashy.yaml) is being run, idle, by a real runner."""
    root = tmp_path_factory.mktemp("live")
    runner = subprocess.Popen(
        [sys.executable, "-m", "interlock.runtime.cli", "run", str(CRASHY), "--session", "s1",
         "--bindings", str(CRASHY_BINDINGS)],
        cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_status(root, lambda v: v["active"] == ["idle"], runner)
        yield root
    finally:
        runner.send_signal(signal.SIGINT)
        try:
            runner.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            runner.kill()
            runner.communicate()


def _plain_cli(*args: str, cwd: Path | None = None,
               timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "interlock.runtime.cli", *args],
                          capture_output=True, text=True, cwd=cwd, timeout=timeout)


def _view(root: Path) -> dict[str, Any]:
    shown = _plain_cli("status", "s1", "--json", cwd=root)
    assert shown.returncode == 0, shown.stderr
    view = json.loads(shown.stdout)
    return {k: view[k] for k in ("status", "active", "context", "queued")}


LIVE: list[Mistake] = [
    Mistake("a mistyped event to a live runner", "live", ("send", "s1", "gooo"), 1,
            r"error: rejected gooo: no active state of \[idle\] accepts it; they accept: go"),
    Mistake("a reserved event to a live runner", "live", ("send", "s1", "done.state.x"), 2,
            r"error: 'done\.state\.x' is reserved for the engine.*"),
    Mistake("a second runner by resume", "live",
            ("resume", "s1", "--bindings", str(CRASHY_BINDINGS)), 1,
            r"error: session 's1' is being run by another runner; .*"),
    Mistake("a second runner by run", "live",
            ("run", str(CRASHY), "--session", "s1", "--bindings", str(CRASHY_BINDINGS)), 1,
            r"error: session 's1' is being run by another runner; .*"),
    Mistake("rm of a live session without --force", "live", ("rm", "s1"), 1,
            r"error: session 's1' is running(?:(?!None).)*, or remove it with --force.*"),
]


@pytest.mark.parametrize("mistake", [_param(m) for m in LIVE])
def test_a_mistake_with_a_live_runner(cli: Cli, live: Path, mistake: Mistake) -> None:
    before = _view(live)
    result = cli(*mistake.args, cwd=live, timeout=60)
    _check(result, mistake)
    assert _view(live) == before  # the live session is untouched
