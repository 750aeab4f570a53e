"""The JSON Schema of spec files, generated from the spec model, for editors.

The model describes the normalized form; YAML authors also write shorthands
(``on: {go: done}``, ``entry: start``, ``timeout: 90``), so the generated schema is
widened to accept exactly the shorthands :mod:`.spec` normalizes.
"""

from __future__ import annotations

from typing import Any

from interlock.machines.spec import Spec

SCHEMA_ID = "https://interlock.dev/schema/spec-v1.json"
SCHEMA_FILE = "interlock-spec.schema.json"

_TRANSITIONS_INPUT: dict[str, Any] = {
    "description": "A target state id, a transition, null (targetless), or a list of them "
    "tried in order.",
    "anyOf": [
        {"type": "string"},
        {"type": "null"},
        {"$ref": "#/$defs/TransitionSpec"},
        {"type": "array", "items": {"anyOf": [{"type": "string"},
                                              {"$ref": "#/$defs/TransitionSpec"}]}},
    ],
}


def _names_or_list(prop: dict[str, Any]) -> dict[str, Any]:
    return {
        "description": prop.get("description", "A name or a list of names."),
        "anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}],
    }


def spec_json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of an interlock spec file."""
    schema = Spec.model_json_schema(by_alias=True)
    defs = schema["$defs"]
    state = defs["StateSpec"]["properties"]
    for name in ("on", "after"):
        state[name] = {
            "description": state[name].get("description", ""),
            "type": "object",
            "additionalProperties": {"$ref": "#/$defs/TransitionsInput"},
        }
    state["always"] = {"description": state["always"].get("description", ""),
                       "$ref": "#/$defs/TransitionsInput"}
    for name in ("entry", "exit", "tags"):
        state[name] = _names_or_list(state[name])
    schema["properties"]["tags"] = _names_or_list(schema["properties"]["tags"])
    invoke = defs["InvokeSpec"]["properties"]
    invoke["timeout"] = {"description": invoke["timeout"]["description"],
                         "anyOf": [{"type": "string"}, {"type": "number", "exclusiveMinimum": 0},
                                   {"type": "null"}]}
    invoke["concurrency"]["anyOf"][0]["minimum"] = 1  # lint says so too (M228)
    transition = defs["TransitionSpec"]["properties"]
    transition["actions"] = _names_or_list(transition["actions"])
    defs["TransitionsInput"] = _TRANSITIONS_INPUT
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "interlock spec",
        **{k: v for k, v in schema.items() if k != "title"},
    }
