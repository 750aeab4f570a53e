"""A TCP proxy to PostgreSQL on loopback that can cut the connection around a COMMIT.

``lose("commit")`` drops the next COMMIT before the server sees it (the transaction rolls
back); ``lose("answer")`` lets the server commit and drops its answer. Either way the
client sees its connection die during COMMIT and cannot know which happened.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from typing import Literal

Cut = Literal["commit", "answer"]
READY_FOR_QUERY = b"Z\x00\x00\x00\x05"


class Proxy:
    def __init__(self, host: str, port: int) -> None:
        self.upstream = (host, port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.listener.getsockname()[1]
        self.cut: Cut | None = None
        self.fired = threading.Event()
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def lose(self, cut: Cut) -> None:
        self.fired.clear()
        self.cut = cut

    def close(self) -> None:
        self.listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            pair = _Pair(client, server)
            threading.Thread(target=self._upstream, args=(pair,), daemon=True).start()
            threading.Thread(target=self._downstream, args=(pair,), daemon=True).start()

    def _take(self, cut: Cut) -> bool:
        with self._lock:
            if self.cut != cut:
                return False
            self.cut = None
            return True

    def _upstream(self, pair: _Pair) -> None:
        while (data := pair.recv(pair.client)) is not None:
            if b"COMMIT\x00" in data:
                if self._take("commit"):
                    pair.close()
                    self.fired.set()
                    return
                if self._take("answer"):
                    pair.swallow = True
            pair.send(pair.server, data)
        pair.close()

    def _downstream(self, pair: _Pair) -> None:
        answer = b""
        while (data := pair.recv(pair.server)) is not None:
            if pair.swallow:
                answer += data
                if READY_FOR_QUERY in answer:  # the server has committed and said so
                    pair.close()
                    self.fired.set()
                    return
                continue
            pair.send(pair.client, data)
        pair.close()


class _Pair:
    def __init__(self, client: socket.socket, server: socket.socket) -> None:
        self.client, self.server = client, server
        self.swallow = False

    @staticmethod
    def recv(sock: socket.socket) -> bytes | None:
        try:
            return sock.recv(65536) or None
        except OSError:
            return None

    @staticmethod
    def send(sock: socket.socket, data: bytes) -> None:
        with contextlib.suppress(OSError):
            sock.sendall(data)

    def close(self) -> None:
        for sock in (self.client, self.server):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
