"""The façade: every exported name resolves, and none is shadowed by a room's package."""

from __future__ import annotations

import pkgutil
from pathlib import Path

import pytest

from interlock import runtime

ROOMS = {m.name for m in pkgutil.iter_modules([str(Path(runtime.__file__).parent)])}


@pytest.mark.parametrize("name", runtime.__all__)
def test_every_exported_name_resolves_and_is_no_room(name: str) -> None:
    assert name not in ROOMS, f"runtime.{name} would be shadowed by the subpackage"
    assert getattr(runtime, name) is not None


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        runtime.nope  # noqa: B018
