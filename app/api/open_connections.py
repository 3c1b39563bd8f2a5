"""A cap on the connections one process holds open, under its descriptor limit: past it, the idlest one is closed.

Every connection is a file descriptor, and so is every PostgreSQL connection, index file and log the process
opens. uvicorn accepts connections whatever their number: a client opening more than the process may hold
(2,000 silent connections with `ulimit -n` 1,024) took every descriptor, so for as long as they stayed open
(`REQUEST_HEAD_TIMEOUT_S`, 20 s) `/healthz`, `/readyz` and every search were cut without an answer, the
outbox could not open the lexical index ("Too many open files") and the engine watch took the embedded
PostgreSQL for down. Now a process holds at most `connection_limit()` connections and queues at most
`listen_backlog()`, leaving `DESCRIPTOR_RESERVE` descriptors to its engines; a new connection past the cap
closes the connection that has been idle longest (no request being answered on it: one that sent nothing,
part of a head, or a kept-alive one between requests), as nginx reuses its idle keep-alive connections when
it runs out. A flood thus pushes
out its own older connections, and a client whose request is being answered keeps its connection. Only when
every connection has a request in flight is the new one closed instead.
"""

from __future__ import annotations

import resource
import weakref
from typing import TYPE_CHECKING, Final, Protocol

from app.api.request_head import HeadLimitedHttpToolsProtocol
from app.observability.metrics import record_connection_closed

if TYPE_CHECKING:
    import asyncio

DESCRIPTOR_RESERVE: Final = 256
"""Descriptors kept for the process's own files and sockets (PostgreSQL pool, index files, logs, the model)."""
MAX_OPEN_CONNECTIONS: Final = 10_000
"""The cap whatever the descriptor limit: an idle connection costs ~2 KiB of the process's memory and kernel buffers."""
MAX_LISTEN_BACKLOG: Final = 2048
"""uvicorn's own backlog, kept where descriptors allow it."""
KEEP_ALIVE_TIMEOUT_S: Final = 75
"""How long a kept-alive connection may wait between requests (uvicorn's default is 5 s).

Longer than the idle timeout of what usually sits in front (ingress-nginx's `upstream-keepalive-timeout` and AWS
load balancers: 60 s), so that side closes an idle connection first: a server closing first loses the request
sent as it closes (96 of 200 searches reused ~5 s after an answer got no answer at 5 s). nginx's own default.
Idle connections are safe to keep: past the cap the idlest are closed for new ones.
"""


def raise_descriptor_limit() -> int:
    """Raise the soft limit on open descriptors to the hard one (as Go does at start); the soft limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard in {resource.RLIM_INFINITY, soft}:
        return soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError):
        return soft  # a platform that refuses: serve under the limit it has
    return hard


def _connection_descriptors(descriptor_limit: int) -> int:
    """Descriptors for connections, open or waiting to be accepted: all but a reserve, at least half."""
    return max(descriptor_limit - DESCRIPTOR_RESERVE, descriptor_limit // 2)


def listen_backlog(descriptor_limit: int) -> int:
    """The listening socket's backlog: a third of the connections' descriptors, at most uvicorn's 2,048.

    The event loop accepts every connection waiting in the backlog at once and closes the ones it pushes out only
    on its next turn: with the backlog at uvicorn's 2,048 under `ulimit -n` 256, a flood that queued while the
    loop was busy was accepted in one go and the lexical index failed "Too many open files" despite the cap.
    """
    if descriptor_limit == resource.RLIM_INFINITY:
        return MAX_LISTEN_BACKLOG
    return max(1, min(MAX_LISTEN_BACKLOG, _connection_descriptors(descriptor_limit) // 3))


def connection_limit(descriptor_limit: int) -> int:
    """How many connections a process with `descriptor_limit` descriptors holds open: what the backlog leaves."""
    if descriptor_limit == resource.RLIM_INFINITY:
        return MAX_OPEN_CONNECTIONS
    available = _connection_descriptors(descriptor_limit) - listen_backlog(descriptor_limit)
    return max(1, min(MAX_OPEN_CONNECTIONS, available))


class Connection(Protocol):
    """What the cap needs of a served connection."""

    transport: asyncio.Transport

    def is_answering(self) -> bool:
        """True while a request of this connection is being answered: such a connection is never closed here."""
        ...


class OpenConnections:
    """One server's open connections, idlest first; `admit` makes room for a new one."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        # Insertion-ordered: a connection moves to the end whenever it finishes an answer (`touch`).
        self._open: dict[Connection, None] = {}

    def __len__(self) -> int:
        return len(self._open)

    def admit(self, connection: Connection) -> bool:
        """Count `connection` in, closing the idlest other one when at the cap; False when none could be closed."""
        if len(self._open) >= self.limit and not self._close_idlest():
            record_connection_closed("full")
            return False
        self._open[connection] = None
        return True

    def touch(self, connection: Connection) -> None:
        """`connection` just finished an answer: it is the least idle now."""
        if connection in self._open:
            del self._open[connection]
            self._open[connection] = None

    def release(self, connection: Connection) -> None:
        """`connection` is closed (or closing): it no longer counts."""
        self._open.pop(connection, None)

    def _close_idlest(self) -> bool:
        answering: list[Connection] = []
        closed = False
        for connection in self._open:
            if connection.is_answering():
                answering.append(connection)  # moved behind the idle ones below, so the next search is short
                continue
            closed = True
            break
        for busy in answering:
            self.touch(busy)
        if not closed:
            return False
        idlest = next(iter(self._open))
        self.release(idlest)  # its descriptor is freed once the close completes (after any answer still buffered)
        idlest.transport.close()
        record_connection_closed("idle")
        return True


_rooms: weakref.WeakKeyDictionary[object, OpenConnections] = weakref.WeakKeyDictionary()


def open_connections(server_state: object, *, limit: int) -> OpenConnections:
    """The open connections of the server whose shared state is `server_state` (made on first use)."""
    room = _rooms.get(server_state)
    if room is None:
        room = _rooms[server_state] = OpenConnections(limit)
    return room


class CappedHttpToolsProtocol(HeadLimitedHttpToolsProtocol):
    """The served protocol (request heads capped and timed), holding at most `connection_limit()` connections."""

    descriptor_limit: int | None = None
    """The descriptors the cap is drawn from; None: the process's soft limit when the first connection comes."""

    _admitted = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Count the connection in, closing the idlest one at the cap (or this one, when every one is answering)."""
        super().connection_made(transport)
        if self._room().admit(self):
            self._admitted = True
        else:
            transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        """Closed: room for another."""
        if self._admitted:
            self._room().release(self)
        super().connection_lost(exc)

    def on_response_complete(self) -> None:
        """An answer went out: this connection is the least idle now."""
        super().on_response_complete()
        if self._admitted and not self.transport.is_closing():
            self._room().touch(self)

    def is_answering(self) -> bool:
        """True while a request of this connection is being answered."""
        return self.cycle is not None and not self.cycle.response_complete

    def _room(self) -> OpenConnections:
        limit = self.descriptor_limit
        if limit is None:
            limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        return open_connections(self.server_state, limit=connection_limit(limit))


class AccessLoggedHttpToolsProtocol(CappedHttpToolsProtocol):
    """The served protocol with `ACCESS_LOG_ENABLED`: each request it refuses before the app is one access line."""

    access_log_enabled = True
