"""A sub-agent's output as it arrives: timestamped chunks, a bounded memory, nothing dropped.

Each stream (stdout, stderr) keeps its most recent bytes in memory up to its share of the
output memory cap. The first time a stream outgrows it, everything it has received so far
is written to a spill file and every later byte is appended there too, so the file always
holds the whole stream and memory holds its tail, where an answer ends. Text is decoded
incrementally as UTF-8 with replacement characters, so a multi-byte character split
across two reads is decoded whole and invalid bytes never raise; the spill file keeps the
raw bytes.
"""

from __future__ import annotations

import codecs
import os
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Literal

Stream = Literal["stdout", "stderr"]
STREAMS: tuple[Stream, ...] = ("stdout", "stderr")


@dataclass(frozen=True, slots=True)
class OutputChunk:
    """One read from a sub-agent's stream (seed 001's OutputChunk): when and what."""

    stream: Stream
    at: float  # the dispatcher's clock (monotonic seconds) when the bytes were read
    data: bytes


class StreamCapture:
    """One stream: the tail in memory (at most ``memory_cap`` bytes) and the rest on disk.

    ``spill_path`` is created only when the stream outgrows the cap.
    """

    def __init__(self, stream: Stream, memory_cap: int, spill_path: Path) -> None:
        self.stream: Stream = stream
        self.memory_cap = memory_cap
        self.spill_path = spill_path
        self.total_bytes = 0
        self.chunk_count = 0
        self.first_at: float | None = None
        self.last_at: float | None = None
        self._chunks: deque[OutputChunk] = deque()
        self._held = 0
        self._spill: BinaryIO | None = None

    @property
    def held_bytes(self) -> int:
        """Bytes kept in memory now (never more than the cap plus one chunk's overshoot,
        which is trimmed before :meth:`add` returns)."""
        return self._held

    @property
    def spilled(self) -> bool:
        return self._spill is not None

    @property
    def truncated(self) -> bool:
        """Whether memory no longer holds the whole stream (the spill file does)."""
        return self._held < self.total_bytes

    def add(self, chunk: OutputChunk) -> None:
        self.total_bytes += len(chunk.data)
        self.chunk_count += 1
        if self.first_at is None:
            self.first_at = chunk.at
        self.last_at = chunk.at
        if self._spill is None and self._held + len(chunk.data) > self.memory_cap:
            self._open_spill()
        if self._spill is not None:
            self._spill.write(chunk.data)
        self._chunks.append(chunk)
        self._held += len(chunk.data)
        self._trim()

    def _open_spill(self) -> None:
        self.spill_path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self.spill_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        spill = os.fdopen(fd, "wb")
        for old in self._chunks:
            spill.write(old.data)
        self._spill = spill

    def _trim(self) -> None:
        while self._held > self.memory_cap and self._chunks:
            excess = self._held - self.memory_cap
            head = self._chunks[0]
            if len(head.data) <= excess:
                self._chunks.popleft()
                self._held -= len(head.data)
            else:  # keep the tail of a chunk larger than what must go
                self._chunks[0] = OutputChunk(head.stream, head.at, head.data[excess:])
                self._held -= excess

    def tail_bytes(self) -> bytes:
        return b"".join(c.data for c in self._chunks)

    def text(self) -> str:
        """The bytes in memory decoded (UTF-8, invalid bytes replaced). When truncated, a
        character cut by the memory boundary shows as one replacement character."""
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        return decoder.decode(self.tail_bytes(), final=True)

    def chunks(self) -> tuple[OutputChunk, ...]:
        return tuple(self._chunks)

    def close(self) -> None:
        if self._spill is not None:
            self._spill.flush()
            self._spill.close()


class OutputBuffer:
    """Both streams of one sub-agent (seed 001's SubAgentOutputBuffer), sharing one cap:
    each stream may hold up to half of it."""

    def __init__(self, memory_cap: int, spill_dir: Path) -> None:
        share = max(1, memory_cap // 2)
        self.streams: dict[Stream, StreamCapture] = {
            name: StreamCapture(name, share, spill_dir / f"{name}.log") for name in STREAMS
        }
        self._stdout_text: str | None = None

    def add(self, chunk: OutputChunk) -> None:
        self.streams[chunk.stream].add(chunk)
        if chunk.stream == "stdout":
            self._stdout_text = None

    def stdout_text(self) -> str:
        """The stdout tail as text, cached until the next stdout chunk."""
        if self._stdout_text is None:
            self._stdout_text = self.streams["stdout"].text()
        return self._stdout_text

    @property
    def held_bytes(self) -> int:
        return sum(s.held_bytes for s in self.streams.values())

    def close(self) -> None:
        for capture in self.streams.values():
            capture.close()
