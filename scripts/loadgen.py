"""Load generation shared by `bench_load.py`, `bench_overload.py` and `soak.py`: clients, statistics, reports.

Clients are asyncio with keep-alive: searches go through `lean_http.LeanHttpClient` (`new_search_client`),
which costs the shared cores far less than httpx; other calls (the soak's writes) through httpx. Closed loop: N clients, each sends its next request when
the last one answered (QPS is what the service sustains at that concurrency). Open loop: requests
start at a fixed rate whatever the service does, and latency counts from the moment a request was
due, so a slow service cannot slow the clock down (no coordinated omission).

Query texts come from `../shared/datasets` (SciFact queries, titles and opening sentences, LoCoMo
questions): thousands of distinct texts, so that no cache stands in for the work unless a run means it to.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Protocol

import httpx
from lean_http import TRANSPORT_ERRORS, LeanHttpClient

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping, Sequence

REPOSITORY: Final = Path(__file__).resolve().parents[1]
DATASETS: Final = REPOSITORY.parent / "shared" / "datasets"
QUERY_SHUFFLE_SEED: Final = 7
MIN_QUERY_CHARS: Final = 9  # shorter texts ("p53", "Aim") are lexical look-ups, not the queries we measure
OPENING_SENTENCE_MAX_WORDS: Final = 14
OPEN_LOOP_MAX_OUTSTANDING: Final = 4096  # client-side bound: an open loop must not exhaust the client's memory
REQUEST_TIMEOUT_S: Final = 30.0
OVERLOADED_TITLE: Final = "Overloaded"  # the problem title of a 503 shed by `app/api/overload.py`


def percentile(values: Sequence[float], fraction: float) -> float:
    """The `fraction` quantile (0..1) with linear interpolation between closest ranks; NaN when empty.

    Same definition as numpy's default and `statistics.quantiles(method="inclusive")`: the p50 of
    [1, 2, 3, 4] is 2.5, its p95 is 3.85.
    """
    if not values:
        return math.nan
    ordered = sorted(values)
    position = fraction * (len(ordered) - 1)
    lower = math.floor(position)
    upper = min(lower + 1, len(ordered) - 1)
    return ordered[lower] + (ordered[upper] - ordered[lower]) * (position - lower)


@dataclass(slots=True)
class RunRecorder:
    """What one run saw. Latencies are of answered (200) requests only; everything else is counted."""

    latencies_ms: list[float] = field(default_factory=list)
    server_ms: list[float] = field(default_factory=list)
    cached_server_ms: list[float] = field(default_factory=list)
    status_counts: dict[int, int] = field(default_factory=dict)
    transport_errors: int = 0
    degraded: int = 0
    cached: int = 0
    shed_with_retry_after: int = 0
    server_errors: int = 0  # 5xx other than shedding

    def record(self, *, status: int, elapsed_ms: float, body: dict[str, Any] | None, retry_after: bool) -> None:
        """One answer; `body` is its parsed JSON (a result, or a problem), None when it was not JSON.

        Shed means refused before any work, with `Retry-After`: a 429 (caller's rate) or the 503 titled
        `Overloaded` (too many in flight). A 503 after the work failed (both legs down or late) is a 5xx.
        """
        self.status_counts[status] = self.status_counts.get(status, 0) + 1
        title = body.get("title") if body is not None else None
        if retry_after and (status == 429 or (status == 503 and title == OVERLOADED_TITLE)):
            self.shed_with_retry_after += 1
        elif status >= 500:
            self.server_errors += 1
        if status != 200 or body is None:
            return
        self.latencies_ms.append(elapsed_ms)
        server_ms = float(body.get("metrics", {}).get("total_time_ms", math.nan))
        self.server_ms.append(server_ms)
        self.degraded += bool(body.get("degraded"))
        if body.get("cached"):
            self.cached += 1
            self.cached_server_ms.append(server_ms)

    def summary(self, *, wall_s: float) -> dict[str, Any]:
        """QPS (answered 200s per wall second), client-side percentiles in ms and every count."""
        answered = len(self.latencies_ms)
        sent = sum(self.status_counts.values()) + self.transport_errors
        return {
            "wall_s": round(wall_s, 2),
            "sent": sent,
            "ok": answered,
            "qps": round(answered / wall_s, 1) if wall_s > 0 else 0.0,
            "p50_ms": round(percentile(self.latencies_ms, 0.50), 2),
            "p95_ms": round(percentile(self.latencies_ms, 0.95), 2),
            "p99_ms": round(percentile(self.latencies_ms, 0.99), 2),
            "server_p50_ms": round(percentile(self.server_ms, 0.50), 3),
            "cached": self.cached,
            "cached_server_p50_ms": round(percentile(self.cached_server_ms, 0.50), 3),
            "degraded": self.degraded,
            "shed": self.shed_with_retry_after,
            "shed_rate": round(self.shed_with_retry_after / sent, 4) if sent else 0.0,
            "other_5xx": self.server_errors,
            "transport_errors": self.transport_errors,
            "status": {str(status): count for status, count in sorted(self.status_counts.items())},
        }


def ratio(numerator: float, denominator: float) -> float:
    """`numerator / denominator` rounded for a report; NaN when either is missing or the denominator is 0."""
    if math.isnan(numerator) or math.isnan(denominator) or denominator == 0:
        return math.nan
    return round(numerator / denominator, 3)


def load_query_texts(datasets: Path = DATASETS) -> list[str]:
    """Distinct query texts in a fixed shuffled order (seeded): the same list on every run."""
    pool: list[str] = []
    scifact, locomo = datasets / "scifact", datasets / "locomo"
    pool += [record["text"] for record in read_jsonl(scifact / "queries.jsonl")]
    pool += [record["text"] for record in read_jsonl(locomo / "queries.jsonl")]
    for document in read_jsonl(scifact / "corpus.jsonl"):
        pool.append(document.get("title", ""))
        words = document.get("text", "").split(". ", 1)[0].split()
        pool.append(" ".join(words[:OPENING_SENTENCE_MAX_WORDS]))
    distinct = list(dict.fromkeys(text.strip() for text in pool if len(text.strip()) >= MIN_QUERY_CHARS))
    random.Random(QUERY_SHUFFLE_SEED).shuffle(distinct)
    return distinct


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """Records of a JSON-lines file, blank lines skipped."""
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                yield json.loads(line)


def corpus_documents(datasets: Path = DATASETS) -> list[dict[str, Any]]:
    """SciFact's corpus as `POST /v1/projects/{p}/documents` bodies (`id`, `title`, `text`, `source`)."""
    return [
        {"id": record["_id"], "title": record.get("title", ""), "text": record["text"], "source": record["_id"]}
        for record in read_jsonl(datasets / "scifact" / "corpus.jsonl")
    ]


class QueryCursor:
    """Hands out texts of the pool in order and counts how often it wrapped (a wrapped text is a repeat)."""

    def __init__(self, texts: Sequence[str]) -> None:
        self._texts = texts
        self._position = 0
        self.wrapped = 0

    def next_text(self) -> str:
        """The next text; past the end it starts again and counts a wrap."""
        if self._position == len(self._texts):
            self._position = 0
            self.wrapped += 1
        text = self._texts[self._position]
        self._position += 1
        return text


@dataclass(frozen=True, slots=True)
class SearchTarget:
    """Where and how to search: `GET /memory/query?query=&project=&limit=&strategy=`."""

    project: str
    strategy: str | None = None
    limit: int = 10


class SearchResponse(Protocol):
    """What `search_once` reads of a response (httpx's and `LeanResponse` both have it)."""

    @property
    def status_code(self) -> int: ...

    @property
    def headers(self) -> Mapping[str, str]: ...

    def json(self) -> Any: ...  # noqa: ANN401 - as httpx.Response


class SearchClient(Protocol):
    """A client `search_once` can send through: `LeanHttpClient`, or an `httpx.AsyncClient`."""

    async def get(self, url: str, *, params: Mapping[str, str | int]) -> SearchResponse: ...


def new_client(base_url: str, *, connections: int) -> httpx.AsyncClient:
    """Keep-alive httpx client with `connections` pooled connections (for calls other than searches)."""
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    return httpx.AsyncClient(base_url=base_url, limits=limits, timeout=REQUEST_TIMEOUT_S)


def new_search_client(base_url: str, *, connections: int) -> LeanHttpClient:
    """The lean keep-alive client the search loads use, `connections` at most (one per closed-loop worker)."""
    return LeanHttpClient(base_url, connections=connections, timeout_s=REQUEST_TIMEOUT_S)


async def search_once(
    client: SearchClient, target: SearchTarget, text: str, recorder: RunRecorder, *, started: float
) -> int | None:
    """One search, recorded with its latency from `started` (a `time.perf_counter()` value); its status or None."""
    params: dict[str, str | int] = {"query": text, "project": target.project, "limit": target.limit}
    if target.strategy is not None:
        params["strategy"] = target.strategy
    try:
        response = await client.get("/memory/query", params=params)
    except (httpx.HTTPError, *TRANSPORT_ERRORS):
        recorder.transport_errors += 1
        return None
    elapsed_ms = (time.perf_counter() - started) * 1000
    try:
        body = response.json()
    except ValueError:  # not JSON (a proxy's error page, say): counted by status only
        body = None
    recorder.record(
        status=response.status_code, elapsed_ms=elapsed_ms, body=body, retry_after="retry-after" in response.headers
    )
    return response.status_code


@dataclass(frozen=True, slots=True)
class SearchLoad:
    """What a loop sends: searches of `target` through `client`, with texts from `next_text()`."""

    client: SearchClient
    target: SearchTarget
    next_text: Callable[[], str]


async def closed_loop(
    load: SearchLoad,
    *,
    concurrency: int,
    duration_s: float,
    until: Callable[[], bool] | None = None,
) -> dict[str, Any]:
    """`concurrency` clients back to back for `duration_s` (or until `until()` turns true, if given)."""
    recorder = RunRecorder()
    deadline = time.perf_counter() + duration_s

    def running() -> bool:
        return time.perf_counter() < deadline if until is None else not until()

    async def client_loop() -> None:
        while running():
            await search_once(load.client, load.target, load.next_text(), recorder, started=time.perf_counter())

    started = time.perf_counter()
    await asyncio.gather(*(client_loop() for _ in range(concurrency)))
    return {"concurrency": concurrency, **recorder.summary(wall_s=time.perf_counter() - started)}


async def open_loop(
    load: SearchLoad,
    *,
    rate_per_s: float,
    duration_s: float,
) -> dict[str, Any]:
    """Requests due every 1/`rate_per_s` seconds for `duration_s`; latency counts from when each was due."""
    recorder = RunRecorder()
    pending: set[asyncio.Task[int | None]] = set()
    skipped = 0  # due while OPEN_LOOP_MAX_OUTSTANDING were outstanding: the client, not the service, gave up
    started = time.perf_counter()
    due_count = int(rate_per_s * duration_s)
    for index in range(due_count):
        due = started + index / rate_per_s
        delay_s = due - time.perf_counter()
        if delay_s > 0:
            await asyncio.sleep(delay_s)
        if len(pending) >= OPEN_LOOP_MAX_OUTSTANDING:
            skipped += 1
            continue
        task = asyncio.create_task(search_once(load.client, load.target, load.next_text(), recorder, started=due))
        pending.add(task)
        task.add_done_callback(pending.discard)
    if pending:
        await asyncio.gather(*pending)
    # Until the last answer, not the last send: answers after the sending window must not inflate QPS.
    summary = recorder.summary(wall_s=time.perf_counter() - started)
    return {"offered_qps": rate_per_s, "client_skipped": skipped, **summary}


def write_report(path: Path, *, summary: dict[str, Any], markdown: str) -> tuple[Path, Path]:
    """`<path>.json` (NaN written as null) and `<path>.md`; returns both paths."""
    json_path, markdown_path = path.with_suffix(".json"), path.with_suffix(".md")
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(without_nan(summary), indent=2) + "\n", encoding="utf-8")
    markdown_path.write_text(markdown, encoding="utf-8")
    return json_path, markdown_path


def without_nan(value: Any) -> Any:  # noqa: ANN401 - any JSON-shaped value
    """`value` with every NaN float replaced by None, so the JSON is standard (no bare NaN token)."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {key: without_nan(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [without_nan(item) for item in value]
    return value


def verdict(*, holds: bool | None) -> str:
    """`holds` / `does not hold` / `not measured` for a target line of a report."""
    if holds is None:
        return "not measured"
    return "holds" if holds else "does not hold"


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A GitHub markdown table; NaN cells print as `-`."""

    def cell(value: object) -> str:
        return "-" if isinstance(value, float) and math.isnan(value) else str(value)

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(value) for value in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"
