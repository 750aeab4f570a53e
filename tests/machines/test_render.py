"""Mermaid and DOT renderers: structure, escaping, determinism, and the real `dot` binary."""

from __future__ import annotations

import functools
import hashlib
import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from interlock.machines import MachineIR, build_ir, loads
from interlock.machines.render import render_dot, render_mermaid
from interlock.machines.render.dot import dot_ids
from interlock.machines.render.mermaid import MERMAID_RESERVED, mermaid_ids, mermaid_text
from interlock.runtime.diagrams.graphviz import run_dot

from support.paths import ROOT, builtin_spec_paths, require_dot
from support.render_cases import all_irs, case

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
SVG_NS = "{http://www.w3.org/2000/svg}"


def lines(text: str) -> list[str]:
    return text.splitlines()


def stripped(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines()]


def block(text: str, opener: str) -> list[str]:
    """The stripped lines inside the `{ ... }` block that starts with ``opener``."""
    out = lines(text)
    start = next(i for i, line in enumerate(out) if line.strip().startswith(opener))
    indent = len(out[start]) - len(out[start].lstrip())
    body = []
    for line in out[start + 1:]:
        if line.strip() == "}" and len(line) - len(line.lstrip()) == indent:
            return body
        body.append(line.strip())
    raise AssertionError(f"block {opener!r} is not closed")


def top_level(text: str) -> list[str]:
    """Lines at indentation 2 (outside every block)."""
    return [line.strip() for line in lines(text) if re.match(r"^  \S", line)]


# -- Mermaid ------------------------------------------------------------------------------


class TestMermaidFlat:
    ir = case("flat")
    out = render_mermaid(ir)

    def test_header_and_initial(self) -> None:
        assert lines(self.out)[0] == "stateDiagram-v2"
        assert lines(self.out)[1] == "  [*] --> closed"
        assert self.out.endswith("\n")

    def test_guard_negation_and_actions(self) -> None:
        assert "closed --> opened : open [!locked] / log_open, count" in stripped(self.out)
        assert "closed --> locked : lock [has_key]" in stripped(self.out)

    def test_after_labels(self) -> None:
        assert "opened --> closed : after close_after" in stripped(self.out)
        # A bare number of seconds reads as a duration.
        assert "opened --> alarm : after 1m30s [!attended]" in stripped(self.out)

    def test_always_labels(self) -> None:
        assert "alarm --> closed : [silenced] / reset" in stripped(self.out)
        assert "alarm --> broken : always" in stripped(self.out)

    def test_internal_transitions_and_actions_listed_in_the_state(self) -> None:
        out = stripped(self.out)
        assert 'state "opened" as opened' in out
        assert out.index('state "opened" as opened') < out.index("opened : entry / start_timer")
        for line in ("opened : entry / start_timer", "opened : exit / stop_timer",
                     "opened : draft / note_draft", "opened : tick"):
            assert line in out
        # Internal means no edge: nothing leaves `opened` on draft or tick.
        assert not [x for x in out if x.startswith("opened --> opened")]

    def test_final(self) -> None:
        assert stripped(self.out)[-1] == "broken --> [*]"

    def test_no_styles_without_active_or_history(self) -> None:
        assert "classDef" not in self.out

    def test_descriptions_are_opt_in(self) -> None:
        ir = build_ir(loads("machine: m\ninitial: a\nstates:\n"
                            "  a: {description: 'Waits: for the go; then leaves.', on: {go: b}}\n"
                            "  b: {}\n"))
        assert "Waits" not in render_mermaid(ir)
        with_desc = stripped(render_mermaid(ir, descriptions=True))
        assert 'state "a" as a' in with_desc
        assert "a : Waits#58; for the go#59; then leaves." in with_desc


class TestMermaidCompound:
    out = render_mermaid(case("compound"))

    def test_block_with_initial_and_final_inside(self) -> None:
        assert 'state "running<br/>entry / start" as running {' in stripped(self.out)
        inner = block(self.out, 'state "running')
        assert inner[0] == "[*] --> fetching"
        assert "fetching --> parsing : fetched" in inner
        assert "done --> [*]" in inner

    def test_cross_boundary_edges_are_top_level(self) -> None:
        # Mermaid moves a state into whichever block mentions it; edges that cross a
        # boundary must be written outside every block.
        top = top_level(self.out)
        assert "fetching --> error : failed" in top
        assert "running --> cancelled : cancel" in top
        assert "error --> running : retry" in top
        assert "fetching --> error : failed" not in block(self.out, 'state "running')


