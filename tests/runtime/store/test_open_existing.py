"""open_store(..., create=False): read-only commands open an existing store or none."""

from __future__ import annotations

from pathlib import Path

import pytest

from interlock.runtime.store import StoreError, StoreMissing, open_store


@pytest.mark.parametrize("url", [None, "state.db", "sub/dir/x.db"])
def test_a_missing_sqlite_file_is_store_missing_and_nothing_is_made(tmp_path: Path,
                                                                    url: str | None) -> None:
    with pytest.raises(StoreMissing) as caught:
        open_store(url, tmp_path, create=False)
    assert str(caught.value).startswith(f"no session store at {tmp_path}/")
    assert str(caught.value).endswith(": nothing has run here yet")
    assert isinstance(caught.value, StoreError)
    assert list(tmp_path.iterdir()) == []


def test_an_absolute_sqlite_url_too(tmp_path: Path) -> None:
    with pytest.raises(StoreMissing):
        open_store(f"sqlite://{tmp_path}/a/b.db", tmp_path, create=False)
    assert list(tmp_path.iterdir()) == []


def test_an_existing_store_opens_read_only_as_usual(tmp_path: Path) -> None:
    open_store(None, tmp_path).close()  # made by a command that writes
    store = open_store(None, tmp_path, create=False)
    try:
        assert store.list() == []
    finally:
        store.close()


def test_a_bad_url_is_still_a_store_error(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="unknown store 'mysql://x'"):
        open_store("mysql://x", tmp_path, create=False)
