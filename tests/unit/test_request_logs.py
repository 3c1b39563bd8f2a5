"""Log lines of a request: its id on every line, no terminal colours in JSON, repeated failures throttled."""

from __future__ import annotations

import io
import json
import logging
from types import SimpleNamespace

import pytest

from app.api.errors import logged_path
from app.api.request_tracing import caller_request_id, traceresponse
from app.auth.tokens import TokenVerifier
from app.domain.errors import AuthenticationError
from app.observability.logs import (
    INVALID_REQUEST_MESSAGE,
    REQUEST_ID,
    SERVER_LOGGER,
    ThrottledLog,
    ThrottledMessage,
    ThrottledRecords,
    configure_logging,
)


def test_json_lines_carry_the_request_id_and_never_uvicorns_colour_copy(restore_root_logger) -> None:
    stream = io.StringIO()
    configure_logging("INFO", json=True, stream=stream)

    token = REQUEST_ID.set("req-42")
    try:
        # uvicorn logs its lifecycle lines with a second, coloured copy of the message in `extra`.
        logging.getLogger("app.test").info("inside", extra={"color_message": "\x1b[32minside\x1b[0m"})
    finally:
        REQUEST_ID.reset(token)
    logging.getLogger("app.test").info("outside")

    inside, outside = (json.loads(line) for line in stream.getvalue().splitlines())
    assert inside["request_id"] == "req-42"
    assert "color_message" not in inside
    assert outside["request_id"] == ""


def test_text_lines_name_the_request_only_inside_one(restore_root_logger) -> None:
    stream = io.StringIO()
    configure_logging("INFO", json=False, stream=stream)

    token = REQUEST_ID.set("req-7")
    try:
        logging.getLogger("app.test").info("inside")
    finally:
        REQUEST_ID.reset(token)
    logging.getLogger("app.test").info("outside")

    inside, outside = stream.getvalue().splitlines()
    assert inside.endswith("app.test: inside [request_id=req-7]")
    assert outside.endswith("app.test: outside")


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_throttled_log_writes_the_first_line_then_counts_the_burst(caplog) -> None:
    clock = _Clock()
    log = ThrottledLog(logging.getLogger("app.test.throttled"), interval_s=10.0, clock=clock)
    caplog.set_level(logging.WARNING, logger="app.test.throttled")

    for _ in range(5):
        log.report("503 postgres", "GET %s answered 503", "/x")
    log.report("504 opensearch", "GET %s answered 504", "/y")  # another kind has its own budget
    clock.now += 10.0
    log.report("503 postgres", "GET %s answered 503", "/z")
    clock.now += 30.0
    log.report("503 postgres", "GET %s answered 503", "/w")

    assert [record.getMessage() for record in caplog.records] == [
        "GET /x answered 503",
        "GET /y answered 504",
        "GET /z answered 503 (4 more since the last such line, not logged)",
        "GET /w answered 503",
    ]


@pytest.mark.parametrize(
    ("header", "kept"),
    [
        (b"3f2a9c", "3f2a9c"),
        (b"00000000-0000-4000-8000-000000000000", "00000000-0000-4000-8000-000000000000"),
        (b"agent:run/7@host", "agent:run/7@host"),
        (b"x" * 128, "x" * 128),
        (b"x" * 129, None),  # longer than any id a log line needs
        (b"has space", None),
        (b'quote"d', None),
        (b"", None),
        (b"caf\xc3\xa9", None),  # not ASCII
    ],
)
def test_a_callers_request_id_is_kept_only_when_well_formed(header: bytes, kept: str | None) -> None:
    assert caller_request_id([(b"accept", b"*/*"), (b"x-request-id", header)]) == kept


def test_traceresponse_is_the_w3c_form_of_the_span() -> None:
    from opentelemetry.trace import SpanContext, TraceFlags  # noqa: PLC0415

    context = SpanContext(trace_id=0xABC, span_id=0x12, is_remote=False, trace_flags=TraceFlags(1))

    assert traceresponse(context) == f"00-{0xABC:032x}-{0x12:016x}-01"


