"""The service a load script measures: `poimen serve` on a free loopback port, and what it costs the machine.

The server runs on the embedded engines under a data folder the script owns (PostgreSQL under
`<data>/postgres`, tantivy under `<data>/lexical`). Samples come from outside the service where they
can (RSS and open descriptors from `/proc/<pid>`, PostgreSQL connections by counting the postmaster's
client backends), and from `/metrics` for what only the service knows (outbox backlog, shed requests).
"""

from __future__ import annotations

import asyncio
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Self

import httpx
import loopback_service
from loadgen import verdict, write_report
from prometheus_client.parser import text_string_to_metric_families

if TYPE_CHECKING:
    import subprocess
    from collections.abc import Callable, Coroutine, Iterator, Mapping
    from types import TracebackType

REPOSITORY: Final = Path(__file__).resolve().parents[1]
READY_TIMEOUT_S: Final = 180.0
STOP_TIMEOUT_S: Final = 40.0
PAGE_BYTES: Final = os.sysconf("SC_PAGE_SIZE")
CLOCK_TICKS_PER_S: Final = os.sysconf("SC_CLK_TCK")


class ServiceUnderTest:
    """`poimen serve` as a child process; a context manager that stops it (SIGTERM, then SIGKILL)."""

    def __init__(self, data_dir: Path, *, environment: Mapping[str, str]) -> None:
        self.data_dir = data_dir
        self.port = loopback_service.free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._environment = {
            **os.environ,
            "POIMEN_DATA_DIR": str(data_dir),
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "LOG_LEVEL": "WARNING",
            **environment,
        }
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        """The server's process id (it must be running)."""
        if self._process is None:
            msg = "the service is not running"
            raise RuntimeError(msg)
        return self._process.pid

    def __enter__(self) -> Self:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._process = loopback_service.spawn(
            loopback_service.serve_command([sys.executable, "-m", "app"], self.port),
            environment=self._environment,
            cwd=REPOSITORY,
            log_path=self.data_dir / "server.log",
        )
        try:
            self._wait_ready()
        except RuntimeError:
            self.__exit__(None, None, None)  # `with` calls no __exit__ when __enter__ raises
            raise
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        process, self._process = self._process, None
        if process is not None:
            loopback_service.stop(process, timeout_s=STOP_TIMEOUT_S)

    def _wait_ready(self) -> None:
        log = self.data_dir / "server.log"
        if self._process is None:
            msg = "the service is not running"
            raise RuntimeError(msg)
        try:
            ready = loopback_service.wait_until_ready(self._process, self.port, timeout_s=READY_TIMEOUT_S)
        except TimeoutError:
            msg = f"server not ready within {READY_TIMEOUT_S} s; see {log}"
            raise RuntimeError(msg) from None
        if not ready:
            msg = f"server exited with {self._process.returncode}; see {log}"
            raise RuntimeError(msg)


def rss_bytes(pid: int) -> int:
    """Resident set size of `pid` (its own pages; PostgreSQL runs in processes of its own)."""
    fields = Path(f"/proc/{pid}/statm").read_text(encoding="ascii").split()
    return int(fields[1]) * PAGE_BYTES


def _stat_fields(pid: int | str) -> list[str]:
    """The fields of `/proc/<pid>/stat` after the command name (index 1 is the parent, 11 and 12 the CPU ticks)."""
    return Path(f"/proc/{pid}/stat").read_text(encoding="ascii").rsplit(")", 1)[1].split()


def cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds `pid` has used so far (all its threads)."""
    fields = _stat_fields(pid)
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS_PER_S


def _postmaster(postgres_dir: Path) -> int | None:
    """The embedded PostgreSQL's postmaster pid; None when it is not running."""
    try:
        return int((postgres_dir / "postmaster.pid").read_text(encoding="ascii").split()[0])
    except (FileNotFoundError, ValueError, IndexError):
        return None


