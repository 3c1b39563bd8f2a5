"""A cap on a request's head (request line and headers): over `MAX_REQUEST_HEAD_BYTES` it is a 431 or 414, not memory.

uvicorn's httptools parser buffers a header whatever its length (a 64 MB header was read in whole), and
Litestar sees the request only once its head is complete, so the cap has to sit in the HTTP protocol itself.
Two counts hold it: the bytes received while a head is being read (bounds memory even when one header never
ends) and the exact lengths of the URL and each header as the parser hands them over (holds the limit for a
head that arrives in one read). Either refuses with a problem+json 431 and ends the connection, as nginx
and Node do for their own limits (a 414 when the cap is crossed before the request line ended: the URL is what
is too long, RFC 9110 15.5.15, and a 431 sent a client looking through its headers): the answer is sent and the
sending side shut, then whatever the client is still sending is read and dropped for up to `LINGER_S` before
closing (closing with unread data would reset the connection and could destroy the 431 before the client reads it).

A head must also arrive in time: whole within `REQUEST_HEAD_TIMEOUT_S` of the connection opening, or of the
first byte of a kept-alive connection's next request (one idle between requests closes after
`app.api.open_connections.KEEP_ALIVE_TIMEOUT_S`). A connection that sent nothing by then is closed; one
partway through a head is answered 408 the same way as a 431. uvicorn has no such timeout: a connection that
never finished its head was held for good, and a client holding as many as the process may open descriptors
shut out every other connection, the kubelet's probes included. The rest of a body left unread by an early
answer (a 405, a 401, a shed 503) is read and dropped under the body's own rule (`app.api.overload`: 20 s,
plus 1 s per 16 KiB received), then the connection is closed: a client trickling it held the connection for
good.

Each refusal (the 400 of a head the parser cannot read included) is counted in
`poimen_http_requests_refused_total{status,reason}` and, with `access_log_enabled` (`ACCESS_LOG_ENABLED`), written
as one access line under the route `<refused>`: they never reach the app, whose metrics and access log saw none.

An answer must be read: a connection whose client takes nothing of it for `RESPONSE_SEND_TIMEOUT_S` while
the answer waits in the process's write buffer is dropped (nginx's `send_timeout`: the time between two
successive writes, not for the whole answer, so a slow client reading steadily gets all of it). uvicorn
has no write timeout, so an answer a client never read (up to ~9 MB for a full batch search) stayed in
memory for as long as the client kept the connection open.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from app.api.access_log import REFUSED_ROUTE, write_access_line
from app.api.errors import framework_title
from app.api.overload import REQUEST_BODY_MIN_RATE_BYTES_PER_S, REQUEST_BODY_TIMEOUT_S
from app.observability.refused_requests import (
    HEAD_TIMEOUT,
    HEAD_TOO_LARGE,
    MALFORMED,
    REFUSAL_STATUSES,
    TARGET_TOO_LONG,
    record_request_refused,
)

if TYPE_CHECKING:
    from asyncio import TimerHandle

MAX_REQUEST_HEAD_BYTES = 64 * 1024
"""The request line and all headers together; a bearer token is at most 16,384 characters (app.auth.tokens)."""
LINGER_S = 2.0
"""After a refused head (414, 431, 408), how long the rest of the request is read and dropped before closing."""
REQUEST_HEAD_TIMEOUT_S = 20.0
"""Seconds from a connection's opening (or its next request's first byte) to the end of the request head."""
RESPONSE_SEND_TIMEOUT_S = 20.0
"""Seconds an answer may wait in the write buffer, its client taking none of it, before the connection is dropped."""


class _HeadTooLargeError(Exception):
    """Raised inside a parser callback; httptools turns it into the parse error uvicorn answers."""


class HeadLimitedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol: a head over `MAX_REQUEST_HEAD_BYTES` is a 431 (414: the URL alone), late a 408."""

    head_timeout_s = REQUEST_HEAD_TIMEOUT_S
    unread_body_timeout_s = REQUEST_BODY_TIMEOUT_S
    unread_body_min_rate_bytes_per_s = REQUEST_BODY_MIN_RATE_BYTES_PER_S
    send_timeout_s = RESPONSE_SEND_TIMEOUT_S
    access_log_enabled = False
    """Write an access line for each refusal (`ACCESS_LOG_ENABLED`; `poimen serve` picks the class)."""

    # Per connection; set on the instance as requests come (class defaults: a new connection reads a head).
    _reading_head = True
    _head_bytes_received = 0
    _head_bytes_parsed = 0
    _head_too_large = False
    _request_line_ended = False
    _target_too_long = False
    _refused = False
    _head_timer: TimerHandle | None = None
    _head_started_s = 0.0  # loop time the head being read began: for a refusal's access line
    _method: str | None = None  # the request line's method, once the parser read one
    _body_bytes_received = 0
    _unread_body_timer: TimerHandle | None = None
    _send_timer: TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """A new connection: its first head is timed from now."""
        super().connection_made(transport)
        self._start_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        """Gone: nothing left to time."""
        self._stop_head_timer()
        self._stop_unread_body_timer()
        self._stop_send_timer()
        super().connection_lost(exc)

    def pause_writing(self) -> None:
        """The answer fills the write buffer: the client must take some of it every `send_timeout_s`."""
        super().pause_writing()
        if self._send_timer is None:
            self._watch_send(self.transport.get_write_buffer_size() + 1)

    def resume_writing(self) -> None:
        """The client read: the buffer is below its low mark again."""
        self._stop_send_timer()
        super().resume_writing()

    def data_received(self, data: bytes) -> None:
        """Count what arrives while a head is read; over the cap, refuse it."""
        if self._refused:
            return  # the refusal is sent; the rest of this request is dropped unread by the parser
        if self._reading_head:
            if self._head_timer is None:  # a kept-alive connection's next request: timed from its first byte
                self._start_head_timer()
            self._head_bytes_received += len(data)
            if not self._request_line_ended and b"\n" in data:
                self._request_line_ended = True
        else:
            self._body_bytes_received += len(data)
        super().data_received(data)
        over_cap = self._reading_head and self._head_bytes_received > MAX_REQUEST_HEAD_BYTES
        if over_cap and not self._refused and not self.transport.is_closing():
            self._head_too_large = True
            self._refuse_head()

    def on_message_begin(self) -> None:
        """A new request: its parsed head starts at zero."""
        super().on_message_begin()
        self._head_bytes_parsed = 0
        self._method = None

    def on_url(self, url: bytes) -> None:
        """Count the request target."""
        if self._method is None:  # the target follows the method: the parser has it now
            self._method = self.parser.get_method().decode("ascii")
        self._count_parsed(len(url), target=True)
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        """Count one header as it stood on the wire."""
        self._count_parsed(len(name) + len(value) + 4)  # ": " and CRLF, as on the wire
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        """The head is whole: what arrives next is body, neither counted nor timed here."""
        self._stop_head_timer()
        self._reading_head = False
        self._body_bytes_received = 0
        self._head_bytes_received = 0
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        """A kept-alive connection's next request starts with its head."""
        super().on_message_complete()
        self._reading_head = True
        self._request_line_ended = False
        self._stop_unread_body_timer()
        if self.cycle is not None and self.cycle.response_complete and self._head_timer is None:
            # The rest of an answered request's body came: uvicorn times nothing now, so the next head is timed.
            self._start_head_timer()

    def on_response_complete(self) -> None:
        """Answered before the whole body came: the rest must come at the body's rate, or the connection closes."""
        super().on_response_complete()
        if not self._reading_head and not self.transport.is_closing():
            deadline = asyncio.get_running_loop().time() + self.unread_body_timeout_s
            self._watch_unread_body(deadline - self._body_bytes_received / self.unread_body_min_rate_bytes_per_s)

    def send_400_response(self, msg: str) -> None:
        """Answer a parse error as uvicorn does (400), but the one `_count_parsed` raised with a 431."""
        if self._head_too_large:
            self._refuse_head()
        else:
            super().send_400_response(msg)
            self._record_refusal(MALFORMED, response_bytes=len(msg))

    def _count_parsed(self, size_bytes: int, *, target: bool = False) -> None:
        self._head_bytes_parsed += size_bytes
        if self._head_bytes_parsed > MAX_REQUEST_HEAD_BYTES:
            self._head_too_large = True
            self._target_too_long = target
            raise _HeadTooLargeError

    def _start_head_timer(self, *, new_head: bool = True) -> None:
        loop = asyncio.get_running_loop()
        if new_head:
            self._head_started_s = loop.time()
        self._head_timer = loop.call_later(self.head_timeout_s, self._head_timed_out)

    def _stop_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self.transport.is_closing() or self._refused:
            return
        if self.cycle is not None and not self.cycle.response_complete:
            self._start_head_timer(new_head=False)  # a request is still being answered here: its answer comes first
            return
        if self._head_bytes_received == 0:
            self.transport.close()  # nothing was asked: nothing to answer
            return
        detail = f"the request line and headers did not arrive within {self.head_timeout_s:g} s"
        self._refuse(HEAD_TIMEOUT, detail)

    def _watch_unread_body(self, since: float) -> None:
        """Close unless the body is whole by `since` + 1 s per `unread_body_min_rate_bytes_per_s` bytes."""
        self._unread_body_timer = None
        if self._reading_head or self.transport.is_closing():
            return
        loop = asyncio.get_running_loop()
        deadline = since + self._body_bytes_received / self.unread_body_min_rate_bytes_per_s
        if loop.time() >= deadline:
            self.transport.close()  # its answer went out long ago; the rest of its body is not worth waiting for
            return
        self._unread_body_timer = loop.call_at(deadline, self._watch_unread_body, since)

    def _stop_unread_body_timer(self) -> None:
        if self._unread_body_timer is not None:
            self._unread_body_timer.cancel()
            self._unread_body_timer = None

    def _stop_send_timer(self) -> None:
        if self._send_timer is not None:
            self._send_timer.cancel()
            self._send_timer = None

    def _watch_send(self, buffered_before: int) -> None:
        """Drop the connection unless the client took some of the buffered answer since the last look."""
        self._send_timer = None
        if self.transport.is_closing():
            return
        buffered = self.transport.get_write_buffer_size()
        if buffered >= buffered_before:
            self.transport.abort()  # close() would wait for the client to read the buffer it is not reading
            return
        self._send_timer = asyncio.get_running_loop().call_later(self.send_timeout_s, self._watch_send, buffered)

    def _refuse_head(self) -> None:
        if self._target_too_long or not self._request_line_ended:
            detail = f"the request target (the URL) is over the {MAX_REQUEST_HEAD_BYTES} bytes a request head may hold"
            self._refuse(TARGET_TOO_LONG, detail)
            return
        detail = f"the request line and headers together are over {MAX_REQUEST_HEAD_BYTES} bytes"
        self._refuse(HEAD_TOO_LARGE, detail)

    def _record_refusal(self, reason: str, *, response_bytes: int) -> None:
        """Count the refusal and, with the access log on, write its line: the app never saw this request."""
        record_request_refused(reason)
        if self.access_log_enabled:
            write_access_line(
                method=self._method,
                route=REFUSED_ROUTE,
                status=REFUSAL_STATUSES[reason],
                duration_ms=(asyncio.get_running_loop().time() - self._head_started_s) * 1000.0,
                response_bytes=response_bytes,
            )

    def _refuse(self, reason: str, detail: str) -> None:
        """Answer `reason`'s status as problem+json, titled as the service titles the framework's errors; close."""
        self._refused = True
        self._stop_head_timer()
        status = REFUSAL_STATUSES[reason]
        title = framework_title(status)
        body = json.dumps({"type": "about:blank", "title": title, "status": status, "detail": detail}).encode()
        content = [STATUS_LINE[status]]
        for name, value in self.server_state.default_headers:
            content.extend([name, b": ", value, b"\r\n"])
        content.extend(
            [
                b"content-type: application/problem+json\r\n",
                b"content-length: " + str(len(body)).encode("ascii") + b"\r\n",
                b"connection: close\r\n",
                b"\r\n",
                body,
            ]
        )
        self.transport.write(b"".join(content))
        self._record_refusal(reason, response_bytes=len(body))
        if self.transport.can_write_eof():
            self.transport.write_eof()
            asyncio.get_running_loop().call_later(LINGER_S, self.transport.close)
        else:
            self.transport.close()