class TestMermaidParallel:
    out = render_mermaid(case("parallel"))

    def test_regions_separated(self) -> None:
        inner = block(self.out, "state playing {")
        assert inner.count("--") == 1
        sep = inner.index("--")
        assert inner[0] == "state audio {" and inner[sep + 1] == "state video {"
        assert "[*] --> muted" in inner and "[*] --> sd" in inner
        # A parallel state has no initial arrow of its own.
        assert not [x for x in inner[:1] if x.startswith("[*]")]

    def test_edges(self) -> None:
        assert "muted --> loud : unmute" in block(self.out, "state audio {")
        assert "hd --> stopped : overheat" in top_level(self.out)
        assert "playing --> stopped : stop" in top_level(self.out)


class TestMermaidHistory:
    out = render_mermaid(case("history"))

    def test_history_nodes_and_defaults(self) -> None:
        inner = block(self.out, "state editing {")
        assert 'state "H" as back' in inner
        assert 'state "H*" as deep_back' in inner
        assert "back --> typing" in inner and "deep_back --> typing" in inner
        assert "help --> back : close" in top_level(self.out)
        assert "class back,deep_back history" in stripped(self.out)


class TestMermaidActive:
    def test_highlight(self) -> None:
        out = stripped(render_mermaid(case("compound"), frozenset({"parsing", "running"})))
        assert out[-2].startswith("classDef active fill:")
        # Document order, not set order.
        assert out[-1] == "class running,parsing active"

    def test_aliased_state_highlighted_by_alias(self) -> None:
        out = stripped(render_mermaid(case("awkward"), frozenset({"end", "état"})))
        ids = mermaid_ids(case("awkward"))
        assert out[-1] == f"class {ids['end']},{ids['état']} active"

    def test_unknown_active_state(self) -> None:
        with pytest.raises(ValueError, match="nope"):
            render_mermaid(case("flat"), frozenset({"nope"}))


class TestMermaidAwkward:
    ir = case("awkward")
    out = render_mermaid(ir)
    ids = mermaid_ids(ir)

    def test_keywords_and_odd_ids_are_aliased(self) -> None:
        for sid in ("end", "state", "note", "default", "my-state", "a.b", "1st", "état"):
            alias = self.ids[sid]
            assert alias != sid
            assert re.fullmatch(r"s_[A-Za-z0-9_]+", alias)
            assert f'state "{mermaid_text(sid)}" as {alias}' in self.out

    def test_aliases_are_unique_and_avoid_existing_ids(self) -> None:
        assert len(set(self.ids.values())) == len(self.ids)
        assert self.ids["s_end"] == "s_end"  # a real state keeps its id...
        assert self.ids["end"] not in ("s_end", "end")  # ...and the alias steps aside

    def test_pseudo_state_names_are_avoided(self) -> None:
        # Mermaid calls the top-level [*] "root_start"; a state of that name is renamed.
        assert self.ids["root_start"] != "root_start"
        assert self.ids["note_start"] == "note_start"  # `note` is drawn as s_note

    def test_every_id_mermaid_sees_is_plain(self) -> None:
        for alias in self.ids.values():
            assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", alias)
            assert alias.lower() not in MERMAID_RESERVED

    def test_labels_carry_no_raw_syntax(self) -> None:
        for line in stripped(self.out):
            if " : " in line:
                label = line.split(" : ", 1)[1]
                assert ":" not in label and '"' not in label
                assert not re.search(r"(?i)direction\s", label)
                # What remains of ';' and '#' belongs to entity codes.
                assert re.fullmatch(r"(?:[^#;]|#\d+;)*", label), label

    def test_escaped_label(self) -> None:
        edge = next(x for x in stripped(self.out) if x.startswith(f"{self.ids['end']} --> "))
        assert edge.endswith("[!ok-ish] / a#58;b, c#59;d, --#62; e")
        assert "#100;irection TB" in edge  # `direction TB` would be read as a statement
        assert "go#58; now#59; #91;x#93; #123;y#125; #35;1" in edge

    def test_mermaid_text(self) -> None:
        assert mermaid_text("a:b") == "a#58;b"
        assert mermaid_text("line\nbreak") == "line break"
        assert mermaid_text("snake_case _lead trail_") == "snake_case #95;lead trail#95;"
        assert mermaid_text("DIRECTION  lr") == "#68;IRECTION lr"