def _children(parent: int) -> Iterator[int]:
    """Pids whose parent is `parent` now (a process that exits while we look is skipped)."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            if int(_stat_fields(entry.name)[1]) == parent:
                yield int(entry.name)
        except OSError:
            continue


def postgres_cpu_seconds(postgres_dir: Path) -> float | None:
    """CPU seconds of the embedded PostgreSQL of `postgres_dir`: its postmaster, every child alive now, and
    every child that has exited (the postmaster reaps them, and the kernel adds their time to its own
    `cutime`/`cstime`: a backend closed by the pool's recycling keeps counting). None when not running."""
    postmaster = _postmaster(postgres_dir)
    if postmaster is None:
        return None
    try:
        fields = _stat_fields(postmaster)
    except OSError:
        return None  # stopped while we looked
    total = sum(int(ticks) for ticks in fields[11:15]) / CLOCK_TICKS_PER_S  # utime, stime, cutime, cstime
    for pid in _children(postmaster):
        try:
            total += cpu_seconds(pid)
        except OSError:
            continue  # exited while we looked (its time moves to the postmaster's cutime)
    return total


class CpuMeter:
    """CPU milliseconds per answered query of the server, its PostgreSQL and this client, over one run.

    Read from `/proc` before and after the run: on 2 cores shared by all three, throughput is bounded
    by their sum, so this says where a query's CPU goes.
    """

    def __init__(self, service: ServiceUnderTest) -> None:
        self._service = service
        self._before: tuple[float, float | None, float] | None = None

    def _sample(self) -> tuple[float, float | None, float]:
        own = os.times()
        return (
            cpu_seconds(self._service.pid),
            postgres_cpu_seconds(self._service.data_dir / "postgres"),
            own.user + own.system,
        )

    def start(self) -> None:
        """Mark the start of a run."""
        self._before = self._sample()

    def per_query_ms(self, answered: int) -> dict[str, float]:
        """Milliseconds of CPU per answered query since `start()`, by process; empty with no answers."""
        if self._before is None or answered == 0:
            return {}
        (server, postgres, client), (server_before, postgres_before, client_before) = self._sample(), self._before

        def per_query(now: float, before: float) -> float:
            return round((now - before) * 1000 / answered, 2)

        result = {
            "server_cpu_ms_per_query": per_query(server, server_before),
            "client_cpu_ms_per_query": per_query(client, client_before),
        }
        if postgres is not None and postgres_before is not None:  # None: PostgreSQL not running at one end
            result["postgres_cpu_ms_per_query"] = per_query(postgres, postgres_before)
        return result


def open_descriptors(pid: int) -> int:
    """File descriptors `pid` holds open (sockets, files, pipes)."""
    return sum(1 for _ in Path(f"/proc/{pid}/fd").iterdir())


def postgres_client_connections(postgres_dir: Path) -> int | None:
    """Client backends of the embedded PostgreSQL of `postgres_dir` (what `pg_stat_activity` lists as clients).

    Counted from `/proc`: children of the postmaster whose title names a client (`... [local] ...` for the
    unix socket, `host(port)` for TCP). Background workers (checkpointer, walwriter, ...) are not clients.
    None when the server is not running.
    """
    postmaster = _postmaster(postgres_dir)
    if postmaster is None:
        return None
    clients = 0
    for pid in _children(postmaster):
        try:
            title = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue  # exited while we looked
        if "[local]" in title or "(" in title:
            clients += 1
    return clients


def scrape_metrics(url: str) -> dict[str, float]:
    """The service's `/metrics` as `name{label="value",...}` -> value (counters as `<name>_total`)."""
    text = httpx.get(f"{url}/metrics", timeout=10).text
    values: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f'{key}="{value}"' for key, value in sorted(sample.labels.items()))
            values[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
    return values


def machine_description() -> dict[str, Any]:
    """Cores, memory, CPU model, Python and load: what a reader needs to weigh the numbers."""
    cpu_model = "unknown"
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    memory_kib = 0
    meminfo = Path("/proc/meminfo")
    if meminfo.exists():
        first = meminfo.read_text(encoding="ascii").splitlines()[0]  # MemTotal:  N kB
        memory_kib = int(first.split()[1])
    return {
        "cpu_model": cpu_model,
        "logical_cores": os.cpu_count(),
        "usable_cores": len(os.sched_getaffinity(0)),
        "memory_gib": round(memory_kib / 1024**2, 1),
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
        "load_average_1m_at_start": round(os.getloadavg()[0], 2),
        "client": "same machine, loopback, asyncio keep-alive (bench_load and bench_overload searches: scripts/lean_http.py; everything else: httpx)",
    }


def ingest_documents(url: str, project: str, documents: list[dict[str, Any]], *, batch_size: int) -> dict[str, int]:
    """Ingest `documents` in batches over HTTP (synchronously); counts of 2xx and failed batches."""
    succeeded = failed = 0
    with httpx.Client(base_url=url, timeout=600) as client:
        for start in range(0, len(documents), batch_size):
            batch = {"documents": documents[start : start + batch_size]}
            response = client.post(f"/v1/projects/{project}/documents", json=batch)
            if response.is_success:
                succeeded += 1
            else:
                failed += 1
    return {"batches_ok": succeeded, "batches_failed": failed}


def wait_for_lexical_index(url: str, project: str, *, timeout_s: float) -> float:
    """Seconds until the project has no documents pending lexical indexing (raises past `timeout_s`)."""
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        stats = httpx.get(f"{url}/v1/projects/{project}", timeout=30).json()
        if stats["pending"] == 0:
            return time.monotonic() - started
        time.sleep(0.5)
    msg = f"project {project} still has documents pending lexical indexing after {timeout_s} s"
    raise RuntimeError(msg)


def machine_line(machine: dict[str, Any]) -> str:
    """One markdown line describing `machine_description()`'s result."""
    return (
        f"Machine: {machine['cpu_model']}, {machine['usable_cores']} usable cores, {machine['memory_gib']} GiB, "
        f"Python {machine['python']}, load average {machine['load_average_1m_at_start']} at start; "
        f"{machine['client']}.  "
    )


def run_benchmark(
    measure: Callable[[Path], Coroutine[Any, Any, dict[str, Any]]],
    *,
    output: Path,
    data_dir_prefix: str,
    render_markdown: Callable[[dict[str, Any]], str],
) -> int:
    """Measure on a throwaway data folder, write `output`.json/.md, print each target's verdict; exit status 0."""
    data_dir = Path(tempfile.mkdtemp(prefix=data_dir_prefix))
    try:
        summary = asyncio.run(measure(data_dir / "data"))
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    output = output if output.is_absolute() else REPOSITORY / output
    json_path, markdown_path = write_report(output, summary=summary, markdown=render_markdown(summary))
    for target in summary["targets"]:
        print(f"{verdict(holds=target['holds']):>14}  {target['target']}: {target['measured']}")
    print(f"wrote {json_path} and {markdown_path}")
    return 0
