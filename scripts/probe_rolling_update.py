"""Probe a rolling update (and its rollback) with real processes: old and new pods on one database.

What the chart's `helm upgrade` does: the migrations Job runs the new `poimen migrate` while the old pods
serve, then new pods replace them one at a time (`RollingUpdate`), so for a while both serve one
PostgreSQL and one OpenSearch. This starts an embedded PostgreSQL (reached over its unix socket as a
`DATABASE_URL`) and an `osmem-server` (PyPI, the OpenSearch API), migrates with the old checkout, starts
an old pod, migrates with the new checkout while it serves, starts a new pod, and checks (one line each,
PASS or FAIL; exit 1 on any FAIL):

- the old pod stays ready and writes after the new migration; an old pod started after it serves;
- ETags read on one side are taken by `If-Match` on the other; versions only grow, whichever side writes;
- six clients replacing three documents with `If-Match` through either pod: the writes that won form one
  chain per document (each one's `If-Match` is the version its predecessor got: no lost update);
- search cursors of one side accepted by the other; each side's query cache misses after the other's write;
- each side's writes indexed lexically by the outbox (either side's worker), the backlog drained;
- `poimen export` of one side read by `poimen import` of the other;
- a rollback (new pod stopped, old pod alone) keeps versions growing; no 5xx, no traceback in any log.

Usage, with a worktree of the release before (`git worktree add ../poimen-old <tag>`):

    python scripts/probe_rolling_update.py --old-checkout ../poimen-old

Each checkout's `app` is used through PYTHONPATH with this interpreter's environment (the console script
`poimen` beside it), so the old release must run with today's dependencies. About 3 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

BIN = Path(sys.executable).parent
READY_TIMEOUT_S = 240.0
CLIENTS = 6
WRITES_PER_CLIENT = 15


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


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
        pod = Pod(name, checkout, self)
        self.pods.append(pod)
        return pod.wait_ready()


class Pod:
    """One `poimen serve` process of a checkout on a free loopback port."""

    def __init__(self, name: str, checkout: Path, fleet: Fleet) -> None:
        port = free_port()
        self.name, self.url = name, f"http://127.0.0.1:{port}"
        data_dir = Path(tempfile.mkdtemp(dir=fleet.root)) / "data"
        self.log_path = fleet.root / f"{name}.log"
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                [str(BIN / "poimen"), "serve", "--host", "127.0.0.1", "--port", str(port)],
                cwd=data_dir.parent,
                env=fleet.environment(checkout, data_dir),
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def wait_ready(self) -> Pod:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                sys.exit(f"{self.name} exited with {self.process.returncode}:\n{self.log()[-3000:]}")
            try:
                if httpx.get(f"{self.url}/readyz", timeout=2.0).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        sys.exit(f"{self.name} not ready within {READY_TIMEOUT_S} s:\n{self.log()[-3000:]}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


class Probe:
    def __init__(self) -> None:
        self.server_errors: list[str] = []
        self.client = httpx.Client(timeout=60.0, event_hooks={"response": [self._note_server_error]})
        self.failed = 0

    def _note_server_error(self, response: httpx.Response) -> None:
        if response.status_code >= 500:
            self.server_errors.append(f"{response.request.method} {response.request.url}: {response.status_code}")

    def check(self, name: str, ok: bool, detail: object = "") -> None:  # noqa: FBT001 - a report line
        self.failed += not ok
        print(f"{'PASS' if ok else 'FAIL'} {name}" + (f": {detail}" if detail != "" else ""), flush=True)

    def write(self, pod: Pod, project: str, document_id: str, text: str, etag: str | None = None) -> httpx.Response:
        body = {"id": document_id, "source": f"m/{document_id}.md", "title": f"Memory {document_id}", "text": text}
        headers = {} if etag is None else {"If-Match": etag}
        return self.client.post(f"{pod.url}/v1/projects/{project}/documents", json=body, headers=headers)

    def etag(self, pod: Pod, project: str, document_id: str) -> str:
        return self.client.get(f"{pod.url}/v1/projects/{project}/documents/{document_id}").headers.get("etag", "")

    def search(self, pod: Pod, body: dict[str, Any]) -> httpx.Response:
        return self.client.post(f"{pod.url}/v1/search", json=body)


def version(etag: str) -> int:
    return int(etag.strip('"'))


def cas_clients(pods: list[Pod], documents: list[str]) -> tuple[dict[str, list[tuple[int, int]]], list]:
    """CLIENTS threads replacing `documents` with If-Match through random pods; per document its (If-Match, version)
    of each write that won, and every answer that was neither 201 nor 409."""
    wins: dict[str, list[tuple[int, int]]] = {document: [] for document in documents}
    unexpected: list[tuple[int, str]] = []
    lock = threading.Lock()

    def client(number: int) -> None:
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
                    elif answer.status_code != 409:
                        unexpected.append((answer.status_code, answer.text[:200]))

    threads = [threading.Thread(target=client, args=(number,)) for number in range(CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return wins, unexpected


def run(probe: Probe, fleet: Fleet, old: Path, new: Path) -> None:  # noqa: PLR0912 - one scenario, top to bottom
    migrated = fleet.cli(old, "migrate")
    probe.check("old `poimen migrate`", migrated.returncode == 0, migrated.stderr[-300:])
    old_pod = fleet.start("old-1", old)
    for number in range(5):  # another project's writes move a shared counter, if the old release has one
        probe.write(old_pod, "other", f"n{number}", f"Another project's note {number}.")
    for document, text in (("x", "The quartz key opens the archive."), ("y", "The copper key opens the cellar.")):
        probe.write(old_pod, "a", document, text)
    for document in ("d0", "d1", "d2"):
        probe.write(old_pod, "cas", document, f"{document} first")
    query = {"query": "which key opens", "project": "a", "strategy": "semantic", "limit": 1}
    old_first_page = probe.search(old_pod, {**query, "offset": 0}).json()

    migrated = fleet.cli(new, "migrate")
    probe.check("new `poimen migrate` while the old pod serves", migrated.returncode == 0, migrated.stderr[-300:])
    probe.check("old pod ready after the new migration", probe.client.get(f"{old_pod.url}/readyz").status_code == 200)
    written = probe.write(old_pod, "a", "w", "Written by the old pod after the migration.")
    probe.check("old pod writes after the new migration", written.status_code == 201, written.text[:200])
    new_pod = fleet.start("new-1", new)

    etags = [probe.etag(old_pod, "a", "x")]
    probe.check("one ETag on both sides", etags[0] == probe.etag(new_pod, "a", "x"), etags)
    for number in range(3):
        probe.write(new_pod, "a", "x", f"The quartz key, revision {number} by the new pod.", etags[-1])
        etags.append(probe.etag(new_pod, "a", "x"))
    answer = probe.write(old_pod, "a", "x", "The quartz key, revised by the old pod.", etags[-1])
    etags.append(probe.etag(old_pod, "a", "x"))
    probe.check(
        "old pod's If-Match replace after the new pod's: version grows",
        version(etags[-1]) > version(etags[-2]),
        (answer.status_code, etags),
    )
    answer = probe.write(new_pod, "a", "x", "The quartz key, again by the new pod.", etags[-1])
    probe.check("new pod's If-Match replace after the old pod's", answer.status_code == 201, answer.text[:200])
    for reader, deleter in ((new_pod, old_pod), (old_pod, new_pod)):
        probe.write(reader, "a", "gone", "A note to delete.")
        etag = probe.etag(reader, "a", "gone")
        deleted = probe.client.delete(f"{deleter.url}/v1/projects/a/documents/gone", headers={"If-Match": etag})
        probe.write(deleter, "a", "gone", "Written again.")
        probe.check(
            f"{deleter.name} deletes with {reader.name}'s ETag; written again, a higher version",
            deleted.status_code == 204 and version(probe.etag(reader, "a", "gone")) > version(etag),
            deleted.status_code,
        )

    wins, unexpected = cas_clients([old_pod, new_pod], ["d0", "d1", "d2"])
    probe.check("concurrent If-Match writers through both pods: only 201 or 409", not unexpected, unexpected[:3])
    for document, won in wins.items():
        chain = sorted(won, key=lambda pair: pair[1])
        linked = all(chain[i][0] == chain[i - 1][1] for i in range(1, len(chain)))
        stored = version(probe.etag(new_pod, "cas", document))
        probe.check(
            f"{document}: {len(chain)} won writes form one chain ending at the stored version",
            linked and chain[-1][1] == stored,
            chain if not linked else stored,
        )

    new_first_page = probe.search(new_pod, {**query, "offset": 0}).json()
    for first, pod in ((old_first_page, new_pod), (new_first_page, old_pod)):
        answer = probe.search(pod, {**query, "cursor": first["next_cursor"]})
        probe.check(f"the other side's cursor accepted by {pod.name}", answer.status_code == 200, answer.text[:200])
    for reader, writer in ((new_pod, old_pod), (old_pod, new_pod)):
        cache_query = {
            "query": f"what did {writer.name} write",
            "project": f"cache-{writer.name}",
            "strategy": "semantic",
            "limit": 5,
        }
        probe.search(reader, cache_query)
        cached = probe.search(reader, cache_query).json()["cached"]
        probe.write(writer, f"cache-{writer.name}", writer.name, f"A note {writer.name} wrote.")
        after = probe.search(reader, cache_query).json()
        found = [hit["document_id"] for hit in after["results"]]
        probe.check(
            f"{reader.name}'s query cache misses after {writer.name}'s write",
            cached and not after["cached"] and writer.name in found,
            (cached, after["cached"], found),
        )

    for word, writer, reader in (("zanzibar", old_pod, new_pod), ("xylophone", new_pod, old_pod)):
        probe.write(writer, "lexical", word, f"The {word} note, written by {writer.name}.")
        found: list[str] = []
        for _ in range(150):
            found = [
                hit["document_id"]
                for hit in probe.search(
                    reader, {"query": f'"{word}"', "project": "lexical", "strategy": "lexical", "limit": 3}
                ).json()["results"]
            ]
            if found:
                break
            time.sleep(0.2)
        probe.check(f"{writer.name}'s write found lexically on {reader.name}", found == [word], found)
    for source, target in ((old, new), (new, old)):
        exported = fleet.root / f"export-{source.name}.jsonl"
        out = fleet.cli(source, "export", "--project", "a", "--output", str(exported))
        into = fleet.cli(target, "import", str(exported), "--project", f"from-{source.name}")
        probe.check(
            f"export of {source} read by the import of {target}",
            out.returncode == 0 and into.returncode == 0,
            (out.stderr[-200:], into.stderr[-200:]),
        )
    restarted = fleet.start("old-2", old)
    probe.check(
        "an old pod started after the new migration serves",
        restarted.process.poll() is None,
        [line for line in restarted.log().splitlines() if "revision" in line][:1],
    )
    stats: dict[str, Any] = {}
    for _ in range(150):
        stats = probe.client.get(f"{new_pod.url}/v1/projects/a").json()
        if stats.get("pending") == 0:
            break
        time.sleep(0.2)
    probe.check("outbox drained", stats.get("pending") == 0, stats)

    new_pod.stop()
    etag = probe.etag(old_pod, "a", "x")
    for number in range(2):
        answer = probe.write(restarted, "a", "x", f"After the rollback, revision {number}.", etag)
        after = probe.etag(restarted, "a", "x")
        probe.check(
            f"rollback: old pod's If-Match write {number}, version grows",
            answer.status_code == 201 and version(after) > version(etag),
            (etag, after),
        )
        etag = after
    probe.check("no 5xx answered", not probe.server_errors, probe.server_errors[:3])
    bad = [line for pod in fleet.pods for line in pod.log().splitlines() if "Traceback" in line or '"ERROR"' in line]
    probe.check("no traceback or ERROR in any pod's log", not bad, bad[:3])


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
    print(f"{probe.failed} failed")
    sys.exit(1 if probe.failed else 0)


if __name__ == "__main__":
    main()
