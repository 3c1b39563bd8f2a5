"""Differential probe of the search doors: one search asked every way the service offers, answers compared.

Starts `poimen serve` on the embedded engines in a temporary POIMEN_DATA_DIR (or uses `--url` with
`--data-dir`), ingests a small seeded corpus, then asks seeded random searches through each door that takes
their options and compares the answers:

- `GET /memory/query` (query string), `POST /v1/search`, `POST /v1/search/batch` (the search alone, and
  after another query), the Python client's `search`, `memory_query` and `search_batch`, sync and async,
  and `poimen query --json` (its `--limit` and `--strategy`);
- answers: every hit's id, rank, scores and score breakdown, the strategy, fusion, `query_analysis` and
  `leg_rankings` (with `explain`), offset and whether a next page exists; not timings or `cached`;
- a door that does not take an option must refuse it with a 400 naming it (the client: a `ValueError`
  before sending), never answer as if it had not been sent;
- invalid values: the same status and field on every door (a batch names `queries[i].<field>`);
- defaults: an option left out answers as the README's knob default sent explicitly;
- batches: one bad item fails the whole batch with a 400 naming it; duplicates answer alike; each
  item's `as_of` and `cursor` are its own.

Prints one line per disagreement and a summary with counts; exit 1 when any disagreement was found.

    python scripts/probe_search_parity.py --seed 7 --cases 40
    python scripts/probe_search_parity.py --seed 7 --env RERANKER=learned --env POIMEN_FLAGS_FILE=/path/flags.yaml
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import loopback_service
import msgspec

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "clients" / "python"))

from poimen_client.clients import AsyncPoimenClient, PoimenClient  # noqa: E402
from poimen_client.errors import InvalidRequestError  # noqa: E402
from poimen_client.models import FusionWeights, SearchFilters, SearchQuery  # noqa: E402

BIN = Path(sys.executable).parent
PROJECT = "parity"
READY_TIMEOUT_S = 240.0
TOPICS = (
    "kubernetes networking port conflicts",
    "postgres backup restore",
    "release notes deploy",
    "incident latency cache",
    "onboarding laptop setup",
    "meeting retrospective planning",
)
TAGS = ("networking", "database", "release", "incident", "onboarding", "meeting")
QUERIES = (
    "backup restore",
    "port conflicts on kubernetes",
    "what happened in the latency incident last week",
    "#release deploy notes",
    '"laptop setup"',
    "retrospective planning -meeting",
    "when did we restore the database",
    "cache timeout error",
)
GET_OPTIONS = frozenset({"limit", "strategy", "fusion", "explain", "offset", "as_of"})
CLI_OPTIONS = frozenset({"limit", "strategy"})
# What GET /memory/query and the CLI would be asked, spelt their way, when they do not take an option.
GET_SPELLING = {
    "filters": "tag",
    "weights": "weights",
    "rrf_k": "rrf_k",
    "collapse": "collapse",
    "min_score": "min_score",
}


EXTRA_ENVIRONMENT: dict[str, str] = {}
"""`--env NAME=VALUE`: set for the server and `poimen query` alike (RERANKER, POIMEN_FLAGS_FILE, a knob)."""


def environment(data_dir: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in {"DATABASE_URL", "OPENSEARCH_URL"}}
    env.update(
        POIMEN_DATA_DIR=str(data_dir),
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        OUTBOX_POLL_INTERVAL_S="0.1",
        PYTHONPATH=str(ROOT),
    )
    for name in ("POIMEN_FLAGS_FILE", "AUTH_MODE", "RERANKER"):
        env.pop(name, None)
    env.update(EXTRA_ENVIRONMENT)
    return env


def corpus(rng: random.Random) -> list[dict[str, Any]]:
    base = datetime(2024, 5, 1, tzinfo=UTC)
    documents = []
    for index in range(24):
        topic = index % len(TOPICS)
        words = [*TOPICS[topic].split(), "the", "server", "team", "fix", "error", "timeout"]
        others = [*TOPICS[(topic + 1) % len(TOPICS)].split(), "alpha", "beta"]
        text = (
            f"# {TOPICS[topic].title()}\n\nIntro {TOPICS[topic]} note {index}.\n\n## Details {index}\n\n"
            + " ".join(rng.choice(words) for _ in range(60))
            + f"\n\n### Deep {index}\n\n"
            + " ".join(rng.choice(others) for _ in range(40))
        )
        document: dict[str, Any] = {
            "id": f"doc-{index:02d}",
            "text": text,
            "source": f"{'runbooks' if index % 2 else 'notes'}/{TAGS[topic]}/{index}.md",
            "title": TOPICS[topic].title(),
            "tags": [TAGS[topic]] + (["shared"] if index % 3 == 0 else []),
        }
        if index % 4:
            document["event_time"] = (base + timedelta(days=3 * index)).isoformat()
        documents.append(document)
    return documents


def random_options(rng: random.Random) -> dict[str, Any]:  # noqa: PLR0912 - one branch per option
    """One search's options as a body spells them (no `query`)."""
    options: dict[str, Any] = {}
    if rng.random() < 0.5:
        options["limit"] = rng.randint(1, 15)
    strategy = rng.choice([None, None, "hybrid", "semantic", "lexical", "cascading"])
    if strategy:
        options["strategy"] = strategy
    if strategy in {None, "hybrid"}:
        fusion = rng.choice([None, "rrf", "weighted", "zscore"])
        if fusion:
            options["fusion"] = fusion
        if rng.random() < 0.3:
            options["weights"] = rng.choice([{"semantic": 0.3}, {"lexical": 0.8}, {"semantic": 2, "lexical": 3}])
        if fusion in {None, "rrf"} and rng.random() < 0.3:
            options["rrf_k"] = rng.choice([1, 5, 60])
    if rng.random() < 0.5:
        options["explain"] = True
    if rng.random() < 0.4:
        options["offset"] = rng.randint(0, 5)
    if rng.random() < 0.3:
        options["as_of"] = rng.choice(["2024-06-15T12:00:00Z", "2024-07-01T08:00:00+09:00"])
    filters: dict[str, Any] = {}
    if rng.random() < 0.25:
        filters["tags"] = [rng.choice(TAGS)]
    if rng.random() < 0.2:
        filters["source_prefix"] = rng.choice(["runbooks/", "notes/", "notes/database"])
    if rng.random() < 0.2:
        filters["date_from"] = "2024-05-10T00:00:00Z"
        filters["date_to"] = "2024-07-01T00:00:00Z"
    if rng.random() < 0.2:
        filters["level"] = rng.choice(["L1", ["L2", "L3"]])
    if filters:
        options["filters"] = filters
    if rng.random() < 0.25:
        options["collapse"] = rng.randint(1, 2)
    if rng.random() < 0.2:
        options["min_score"] = rng.choice([0.1, 0.3])
    return options


