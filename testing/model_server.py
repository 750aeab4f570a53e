"""A scripted model server on 127.0.0.1: the real agent CLIs run against it, offline.

The server speaks each model API an agent CLI uses (one :mod:`interlock.testing.wire`
module per wire protocol: Anthropic Messages, OpenAI Responses, Gemini generateContent,
OpenAI Chat Completions), answers every request with the next scripted
:class:`~interlock.testing.replies.Reply`, and records what the CLI sent, so a test can
assert the prompt, the tool results and the conversation carried into a steer::

    with ModelServer([write_file("hello.txt", "hi\\n"), say("verdict: done")]) as server:
        env = cli_env("claude", server, tmp_path / "home")
        subprocess.run(["claude", "-p", ...], env=env, input="Write hello.txt")
        assert server.requests[0].prompt == "Write hello.txt"

Requests the CLI makes on its own (a title for the conversation, a quota probe) are
answered by the wire module without taking a scripted reply and recorded with
``side=True``.
"""

from __future__ import annotations

import asyncio
import itertools
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Protocol

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from interlock.testing.replies import Reply, say

START_TIMEOUT = 10.0


@dataclass(frozen=True, slots=True)
class Message:
    """One message of the conversation a request carries, as plain text: ``role`` is
    ``system``, ``user``, ``assistant`` or ``tool`` (a tool's result sent back)."""

    role: str
    text: str


@dataclass(frozen=True, slots=True)
class Parsed:
    """What a wire module read from a request body."""

    messages: tuple[Message, ...]
    model: str = ""
    stream: bool = True
    side: bool = False
    tools: dict[str, Any] = field(default_factory=dict)  # offered tools: name -> JSON schema


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """One request the server received, as recorded."""

    wire: str
    path: str
    headers: dict[str, str]
    body: Any
    messages: tuple[Message, ...]
    model: str
    side: bool

    @property
    def prompt(self) -> str:
        """The text of the first user message: the prompt the CLI was given (CLIs may
        add context blocks of their own before it; see :attr:`user_text`)."""
        return next((m.text for m in self.messages if m.role == "user"), "")

    @property
    def user_text(self) -> str:
        """Every user message's text, joined: where a prompt or a steer is looked for."""
        return "\n".join(m.text for m in self.messages if m.role == "user")

    @property
    def last(self) -> Message | None:
        """The last message: a user's turn or a tool's result."""
        return self.messages[-1] if self.messages else None

    @property
    def tool_results(self) -> list[str]:
        return [m.text for m in self.messages if m.role == "tool"]


Responder = Callable[[ModelRequest], Reply]


class Ids:
    """Unique ids for messages and tool calls of one server."""

    def __init__(self) -> None:
        self._count = itertools.count(1)

    def next(self, prefix: str) -> str:
        return f"{prefix}{next(self._count):06d}"


class Wire(Protocol):
    """One model API: its routes, how to read a request, how to answer."""

    name: str
    paths: Sequence[str]  # Starlette path patterns answered with a model reply (POST)

    def parse(self, path: str, body: Any) -> Parsed:
        """The conversation a request carries."""

    def side_reply(self, parsed: Parsed) -> Reply:
        """The answer to a request the CLI makes on its own."""

    def render(self, reply: Reply, parsed: Parsed, ids: Ids) -> Response | Iterable[bytes]:
        """The answer to a successful reply: a response, or the bytes of a stream (which
        the server cuts short when ``reply.cut``)."""

    def error(self, reply: Reply) -> Response:
        """The API's error response for a failed reply."""

    def extra_routes(self) -> Sequence[Route]:
        """Other routes the CLI calls (a model list, say)."""


class Script:
    """Replies in order, then ``then`` for every request after them (a callable script
    answers each request as it likes)."""

    def __init__(self, replies: Iterable[Reply] | Responder, then: Reply | None = None
                 ) -> None:
        self._responder: Responder | None = replies if callable(replies) else None
        self._queue: list[Reply] = [] if callable(replies) else list(replies)
        self._then = then if then is not None else say("(the script has no more replies)")
        self._lock = threading.Lock()

    def __call__(self, request: ModelRequest) -> Reply:
        if self._responder is not None:
            return self._responder(request)
        with self._lock:
            return self._queue.pop(0) if self._queue else self._then

    def add(self, *replies: Reply) -> None:
        """More replies at the end of the queue."""
        with self._lock:
            self._queue.extend(replies)