def test_mermaid_broken_spec_still_draws() -> None:
    out = render_mermaid(case("broken"))
    assert "a --> nowhere : go" in top_level(out)
    # No initial anywhere (the spec has none, and b's initial names no child).
    assert "[*] -->" not in out


# -- DOT ----------------------------------------------------------------------------------


def dot_stmts(text: str) -> list[str]:
    return stripped(text)


def edge_line(text: str, tail: str, head: str) -> str:
    prefix = f'"{tail}" -> "{head}"'
    found = [x for x in dot_stmts(text) if x.startswith(prefix)]
    assert found, f"no edge {prefix} in:\n{text}"
    return found[0]


class TestDot:
    def test_header(self) -> None:
        out = render_dot(case("flat"))
        assert lines(out)[0] == 'digraph "door" {'
        assert "compound=true" in lines(out)[1]
        assert out.endswith("}\n")

    def test_initial_point_and_final(self) -> None:
        out = render_dot(case("flat"))
        assert '"::initial" [shape=point, width=0.15];' in dot_stmts(out)
        assert edge_line(out, "::initial", "closed") == '"::initial" -> "closed";'
        broken = next(x for x in dot_stmts(out) if x.startswith('"broken" ['))
        assert 'peripheries="2"' in broken

    def test_labels(self) -> None:
        out = render_dot(case("flat"))
        assert "label=<open [!locked]<BR/>/ log_open, count>" in edge_line(out, "closed", "opened")
        assert "label=<after close_after>" in edge_line(out, "opened", "closed")
        assert "label=<[silenced] / reset>" in edge_line(out, "alarm", "closed")
        assert "label=<always>" in edge_line(out, "alarm", "broken")
        opened = next(x for x in dot_stmts(out) if x.startswith('"opened" ['))
        assert "entry / start_timer<BR/>exit / stop_timer<BR/>draft / note_draft<BR/>tick" in opened
        assert not [x for x in dot_stmts(out) if x.startswith('"opened" -> "opened"')]

    def test_long_label_breaks_before_actions(self) -> None:
        ir = build_ir(loads("machine: m\ninitial: a\nstates:\n  a:\n    on:\n"
                            "      a_rather_long_event: {target: b, guard: g, actions: [x, y]}\n"
                            "  b: {}\n"))
        assert "label=<a_rather_long_event [g]<BR/>/ x, y>" in edge_line(render_dot(ir), "a", "b")

    def test_compound_cluster_anchor_and_edges(self) -> None:
        out = render_dot(case("compound"))
        stmts = dot_stmts(out)
        assert 'subgraph "cluster_running" {' in stmts
        assert '"::anchor:running" [shape=point, style=invis, width=0.01, height=0.01];' in stmts
        assert '"::initial:running" [shape=point, width=0.15];' in stmts
        assert edge_line(out, "::initial:running", "fetching")
        into = edge_line(out, "error", "::anchor:running")
        assert 'lhead="cluster_running"' in into and "ltail" not in into
        out_of = edge_line(out, "::anchor:running", "cancelled")
        assert 'ltail="cluster_running"' in out_of and "lhead" not in out_of
        # Edges are all at the top level, after every node: an edge inside a subgraph
        # would pull its nodes into that cluster.
        first_edge = next(i for i, x in enumerate(stmts) if " -> " in x)
        assert all(" -> " in x for x in stmts[first_edge:-1])

    def test_no_clipping_against_own_cluster(self) -> None:
        ir = build_ir(loads("machine: m\ninitial: p\nstates:\n  p:\n    initial: c\n"
                            "    on: {reset: c}\n    states:\n      c: {on: {up: p}}\n"))
        down = edge_line(render_dot(ir), "::anchor:p", "c")
        assert "ltail" not in down and "lhead" not in down
        up = edge_line(render_dot(ir), "c", "::anchor:p")
        assert "lhead" not in up

    def test_parallel(self) -> None:
        out = render_dot(case("parallel"))
        body = block(out, 'subgraph "cluster_playing"')
        assert 'style="dashed,rounded";' in body
        assert 'subgraph "cluster_audio" {' in body and 'subgraph "cluster_video" {' in body
        assert '"::initial:playing" [shape=point, width=0.15];' not in body
        assert "lhead" not in edge_line(out, "hd", "stopped")

    def test_history(self) -> None:
        out = render_dot(case("history"))
        back = next(x for x in dot_stmts(out) if x.startswith('"back" ['))
        deep = next(x for x in dot_stmts(out) if x.startswith('"deep_back" ['))
        assert 'shape="circle", label=<H>' in back and 'label=<H*>' in deep
        assert 'style="dashed"' in edge_line(out, "back", "typing")

    def test_active(self) -> None:
        out = render_dot(case("compound"), frozenset({"running", "parsing"}))
        parsing = next(x for x in dot_stmts(out) if x.startswith('"parsing" ['))
        assert 'style="rounded,filled"' in parsing and 'fillcolor="#ffe082"' in parsing
        body = block(out, 'subgraph "cluster_running"')
        assert 'style="rounded,filled";' in body
        fetching = next(x for x in dot_stmts(out) if x.startswith('"fetching" ['))
        assert "filled" not in fetching
        with pytest.raises(ValueError, match="ghost"):
            render_dot(case("compound"), frozenset({"ghost"}))

    def test_awkward_ids_and_labels(self) -> None:
        ir = case("awkward")
        ids = dot_ids(ir)
        assert ids["end"] == "end" and ids["a.b"] == "a.b" and ids["my-state"] == "my-state"
        assert ids["état"].startswith("::state:")
        out = render_dot(ir)
        label = edge_line(out, "end", "state")
        assert "&quot;q&quot;" in label and "&lt;b&gt; &amp;" in label
        assert "--&gt; e" in label
        etat = next(x for x in dot_stmts(out) if x.startswith(f'"{ids["état"]}" ['))
        assert "<B>état</B>" in etat
        # A description ending in a backslash gets a space: DOT cannot end a string in one.
        assert 'tooltip="A description with \\"quotes\\", <tags> & a backslash \\\\ "' in etat

    def test_unknown_target_drawn_in_red(self) -> None:
        out = render_dot(case("broken"))
        nowhere = next(x for x in dot_stmts(out) if x.startswith('"nowhere" ['))
        assert 'color="#c62828"' in nowhere
        assert "::initial" not in out


