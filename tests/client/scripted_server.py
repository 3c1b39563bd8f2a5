"""A real loopback HTTP server that answers from a script, for the client's tests (no mocks of httpx).

It answers each request with the next scripted answer and records when each arrived, so tests measure
the waits the client really made, and see that a request refused before sending never arrived.
"""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator

LIVE = (200, {}, {"status": "ok"})
PROBLEM = {"Content-Type": "application/problem+json"}


@dataclass
class Arrival:
    at_s: float
    method: str
    path: str
    body: bytes


@dataclass
class ScriptedServer:
    """Answers request n with `script[n]` (the last answer repeats); `arrivals` records every request."""

    url: str = ""
    script: list[tuple[int, dict[str, str], object]] = field(default_factory=list)
    arrivals: list[Arrival] = field(default_factory=list)

    def gaps_s(self) -> list[float]:
        return [later.at_s - earlier.at_s for earlier, later in zip(self.arrivals, self.arrivals[1:], strict=False)]


@contextlib.contextmanager
def scripted_server() -> Iterator[ScriptedServer]:
    """A `ScriptedServer` listening on a free loopback port until the block ends."""
    scripted = ScriptedServer()

    class Handler(BaseHTTPRequestHandler):
        def answer(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            scripted.arrivals.append(Arrival(time.monotonic(), self.command, self.path, body))
            status, headers, payload = scripted.script[min(len(scripted.arrivals), len(scripted.script)) - 1]
            content = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
            self.send_response(status)
            for name, value in {"Content-Type": "application/json", **headers}.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(content)))
            self.end_headers()
            self.wfile.write(content)

        do_GET = do_POST = do_DELETE = answer  # noqa: N815 - the method names http.server calls

        def log_message(self, *_: object) -> None:
            pass

    http_server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    scripted.url = f"http://127.0.0.1:{http_server.server_address[1]}"
    thread = threading.Thread(target=http_server.serve_forever, daemon=True)
    thread.start()
    try:
        yield scripted
    finally:
        http_server.shutdown()
        http_server.server_close()


@dataclass
class SilentServer:
    """Accepts connections and reads requests, never answers; `requests` counts the request heads read."""

    url: str = ""
    connections: int = 0
    requests: int = 0


@contextlib.contextmanager
def silent_server() -> Iterator[SilentServer]:
    """A `SilentServer` listening on a free loopback port until the block ends (a service hung mid-request)."""
    silent = SilentServer()
    listener = socket.create_server(("127.0.0.1", 0))
    silent.url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    held: list[socket.socket] = []

    def hold(connection: socket.socket) -> None:
        with contextlib.suppress(OSError), connection:
            while data := connection.recv(65536):  # until the client gives up and closes
                silent.requests += data.count(b"\r\n\r\n")

    def accept() -> None:
        with contextlib.suppress(OSError):
            while True:
                connection, _ = listener.accept()
                silent.connections += 1
                held.append(connection)
                threading.Thread(target=hold, args=(connection,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield silent
    finally:
        listener.close()
        for connection in held:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)


@dataclass
class HangUpServer:
    """Reads each request whole, then closes the connection without an answer (`reset`: with a TCP RST).

    A service that did the work and died before answering, or a proxy that dropped the connection: the
    request reached it. `requests` counts the requests read.
    """

    url: str = ""
    reset: bool = False
    requests: int = 0


@contextlib.contextmanager
def hang_up_server(*, reset: bool = False) -> Iterator[HangUpServer]:
    """A `HangUpServer` listening on a free loopback port until the block ends."""
    server = HangUpServer(reset=reset)
    listener = socket.create_server(("127.0.0.1", 0))
    server.url = f"http://127.0.0.1:{listener.getsockname()[1]}"

    def read_then_hang_up(connection: socket.socket) -> None:
        with contextlib.suppress(OSError), connection:
            received = b""
            while b"\r\n\r\n" not in received and (data := connection.recv(65536)):
                received += data
            head, _, body = received.partition(b"\r\n\r\n")
            length = next(
                (
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                ),
                0,
            )
            while len(body) < length and (data := connection.recv(65536)):
                body += data
            server.requests += 1
            if server.reset:  # linger 0: close() sends RST, the client reads ECONNRESET
                connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))

    def accept() -> None:
        with contextlib.suppress(OSError):
            while True:
                connection, _ = listener.accept()
                threading.Thread(target=read_then_hang_up, args=(connection,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield server
    finally:
        listener.close()