class _Cut(Exception):
    """Raised inside a stream to drop the connection mid-answer."""


class ModelServer:
    """The scripted server, running in a thread of this process while in ``with``."""

    def __init__(self, script: Iterable[Reply] | Responder | Script = (),
                 *, wires: Sequence[Wire] | None = None, host: str = "127.0.0.1") -> None:
        from interlock.testing.wire import WIRES

        self.script = script if isinstance(script, Script) else Script(script)
        self.wires = list(wires if wires is not None else WIRES)
        self.host = host
        self.ids = Ids()
        self._requests: list[ModelRequest] = []
        self._lock = threading.Lock()
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._sock: socket.socket | None = None
        self.url = ""

    # -- what was asked ----------------------------------------------------------------

    @property
    def requests(self) -> list[ModelRequest]:
        """Every request the CLIs made that the script answered (side requests left
        out), in arrival order."""
        with self._lock:
            return [r for r in self._requests if not r.side]

    @property
    def all_requests(self) -> list[ModelRequest]:
        with self._lock:
            return list(self._requests)

    def wait_for(self, count: int, timeout: float = 10.0) -> list[ModelRequest]:
        """Block until at least ``count`` scripted requests arrived; returns them."""
        deadline = time.monotonic() + timeout
        while len(self.requests) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(self.requests)} of {count} model requests came")
            time.sleep(0.01)
        return self.requests

    # -- serving -----------------------------------------------------------------------

    def app(self) -> Starlette:
        routes: list[Route] = []
        for wire in self.wires:
            for path in wire.paths:
                routes.append(Route(path, self._endpoint(wire), methods=["POST"]))
            routes.extend(wire.extra_routes())
        return Starlette(routes=routes)

    def _endpoint(self, wire: Wire) -> Callable[[Request], Any]:
        async def endpoint(request: Request) -> Response:
            return await self._answer(wire, request)
        return endpoint

    async def _answer(self, wire: Wire, request: Request) -> Response:
        raw = await request.body()
        try:
            import json
            body = json.loads(raw) if raw else {}
        except ValueError:
            return JSONResponse({"error": "the body is not JSON"}, status_code=400)
        parsed = wire.parse(request.url.path, body)
        record = ModelRequest(wire=wire.name, path=request.url.path,
                              headers=dict(request.headers), body=body,
                              messages=parsed.messages, model=parsed.model, side=parsed.side)
        with self._lock:
            self._requests.append(record)
        if parsed.side:
            reply = wire.side_reply(parsed)
        else:
            reply = await asyncio.to_thread(self.script, record)
        if reply.delay:
            await asyncio.sleep(reply.delay)
        if reply.failed:
            return wire.error(reply)
        answer = wire.render(reply, parsed, self.ids)
        if isinstance(answer, Response):
            return answer
        return StreamingResponse(_cut_short(list(answer)) if reply.cut else _chunks(answer),
                                 media_type="text/event-stream",
                                 headers={"cache-control": "no-cache"})

    def start(self) -> ModelServer:
        import uvicorn

        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, 0))
        sock.listen(128)
        self._sock = sock
        self.url = f"http://{self.host}:{sock.getsockname()[1]}"
        self._server = uvicorn.Server(uvicorn.Config(
            self.app(), log_level="critical", access_log=False, lifespan="off",
            timeout_graceful_shutdown=1))
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]},
                                        daemon=True, name="model-server")
        self._thread.start()
        deadline = time.monotonic() + START_TIMEOUT
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the scripted model server did not start")
            time.sleep(0.005)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._sock is not None:
            self._sock.close()

    def __enter__(self) -> ModelServer:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


async def _chunks(chunks: Iterable[bytes]) -> AsyncIterator[bytes]:
    for chunk in chunks:
        yield chunk


async def _cut_short(chunks: list[bytes]) -> AsyncIterator[bytes]:
    """The first half of the stream (at least one chunk), then a dropped connection."""
    for chunk in chunks[:max(1, len(chunks) // 2)]:
        yield chunk
    await asyncio.sleep(0.05)
    raise _Cut("the scripted stream is cut here")


def sse(event: str | None, data: Any) -> bytes:
    """One server-sent event (``event:`` line only when named)."""
    import json

    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


def iter_text(text: str, size: int = 40) -> Iterator[str]:
    """``text`` in pieces of ``size`` characters (how a model streams its tokens)."""
    for start in range(0, len(text), size):
        yield text[start:start + size]