# -- Determinism --------------------------------------------------------------------------

_RENDER_ALL = """
import hashlib, json, sys
sys.path[:0] = [sys.argv[1]]
from support.render_cases import all_irs
from interlock.machines.render import render_dot, render_mermaid
out = {}
for name, ir in all_irs():
    active = frozenset(list(ir.states)[:3])
    text = render_mermaid(ir, active) + render_dot(ir, active)
    out[name] = hashlib.sha256(text.encode()).hexdigest()
print(json.dumps(out))
"""


@functools.cache
def _digests() -> dict[str, str]:
    out = {}
    for name, ir in all_irs():
        active = frozenset(list(ir.states)[:3])
        text = render_mermaid(ir, active) + render_dot(ir, active)
        out[name] = hashlib.sha256(text.encode()).hexdigest()
    return out


def test_render_twice_identical() -> None:
    for _, ir in all_irs():
        assert render_mermaid(ir) == render_mermaid(ir)
        assert render_dot(ir) == render_dot(ir)


@pytest.mark.parametrize("seed", ["0", "4242"])
def test_identical_across_interpreters(seed: str) -> None:
    """Output never depends on set or hash order: fresh interpreters, other hash seeds
    than this one's (random unless PYTHONHASHSEED is set)."""
    env = {"PYTHONHASHSEED": seed, "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-c", _RENDER_ALL, str(ROOT / "tests")],
                          capture_output=True, text=True, env=env, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == _digests()


# -- Through the real Graphviz ------------------------------------------------------------

ALL = all_irs()


