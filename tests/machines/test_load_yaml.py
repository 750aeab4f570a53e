"""machines.yamlsrc.load_yaml: the one plain-data YAML reader (agent output, metadata)."""

from __future__ import annotations

import pytest
import yaml

from interlock.machines.yamlsrc import YamlRefused, load_yaml, yaml_refusal


def test_yaml_12_booleans_and_safe_constructors() -> None:
    assert load_yaml("a: yes\nb: NO\nc: on\nd: True\ne: false\n") == {
        "a": "yes", "b": "NO", "c": "on", "d": True, "e": False}
    assert load_yaml(b"v: GO\n") == {"v": "GO"}
    with pytest.raises(yaml.YAMLError):
        load_yaml("v: !!python/object/apply:os.system ['true']\n")
    with pytest.raises(yaml.YAMLError):
        load_yaml("v: 'unterminated\n")


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("v: " + "[" * 100_000, "nesting"),
        ("v:\n" + "- " * 100_000 + "x", "nesting"),
        ("v: " + "{" * 100_000, "nesting"),
        ("a: &a [1, 2]\nb: &b [*a, *a]\nv: *b\n", "anchors"),
    ],
)
def test_hostile_documents_are_refused_before_parsing(text: str, reason: str) -> None:
    with pytest.raises(YamlRefused, match=reason):
        load_yaml(text)
    assert isinstance(YamlRefused("x"), ValueError)


@pytest.mark.parametrize(
    "text",
    [
        "message: 'fish &chips *today*'\n",
        'message: "a &b, *c"\n',
        "only_anchor: &a 1\n",
        "a: [" * 400 + "]" * 400,
    ],
)
def test_what_only_looks_hostile_is_read(text: str) -> None:
    assert yaml_refusal(text) is None
    load_yaml(text)
