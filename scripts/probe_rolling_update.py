"""Probe a rolling update (and its rollback) with real processes: old and new pods on one database.

What the chart's `helm upgrade` does: the migrations Job runs the new `poimen migrate` while the old pods
serve, then new pods replace them one at a time (`RollingUpdate`), so for a while both serve one
PostgreSQL and one OpenSearch. This starts an embedded PostgreSQL (reached over its unix socket as a
`DATABASE_URL`) and an `osmem-server` (PyPI, the OpenSearch API), migrates with the old checkout, starts
an old pod, migrates with the new checkout while it serves, starts a new pod, and checks (one line each):

- the old pod stays ready and writes after the new migration; it writes and deletes in a project of
  `BULK_DOCUMENTS` documents while the new pod starts (and upgrades the project's OpenSearch index when the
  mapping version moved): every write found and every delete gone lexically on both sides afterwards;
- ETags read on one side are taken by `If-Match` on the other (a new pod's pending `"7-pending"` included);
  versions only grow, whichever side writes; how long a new pod's tag stays pending (MEASURED);
- six clients replacing three documents with `If-Match` through either pod: the writes that won form one
  chain per document (each one's `If-Match` is the version its predecessor got: no lost update);
- search cursors of one side accepted by the other, and pages served alternately by both, each from the
  other's cursor, are the unpaged ranking; each side's query cache misses after the other's write;
- each side's writes indexed lexically by the outbox (either side's worker), the backlog drained;
- HEAD and a body labelled `Content-Encoding: br` answered alike on both sides;
- `poimen export` of one side read by `poimen import` of the other; an old pod started after the new one;
- a rollback (new pod stopped, old pod alone) keeps versions growing and the new pod's writes and deletes;
  where the old release cannot start on the upgraded OpenSearch indexes, the probe first does the rollback
  docs/operations.md gives (aliases moved back, then the old `poimen reindex` of every project);
- no 5xx, no traceback in any serving pod's log.

Each line says PASS, FAIL or KNOWN: a difference docs/operations.md ("Rolling updates") lists with its effect
on clients (exit 1 on a FAIL only). MEASURED lines report numbers the docs quote.

Usage, with a worktree of the release before (`git worktree add ../poimen-old <tag>`):

    python scripts/probe_rolling_update.py --old-checkout ../poimen-old

Each checkout's `app` is used through PYTHONPATH with this interpreter's environment (the console script
`poimen` beside it), so the old release must run with today's dependencies. About 4 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import loopback_service

BIN = Path(sys.executable).parent
READY_TIMEOUT_S = 240.0
CLIENTS = 6
WRITES_PER_CLIENT = 15
BULK_DOCUMENTS = 1500


class Fleet:
    """The shared engines and the pods and CLI runs of either checkout against them."""

    def __init__(self, root: Path, database_url: str, opensearch_url: str) -> None:
        self.root, self.database_url, self.opensearch_url = root, database_url, opensearch_url
        self.pods: list[Pod] = []

    def environment(self, checkout: Path, data_dir: Path) -> dict[str, str]:
        environment = {
            key: value
            for key, value in os.environ.items()
            if key not in {"DATABASE_URL", "OPENSEARCH_URL", "PYTHONPATH", "POIMEN_FLAGS_FILE", "AUTH_MODE"}
        }
        environment.update(
            PYTHONPATH=str(checkout),
            POIMEN_DATA_DIR=str(data_dir),
            DATABASE_URL=self.database_url,
            OPENSEARCH_URL=self.opensearch_url,
            OPENSEARCH_INDEX="rolling",
            OPENSEARCH_SHARDS="1",
            OPENSEARCH_REPLICAS="0",
            OUTBOX_POLL_INTERVAL_S="0.1",
            QUERY_CACHE_TTL_SECS="3600",
            HF_HUB_OFFLINE="1",
            TRANSFORMERS_OFFLINE="1",
            PYTHONUNBUFFERED="1",
        )
        return environment

    def cli(self, checkout: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
        data_dir = Path(tempfile.mkdtemp(dir=self.root)) / "data"
        return subprocess.run(
            [str(BIN / "poimen"), *arguments],
            cwd=data_dir.parent,
            env=self.environment(checkout, data_dir),
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )

    def start(self, name: str, checkout: Path) -> Pod:
        pod = self.try_start(name, checkout)
        if pod is None:
            sys.exit(f"{name} exited:\n{(self.root / f'{name}.log').read_text(errors='replace')[-3000:]}")
        return pod

    def try_start(self, name: str, checkout: Path) -> Pod | None:
        """The pod once ready; None when its process exited before (its log stays in `root`)."""
        pod = Pod(name, checkout, self)
        self.pods.append(pod)
        if pod.wait_ready():
            return pod
        self.pods.remove(pod)
        return None


class Pod:
    """One `poimen serve` process of a checkout on a free loopback port."""

    def __init__(self, name: str, checkout: Path, fleet: Fleet) -> None:
        self.port = loopback_service.free_port()
        self.name, self.url = name, f"http://127.0.0.1:{self.port}"
        data_dir = Path(tempfile.mkdtemp(dir=fleet.root)) / "data"
        self.log_path = fleet.root / f"{name}.log"
        self.log_path.unlink(missing_ok=True)  # a pod name used again starts a log of its own
        self.process = loopback_service.spawn(
            loopback_service.serve_command([str(BIN / "poimen")], self.port),
            environment=fleet.environment(checkout, data_dir),
            cwd=data_dir.parent,
            log_path=self.log_path,
        )

    def wait_ready(self) -> bool:
        """True once `/readyz` answers 200; False when the process exited first."""
        try:
            return loopback_service.wait_until_ready(
                self.process, self.port, timeout_s=READY_TIMEOUT_S, poll_interval_s=0.3
            )
        except TimeoutError:
            sys.exit(f"{self.name} not ready within {READY_TIMEOUT_S} s:\n{self.log()[-3000:]}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        loopback_service.stop(self.process)


class Probe:
    def __init__(self) -> None:
        self.server_errors: list[str] = []
        self.client = httpx.Client(timeout=60.0, event_hooks={"response": [self._note_server_error]})
        self.failed = 0
        self.known = 0

    def _note_server_error(self, response: httpx.Response) -> None:
        if response.status_code >= 500:
            self.server_errors.append(f"{response.request.method} {response.request.url}: {response.status_code}")

    def check(self, name: str, ok: bool, detail: object = "", *, known: bool = False) -> None:  # noqa: FBT001
        """One report line: PASS, FAIL, or KNOWN (failed as docs/operations.md "Rolling updates" says it does)."""
        self.failed += not ok and not known
        self.known += not ok and known
        verdict = "PASS" if ok else "KNOWN" if known else "FAIL"
        print(f"{verdict} {name}" + (f": {detail}" if detail != "" else ""), flush=True)

    def measure(self, name: str, detail: object) -> None:
        print(f"MEASURED {name}: {detail}", flush=True)

    def write(self, pod: Pod, project: str, document_id: str, text: str, etag: str | None = None) -> httpx.Response:
        body = {"id": document_id, "source": f"m/{document_id}.md", "title": f"Memory {document_id}", "text": text}
        headers = {} if etag is None else {"If-Match": etag}
        return self.client.post(f"{pod.url}/v1/projects/{project}/documents", json=body, headers=headers)

    def etag(self, pod: Pod, project: str, document_id: str) -> str:
        return self.client.get(f"{pod.url}/v1/projects/{project}/documents/{document_id}").headers.get("etag", "")

    def search(self, pod: Pod, body: dict[str, Any]) -> httpx.Response:
        return self.client.post(f"{pod.url}/v1/search", json=body)


def version(etag: str) -> int:
    """The version an ETag names: `"7"`, or `"7-pending"` (a new pod's, until the lexical index has the document)."""
    return int(etag.strip('"').removesuffix("-pending"))


def pending_refused(answer: httpx.Response) -> bool:
    """An old release's 400 for an `If-Match` naming a pending ETag (`"7-pending"`), which it does not parse."""
    return answer.status_code == 400 and "-pending" in answer.text and "If-Match" in answer.text


def word(number: int) -> str:
    """A made-up word per number (letters only: one term on every analyzer), `zq` + base 26."""
    letters = ""
    while True:
        number, digit = divmod(number, 26)
        letters += chr(ord("a") + digit)
        if number == 0:
            return f"zq{letters}x"


def cas_clients(pods: list[Pod], documents: list[str]) -> tuple[dict[str, list[tuple[int, int]]], list, int]:
    """CLIENTS threads replacing `documents` with If-Match through random pods; per document its (If-Match, version)
    of each write that won, every answer that was neither 201 nor 409 nor `pending_refused`, and how many were that."""
    wins: dict[str, list[tuple[int, int]]] = {document: [] for document in documents}
    unexpected: list[tuple[int, str]] = []
    refused = 0
    lock = threading.Lock()

    def client(number: int) -> None:
        nonlocal refused
        chooser = random.Random(number)
        with httpx.Client(timeout=60.0) as http:
            for write in range(WRITES_PER_CLIENT):
                document, reader, writer = chooser.choice(documents), chooser.choice(pods), chooser.choice(pods)
                etag = http.get(f"{reader.url}/v1/projects/cas/documents/{document}").headers["etag"]
                body = {"id": document, "source": "m.md", "title": document, "text": f"{document} w{number}x{write}"}
                answer = http.post(f"{writer.url}/v1/projects/cas/documents", json=body, headers={"If-Match": etag})
                with lock:
                    if answer.status_code == 201:
                        wins[document].append((version(etag), answer.json()["documents"][0]["version"]))
                    elif pending_refused(answer):
                        refused += 1
                    elif answer.status_code != 409:
                        unexpected.append((answer.status_code, answer.text[:200]))

    threads = [threading.Thread(target=client, args=(number,)) for number in range(CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return wins, unexpected, refused


class OldWriter(threading.Thread):
    """Writes documents of project `bulk` through a pod until stopped, each with its own word; every third
    write also deletes the document written two before. What it kept and deleted is checked afterwards."""

    def __init__(self, pod: Pod) -> None:
        super().__init__(daemon=True)
        self.pod, self.stopping = pod, threading.Event()
        self.kept: list[str] = []
        self.deleted: list[str] = []
        self.failed: list[tuple[int, str]] = []

    def run(self) -> None:
        with httpx.Client(timeout=60.0) as http:
            number = 0
            while not self.stopping.is_set():
                name = word(number)
                body = {"id": name, "source": f"m/{name}.md", "title": "Rolling", "text": f"The {name} note."}
                answer = http.post(f"{self.pod.url}/v1/projects/bulk/documents", json=body)
                if answer.status_code != 201:
                    self.failed.append((answer.status_code, answer.text[:200]))
                self.kept.append(name)
                if number % 3 == 2:
                    gone = self.kept.pop(-3)
                    answer = http.delete(f"{self.pod.url}/v1/projects/bulk/documents/{gone}")
                    if answer.status_code != 204:
                        self.failed.append((answer.status_code, answer.text[:200]))
                    self.deleted.append(gone)
                number += 1
                time.sleep(0.1)


def lexical_ids(probe: Probe, pod: Pod, project: str, text: str, limit: int = 3) -> list[str]:
    body = {"query": text, "project": project, "strategy": "lexical", "limit": limit}
    return [hit["document_id"] for hit in probe.search(pod, body).json()["results"]]


def wait_drained(probe: Probe, pod: Pod, project: str) -> dict[str, Any]:
    stats: dict[str, Any] = {}
    for _ in range(300):
        stats = probe.client.get(f"{pod.url}/v1/projects/{project}").json()
        if stats.get("pending") == 0:
            break
        time.sleep(0.2)
    return stats


def seed_bulk(probe: Probe, pod: Pod, documents: int) -> None:
    """`documents` short notes in project `bulk`, so that the new pod's index upgrade has something to copy."""
    for start in range(0, documents, 100):
        batch = [
            {"id": f"seed-{number}", "source": f"seed/{number}.md", "text": f"Seed note {number} about the archive."}
            for number in range(start, min(start + 100, documents))
        ]
        answer = probe.client.post(f"{pod.url}/v1/projects/bulk/documents", json={"documents": batch})
        answer.raise_for_status()


def check_mapping_upgrade(probe: Probe, old_pod: Pod, new_pod: Pod, writer: OldWriter) -> None:
    """The old pod's writes and deletes before, during and after the new pod's index upgrade, all in the index."""
    probe.check("old pod's writes and deletes during the new pod's start: all answered", not writer.failed)
    log = old_pod.log()
    probe.measure(
        "old pod's lexical writes refused while the new pod copied (index.blocks.write), then retried",
        log.count("blocked by"),
    )
    probe.measure("old pod's refills after the alias moved (its generation replaced)", log.count("was replaced"))
    stats = wait_drained(probe, new_pod, "bulk")
    probe.check("project bulk drained after the upgrade", stats.get("pending") == 0, stats)
    for pod in (new_pod, old_pod):
        missing = [name for name in writer.kept if lexical_ids(probe, pod, "bulk", name) != [name]]
        found = [name for name in writer.deleted if lexical_ids(probe, pod, "bulk", name)]
        probe.check(
            f"{len(writer.kept)} old-pod writes around the upgrade found lexically on {pod.name}", not missing, missing
        )
        probe.check(f"{len(writer.deleted)} old-pod deletes around the upgrade gone on {pod.name}", not found, found)


def check_etags(probe: Probe, old_pod: Pod, new_pod: Pod) -> None:
    """ETags of one side as If-Match on the other, including a new pod's pending tag on the old pod."""
    etags = [probe.etag(old_pod, "a", "x")]
    probe.check("one ETag on both sides", etags[0] == probe.etag(new_pod, "a", "x"), etags)
    for number in range(3):
        probe.write(new_pod, "a", "x", f"The quartz key, revision {number} by the new pod.", etags[-1])
        etags.append(probe.etag(new_pod, "a", "x"))
    answer = probe.write(old_pod, "a", "x", "The quartz key, revised by the old pod.", etags[-1])
    probe.check(
        "old pod's If-Match replace with the new pod's ETag read after its write",
        answer.status_code == 201,
        (answer.status_code, etags),
        known=pending_refused(answer),
    )
    etags.append(probe.etag(old_pod, "a", "x"))
    probe.check("versions grow across both sides", version(etags[-1]) >= version(etags[-2]), etags)
    answer = probe.write(new_pod, "a", "x", "The quartz key, again by the new pod.", etags[-1])
    probe.check("new pod's If-Match replace after the old pod's", answer.status_code == 201, answer.text[:200])
    pending_ms: list[float] = []
    for number in range(10):
        written = probe.write(new_pod, "a", "p", f"Pending note {number}.")
        started, etag = time.monotonic(), probe.etag(new_pod, "a", "p")
        while etag.endswith('-pending"') and time.monotonic() - started < 30:
            time.sleep(0.005)
            etag = probe.etag(new_pod, "a", "p")
        pending_ms.append(round((time.monotonic() - started) * 1000) if written.status_code == 201 else -1)
    probe.measure("ms a new pod's ETag stays pending after its write answered (10 writes; -1: not written)", pending_ms)
    for deleter in (old_pod, new_pod):
        for attempt in range(20):  # a read right after the write: the lexical index has not taken it yet
            probe.write(new_pod, "a", "pend", f"A note read while pending, {deleter.name} {attempt}.")
            etag = probe.etag(new_pod, "a", "pend")
            if etag.endswith('-pending"'):
                break
        answer = probe.write(deleter, "a", "pend", "Replaced with the pending ETag.", etag)
        probe.check(
            f"a new pod's pending ETag ({etag}) as If-Match on {deleter.name}",
            answer.status_code == 201,
            (answer.status_code, answer.text[:160]),
            known=pending_refused(answer),
        )
    for reader, deleter in ((new_pod, old_pod), (old_pod, new_pod)):
        probe.write(reader, "a", "gone", "A note to delete.")
        etag = probe.etag(reader, "a", "gone")
        deleted = probe.client.delete(f"{deleter.url}/v1/projects/a/documents/gone", headers={"If-Match": etag})
        probe.write(deleter, "a", "gone", "Written again.")
        probe.check(
            f"{deleter.name} deletes with {reader.name}'s ETag ({etag}); written again, a higher version",
            deleted.status_code == 204 and version(probe.etag(reader, "a", "gone")) > version(etag),
            deleted.status_code,
            known=pending_refused(deleted),
        )


def check_concurrent_writers(probe: Probe, old_pod: Pod, new_pod: Pod) -> None:
    wins, unexpected, refused = cas_clients([old_pod, new_pod], ["d0", "d1", "d2"])
    probe.check("concurrent If-Match writers through both pods: only 201 or 409", not unexpected, unexpected[:3])
    probe.check(
        "concurrent If-Match writers: no old pod refusing a new pod's pending ETag",
        not refused,
        f"{refused} of {CLIENTS * WRITES_PER_CLIENT} writes a 400",
        known=True,
    )
    for document, won in wins.items():
        chain = sorted(won, key=lambda pair: pair[1])
        linked = all(chain[i][0] == chain[i - 1][1] for i in range(1, len(chain)))
        stored = version(probe.etag(new_pod, "cas", document))
        probe.check(
            f"{document}: {len(chain)} won writes form one chain ending at the stored version",
            linked and chain[-1][1] == stored,
            chain if not linked else stored,
        )


def check_cursors(probe: Probe, old_pod: Pod, new_pod: Pod) -> None:
    """Pages of one query served alternately by both pods, each from the other's cursor: the unpaged ranking."""
    for number in range(7):
        probe.write(old_pod, "pages", f"k{number}", f"The key number {number} opens door {number} of the archive.")
    query = {"query": "which key opens the door", "project": "pages", "strategy": "semantic"}
    whole = [hit["id"] for hit in probe.search(new_pod, {**query, "limit": 7}).json()["results"]]
    for first in (old_pod, new_pod):
        served: list[str] = []
        statuses: list[int] = []
        changed: list[bool] = []
        order = [first, new_pod if first is old_pod else old_pod] * 2
        body: dict[str, Any] = {**query, "limit": 2, "offset": 0}  # an offset asks for a paged answer
        for pod in order:
            answer = probe.search(pod, body)
            statuses.append(answer.status_code)
            if answer.status_code != 200:
                break
            page = answer.json()
            served += [hit["id"] for hit in page["results"]]
            changed.append(page.get("ranking_changed", False))
            if page["next_cursor"] is None:
                break
            body = {**query, "limit": 2, "cursor": page["next_cursor"]}
        names = "→".join(pod.name for pod in order)
        probe.check(
            f"pages {names}, each from the other side's cursor: the unpaged ranking, no ranking_changed",
            set(statuses) == {200} and served == whole and not any(changed),
            (statuses, served, whole, changed),
        )


def check_http_changes(probe: Probe, old_pod: Pod, new_pod: Pod) -> None:
    """What this release answers otherwise than the one before (documented under "Rolling updates")."""
    url = "/v1/projects/a/documents/x"
    heads = {pod.name: probe.client.head(f"{pod.url}{url}").status_code for pod in (old_pod, new_pod)}
    probe.check("HEAD of a document answered alike by both sides", len(set(heads.values())) == 1, heads, known=True)
    coded = {
        pod.name: probe.client.post(
            f"{pod.url}/v1/projects/coded/documents",
            content=b'{"id": "c", "text": "Sent plain but labelled br."}',
            headers={"Content-Type": "application/json", "Content-Encoding": "br"},
        ).status_code
        for pod in (old_pod, new_pod)
    }
    probe.check("a body labelled Content-Encoding: br answered alike", len(set(coded.values())) == 1, coded, known=True)


def roll_back_aliases(probe: Probe, fleet: Fleet) -> list[str]:
    """The documented rollback of an index upgrade the old release refuses: each project alias back on its previous
    index, made writable again, or, for a project only the new release indexed, its index deleted (the old release
    recreates it). Returns the projects whose alias changed (each then needs the old `poimen reindex`)."""
    os_url, base = fleet.opensearch_url, "rolling-p-"
    listed = probe.client.get(f"{os_url}/{base}*/_alias").json()
    changed: list[str] = []
    for index, body in sorted(listed.items()):
        for alias in body.get("aliases", {}):
            older = [name for name in listed if re.fullmatch(rf"{re.escape(alias)}_?-v(\d+)", name) and name != index]
            if older:
                previous = max(older, key=lambda name: int(name.rsplit("-v", 1)[1]))
                actions = [{"remove": {"index": index, "alias": alias}}, {"add": {"index": previous, "alias": alias}}]
                probe.client.post(f"{os_url}/_aliases", json={"actions": actions}).raise_for_status()
                settings = {"index.blocks.write": False}
                probe.client.put(f"{os_url}/{previous}/_settings", json=settings).raise_for_status()
            else:
                probe.client.delete(f"{os_url}/{index}").raise_for_status()
            changed.append(alias.removeprefix(base))
    return changed


def run(probe: Probe, fleet: Fleet, old: Path, new: Path) -> None:
    migrated = fleet.cli(old, "migrate")
    probe.check("old `poimen migrate`", migrated.returncode == 0, migrated.stderr[-300:])
    old_pod = fleet.start("old-1", old)
    for number in range(5):  # another project's writes move a shared counter, if the old release has one
        probe.write(old_pod, "other", f"n{number}", f"Another project's note {number}.")
    for document, text in (("x", "The quartz key opens the archive."), ("y", "The copper key opens the cellar.")):
        probe.write(old_pod, "a", document, text)
    for document in ("d0", "d1", "d2"):
        probe.write(old_pod, "cas", document, f"{document} first")
    seed_bulk(probe, old_pod, BULK_DOCUMENTS)
    query = {"query": "which key opens", "project": "a", "strategy": "semantic", "limit": 1}
    old_first_page = probe.search(old_pod, {**query, "offset": 0}).json()

    migrated = fleet.cli(new, "migrate")
    probe.check("new `poimen migrate` while the old pod serves", migrated.returncode == 0, migrated.stderr[-300:])
    probe.check("old pod ready after the new migration", probe.client.get(f"{old_pod.url}/readyz").status_code == 200)
    written = probe.write(old_pod, "a", "w", "Written by the old pod after the migration.")
    probe.check("old pod writes after the new migration", written.status_code == 201, written.text[:200])
    writer = OldWriter(old_pod)
    writer.start()  # through the new pod's start, which upgrades each project's OpenSearch index
    new_pod = fleet.start("new-1", new)
    time.sleep(3.0)
    writer.stopping.set()
    writer.join()
    check_mapping_upgrade(probe, old_pod, new_pod, writer)

    check_etags(probe, old_pod, new_pod)
    check_concurrent_writers(probe, old_pod, new_pod)
    new_first_page = probe.search(new_pod, {**query, "offset": 0}).json()
    for first, pod in ((old_first_page, new_pod), (new_first_page, old_pod)):
        answer = probe.search(pod, {**query, "cursor": first["next_cursor"]})
        probe.check(f"the other side's cursor accepted by {pod.name}", answer.status_code == 200, answer.text[:200])
    check_cursors(probe, old_pod, new_pod)
    for reader, writer_pod in ((new_pod, old_pod), (old_pod, new_pod)):
        cache_query = {
            "query": f"what did {writer_pod.name} write",
            "project": f"cache-{writer_pod.name}",
            "strategy": "semantic",
            "limit": 5,
        }
        probe.search(reader, cache_query)
        cached = probe.search(reader, cache_query).json()["cached"]
        probe.write(writer_pod, f"cache-{writer_pod.name}", writer_pod.name, f"A note {writer_pod.name} wrote.")
        after = probe.search(reader, cache_query).json()
        found = [hit["document_id"] for hit in after["results"]]
        probe.check(
            f"{reader.name}'s query cache misses after {writer_pod.name}'s write",
            cached and not after["cached"] and writer_pod.name in found,
            (cached, after["cached"], found),
        )

    for term, writer_pod, reader in (("zanzibar", old_pod, new_pod), ("xylophone", new_pod, old_pod)):
        probe.write(writer_pod, "lexical", term, f"The {term} note, written by {writer_pod.name}.")
        found: list[str] = []
        for _ in range(150):
            found = lexical_ids(probe, reader, "lexical", f'"{term}"')
            if found:
                break
            time.sleep(0.2)
        probe.check(f"{writer_pod.name}'s write found lexically on {reader.name}", found == [term], found)
    probe.write(new_pod, "lexical", "ephemeral", "The ephemeral note, deleted after the upgrade.")
    probe.client.delete(f"{new_pod.url}/v1/projects/lexical/documents/ephemeral")
    check_http_changes(probe, old_pod, new_pod)
    for source, target in ((old, new), (new, old)):
        exported = fleet.root / f"export-{source.name}.jsonl"
        out = fleet.cli(source, "export", "--project", "a", "--output", str(exported))
        into = fleet.cli(target, "import", str(exported), "--project", f"from-{source.name}")
        probe.check(
            f"export of {source} read by the import of {target}",
            out.returncode == 0 and into.returncode == 0,
            (out.stderr[-200:], into.stderr[-200:]),
            known="points at" in out.stderr + into.stderr,
        )
    restarted = fleet.try_start("old-2", old)
    refused_start = (fleet.root / "old-2.log").read_text(errors="replace")
    probe.check(
        "an old pod started after the new pod's index upgrade serves",
        restarted is not None,
        [line[-220:] for line in refused_start.splitlines() if "start-up failed" in line][:1],
        known=restarted is None and "points at" in refused_start,
    )
    stats = wait_drained(probe, new_pod, "a")
    probe.check("outbox drained", stats.get("pending") == 0, stats)

    new_pod.stop()
    if restarted is None:  # the rollback docs/operations.md gives for an index upgrade the old release refuses
        moved = roll_back_aliases(probe, fleet)
        reindexed = [fleet.cli(old, "reindex", "--project", project) for project in moved]
        probe.check(
            f"rollback: {len(moved)} aliases moved back, writes unblocked, old `poimen reindex` of each",
            bool(moved) and all(done.returncode == 0 for done in reindexed),
            [done.stderr[-200:] for done in reindexed if done.returncode],
        )
        restarted = fleet.start("old-3", old)
    found = lexical_ids(probe, restarted, "lexical", '"xylophone"')
    probe.check("rollback: the new pod's write found lexically on the old release", found == ["xylophone"], found)
    found = lexical_ids(probe, restarted, "lexical", '"ephemeral"')
    probe.check("rollback: the new pod's delete stays deleted on the old release", not found, found)
    etag = probe.etag(old_pod, "a", "x")
    for number in range(2):
        answer = probe.write(restarted, "a", "x", f"After the rollback, revision {number}.", etag)
        after = probe.etag(restarted, "a", "x")
        probe.check(
            f"rollback: old pod's If-Match write {number}, version grows",
            answer.status_code == 201 and version(after) > version(etag),
            (etag, after, answer.text[:160]),
        )
        etag = after
    probe.check("no 5xx answered", not probe.server_errors, probe.server_errors[:3])
    bad = [line for pod in fleet.pods for line in pod.log().splitlines() if "Traceback" in line or '"ERROR"' in line]
    probe.check("no traceback or ERROR in any pod's log (a refused start's aside)", not bad, bad[:3])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--old-checkout", type=Path, required=True, help="a checkout of the release before")
    parser.add_argument(
        "--new-checkout", type=Path, default=Path(__file__).resolve().parents[1], help="default: this one"
    )
    arguments = parser.parse_args()
    old, new = arguments.old_checkout.resolve(), arguments.new_checkout.resolve()
    sys.path.insert(0, str(new))
    from osmem_server import OsmemServer  # noqa: PLC0415 - the new checkout's packages, after sys.path

    from app.engines.embedded_postgres import EmbeddedPostgres  # noqa: PLC0415

    root = Path(tempfile.mkdtemp(prefix="poimen-rolling-"))
    postgres = EmbeddedPostgres(root / "postgres")
    opensearch = OsmemServer.start(japanese=False, addr="127.0.0.1:0")
    fleet = Fleet(root, postgres.start(), opensearch.url)
    probe = Probe()
    try:
        run(probe, fleet, old, new)
    finally:
        for pod in fleet.pods:
            pod.stop()
        opensearch.close()
        postgres.stop()
        shutil.rmtree(root, ignore_errors=True)
    print(f'{probe.failed} failed, {probe.known} known (docs/operations.md, "Rolling updates")')
    sys.exit(1 if probe.failed else 0)


if __name__ == "__main__":
    main()
