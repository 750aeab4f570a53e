"""The terminal UI in a real pty (pexpect), its screen read with pyte: the seed's path driven
by keystrokes, Back at each level, Esc aborts. The run is recorded as an asciinema v2 cast
(``INTERLOCK_CAST=PATH`` keeps it, with the screen as text beside it)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pexpect

from interlock import runtime

from support.interview import gone, use_fake_poller
from support.invoke_helpers import wait_for
from support.pty_screen import BACKSPACE, COLUMNS, DOWN, ESC, ROWS, Recorder, keys, screen_of


def spawn(folder: Path) -> tuple[pexpect.spawn, Recorder]:
    (folder / "out.md").write_text("# Sprite sheet\nA design for 36 hex renders.\n")
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": str(COLUMNS),
           "LINES": str(ROWS)}
    child = pexpect.spawn(sys.executable, ["-m", "interlock.runtime.cli", "review", "out.md",
                                           "--node", "node_14"], cwd=str(folder), env=env,
                          dimensions=(ROWS, COLUMNS), encoding="utf-8", timeout=60)
    recorder = Recorder()
    child.logfile_read = recorder
    return child, recorder


def test_the_seed_path_by_keystrokes_with_back_at_each_level(tmp_path: Path) -> None:
    child, recorder = spawn(tmp_path)
    keys(child, recorder, [
        (r"^\? What should happen", DOWN),      # arrow keys: accept -> retry
        (r"^> 2\. Retry", "\r"),
        (r"^\? What's wrong", "B"),
        (r"^\? What's missing", "<"),           # Back to the category question
        (r"^> B\. Facts are wrong", "A"),       # ... with its answer kept
        (r"^\? What's missing", "A"),
        (r"^\? Is this what you meant", "B"),   # echo Back: B (no option is B there)
        (r"^> A\. Performance", "A"),           # the narrow question, its answer kept
        (r"^\? Is this what you meant", "X"),   # Close
        (r"^\? Close but not exactly", BACKSPACE),  # Close menu Back: Backspace
        (r"^\? Is this what you meant", "X"),
        (r"^\? Close but not exactly", "D"),    # combination
        (r"^\? Select all that apply", "<"),    # multi-select Back
        (r"^> D\. Combination", "D"),
        (r"^\? Select all that apply", "B"),    # toggle B
        (r"\[x\] B\. Wrong metric", "C"),       # toggle C
        (r"\[x\] C\. Too specific", "X"),       # confirm
        (r"^\? Is this what you meant", "A"),   # the refined echo: Correct
    ])
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    screen = screen_of(recorder)
    text = "\n".join(screen)
    assert "output of node_14" in text
    assert "What's missing? Back" in text and "Is this what you meant? Back" in text
    assert "Close but not exactly... What's off? Back" in text and "Refined fix" in text
    assert "Select all that apply: B, C" in text and "Is this what you meant? A" in text
    assert "POLLER: You said: output too shallow." in text
    assert "resolved (poller poller-14-001); staged: interlock staged node_14" in text
    staged = runtime.sync.staged("node_14", root=tmp_path)
    assert staged is not None and staged["corrections"][1:] == [
        "Focus on 36-hex render time specifically",
        "Give higher-level guidance, not exact numbers"]
    keep = os.environ.get("INTERLOCK_CAST")
    if keep:
        Path(keep).write_text(recorder.cast())
        Path(keep).with_suffix(".txt").write_text(text + "\n")


def test_esc_aborts_and_stages_nothing(tmp_path: Path) -> None:
    child, recorder = spawn(tmp_path)
    keys(child, recorder, [(r"^\? What should happen", "2"), (r"^\? What's wrong", "A"),
                           (r"^\? What's missing", ESC)])
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 3
    assert runtime.sync.staged("node_14", root=tmp_path) is None


def test_ctrl_c_while_the_agent_works_stops_it(tmp_path: Path) -> None:
    use_fake_poller(tmp_path, "--hold", "narrow")
    child, recorder = spawn(tmp_path)
    keys(child, recorder, [(r"^\? What should happen", "2"), (r"^\? What's wrong", "A")])
    wait_for(lambda: (tmp_path / "held").exists())  # the agent drafts the next question
    agent = int((tmp_path / "held").read_text())
    child.sendcontrol("c")  # the terminal signals the command, not the agent (own session)
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 130
    assert gone(agent)
    text = "\n".join(screen_of(recorder))
    assert "interrupted; continue with: interlock review --resume poller-14-001" in text
    assert "Traceback" not in text


def test_accept_from_the_menu(tmp_path: Path) -> None:
    child, recorder = spawn(tmp_path)
    keys(child, recorder, [(r"^\? What should happen", "\r")])
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert any("accepted" in line for line in screen_of(recorder))