def comparable(answer: dict[str, Any]) -> dict[str, Any]:
    """What must agree between doors: all but timings, `cached`, the cursor's bytes and the echoed query."""
    kept = {key: value for key, value in answer.items() if key not in {"metrics", "cached", "next_cursor"}}
    kept["has_next_cursor"] = answer.get("next_cursor") is not None
    kept["final_results_count"] = answer["metrics"]["final_results_count"]
    return kept


def first_difference(left: Any, right: Any, path: str = "") -> str | None:  # noqa: ANN401, PLR0911 - JSON values
    if isinstance(left, dict) and isinstance(right, dict):
        for key in sorted(set(left) | set(right)):
            found = first_difference(left.get(key, "<absent>"), right.get(key, "<absent>"), f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(left, list) and isinstance(right, list):
        if len(left) != len(right):
            return f"{path}: {len(left)} items vs {len(right)}"
        for index, (a, b) in enumerate(zip(left, right, strict=True)):
            found = first_difference(a, b, f"{path}[{index}]")
            if found:
                return found
        return None
    if isinstance(left, float) and isinstance(right, float) and abs(left - right) <= 1e-9:
        return None
    return None if left == right else f"{path}: {left!r} vs {right!r}"


def query_string(text: str, options: dict[str, Any]) -> dict[str, str]:
    params = {"query": text, "project": PROJECT}
    for name, value in options.items():
        params[name] = str(value).lower() if isinstance(value, bool) else str(value)
    return params


def client_query(text: str, options: dict[str, Any]) -> SearchQuery:
    fields = dict(options)
    if "filters" in fields:
        fields["filters"] = msgspec.convert(fields["filters"], SearchFilters)
    if "weights" in fields:
        fields["weights"] = FusionWeights(**fields["weights"])
    if "as_of" in fields:
        fields["as_of"] = datetime.fromisoformat(fields["as_of"])
    return SearchQuery(query=text, **fields)


class Probe:
    def __init__(self, url: str, data_dir: Path | None) -> None:
        self.url = url
        self.data_dir = data_dir
        self.http = httpx.Client(base_url=url, timeout=120.0)
        self.client = PoimenClient(url, timeout_s=120.0)
        self.findings: list[str] = []
        self.checks: Counter[str] = Counter()

    def finding(self, kind: str, message: str) -> None:
        self.findings.append(f"{kind}: {message}")
        print(f"DISAGREE {kind}: {message}", flush=True)

    # The doors

    def get(self, text: str, options: dict[str, Any]) -> httpx.Response:
        return self.http.get("/memory/query", params=query_string(text, options))

    def post(self, text: str, options: dict[str, Any]) -> httpx.Response:
        return self.http.post("/v1/search", json={"project": PROJECT, "query": text, **options})

    def batch(self, items: list[dict[str, Any]]) -> httpx.Response:
        return self.http.post("/v1/search/batch", json={"project": PROJECT, "queries": items})

    def cli(self, texts: list[str], options: dict[str, Any]) -> list[dict[str, Any]] | str:
        if self.data_dir is None:
            return "no data dir"
        arguments = [str(BIN / "poimen"), "query", "--project", PROJECT, "--json"]
        for name in ("limit", "strategy"):
            if name in options:
                arguments += [f"--{name}", str(options[name])]
        done = subprocess.run(
            [*arguments, "--", *texts],
            env=environment(self.data_dir),
            cwd=self.data_dir.parent,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        if done.returncode != 0:
            return f"exit {done.returncode}: {done.stderr.strip()[-300:]}"
        return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]

    # The checks

    def compare(self, case: str, reference: dict[str, Any], other: dict[str, Any], door: str) -> None:
        self.checks["answers compared"] += 1
        difference = first_difference(comparable(reference), comparable(other))
        if difference:
            self.finding("answer", f"{case}: POST vs {door}: {difference}")

    def search_case(self, index: int, text: str, options: dict[str, Any], rng: random.Random) -> None:
        case = f"case {index} {text!r} {json.dumps(options, sort_keys=True)}"
        posted = self.post(text, options)
        if posted.status_code != 200:
            self.checks["refused by POST"] += 1
            return
        reference = posted.json()
        single = self.batch([{"query": text, **options}])
        after = self.batch([{"query": rng.choice(QUERIES)}, {"query": text, **options}])
        for door, response, position in (("batch", single, 0), ("batch[1]", after, 1)):
            if response.status_code != 200:
                self.finding("status", f"{case}: {door} answered {response.status_code}: {response.text[:200]}")
            else:
                self.compare(case, reference, response.json()["results"][position], door)
        query = client_query(text, options)
        self.compare(case, reference, msgspec.to_builtins(self.client.search(PROJECT, query)), "client.search")
        answer = asyncio.run(self.async_search(query))
        self.compare(case, reference, msgspec.to_builtins(answer), "async client.search")
        unsupported = sorted(set(options) - GET_OPTIONS)
        got = self.get(text, options)
        if unsupported:
            self.checks["GET refusals"] += 1
            named = got.json().get("field") if got.status_code == 400 else None
            if got.status_code != 400 or named not in unsupported:
                self.finding("ignored", f"{case}: GET with {unsupported} answered {got.status_code} naming {named!r}")
            try:
                self.client.memory_query(PROJECT, query)
                self.finding("ignored", f"{case}: client.memory_query with {unsupported} sent it")
            except ValueError:
                pass
        else:
            if got.status_code != 200:
                self.finding("status", f"{case}: GET answered {got.status_code}: {got.text[:200]}")
            else:
                self.compare(case, reference, got.json(), "GET")
            self.compare(
                case, reference, msgspec.to_builtins(self.client.memory_query(PROJECT, query)), "client.memory_query"
            )
        self.follow_cursor(case, text, options, reference)

    async def async_search(self, query: SearchQuery) -> Any:  # noqa: ANN401
        async with AsyncPoimenClient(self.url, timeout_s=120.0) as client:
            return await client.search(PROJECT, query)

    def follow_cursor(self, case: str, text: str, options: dict[str, Any], reference: dict[str, Any]) -> None:
        """A cursor one door returned is honoured alike by the others (they share the cursor format)."""
        cursor = reference.get("next_cursor")
        if cursor is None:
            return
        rest = {key: value for key, value in options.items() if key != "offset"}  # `as_of` goes again
        posted = self.post(text, {**rest, "cursor": cursor})
        batched = self.batch([{"query": text, **rest, "cursor": cursor}])
        self.checks["cursors followed"] += 1
        if posted.status_code != 200 or batched.status_code != 200:
            self.finding("cursor", f"{case}: next page POST {posted.status_code}, batch {batched.status_code}")
            return
        self.compare(case + " (page 2)", posted.json(), batched.json()["results"][0], "batch cursor")
        if not set(rest) - GET_OPTIONS:
            got = self.get(text, {**rest, "cursor": cursor})
            if got.status_code != 200:
                self.finding("cursor", f"{case}: next page GET {got.status_code}: {got.text[:200]}")
            else:
                self.compare(case + " (page 2)", posted.json(), got.json(), "GET cursor")

    def defaults(self) -> None:
        """An option left out answers as its README default sent explicitly, through every door."""
        explicit = {"limit": 10, "strategy": "hybrid", "fusion": "zscore", "weights": {"semantic": 0.45}}
        for text in QUERIES[:3]:
            if text.startswith('"'):
                continue
            bare = self.post(text, {"explain": True}).json()
            spelt = self.post(text, {**explicit, "explain": True}).json()
            self.checks["defaults compared"] += 1
            # An explicit strategy reads confidence 1 and is served by the rollout's control arm.
            for key in ("strategy_confidence", "query_analysis", "rollout_arm", "rollout_decided_by"):
                bare.pop(key, None)
                spelt.pop(key, None)
            difference = first_difference(comparable(bare), comparable(spelt))
            if difference:
                self.finding("default", f"{text!r}: omitted vs README defaults: {difference}")
            get_bare = self.get(text, {"explain": True}).json()
            difference = first_difference(comparable(self.post(text, {"explain": True}).json()), comparable(get_bare))
            if difference:
                self.finding("default", f"{text!r}: POST vs GET with nothing given: {difference}")

    def cli_cases(self, rng: random.Random) -> None:
        """`poimen query --json` answers as POST /v1/search with the same `limit` and `strategy`."""
        for options in ({}, {"limit": 3}, {"strategy": "lexical"}, {"strategy": "cascading", "limit": 4}):
            texts = rng.sample([q for q in QUERIES if not q.startswith("-")], 3)
            answers = self.cli(texts, options)
            if isinstance(answers, str):
                self.finding("cli", f"{options}: {answers}")
                continue
            for text, answer in zip(texts, answers, strict=True):
                reference = self.post(text, options).json()
                self.compare(f"cli {text!r} {options}", reference, answer, "cli --json")

    def invalid_values(self) -> None:
        """One bad value: the same status and field through every door that takes the option."""
        cases: list[tuple[str, Any, str | None]] = [
            ("limit", 0, "0"),
            ("limit", 101, "101"),
            ("limit", "ten", "ten"),
            ("limit", 5.0, "5.0"),
            ("offset", 1.0, "1e0"),
            ("strategy", "HYBRID", "HYBRID"),
            ("strategy", "", ""),
            ("fusion", "borda", "borda"),
            ("offset", -1, "-1"),
            ("offset", 100, "100"),
            ("as_of", "2024-05-08T12:00:00", "2024-05-08T12:00:00"),
            ("as_of", "yesterday", "yesterday"),
            ("cursor", "zzz", "zzz"),
            ("explain", "yes", "yes"),
            ("rrf_k", 0, None),
            ("collapse", 0, None),
            ("min_score", 1.5, None),
            ("weights", {"semantic": -1}, None),
            ("filters", {"level": "L9"}, None),
            ("filters", {"tags": [""]}, None),
            ("filters", {"date_from": "2025-01-01T00:00:00Z", "date_to": "2024-01-01T00:00:00Z"}, None),
        ]
        for name, body_value, get_value in cases:
            posted = self.post("backup", {name: body_value})
            batched = self.batch([{"query": "backup"}, {"query": "backup", name: body_value}])
            self.checks["invalid values"] += 1
            post_field = posted.json().get("field") if posted.status_code == 400 else None
            batch_field = batched.json().get("field") if batched.status_code == 400 else None
            if posted.status_code != 400 or batched.status_code != 400:
                self.finding(
                    "invalid", f"{name}={body_value!r}: POST {posted.status_code}, batch {batched.status_code}"
                )
                continue
            if batch_field != f"queries[1].{post_field}":
                self.finding("invalid", f"{name}={body_value!r}: POST names {post_field!r}, batch {batch_field!r}")
            if post_field is None or not post_field.startswith(name):
                self.finding("invalid", f"{name}={body_value!r}: POST names {post_field!r}")
            if get_value is not None:
                got = self.http.get("/memory/query", params={"query": "backup", "project": PROJECT, name: get_value})
                got_field = got.json().get("field") if got.status_code == 400 else None
                if got.status_code != 400 or got_field != post_field:
                    self.finding(
                        "invalid",
                        f"{name}={get_value!r}: GET {got.status_code} names {got_field!r}, POST {post_field!r}",
                    )
            if name == "as_of" and body_value.startswith("2024"):
                continue  # the client reads a time without an offset as UTC (documented): it is sent with Z
            with contextlib.suppress(TypeError, ValueError, msgspec.ValidationError):  # the client refuses some first
                try:
                    self.client.search(PROJECT, msgspec.convert({"query": "backup", name: body_value}, SearchQuery))
                    self.finding("invalid", f"{name}={body_value!r}: the client's search answered")
                except InvalidRequestError as error:
                    if error.field != post_field:
                        self.finding("invalid", f"{name}={body_value!r}: client names {error.field!r}")

    def batches(self) -> None:
        """Duplicates, and each item's own `as_of` and cursor."""
        text = "what happened in the latency incident last week"
        items = [{"query": text, "explain": True}] * 3
        answer = self.batch(items)
        self.checks["batch duplicates"] += 1
        if answer.status_code != 200:
            self.finding("batch", f"duplicates answered {answer.status_code}")
        else:
            results = answer.json()["results"]
            for position in (1, 2):
                self.compare("batch duplicates", results[0], results[position], f"duplicate {position}")
        moments = ["2024-06-15T12:00:00Z", "2024-08-01T12:00:00Z"]
        answer = self.batch([{"query": text, "as_of": moment, "explain": True} for moment in moments])
        self.checks["batch as_of"] += 1
        for moment, result in zip(moments, answer.json()["results"], strict=True):
            alone = self.post(text, {"as_of": moment, "explain": True}).json()
            self.compare(f"batch as_of {moment}", alone, result, "batch item")
        first = self.post(text, {"offset": 0, "limit": 3}).json()
        other = self.post("backup restore", {"offset": 0, "limit": 3}).json()
        answer = self.batch(
            [
                {"query": text, "cursor": first["next_cursor"], "limit": 3},
                {"query": "backup restore", "cursor": other["next_cursor"], "limit": 3},
                {"query": text, "cursor": first["next_cursor"], "limit": 3},
            ]
        )
        self.checks["batch cursors"] += 1
        if answer.status_code != 200:
            self.finding("batch", f"per-item cursors answered {answer.status_code}: {answer.text[:200]}")
            return
        results = answer.json()["results"]
        for position, (query, cursor) in enumerate(
            [(text, first["next_cursor"]), ("backup restore", other["next_cursor"]), (text, first["next_cursor"])]
        ):
            alone = self.post(query, {"cursor": cursor, "limit": 3}).json()
            self.compare(f"batch cursor item {position}", alone, results[position], "batch item")
        swapped = self.batch([{"query": "backup restore", "cursor": first["next_cursor"]}])
        if swapped.status_code != 400 or swapped.json().get("field") != "queries[0].cursor":
            self.finding("batch", f"another query's cursor: {swapped.status_code} {swapped.text[:200]}")


def start_service(data_dir: Path, log_path: Path) -> tuple[subprocess.Popen[bytes], str]:
    try:
        return loopback_service.start(
            [str(BIN / "poimen")],
            environment=environment(data_dir),
            cwd=data_dir.parent,
            log_path=log_path,
            timeout_s=READY_TIMEOUT_S,
        )
    except loopback_service.StartFailedError as error:
        sys.exit(str(error))


def ingest(url: str, seed: int) -> None:
    documents = corpus(random.Random(seed))
    answer = httpx.post(f"{url}/v1/projects/{PROJECT}/documents", json={"documents": documents}, timeout=600)
    answer.raise_for_status()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if httpx.get(f"{url}/v1/projects/{PROJECT}", timeout=30).json()["pending"] == 0:
            return
        time.sleep(0.2)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--cases", type=int, default=40)
    parser.add_argument("--url", help="a running service whose project `parity` holds this seed's corpus")
    parser.add_argument("--data-dir", type=Path, help="its POIMEN_DATA_DIR, for `poimen query`")
    parser.add_argument("--no-cli", action="store_true")
    parser.add_argument(
        "--env", action="append", default=[], metavar="NAME=VALUE", help="for the server and `poimen query` alike"
    )
    arguments = parser.parse_args()
    EXTRA_ENVIRONMENT.update(item.split("=", 1) for item in arguments.env)
    rng = random.Random(arguments.seed)
    process = None
    scratch = None
    if arguments.url:
        url, data_dir = arguments.url, arguments.data_dir
    else:
        scratch = Path(tempfile.mkdtemp(prefix="poimen-parity-"))
        data_dir = scratch / "data"
        process, url = start_service(data_dir, scratch / "serve.log")
        ingest(url, arguments.seed)
    probe = Probe(url, None if arguments.no_cli else data_dir)
    try:
        for index in range(arguments.cases):
            probe.search_case(index, rng.choice(QUERIES), random_options(rng), rng)
        if not EXTRA_ENVIRONMENT:  # settings of its own change the defaults the README states
            probe.defaults()
        probe.invalid_values()
        probe.batches()
        if not arguments.no_cli:
            probe.cli_cases(rng)
    finally:
        if process is not None:
            loopback_service.stop(process, timeout_s=60)
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    print("checks: " + ", ".join(f"{name} {count}" for name, count in sorted(probe.checks.items())))
    kinds = Counter(finding.split(":", 1)[0] for finding in probe.findings)
    print(f"disagreements: {len(probe.findings)} " + json.dumps(dict(kinds)))
    return 1 if probe.findings else 0


if __name__ == "__main__":
    sys.exit(main())