@pytest.mark.parametrize(("name", "ir"), ALL, ids=[n for n, _ in ALL])
def test_dot_renders_with_graphviz(name: str, ir: MachineIR) -> None:
    require_dot()
    active = frozenset(list(ir.states)[-2:])
    source = render_dot(ir, active)
    svg = run_dot(source, "svg")
    assert svg.stderr == "", f"dot warned about {name}:\n{svg.stderr}"
    root = ET.fromstring(svg.output)
    assert root.tag == f"{SVG_NS}svg"
    titles = {t.text for t in root.iter(f"{SVG_NS}title")}
    ids = dot_ids(ir)
    for state in ir.states.values():
        if state.children:
            assert f"cluster_{ids[state.id]}" in titles, state.id
        else:
            assert ids[state.id] in titles, state.id
    png = run_dot(source, "png")
    assert png.stderr == ""
    assert png.output.startswith(PNG_SIGNATURE)


def test_every_builtin_spec_is_covered() -> None:
    paths = builtin_spec_paths()
    assert paths, "specs/ holds no spec"
    names = {n for n, _ in ALL}
    assert {p.name for p in paths} <= names



def test_renderers_are_pure() -> None:
    """machines/render imports nothing from the runtime and nothing that does I/O."""
    import ast

    banned = {"interlock.runtime", "subprocess", "os", "shutil", "pathlib", "socket", "io"}
    for path in sorted((ROOT / "machines" / "render").glob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                assert not any(name == b or name.startswith(b + ".") for b in banned), (
                    f"{path.name} imports {name}")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                assert node.func.id not in ("open", "print", "input"), path.name


class TestInvoke:
    """A state's invoke is listed under its name, between entry and exit, like UML's do/."""

    def test_mermaid_lists_the_invoke_in_the_state(self) -> None:
        out = stripped(render_mermaid(case("invoke")))
        entry = out.index("working : entry / log_start")
        assert out.index("working : invoke work / agent executor") == entry + 1
        assert out.index("working : exit / log_stop") == entry + 2
        assert "scanning : invoke / command /usr/bin/env" in out
        assert "linting : invoke lint / command ruff" in out

    def test_mermaid_puts_a_containers_invoke_in_its_title(self) -> None:
        out = stripped(render_mermaid(case("invoke")))
        assert 'state "reviewing<br/>invoke / agent lead#58;reviewer" as reviewing {' in out

    def test_dot_lists_the_invoke_in_the_label(self) -> None:
        out = render_dot(case("invoke"))
        working = next(x for x in dot_stmts(out) if x.startswith('"working" ['))
        assert "entry / log_start<BR/>invoke work / agent executor<BR/>exit / log_stop" in working
        assert "invoke / agent lead:reviewer" in out
        assert "invoke / command /usr/bin/env" in out

    def test_the_prompt_is_not_drawn(self) -> None:
        assert "Task" not in render_mermaid(case("invoke"))
        assert "Task" not in render_dot(case("invoke"))


class TestFanout:
    """A fan-out (``each:``) is drawn as its invoke plus a line of its own: ``∥ each:``
    what it runs over, then a times sign and how many run at most at once."""

    def test_mermaid_draws_the_fanout_under_its_invoke(self) -> None:
        out = stripped(render_mermaid(case("fanout")))
        assert ('state "executing<br/>invoke executors / machine ralph_subagent<br/>'
                "∥ each: context.batch \u00d7context.parallel<br/>error.invoke.executors / note\""
                " as executing {") in out
        invoke = out.index("checking : invoke check / command make")
        assert out.index("checking : ∥ each: #91;3 items#93;") == invoke + 1

    def test_dot_draws_the_fanout_under_its_invoke(self) -> None:
        out = render_dot(case("fanout"))
        assert "invoke executors / machine ralph_subagent<BR/>∥ each: context.batch " \
               "\u00d7context.parallel" in out
        checking = next(x for x in dot_stmts(out) if x.startswith('"checking" ['))
        assert "invoke check / command make<BR/>∥ each: [3 items]</FONT>" in checking

    def test_an_invoke_without_each_has_no_fanout_line(self) -> None:
        assert "∥" not in render_mermaid(case("invoke")) + render_dot(case("invoke"))
