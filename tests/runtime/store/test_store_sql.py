"""The SQL both backends share (runtime/store/_sql.py), rendered per dialect."""

from __future__ import annotations

import dataclasses
import re

import pytest

from interlock.runtime.store._sql import POSTGRES, SQLITE, Statements, render


def test_every_shared_statement_renders_to_each_dialect_with_the_same_values() -> None:
    written = Statements()
    for field in dataclasses.fields(Statements):
        template = getattr(written, field.name)
        lite, pg = getattr(SQLITE, field.name), getattr(POSTGRES, field.name)
        values = template.count("?")
        assert "?j" not in lite and lite.count("?") == values, field.name
        assert "?" not in pg and pg.count("%s") == values, field.name
        assert pg.count("::jsonb") == len(re.findall(r"\?j\b", template)), field.name


def test_a_json_value_is_cast_for_postgres_only() -> None:
    assert render("INSERT INTO t (a, b) VALUES (?, ?j)", "sqlite") == (
        "INSERT INTO t (a, b) VALUES (?, ?)")
    assert render("INSERT INTO t (a, b) VALUES (?, ?j)", "postgres") == (
        "INSERT INTO t (a, b) VALUES (%s, %s::jsonb)")


def test_a_literal_percent_is_refused_for_postgres() -> None:
    with pytest.raises(ValueError, match="literal '%'"):
        render("SELECT 1 WHERE a LIKE 'x%' AND b = ?", "postgres")