def test_uvicorns_invalid_request_warning_is_logged_once_per_interval_with_a_count(
    restore_root_logger, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An in-process uvicorn of another test may have applied its own log config (no propagation to the root).
    for name in ("uvicorn", "uvicorn.error"):
        monkeypatch.setattr(logging.getLogger(name), "propagate", True)
        monkeypatch.setattr(logging.getLogger(name), "disabled", False)
        monkeypatch.setattr(logging.getLogger(name), "level", logging.NOTSET)
    stream = io.StringIO()
    configure_logging("INFO", json=False, stream=stream)
    server = logging.getLogger(SERVER_LOGGER)

    for _ in range(500):  # a NUL in a header, sent 500 times by anyone who can reach the port
        server.warning(INVALID_REQUEST_MESSAGE)
    server.warning("Started server process [1]")

    lines = stream.getvalue().splitlines()
    assert len([line for line in lines if INVALID_REQUEST_MESSAGE in line]) == 1
    assert lines[-1].endswith("Started server process [1]")  # other lines pass


def test_a_throttled_message_says_how_many_it_held_back() -> None:
    clock = _Clock()
    throttled = ThrottledMessage("Invalid HTTP request received.", interval_s=10.0, clock=clock)
    record = logging.LogRecord("uvicorn.error", logging.WARNING, "", 0, "Invalid HTTP request received.", None, None)

    passed = [throttled.filter(record) for _ in range(3)]
    clock.now += 10.0
    again = logging.LogRecord("uvicorn.error", logging.WARNING, "", 0, "Invalid HTTP request received.", None, None)

    assert passed == [True, False, False]
    assert throttled.filter(again)
    assert again.getMessage() == "Invalid HTTP request received. (2 more since the last such line, not logged)"


def failed_request(url: str, error: Exception | None = None) -> logging.LogRecord:
    """A record as opensearch-py's `log_request_fail` makes it."""
    exc_info = (type(error), error, None) if error is not None else None
    return logging.LogRecord(
        "opensearch", logging.WARNING, "", 0, "%s %s [status:%s request:%.3fs]", ("POST", url, "N/A", 0.001), exc_info
    )


def test_a_librarys_failed_calls_pass_once_per_kind_and_interval_then_say_how_many_were_held_back() -> None:
    clock = _Clock()
    throttled = ThrottledRecords(interval_s=10.0, clock=clock)
    refused = ConnectionRefusedError(111, "Connect call failed")

    first = [throttled.filter(failed_request(f"http://127.0.0.1:9/p{n}/_search", refused)) for n in range(4)]
    other_kind = throttled.filter(failed_request("http://127.0.0.1:9/p/_search", TimeoutError()))
    clock.now += 10.0
    again = failed_request("http://127.0.0.1:9/p9/_search", refused)
    passed_again = throttled.filter(again)

    assert first == [True, False, False, False]  # URLs and durations make no new kind
    assert other_kind  # another exception type is another kind
    assert passed_again
    assert again.getMessage() == (
        "POST http://127.0.0.1:9/p9/_search [status:N/A request:0.001s] (3 more since the last such line, not logged)"
    )


def test_a_logged_path_stays_percent_encoded_so_a_caller_cannot_write_a_log_line() -> None:
    forged = "/v1/projects/t/documents/x%0A2026-12-02 CRITICAL poimen.auth: FORGED%0Ay"
    request = SimpleNamespace(scope={"raw_path": forged.encode()}, url=SimpleNamespace(path="decoded\nline"))

    assert logged_path(request) == forged
    assert "\n" not in logged_path(request)


def test_refused_bearer_tokens_are_logged_once_per_reason_and_interval(
    restore_root_logger, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Without a token, anyone who reaches the port wrote one INFO line per request.
    monkeypatch.setattr(logging.getLogger("poimen.auth"), "propagate", True)
    stream = io.StringIO()
    configure_logging("INFO", json=False, stream=stream)
    verifier = TokenVerifier.from_hs256_secret("a-secret-of-at-least-32-bytes-for-hs256!")

    for _ in range(300):
        for header in ("Bearer not-a-jwt", None):
            with pytest.raises(AuthenticationError):
                verifier.verify(header)

    lines = [line for line in stream.getvalue().splitlines() if "bearer token refused" in line]
    assert len(lines) == 2  # one per reason: a malformed token, a missing header
    assert len({line.partition("bearer token refused: ")[2] for line in lines}) == 2
