"""Dispatch configuration (seed 001): defaults, every validation rule, marks, overrides."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from interlock.machines.diagnostics import CODES, Diagnostic
from interlock.runtime.config.dispatch import (
    MIB,
    CompletionMarkerConfig,
    ConfigError,
    FlagError,
    PollingConfiguration,
    find_project_config,
    load_dispatch_config,
    parse_dispatch_config,
    with_overrides,
)


def _errors(data: Any) -> list[Diagnostic]:
    with pytest.raises(ConfigError) as caught:
        parse_dispatch_config(data)
    for d in caught.value.diagnostics:
        assert d.code in CODES
        assert d.is_error
    return caught.value.diagnostics


def _write(folder: Path, text: str) -> Path:
    path = folder / "interlock.yaml"
    path.write_text(text)
    return path


def test_defaults_are_the_seeds() -> None:
    config = PollingConfiguration()
    assert config.dispatch_timeout == 180
    assert config.polling_interval == 1
    assert config.min_output_length == 100
    markers = config.completion_markers
    assert markers.yaml_markers == ("---", "\n...")
    assert markers.json_markers == ("}\n",)
    assert markers.required_field == "v"
    assert markers.min_silence_cycles == 2
    assert (config.idle_timeout, config.terminate_grace) == (60, 5)
    assert config.output_memory_cap == 8 * MIB
    assert config.output_format == "yaml"


def test_the_seeds_example_loads_and_normalises_the_required_field() -> None:
    seed_example = {
        "dispatchTimeout": 180,
        "pollingInterval": 1,
        "completionMarkers": {"yaml": ["---", "\n..."], "json": ["}\n"],
                              "requiredField": "v:"},
        "minOutputLength": 100,
    }
    assert parse_dispatch_config(seed_example) == PollingConfiguration()


@pytest.mark.parametrize("written", ["v", "v:", " v: "])
def test_required_field_accepts_key_with_or_without_colon(written: str) -> None:
    assert CompletionMarkerConfig(requiredField=written).required_field == "v"


def test_configuration_is_frozen() -> None:
    config = PollingConfiguration()
    with pytest.raises(ValueError, match="frozen"):
        config.dispatch_timeout = 5  # type: ignore[misc]


# (data, field named in the message, a passing value at the boundary)
RULES: list[tuple[dict[str, Any], str, dict[str, Any]]] = [
    ({"dispatchTimeout": 9.99}, "dispatchTimeout must be at least 10 s",
     {"dispatchTimeout": 10}),
    ({"pollingInterval": 0.999}, "pollingInterval must be at least 1 s",
     {"pollingInterval": 1}),
    ({"dispatchTimeout": 20, "pollingInterval": 21},
     "pollingInterval must be at most dispatchTimeout (20 s)",
     {"dispatchTimeout": 20, "pollingInterval": 20}),
    ({"minOutputLength": -1}, "minOutputLength must be at least 0", {"minOutputLength": 0}),
    ({"completionMarkers": {"minSilenceCycles": 0}}, "minSilenceCycles must be at least 1",
     {"completionMarkers": {"minSilenceCycles": 1}}),
    ({"completionMarkers": {"yaml": []}}, "completionMarkers.yaml must list at least one",
     {"completionMarkers": {"yaml": ["x"]}}),
    ({"completionMarkers": {"json": []}}, "completionMarkers.json must list at least one",
     {"completionMarkers": {"json": ["x"]}}),
    ({"completionMarkers": {"yaml": ["---", ""]}}, "completionMarkers.yaml must not contain",
     {"completionMarkers": {"yaml": ["---", " "]}}),
    ({"completionMarkers": {"requiredField": ":"}}, "requiredField must name a YAML key",
     {"completionMarkers": {"requiredField": "x:"}}),
    ({"idleTimeout": 0}, "idleTimeout must be more than 0 s", {"idleTimeout": "1ms"}),
    ({"dispatchTimeout": 30, "idleTimeout": 31}, "idleTimeout must be at most dispatchTimeout",
     {"dispatchTimeout": 30, "idleTimeout": 30}),
    ({"terminateGrace": -1}, "a duration cannot be negative", {"terminateGrace": 0}),
    ({"outputMemoryCap": 64 * 1024 - 1}, "outputMemoryCap must be at least 65536 bytes",
     {"outputMemoryCap": 64 * 1024}),
]


@pytest.mark.parametrize(("bad", "message", "boundary"), RULES, ids=lambda v: str(v)[:40])
def test_each_rule_rejects_naming_the_field_and_passes_at_its_boundary(
    bad: dict[str, Any], message: str, boundary: dict[str, Any]
) -> None:
    diagnostics = _errors(bad)
    assert len(diagnostics) == 1
    assert message in diagnostics[0].message
    parse_dispatch_config(boundary)  # no error


def test_the_seeds_timeout_message_reads_as_specified() -> None:
    [d] = _errors({"dispatchTimeout": 5})
    assert (d.code, d.message) == ("D403", "dispatchTimeout must be at least 10 s, got 5")


@pytest.mark.parametrize(
    ("data", "code"),
    [
        ({"outputFormat": "xml"}, "D402"),
        ({"minOutputLength": "12"}, "D402"),  # numbers are numbers, not text
        ({"minOutputLength": True}, "D402"),
        ({"completionMarkers": {"yaml": [1]}}, "D402"),
        ({"completionMarkers": 3}, "D402"),
        ({"dispatchTimeout": "3 minutes"}, "D404"),
        ({"dispatchTimeout": True}, "D404"),
        ({"dispatchTimeout": float("inf")}, "D404"),
        ({"pollingInterval": [1]}, "D404"),
        ({"outputMemoryCap": "lots"}, "D402"),
    ],
)
def test_wrong_types_are_reported(data: dict[str, Any], code: str) -> None:
    [d] = _errors(data)
    assert d.code == code
    assert next(iter(data)) in d.message  # the field, in the seed's spelling


def test_not_a_mapping() -> None:
    assert [d.code for d in _errors(["dispatchTimeout", 5])] == ["D405"]


def test_no_section_means_defaults() -> None:
    assert parse_dispatch_config(None) == PollingConfiguration()


def test_camel_case_and_snake_case_both_load() -> None:
    camel = parse_dispatch_config({"dispatchTimeout": 30, "pollingInterval": 2,
                                   "completionMarkers": {"minSilenceCycles": 3},
                                   "outputMemoryCap": 1 << 20})
    snake = parse_dispatch_config({"dispatch_timeout": 30, "polling_interval": 2,
                                   "completion_markers": {"min_silence_cycles": 3},
                                   "output_memory_cap": 1 << 20})
    assert camel == snake
    assert camel.completion_markers.min_silence_cycles == 3
    assert camel.model_dump(by_alias=True)["dispatchTimeout"] == 30


def test_durations_and_sizes_as_text() -> None:
    config = parse_dispatch_config({"dispatchTimeout": "3m", "pollingInterval": "1500ms",
                                    "idleTimeout": "1m30s", "terminateGrace": "500ms",
                                    "outputMemoryCap": "512KiB"})
    assert config.dispatch_timeout == 180
    assert config.polling_interval == 1.5
    assert config.idle_timeout == 90
    assert config.terminate_grace == 0.5
    assert config.output_memory_cap == 512 * 1024


def test_idle_timeout_default_shrinks_to_a_short_dispatch_timeout() -> None:
    assert parse_dispatch_config({"dispatchTimeout": "30s"}).idle_timeout == 30
    assert parse_dispatch_config({"dispatchTimeout": "5m"}).idle_timeout == 60


def test_project_file_errors_point_at_line_and_column(tmp_path: Path) -> None:
    path = _write(tmp_path, "name: demo\n"
                            "dispatch:\n"
                            "  dispatchTimeout: 5\n"
                            "  completionMarkers:\n"
                            "    min_silence_cycles: 0\n"
                            "  pollingInterval: soon\n")
    with pytest.raises(ConfigError) as caught:
        load_dispatch_config(path)
    found = [(d.code, d.mark.file, d.mark.line, d.mark.column)
             for d in caught.value.diagnostics]
    assert found == [("D403", str(path), 3, 20), ("D403", str(path), 5, 25),
                     ("D404", str(path), 6, 20)]
    assert str(caught.value).startswith(f"{path}:3:20: error D403: dispatchTimeout")


def test_unknown_key_gets_did_you_mean_at_the_key(tmp_path: Path) -> None:
    path = _write(tmp_path, "dispatch:\n  completionMarkers:\n    requiredFeild: v\n"
                            "  polling_intervall: 2\n")
    with pytest.raises(ConfigError) as caught:
        load_dispatch_config(path)
    [marker, top] = caught.value.diagnostics
    assert (marker.code, marker.mark.line, marker.mark.column) == ("D401", 3, 5)
    assert marker.hint == "did you mean 'requiredField'?"
    assert (top.code, top.mark.line, top.mark.column) == ("D401", 4, 3)
    assert top.hint == "did you mean 'pollingInterval'?"


def test_yaml_errors_of_the_project_file_are_config_errors(tmp_path: Path) -> None:
    path = _write(tmp_path, "dispatch:\n  a: 1\n  a: 2\n")
    with pytest.raises(ConfigError) as caught:
        load_dispatch_config(path)
    assert [(d.code, d.mark.line) for d in caught.value.diagnostics] == [("Y004", 3)]
    with pytest.raises(ConfigError, match="Y011"):
        load_dispatch_config(tmp_path / "missing.yaml")


def test_project_file_without_dispatch_key_gives_defaults(tmp_path: Path) -> None:
    assert load_dispatch_config(_write(tmp_path, "other: 1\n")) == PollingConfiguration()
    _write(tmp_path, "dispatch:\n")
    assert load_dispatch_config(tmp_path / "interlock.yaml") == PollingConfiguration()


def test_find_project_config_walks_up(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    assert find_project_config(deep) is None
    path = _write(tmp_path, "dispatch: {dispatchTimeout: 42}\n")
    assert find_project_config(deep) == path
    assert load_dispatch_config(start=deep).dispatch_timeout == 42
    nearer = _write(tmp_path / "a", "dispatch: {dispatchTimeout: 43}\n")
    assert find_project_config(deep) == nearer


def test_find_project_config_stops_at_git(tmp_path: Path) -> None:
    _write(tmp_path, "dispatch: {dispatchTimeout: 42}\n")  # outside the repository
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "src").mkdir()
    assert find_project_config(repo / "src") is None
    assert load_dispatch_config(start=repo / "src") == PollingConfiguration()
    assert find_project_config(tmp_path) == tmp_path / "interlock.yaml"


def test_find_project_config_uses_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / ".git").mkdir()
    path = _write(tmp_path, "dispatch: {}\n")
    monkeypatch.chdir(tmp_path)
    assert find_project_config() == path


def test_overrides_apply_and_keep_the_rest() -> None:
    base = parse_dispatch_config({"minOutputLength": 7,
                                  "completionMarkers": {"json": ["]\n"]}})
    config = with_overrides(base, timeout="2m", interval=3, required_field="verdict:",
                            output_format="json")
    assert (config.dispatch_timeout, config.polling_interval) == (120, 3)
    assert config.completion_markers.required_field == "verdict"
    assert config.completion_markers.json_markers == ("]\n",)
    assert (config.output_format, config.min_output_length) == ("json", 7)
    assert with_overrides(base) == base


@pytest.mark.parametrize(
    ("flags", "code", "message"),
    [
        ({"timeout": 0}, "D403", "dispatchTimeout must be more than 0 s"),
        ({"timeout": "20s", "interval": 21}, "D403", "pollingInterval must be at most"),
        ({"interval": "fast"}, "D404", "pollingInterval"),
        ({"output_format": "xml"}, "D402", "outputFormat"),
        ({"required_field": ""}, "D403", "requiredField"),
    ],
)
def test_overrides_are_validated(flags: dict[str, Any], code: str, message: str) -> None:
    with pytest.raises(FlagError) as caught:
        with_overrides(PollingConfiguration(), **flags)
    d = caught.value.diagnostics[0]  # --timeout 0 also makes the derived idleTimeout 0
    assert d.code == code
    assert message in d.message
    assert d.hint is not None and d.hint.startswith("with --")
    flag = "--" + next(iter(flags)).replace("_", "-").replace("output-format", "format")
    assert caught.value.message.startswith(flag + " ")
    assert "<command line>" not in caught.value.message


def test_a_bare_timeout_flag_is_seconds_with_no_floor() -> None:
    """`--timeout 5` means 5 s; the seed's 10 s floor holds for interlock.yaml only."""
    config = with_overrides(PollingConfiguration(), timeout="5")
    assert (config.dispatch_timeout, config.idle_timeout) == (5.0, 5.0)
    assert with_overrides(PollingConfiguration(), timeout=0.5).dispatch_timeout == 0.5
    with pytest.raises(ConfigError, match="at least 10 s"):
        parse_dispatch_config({"dispatchTimeout": 5})
    with pytest.raises(FlagError) as caught:
        with_overrides(PollingConfiguration(), timeout="5", interval="9")
    assert caught.value.message == ("--timeout 5 --interval 9: pollingInterval must be at "
                                    "most dispatchTimeout (5 s), got 9")


def test_overrides_check_against_the_configured_values() -> None:
    base = parse_dispatch_config({"pollingInterval": 30, "idleTimeout": 100})
    with pytest.raises(ConfigError) as caught:
        with_overrides(base, timeout=20)
    assert {d.message.split()[0] for d in caught.value.diagnostics} == {
        "pollingInterval", "idleTimeout"}


def test_a_derived_idle_timeout_follows_a_timeout_flag(tmp_path: Path) -> None:
    """interlock.yaml's dispatchTimeout 30 derives idleTimeout 30; `--timeout 5` derives 5."""
    project = tmp_path / "interlock.yaml"
    project.write_text("dispatch:\n  dispatchTimeout: 30\n")
    base = load_dispatch_config(project)
    assert base.idle_timeout == 30
    assert with_overrides(base, timeout="5").idle_timeout == 5
    explicit = parse_dispatch_config({"dispatchTimeout": 30, "idleTimeout": 20})
    with pytest.raises(FlagError, match=r"^--timeout 5: idleTimeout must be at most "):
        with_overrides(explicit, timeout="5")
