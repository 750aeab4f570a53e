"""The `interlock` CLI as a user runs it: exit codes, output formats, no tracebacks."""

from __future__ import annotations

import json
from pathlib import Path

from support.cli import Cli
from support.paths import ROOT, SPECS, builtin_spec_paths

GOOD = (
    "machine: door\ninitial: closed\nstates:\n"
    "  closed: {on: {open: opened}}\n  opened: {on: {close: closed}}\n"
)


def test_validate_clean_spec_exits_0(cli: Cli, tmp_path: Path) -> None:
    spec = tmp_path / "door.yaml"
    spec.write_text(GOOD)
    result = cli("validate", str(spec))
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    assert "0 error(s), 0 warning(s)" in result.stderr


def test_validate_reports_file_line_col_code_and_exits_1(cli: Cli, tmp_path: Path) -> None:
    spec = tmp_path / "bad.yaml"
    spec.write_text("machine: door\nstates:\n  closed:\n    tyep: final\n")
    result = cli("validate", str(spec))
    assert result.returncode == 1
    assert f"{spec}:4:5: error S101: unknown key 'tyep'" in result.stdout
    assert "did you mean 'type'?" in result.stdout
    assert "Traceback" not in result.stderr


def test_warnings_pass_unless_strict(cli: Cli, tmp_path: Path) -> None:
    spec = tmp_path / "warn.yaml"
    # `lonely` is unreachable: a warning, not an error.
    spec.write_text(GOOD + "  lonely: {on: {go: closed}}\n")
    relaxed = cli("validate", str(spec))
    strict = cli("validate", "--strict", str(spec))
    assert relaxed.returncode == 0, relaxed.stdout
    assert "warning M205" in relaxed.stdout
    assert strict.returncode == 1


def test_json_output_is_a_list_of_diagnostics(cli: Cli, tmp_path: Path) -> None:
    spec = tmp_path / "bad.yaml"
    spec.write_text("machine: door\nstates:\n  a: {on: {go: nowhere}}\n")
    result = cli("validate", "--json", str(spec))
    assert result.returncode == 1
    found = json.loads(result.stdout)
    assert [(d["code"], d["line"], d["column"], d["severity"]) for d in found] == [
        ("M201", 3, 16, "error")
    ]


def test_usage_errors_exit_2(cli: Cli, tmp_path: Path) -> None:
    assert cli("validate").returncode == 2
    missing = cli("validate", str(tmp_path / "nope.yaml"))
    assert missing.returncode == 2
    assert "no such file" in missing.stderr
    empty_dir = cli("validate", str(tmp_path))
    assert empty_dir.returncode == 2
    assert cli("validate", "--no-such-flag", str(tmp_path)).returncode == 2


def test_every_broken_spec_fails_cleanly_through_the_cli(cli: Cli) -> None:
    broken = ROOT / "tests" / "machines" / "broken"
    result = cli("validate", "--json", str(broken))
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    reported = {(Path(d["file"]).name, d["code"]) for d in json.loads(result.stdout)}
    expected = set()
    for line in (broken / "EXPECTED.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, code, _ = line.split()
            # M211 needs bindings (see test_bindings_option_reports_unbound_names),
            # M222 the agents of interlock.yaml, which validate does not pass yet;
            # S107 (not a spec) is skipped in a folder.
            if code not in ("M211", "M222", "S107"):
                expected.add((name, code))
    assert expected <= reported, sorted(expected - reported)
    assert f"skipped {broken / 'S107_not_a_spec.yaml'}: not a spec" in result.stderr


def test_bindings_option_reports_unbound_names(cli: Cli, tmp_path: Path) -> None:
    spec = tmp_path / "door.yaml"
    spec.write_text("machine: door\ninitial: closed\nstates:\n"
                    "  closed: {on: {open: {guard: may_open, target: opened}}}\n"
                    "  opened: {entry: [ring], on: {close: closed}}\n")
    module = tmp_path / "door_bindings.py"
    module.write_text("BINDINGS = {'may_open': lambda call: True}\n")
    result = cli("validate", "--bindings", str(module), str(spec))
    assert result.returncode == 1
    assert "M211" in result.stdout and "'ring'" in result.stdout
    assert "may_open" not in result.stdout
    module.write_text("BINDINGS = {'may_open': lambda call: True, 'ring': print}\n")
    assert cli("validate", "--bindings", str(module), str(spec)).returncode == 0
    missing = cli("validate", "--bindings", "no_such_module_xyz", str(spec))
    assert missing.returncode == 2
    assert "bindings module 'no_such_module_xyz' not found" in missing.stderr


def test_builtin_specs_pass_strict_validation(cli: Cli) -> None:
    paths = [str(p) for p in builtin_spec_paths()]
    assert len(paths) >= 6
    result = cli("validate", "--strict", *paths)
    assert result.returncode == 0, result.stdout + result.stderr


def test_schema_file_shipped_with_specs_is_current(cli: Cli) -> None:
    result = cli("schema")
    assert result.returncode == 0
    shipped = (SPECS / "interlock-spec.schema.json").read_text()
    assert json.loads(result.stdout) == json.loads(shipped), (
        "specs/interlock-spec.schema.json is stale: run `make diagrams`"
    )


def test_builtin_specs_point_editors_at_the_schema() -> None:
    for path in builtin_spec_paths():
        first = path.read_text().splitlines()[0]
        assert first == "# yaml-language-server: $schema=./interlock-spec.schema.json", path


def test_specs_lists_builtin_specs(cli: Cli) -> None:
    result = cli("specs")
    assert result.returncode == 0
    names = {line.split()[0] for line in result.stdout.splitlines()}
    assert {"polling_state", "review_menu", "poller_interview", "ralph_orchestrator",
            "ralph_subagent", "inbox_poller"} <= names


def test_folders_are_searched_without_hidden_and_vendored_dirs(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "specs" / "nested").mkdir(parents=True)
    (tmp_path / "specs" / "nested" / "door.yml").write_text(GOOD)
    for junk in (".venv/lib", "node_modules/pkg", ".git"):
        (tmp_path / junk).mkdir(parents=True)
        (tmp_path / junk / "config.yaml").write_text("not: [a spec\n")
    result = cli("validate", str(tmp_path))
    assert result.returncode == 0, result.stdout
    assert "checked 1 spec:" in result.stderr


VALIDATE_EXAMPLE = "$ cd docs/examples && interlock validate broken_door.yaml\n"


def test_validate_example_is_current(cli: Cli) -> None:
    """The `validate` example of docs/cli.md, and of the README where it shows it too."""
    pages = [page for page in (ROOT / "docs" / "cli.md", ROOT / "README.md")
             if VALIDATE_EXAMPLE in page.read_text()]
    assert pages and pages[0].name == "cli.md", "docs/cli.md lost its validate example"
    result = cli("validate", "broken_door.yaml", cwd=ROOT / "docs" / "examples")
    assert result.returncode == 1
    for page in pages:
        block = page.read_text().split(VALIDATE_EXAMPLE, 1)[1]
        expected = block.split("```", 1)[0].splitlines()
        assert result.stdout.splitlines() + result.stderr.splitlines() == expected, page
