"""A lean HTTP/1.1 GET client for the search load generators: keep-alive connections over asyncio streams.

Why not httpx here: httpx spends about a millisecond of CPU per request, and the load generators run on
the same two cores as the service. `make bench-overload` with httpx could not send 295 requests/s: it
skipped thousands it was due to send and queued the rest in its own pool, so it measured itself. This
client does only what a search load needs (GET, `Content-Length` or chunked bodies, keep-alive, plain
HTTP on loopback) in a fraction of that.

Not a general client: no TLS, redirects, proxies, cookies or compression.
"""

from __future__ import annotations

import asyncio
import json
import urllib.parse
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Self

if TYPE_CHECKING:
    from collections.abc import Mapping
    from types import TracebackType

HEADER_END: Final = b"\r\n\r\n"
TRANSPORT_ERRORS: Final = (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ValueError)
"""What a request through `LeanHttpClient` raises when the connection, not the service, failed."""


@dataclass(frozen=True, slots=True)
class LeanResponse:
    """Status, lowercase header names, and the body as sent."""

    status_code: int
    headers: Mapping[str, str]
    content: bytes

    def json(self) -> Any:  # noqa: ANN401 - any JSON value
        """The body parsed as JSON (`ValueError` when it is not)."""
        return json.loads(self.content)


@dataclass
class LeanHttpClient:
    """GETs against `base_url` (`http://host:port`) over at most `connections` keep-alive connections."""

    base_url: str
    connections: int
    timeout_s: float = 30.0
    _idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = field(default_factory=list)
    _slots: asyncio.Semaphore | None = None

    def __post_init__(self) -> None:
        parsed = urllib.parse.urlsplit(self.base_url)
        if parsed.scheme != "http" or parsed.hostname is None:
            msg = f"LeanHttpClient speaks plain http to a host: {self.base_url!r}"
            raise ValueError(msg)
        self._host, self._port = parsed.hostname, parsed.port or 80

    async def __aenter__(self) -> Self:
        self._slots = asyncio.Semaphore(self.connections)
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        while self._idle:
            _, writer = self._idle.pop()
            writer.close()

    async def get(self, path: str, *, params: Mapping[str, str | int] | None = None) -> LeanResponse:
        """`GET path?params`; raises one of `TRANSPORT_ERRORS` when the connection fails."""
        if self._slots is None:
            msg = "use the client as `async with LeanHttpClient(...) as client`"
            raise RuntimeError(msg)
        target = path + ("?" + urllib.parse.urlencode(params) if params else "")
        request = f"GET {target} HTTP/1.1\r\nHost: {self._host}:{self._port}\r\n\r\n".encode()
        async with self._slots:
            while True:
                reused, (reader, writer) = await self._connection()
                try:
                    async with asyncio.timeout(self.timeout_s):
                        writer.write(request)
                        response, keep = await _read_response(reader)
                except (asyncio.IncompleteReadError, ConnectionError) as error:
                    writer.close()
                    # A kept-alive connection the server closed while it sat idle (uvicorn: after 5 s) fails
                    # before the first byte of an answer; a GET is safe to send again on a new one.
                    if reused and not getattr(error, "partial", b""):
                        continue
                    raise
                except BaseException:
                    writer.close()
                    raise
                if keep:
                    self._idle.append((reader, writer))
                else:
                    writer.close()
                return response

    async def _connection(self) -> tuple[bool, tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
        """`(reused, connection)`: an idle one the server has not closed, else a new one."""
        while self._idle:
            reader, writer = self._idle.pop()
            if not reader.at_eof():
                return True, (reader, writer)
            writer.close()
        return False, await self._connect()

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        async with asyncio.timeout(self.timeout_s):
            return await asyncio.open_connection(self._host, self._port)


async def _read_response(reader: asyncio.StreamReader) -> tuple[LeanResponse, bool]:
    """One response and whether its connection may carry the next request."""
    head = (await reader.readuntil(HEADER_END)).decode("latin-1")
    status_line, *header_lines = head[: -len(HEADER_END)].split("\r\n")
    version, status, *_ = status_line.split(" ", 2)
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if "content-length" in headers:
        body = await reader.readexactly(int(headers["content-length"]))
    elif headers.get("transfer-encoding", "").lower() == "chunked":
        body = await _read_chunked(reader)
    else:  # no length: the body runs to the end of the connection
        body = await reader.read()
        headers["connection"] = "close"
    keep = version == "HTTP/1.1" and headers.get("connection", "").lower() != "close"
    return LeanResponse(status_code=int(status), headers=headers, content=body), keep


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    parts: list[bytes] = []
    while True:
        size = int((await reader.readuntil(b"\r\n")).split(b";", 1)[0], 16)
        if size == 0:
            await reader.readuntil(b"\r\n")  # no trailers are sent to a search client
            return b"".join(parts)
        parts.append(await reader.readexactly(size))
        await reader.readexactly(2)
