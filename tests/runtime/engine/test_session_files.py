"""A session's folder and files: a child's folder is inside its parent's; nothing outside
the folder is ever named by a path into it."""

from __future__ import annotations

from pathlib import Path

from interlock.runtime.engine.session_files import file_in, files_in, folder_of, session_folder
from interlock.runtime.store.sqlite import SqliteStore

from support.store_helpers import created, row


def test_file_in_refuses_every_way_out(tmp_path: Path) -> None:
    folder = tmp_path / "s"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "a.md").write_text("a")
    (tmp_path / "secret.txt").write_text("secret")
    (folder / "out").symlink_to(tmp_path / "secret.txt")
    (folder / "outdir").symlink_to(tmp_path)
    (folder / "in").symlink_to(folder / "sub" / "a.md")
    assert file_in(folder, "sub/a.md") == (folder / "sub" / "a.md").resolve()
    assert file_in(folder, "in") == (folder / "sub" / "a.md").resolve()
    for bad in ("../secret.txt", "sub/../../secret.txt", "/etc/passwd", "out",
                "outdir/secret.txt", "sub", "", "missing.md", "sub\\..\\..\\secret.txt",
                "a\x00b", str(tmp_path / "secret.txt")):
        assert file_in(folder, bad) is None, bad


def test_files_in_lists_regular_files_and_never_follows_symlinks(tmp_path: Path) -> None:
    folder = tmp_path / "s"
    (folder / "b").mkdir(parents=True)
    (folder / "b" / "z.txt").write_text("zz")
    (folder / "a.txt").write_text("a")
    (folder / "link").symlink_to(tmp_path)
    (folder / "alias.txt").symlink_to(folder / "a.txt")
    assert [f.path for f in files_in(folder)] == ["a.txt", "b/z.txt"]
    assert [f.size for f in files_in(folder)] == [1, 2]
    assert files_in(tmp_path / "none") == []
    assert len(files_in(folder, limit=1)) == 1


def test_a_child_sessions_folder_is_inside_its_parents(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / ".interlock" / "state.db")
    try:
        store.create(row("p"), created())
        store.create(row("p.0002-step"), created())
        base = folder_of(store, "p")
        assert base == tmp_path / ".interlock" / "sessions" / "p"
        assert session_folder(store, "p.0002-step") == base / "invocations" / "0002-step"
        assert session_folder(store, "q.0001-x") == folder_of(store, "q.0001-x")  # no parent
    finally:
        store.close()
