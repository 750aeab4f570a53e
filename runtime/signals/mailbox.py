"""The mailbox folders of one session, and the file operations that make them safe.

Layout (seed 004, plus ``tmp/`` and ``rejected/``)::

    SESSION_DIR/signals/
      tmp/         writers create and fsync a file here...
      inputs/      ...then rename it in: the rename is the delivery
      processed/   handled signals, with their handling_metadata appended
        .claims/<owner>/   claimed, being handled (one folder per live consumer)
      rejected/    malformed files, each with a NAME.reason beside it

Nothing is ever deleted. A consumer claims a signal by renaming it from ``inputs/`` into
its own claims folder: of two consumers, only the first rename succeeds (the source is
gone for the second). When the signal has been delivered, the final file (the original
text plus ``handling_metadata``) is written atomically into ``processed/`` and the claim
is removed. A consumer that died leaves its claims behind; another one adopts them by
renaming them into its own folder (again, only one can), re-delivers them (delivery is
idempotent by signal id) and finishes them.
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from interlock.machines.yamlsrc import load_yaml
from interlock.runtime.host.owners import is_owner_name
from interlock.runtime.signals.model import Signal, SignalError, fifo_key, render_signal

FOLDERS = ("tmp", "inputs", "processed", "rejected")
CLAIMS = ".claims"
METADATA_KEY = "handling_metadata"


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_new(path: Path, data: bytes, flags: int, *, durable: bool) -> None:
    """Create ``path`` (0600) with ``data``, all of it, fsynced when ``durable``."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | flags, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Write ``path`` whole or not at all: a hidden temporary beside it, fsync, rename. The
    temporary's name is the writer's own (two threads of one process may write at once)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:12]}.tmp")
    _write_new(tmp, data, os.O_TRUNC, durable=durable)
    tmp.replace(path)
    if durable:
        fsync_dir(path.parent)


@dataclass(frozen=True, slots=True)
class SignalClaim:
    """A signal file this consumer owns now (in its claims folder)."""

    name: str
    path: Path
    raw: bytes


