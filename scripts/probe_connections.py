"""Misbehaving clients against a real `poimen serve`: a connection flood, idle keep-alive reuse, large bodies.

What it does, on a fresh `--data-dir` (embedded engines) with the server's `ulimit -n` at `--descriptors`:
1. Flood: `--flood` connections that send nothing, opened by 300 openers at once, while `/healthz`, `/readyz`
   and a search are asked every 0.1 s on new connections. Prints their statuses (or the error that cut them)
   and the most descriptors the server held (`/proc/<pid>/fd`).
2. Keep-alive: `--kept-alive` connections each answered a search, left idle `--idle-s`, then asked again.
   Prints how many answered the second time (an ingress reuses idle upstream connections up to 60 s).
3. Large bodies: `--bodies` search bodies of `--body-mb` MB at once (their query too long: each is a 400).
   Prints the server's RSS before, at its peak (sampled every 50 ms) and 1 s after.

Usage:
    .venv/bin/python scripts/probe_connections.py --data-dir /tmp/probe-connections/data
    .venv/bin/python scripts/probe_connections.py --data-dir DIR --descriptors 1024 --flood 5000 --bodies 32
Run it from a checkout whose `poimen` is installed (the venv's console script is used).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import loopback_service

READY_TIMEOUT_S = 180.0
CONCURRENT_OPENERS = 300
MIB = 1024 * 1024


def parse_arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--descriptors", type=int, default=1024, help="the server's ulimit -n")
    parser.add_argument("--flood", type=int, default=2000)
    parser.add_argument("--kept-alive", type=int, default=50)
    parser.add_argument("--idle-s", type=float, default=6.0)
    parser.add_argument("--bodies", type=int, default=16)
    parser.add_argument("--body-mb", type=int, default=50)
    return parser.parse_args()


def descriptors(pid: int) -> int:
    return sum(1 for _ in Path(f"/proc/{pid}/fd").iterdir())


def rss_mib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) // 1024
    return 0


async def fresh_status(url: str, path: str) -> str:
    try:
        async with httpx.AsyncClient(base_url=url, timeout=15.0) as client:
            return str((await client.get(path, headers={"host": "localhost"})).status_code)
    except httpx.HTTPError as error:
        return type(error).__name__


async def flood(url: str, port: int, pid: int, count: int) -> dict[str, Any]:
    opened: list[asyncio.StreamWriter] = []
    failed: dict[str, int] = {}
    openers = asyncio.Semaphore(CONCURRENT_OPENERS)
    done = asyncio.Event()

    async def open_one() -> None:
        async with openers:
            try:
                _, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 15.0)
                opened.append(writer)
            except (OSError, TimeoutError) as error:
                failed[type(error).__name__] = failed.get(type(error).__name__, 0) + 1

    async def probe() -> tuple[dict[str, int], int]:
        statuses: dict[str, int] = {}
        most = 0
        while not done.is_set():
            most = max(most, descriptors(pid))
            for path in ("/healthz", "/readyz", "/memory/query?query=backup&project=probe"):
                status = await fresh_status(url, path)
                statuses[status] = statuses.get(status, 0) + 1
            await asyncio.sleep(0.1)
        return statuses, most

    probing = asyncio.create_task(probe())
    await asyncio.gather(*(open_one() for _ in range(count)))
    done.set()
    statuses, most = await probing
    for writer in opened:
        writer.close()
    return {"flood": count, "opened": len(opened), "open_failed": failed, "probes": statuses, "most_fds": most}


async def kept_alive(port: int, count: int, idle_s: float) -> dict[str, Any]:
    body = json.dumps({"query": "backup", "project": "probe"}).encode()
    request = (
        b"POST /v1/search HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n" % len(body)
    ) + body

    async def ask(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        writer.write(request)
        try:
            await writer.drain()
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 15.0)
        except (OSError, asyncio.IncompleteReadError, TimeoutError):
            return False
        length = next(
            int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")
        )
        await reader.readexactly(length)
        return head.startswith(b"HTTP/1.1 200")

    connections = [await asyncio.open_connection("127.0.0.1", port) for _ in range(count)]
    first = sum([await ask(reader, writer) for reader, writer in connections])
    await asyncio.sleep(idle_s)
    second = sum(await asyncio.gather(*(ask(reader, writer) for reader, writer in connections)))
    for _, writer in connections:
        writer.close()
    return {"kept_alive": count, "idle_s": idle_s, "answered_first": first, "answered_after_idle": second}


async def large_bodies(port: int, pid: int, count: int, body_mb: int) -> dict[str, Any]:
    body = json.dumps({"query": "q" * (body_mb * 1_000_000), "project": "probe"}).encode()
    head = (
        "POST /v1/search HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode()

    async def send_one() -> str:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(head + body)
        await writer.drain()
        answer = await reader.read()
        writer.close()
        return answer.split(b"\r\n", 1)[0].decode(errors="replace")

    before = rss_mib(pid)
    peak = before
    sending = asyncio.gather(*(send_one() for _ in range(count)))
    started = time.monotonic()
    while not sending.done():
        peak = max(peak, rss_mib(pid))
        await asyncio.sleep(0.05)
    statuses = sorted(set(await sending))
    elapsed_s = round(time.monotonic() - started, 1)
    await asyncio.sleep(1.0)
    return {"bodies": count, "body_mb": body_mb, "statuses": statuses, "seconds": elapsed_s,
            "rss_before_mib": before, "rss_peak_mib": peak, "rss_after_1s_mib": rss_mib(pid)}  # fmt: skip


async def probe_all(url: str, pid: int, arguments: argparse.Namespace) -> None:
    port = int(url.rsplit(":", 1)[1])
    async with httpx.AsyncClient(base_url=url, timeout=60.0, headers={"host": "localhost"}) as client:
        document = {
            "id": "note",
            "title": "Backups",
            "text": "The nightly backup runs at 02:00 on the billing cluster.",
        }
        (await client.post("/v1/projects/probe/documents", json=document)).raise_for_status()
    print(json.dumps(await flood(url, port, pid, arguments.flood)), flush=True)
    print(json.dumps(await kept_alive(port, arguments.kept_alive, arguments.idle_s)), flush=True)
    print(json.dumps(await large_bodies(port, pid, arguments.bodies, arguments.body_mb)), flush=True)


def main() -> int:
    arguments = parse_arguments()
    arguments.data_dir.mkdir(parents=True, exist_ok=True)
    poimen = str(Path(sys.executable).parent / "poimen")
    environment = {**os.environ, "POIMEN_DATA_DIR": str(arguments.data_dir), "QUERY_CACHE_TTL_SECS": "0"}
    environment.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "AUTH_MODE": "off"})
    limited = ["sh", "-c", f'ulimit -n {arguments.descriptors} && exec "$@"', "sh", poimen]
    process, url = loopback_service.start(
        limited,
        environment=environment,
        cwd=arguments.data_dir.parent,
        log_path=arguments.data_dir.parent / "serve.log",
        timeout_s=READY_TIMEOUT_S,
    )
    try:
        asyncio.run(probe_all(url, process.pid, arguments))
    finally:
        loopback_service.stop(process)
    log = (arguments.data_dir.parent / "serve.log").read_text(errors="replace")
    print(
        json.dumps({"too_many_open_files_lines": log.count("Too many open files"), "error_lines": log.count('"ERROR"')})
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
