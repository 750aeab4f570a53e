"""machines.settings: pydantic errors of an interlock.yaml section -> located diagnostics."""

from __future__ import annotations

from typing import Annotated

import pytest
from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from interlock.machines.diagnostics import Diagnostic
from interlock.machines.settings import Duration, Rule, Section, section_diagnostics
from interlock.machines.yamlsrc import parse_yaml


class Step(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    name: str
    run_for: Duration = Field(default=1.0, alias="runFor")


class Tuning(BaseModel):
    model_config = ConfigDict(extra="forbid")

    base_delay: Duration = Field(default=1.0, validation_alias=AliasChoices("base_delay", "base"))
    max_delay: Duration = 5.0

    @model_validator(mode="after")
    def _order(self) -> Tuning:
        if self.max_delay < self.base_delay:
            raise PydanticCustomError("demo_order", "max_delay must not be below base_delay")
        return self


class Demo(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    steps: tuple[Step, ...] = ()
    tuning: Tuning = Field(default_factory=Tuning)
    limit: Annotated[int, Field(strict=True, ge=1)] = 1
    label: str = "x"

    @field_validator("label")
    @classmethod
    def _label(cls, value: str) -> str:
        if value.startswith("-"):
            raise ValueError(f"a label cannot start with '-': {value!r}")
        if value == "odd":
            raise PydanticCustomError("demo_odd", "odd is taken")
        return value


DEMO = Section("demo", Demo, unknown_key="X1", invalid_value="X2", invalid_duration="X3",
               missing="X4", rules={"demo_odd": Rule("X5", "{name} is odd: {msg}")})


def _problems(text: str) -> list[Diagnostic]:
    document = parse_yaml(text, "interlock.yaml")
    with pytest.raises(ValidationError) as info:
        Demo.model_validate(document.data["demo"])
    return section_diagnostics(info.value, DEMO, document.source, ("demo",))


def _lines(text: str) -> list[str]:
    return [str(d) for d in _problems(text)]


def test_an_unknown_key_is_marked_at_the_key_with_the_closest_spelling() -> None:
    assert _lines("demo:\n  steps:\n    - {name: a, runfor: 2}\n") == [
        "interlock.yaml:3:17: error X1: unknown key 'runfor' in demo.steps.0 "
        "(did you mean 'runFor'?)"]
    assert _lines("demo:\n  colour: red\n") == [
        "interlock.yaml:2:3: error X1: unknown key 'colour' in demo "
        "(expected one of: steps, tuning, limit, label)"]


def test_a_setting_is_named_as_the_file_spells_it() -> None:
    camel, snake = (_lines(f"demo:\n  steps: [{{name: a, {key}: soon}}]\n")
                    for key in ("runFor", "run_for"))
    assert camel[0].startswith("interlock.yaml:2:29: error X3: invalid duration for "
                               "demo.steps.0.runFor: 'soon' is not a duration")
    assert snake[0].startswith("interlock.yaml:2:30: error X3: invalid duration for "
                               "demo.steps.0.run_for: 'soon' is not a duration")
    choice = _lines("demo:\n  tuning: {base: -1}\n")
    assert choice == ["interlock.yaml:2:18: error X3: invalid duration for demo.tuning.base: "
                      "a duration cannot be negative"]


def test_a_missing_key_points_at_the_mapping_that_lacks_it() -> None:
    assert _lines("demo:\n  steps:\n    - runFor: 2\n") == [
        "interlock.yaml:3:7: error X4: demo.steps.0.name is required"]


def test_a_wrong_value_shows_what_was_given() -> None:
    assert _lines("demo:\n  limit: '3'\n") == [
        "interlock.yaml:2:10: error X2: invalid value for demo.limit: expected a valid "
        "integer, got '3'"]


def test_a_sections_own_rules_read_as_written() -> None:
    assert _lines("demo:\n  label: -x\n") == [
        "interlock.yaml:2:10: error X2: invalid value for demo.label: a label cannot start "
        "with '-': '-x'"]
    assert _lines("demo:\n  label: odd\n") == [
        "interlock.yaml:2:10: error X5: demo.label is odd: odd is taken"]
    # A rule about a whole mapping points at the key that names it.
    assert _lines("demo:\n  tuning: {base: 5, max_delay: 1}\n") == [
        "interlock.yaml:2:3: error X2: invalid value for demo.tuning: max_delay must not be "
        "below base_delay"]


def test_every_problem_is_reported() -> None:
    problems = _problems("demo:\n  limit: 0\n  steps: [{name: a, runFor: x}]\n  oops: 1\n")
    assert sorted((d.mark.line, d.code) for d in problems) == [(2, "X2"), (3, "X3"), (4, "X1")]