class Mailbox:
    """The ``signals/`` folder of one session folder (created 0700 where missing)."""

    def __init__(self, session_dir: Path, *, create: bool = True, durable: bool = True) -> None:
        self.session_dir = session_dir
        self.root = session_dir / "signals"
        self.durable = durable
        self.tmp = self.root / "tmp"
        self.inputs = self.root / "inputs"
        self.processed = self.root / "processed"
        self.rejected = self.root / "rejected"
        self.claims = self.processed / CLAIMS
        if create:
            for folder in (self.root, self.tmp, self.inputs, self.processed, self.rejected,
                           self.claims):
                folder.mkdir(mode=0o700, parents=True, exist_ok=True)

    def exists(self) -> bool:
        return self.inputs.is_dir() and self.processed.is_dir()

    # -- writing ------------------------------------------------------------------------

    def post(self, signal: Signal) -> Path:
        """Deliver ``signal``: write it in ``tmp/``, fsync, rename into ``inputs/``."""
        return self.publish(self.stage(signal))

    def stage(self, signal: Signal) -> Path:
        """The first half of :meth:`post`: the signal written and fsynced in ``tmp/``."""
        staged = self.tmp / signal.file_name
        _write_new(staged, render_signal(signal).encode("utf-8"), os.O_EXCL,
                   durable=self.durable)
        return staged

    def publish(self, staged: Path) -> Path:
        """The second half: the rename into ``inputs/`` (the delivery), then its fsync."""
        target = self.inputs / staged.name
        staged.rename(target)
        if self.durable:
            fsync_dir(self.inputs)
        return target

    # -- reading ------------------------------------------------------------------------

    def pending(self) -> list[str]:
        """Names in ``inputs/``, oldest first (hidden files are ignored)."""
        try:
            names = [e.name for e in os.scandir(self.inputs)
                     if not e.name.startswith(".") and e.is_file(follow_symlinks=False)]
        except FileNotFoundError:
            return []
        return sorted(names, key=fifo_key)

    def idle(self) -> bool:
        """Whether nothing waits in ``inputs/`` and no consumer holds a claim: a scan now
        would deliver nothing. A few directory listings, for a runner's question "is
        the mailbox clear?" after each step (a scan is a hand-off to the consumer's
        thread and back)."""
        if self.pending():
            return False
        try:
            owners = [e.path for e in os.scandir(self.claims) if e.is_dir()]
        except FileNotFoundError:
            return True
        for folder in owners:
            try:
                with os.scandir(folder) as entries:
                    if any(entries):
                        return False
            except FileNotFoundError:
                continue
        return True

    def peek(self, name: str, limit: int) -> bytes | None:
        """The first ``limit + 1`` bytes of ``inputs/NAME``, or None if it is gone."""
        try:
            with (self.inputs / name).open("rb") as f:
                return f.read(limit + 1)
        except FileNotFoundError:
            return None

    def age(self, name: str) -> float:
        """Seconds since ``inputs/NAME`` was last modified (inf when it is gone)."""
        try:
            return time.time() - (self.inputs / name).stat().st_mtime
        except FileNotFoundError:
            return float("inf")

    # -- claiming -----------------------------------------------------------------------

    def claims_of(self, owner: str) -> Path:
        """The claims folder of ``owner`` (an id of :mod:`interlock.runtime.host.owners`)."""
        if not is_owner_name(owner):
            raise SignalError(f"consumer id {owner!r} is not a valid owner id: use "
                              "host:pid-start:tag (letters, digits, '_', '.', ':', '-')")
        folder = self.claims / owner
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        return folder

    def claim(self, name: str, owner: str) -> SignalClaim | None:
        """Take ``inputs/NAME`` for ``owner``; None when another consumer took it first."""
        target = self.claims_of(owner) / name
        try:
            (self.inputs / name).rename(target)
        except FileNotFoundError:
            return None
        if self.durable:
            fsync_dir(target.parent)
        return SignalClaim(name, target, target.read_bytes())

    def owners_with_claims(self) -> list[str]:
        try:
            return sorted(e.name for e in os.scandir(self.claims) if e.is_dir())
        except FileNotFoundError:
            return []

    def claimed(self, owner: str) -> Iterator[str]:
        folder = self.claims / owner
        try:
            names = [e.name for e in os.scandir(folder) if not e.name.startswith(".")]
        except FileNotFoundError:
            return
        yield from sorted(names, key=fifo_key)

    def adopt(self, name: str, dead_owner: str, owner: str) -> SignalClaim | None:
        """Take over a claim a dead consumer left; None when another consumer took it."""
        target = self.claims_of(owner) / name
        try:
            (self.claims / dead_owner / name).rename(target)
        except FileNotFoundError:
            return None
        return SignalClaim(name, target, target.read_bytes())

    def finish(self, claim: SignalClaim, metadata: dict[str, Any]) -> Path:
        """Write ``processed/NAME`` (the original text plus ``handling_metadata``),
        atomically, then drop the claim. Idempotent: an already finished signal keeps
        its first metadata."""
        final = self.processed / claim.name
        if not final.exists():
            text = claim.raw.decode("utf-8", "replace")
            if text and not text.endswith("\n"):
                text += "\n"
            block = yaml.safe_dump({METADATA_KEY: metadata}, sort_keys=False,
                                   allow_unicode=True, width=1000)
            write_atomically(final, (text + block).encode("utf-8"), durable=self.durable)
        self.drop_claim(claim)
        return final

    def release(self, claim: SignalClaim) -> None:
        """Put a claimed signal back into ``inputs/`` (a dead consumer's claim that this
        consumer does not take now); it keeps its name, so its place in the order."""
        with contextlib.suppress(FileNotFoundError):
            claim.path.rename(self.inputs / claim.name)

    def drop_claim(self, claim: SignalClaim) -> None:
        """Remove a claim whose signal is already in ``processed/`` (a second copy)."""
        with contextlib.suppress(FileNotFoundError):
            claim.path.unlink()

    def is_finished(self, name: str) -> bool:
        return (self.processed / name).exists()

    # -- quarantine ---------------------------------------------------------------------

    def reject(self, name: str, reason: str) -> Path | None:
        """Move ``inputs/NAME`` to ``rejected/`` with ``NAME.reason`` beside it; None if
        another consumer moved it first. Nothing is deleted."""
        target = self.rejected / name
        try:
            (self.inputs / name).rename(target)
        except FileNotFoundError:
            return None
        write_atomically(self.rejected / f"{name}.reason", (reason.rstrip() + "\n").encode(),
                         durable=self.durable)
        return target

    def reject_claim(self, claim: SignalClaim, reason: str) -> Path:
        target = self.rejected / claim.name
        claim.path.rename(target)
        write_atomically(self.rejected / f"{claim.name}.reason",
                         (reason.rstrip() + "\n").encode(), durable=self.durable)
        return target


def read_metadata(path: Path) -> dict[str, Any] | None:
    """The handling_metadata of a processed signal file, or None."""
    try:
        data = load_yaml(path.read_bytes())
    except (OSError, ValueError, yaml.YAMLError):  # ValueError: not UTF-8, or refused
        return None
    if isinstance(data, dict) and isinstance(data.get(METADATA_KEY), dict):
        return dict(data[METADATA_KEY])
    return None
