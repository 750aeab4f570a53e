"""Every Mermaid diagram we produce goes through the real Mermaid parser.

tests/tools/mermaid_check.mjs loads the pinned `mermaid` package (with jsdom) under node,
runs `mermaid.parse()` and then the state diagram's own data extraction, and dumps the
nodes and edges Mermaid would lay out. The tests check that Mermaid accepts each diagram
*and* understands it as the IR says: same states, same nesting, same edges and labels.

Install the parser with `tests/tools/install_mermaid_check.sh` (CI does). Without node or
the package these tests skip locally and fail in CI.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import subprocess
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from interlock.machines import MachineIR, build_ir, loads
from interlock.machines.render import render_mermaid
from interlock.machines.render._labels import transition_label
from interlock.machines.render.mermaid import mermaid_ids

from support.paths import DIAGRAMS, IN_CI, ROOT
from support.render_cases import all_irs, write_text

CHECKER = ROOT / "tests" / "tools" / "mermaid_check.mjs"
CHECK_DIR = Path(os.environ.get("MERMAID_CHECK_DIR", ROOT / ".cache" / "mermaid-check"))
INSTALL = "tests/tools/install_mermaid_check.sh"


def _require_checker() -> str:
    node = shutil.which("node")
    problem = None
    if node is None:
        problem = "node is not installed"
    elif not (CHECK_DIR / "node_modules" / "mermaid" / "package.json").is_file():
        problem = f"mermaid is not installed in {CHECK_DIR} (run {INSTALL})"
    if problem is not None:
        if IN_CI:
            pytest.fail(f"the Mermaid parser is required in CI: {problem}")
        pytest.skip(problem)
    assert node is not None
    return node


Checker = Callable[[list[Path]], tuple[int, list[dict[str, Any]], str]]


@pytest.fixture(scope="session")
def run_checker() -> Iterator[Checker]:
    """The checker as one ``--serve`` process for this test worker (node, jsdom and mermaid
    load once: about a second of CPU, for each of this module's tests before); a call
    checks ``files`` and returns the exit status the CLI would give, the ``--dump``
    objects and what stderr would say."""
    node = _require_checker()
    env = {**os.environ, "MERMAID_CHECK_DIR": str(CHECK_DIR)}
    proc = subprocess.Popen([node, str(CHECKER), "--serve"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stdin is not None and proc.stdout is not None

    def check(files: list[Path]) -> tuple[int, list[dict[str, Any]], str]:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps([str(f) for f in files]) + "\n")
        proc.stdin.flush()
        line = proc.stdout.readline()
        if not line:
            proc.kill()
            pytest.fail(f"mermaid_check could not run:\n{proc.communicate()[1]}")
        reply = json.loads(line)
        if reply["code"] == 2:
            pytest.fail(f"mermaid_check could not run:\n{reply['stderr']}")
        return reply["code"], reply["results"], reply["stderr"]

    yield check
    proc.stdin.close()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


_ENTITY = re.compile(r"ﬂ°°(\d+)¶ß")


def decode(text: str) -> str:
    """Mermaid keeps `#58;` codes as placeholders until it draws; turn them back."""
    return _ENTITY.sub(lambda m: chr(int(m.group(1))), text)


def norm(text: str) -> str:
    return " ".join(text.split())


def expected_graph(ir: MachineIR, active: frozenset[str]) -> dict[str, Any]:
    """What Mermaid should understand from our diagram of ``ir``."""
    ids = mermaid_ids(ir)
    start = {None: "root_start"} | {s.id: f"{ids[s.id]}_start" for s in ir.states.values()}
    end = {None: "root_end"} | {s.id: f"{ids[s.id]}_end" for s in ir.states.values()}
    edges: Counter[tuple[str, str, str]] = Counter()
    initial = ir.initial if ir.initial in ir.top else None
    if initial is not None and ir.states[initial].parent is None:
        edges[(start[None], ids[initial], "")] += 1
    for s in ir.states.values():
        if (s.children and s.kind != "parallel" and s.initial in s.children
                and ir.states[s.initial].parent == s.id):
            edges[(start[s.id], ids[s.initial], "")] += 1
        if s.is_final and (s.parent is None or ir.states[s.parent].kind != "parallel"):
            edges[(ids[s.id], end[s.parent], "")] += 1
        if s.is_history and s.default is not None:
            edges[(ids[s.id], ids[s.default], "")] += 1
        for t in s.transitions:
            if t.target is not None:
                edges[(ids[s.id], ids[t.target], norm(transition_label(t)))] += 1
    parents = {ids[s.id]: (ids[s.parent] if s.parent else None) for s in ir.states.values()}
    return {"edges": edges, "parents": parents,
            "active": {ids[a] for a in active}, "labels": {ids[s]: s for s in ir.states}}


def assert_understood(ir: MachineIR, active: frozenset[str], result: dict[str, Any]) -> None:
    where = f"{ir.name} ({result['file']})"
    assert result["ok"], f"{where}: {result['error']}"
    assert result["type"] == "stateDiagram"
    nodes = {n["id"]: n for n in result["nodes"]}
    want = expected_graph(ir, active)

    def parent(node_id: str) -> str | None:
        """Nearest enclosing state, skipping the divider groups of parallel regions."""
        p = nodes[node_id]["parentId"]
        while p is not None and nodes[p]["shape"] == "divider":
            p = nodes[p]["parentId"]
        return p

    for mid, mparent in want["parents"].items():
        assert mid in nodes, f"{where}: state {mid} missing"
        assert parent(mid) == mparent, f"{where}: {mid} is inside {parent(mid)}, not {mparent}"
        first = nodes[mid]["label"]
        first = first[0] if isinstance(first, list) else first
        title = decode(first.split("<br>")[0]) if first else mid
        original = want["labels"][mid]
        assert title in (original, "H", "H*"), f"{where}: {mid} is labelled {title!r}"
        assert ("active" in nodes[mid]["classes"]) == (mid in want["active"]), mid
    # Nothing else (no state created by a stray mention), pseudo-states aside.
    extra = {i for i, n in nodes.items()
             if i not in want["parents"] and n["shape"] not in ("divider", "stateStart",
                                                              "stateEnd")}
    dangling = {e[1] for e in want["edges"]}
    assert extra <= dangling, f"{where}: unexpected states {sorted(extra - dangling)}"
    got = Counter((e["start"], e["end"], norm(decode(e["label"]))) for e in result["edges"])
    assert got == want["edges"], (f"{where}: edges differ\n missing {want['edges'] - got}"
                                  f"\n extra {got - want['edges']}")


def _check_all(run_checker: Checker, tmp_path: Path,
               irs: Sequence[tuple[str, MachineIR]]) -> None:
    files, expectations = [], []
    for n, (_, ir) in enumerate(irs):
        active = frozenset(list(ir.states)[1:3])
        files.append(write_text(tmp_path / f"d{n}.mmd", render_mermaid(ir, active)))
        expectations.append((ir, active))
    code, results, stderr = run_checker(files)
    assert len(results) == len(files), stderr
    for (ir, active), result in zip(expectations, results, strict=True):
        assert_understood(ir, active, result)
    assert code == 0, stderr


def test_cases_builtins_and_broken_corpus(run_checker: Checker, tmp_path: Path) -> None:
    _check_all(run_checker, tmp_path, all_irs())


def test_descriptions_parse(run_checker: Checker, tmp_path: Path) -> None:
    irs = all_irs()
    files = [write_text(tmp_path / f"d{n}.mmd", render_mermaid(ir, descriptions=True))
             for n, (_, ir) in enumerate(irs)]
    code, results, stderr = run_checker(files)
    assert code == 0, stderr
    assert all(r["ok"] for r in results)


# -- Random machines with hostile names ---------------------------------------------------

_ID_POOL = [
    "end", "End", "state", "note", "default", "Default", "class", "classDef", "style",
    "click", "href", "scale", "direction", "as", "root", "root_start", "root_end", "hide",
    "stateDiagram", "fork", "join", "choice", "a-b", "a.b", "1x", "x y", "ünï", "a:b",
    "[*]", "{", "}", "--", "-->", "%%", "#", ";", '"q"', "s_end", "s_end_2", "_", "__",
    "idle", "busy", "done",
]
_TEXT_POOL = [
    "go", "a:b", "x;y", "#35;", "%%{init}%%", "<br/>", "<b>bold</b>", "[*]", "-->", "--",
    "{x}", '"q"', "'s'", "`c`", "**b**", "_i_", "a|b", "direction LR", "Direction tb",
    "end note", "hide empty description", "classDef x fill:#f00", "&amp;", "\\", "é", "~x~",
    "%% c", "state X {", "::", ":::", "note right of a : x",
]


def _random_spec(rng: random.Random, n: int) -> dict[str, Any]:
    ids = rng.sample(_ID_POOL, k=rng.randint(3, 9))
    all_ids: list[str] = []

    def text() -> str:
        return rng.choice(_TEXT_POOL) + rng.choice(["", " ", "x"]) + rng.choice(_TEXT_POOL)

    def states(pool: list[str], depth: int) -> dict[str, Any]:
        out: dict[str, Any] = {}
        while pool and (not out or rng.random() < 0.6):
            sid = pool.pop()
            all_ids.append(sid)
            node: dict[str, Any] = {}
            roll = rng.random()
            if depth < 2 and len(pool) >= 2 and roll < 0.35:
                node["type"] = rng.choice(["compound", "parallel"])
                node["states"] = states(pool, depth + 1)
                if node["type"] == "parallel":
                    for region, spec in list(node["states"].items()):
                        if "states" not in spec:
                            node["states"][region] = {"states": {f"{region}_r{n}": {}}}
                            all_ids.append(f"{region}_r{n}")
            elif roll < 0.45:
                node["type"] = "final"
            elif roll < 0.5:
                node["type"] = "history"
                node["history"] = rng.choice(["shallow", "deep"])
            if rng.random() < 0.4:
                node["entry"] = [text()]
            if rng.random() < 0.3:
                node["description"] = text()
            out[sid] = node
        return out

    spec: dict[str, Any] = {"machine": f"fuzz{n}", "states": states(ids, 0)}
    spec["initial"] = next(iter(spec["states"]))

    def wire(node_map: dict[str, Any]) -> None:
        for sid, node in node_map.items():
            if "states" in node:
                node["initial"] = next(iter(node["states"]))
                wire(node["states"])
            if node.get("type") == "history":
                node["default"] = rng.choice(all_ids)
                continue
            on: dict[str, Any] = {}
            for _ in range(rng.randint(0, 3)):
                tr: dict[str, Any] = {"target": rng.choice([*all_ids, None, "ghost:1"])}
                if rng.random() < 0.5:
                    tr["guard"] = rng.choice(["", "!"]) + text()
                if rng.random() < 0.5:
                    tr["actions"] = [text() for _ in range(rng.randint(1, 2))]
                on[text()] = tr
            if on:
                node["on"] = on
            if rng.random() < 0.3:
                node["after"] = {rng.choice(["3m", "90", "1h30m", text()]): rng.choice(all_ids)}
            if rng.random() < 0.2:
                node["always"] = [{"guard": text(), "target": rng.choice(all_ids)}]
            del sid

    wire(spec["states"])
    return spec


def test_random_machines_with_hostile_names(run_checker: Checker, tmp_path: Path) -> None:
    rng = random.Random(20240611)
    irs = []
    for n in range(60):
        spec = _random_spec(rng, n)
        irs.append((f"fuzz{n}", build_ir(loads(yaml.safe_dump(spec, allow_unicode=True)))))
    _check_all(run_checker, tmp_path, irs)


# -- The checker itself, and the committed diagrams ---------------------------------------


def test_checker_rejects_invalid_diagrams(run_checker: Checker, tmp_path: Path) -> None:
    bad = write_text(tmp_path / "bad.mmd", "stateDiagram-v2\n  a --> : x\n")
    keyword = write_text(tmp_path / "kw.mmd", "stateDiagram-v2\n  [*] --> default\n")
    good = write_text(tmp_path / "good.mmd", "stateDiagram-v2\n  [*] --> a\n")
    code, results, stderr = run_checker([bad, keyword, good])
    assert code == 1
    assert [r["ok"] for r in results] == [False, False, True]
    assert "bad.mmd" in stderr and "Parse error" in stderr


def test_committed_diagrams_parse(run_checker: Checker) -> None:
    pages = sorted(p for p in DIAGRAMS.glob("*.md") if p.name != "README.md")
    assert pages, "diagrams/ holds no diagram"
    code, results, stderr = run_checker(pages)
    assert code == 0, stderr
    assert len(results) == len(pages)
