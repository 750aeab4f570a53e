"""The examples in the agents modules' docstrings run."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [f"interlock.runtime.{name}" for name in (
    "config.agents", "agents.events", "agents.preflight", "engine.prompts", "agents.roles",
    "agents.ralph_protocol")]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0
