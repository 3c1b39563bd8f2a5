"""OpenSearch-API servers for the contract tier, shared by every OpenSearch test module (via conftest).

- `opensearch_url`: a real cluster when `OPENSEARCH_URL` is set, else `osmem-server` (PyPI) on loopback.
- `noida_url`: `noida-db` (PyPI), an Elasticsearch 8 API with Lucene-exact BM25, on loopback.
Both start once per session.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import time
import urllib.request
from importlib.resources import files
from typing import TYPE_CHECKING

import pytest
from osmem_server import OsmemServer

from app.config import Settings
from app.engines.opensearch_lifecycle import create_opensearch_client

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator

    from opensearchpy import AsyncOpenSearch

REAL_CLUSTER_URL = os.environ.get("OPENSEARCH_URL") or None


@pytest.fixture(scope="session")
def opensearch_url() -> Iterator[str]:
    """A real cluster's URL, or an `osmem-server` started on 127.0.0.1 for this session."""
    if REAL_CLUSTER_URL is not None:
        yield REAL_CLUSTER_URL
        return
    server = OsmemServer.start(japanese=False, addr="127.0.0.1:0")
    try:
        yield server.url
    finally:
        stop_osmem(server)


def stop_osmem(server: OsmemServer) -> None:
    """`server.close()`, then close its pipes: osmem-server 0.1.6 leaves open the stdout it read the ready line from."""
    server.close()
    for pipe in (server.process.stdin, server.process.stdout):
        if pipe is not None:
            pipe.close()


@pytest.fixture(scope="session")
async def opensearch_client(opensearch_url: str) -> AsyncIterator[AsyncOpenSearch]:
    settings = Settings(opensearch_url=opensearch_url) if REAL_CLUSTER_URL is None else Settings()
    client = create_opensearch_client(settings)
    yield client
    await client.close()


@pytest.fixture
async def opensearch_alias(opensearch_client: AsyncOpenSearch, unique_name: str) -> AsyncIterator[str]:
    """A fresh base alias per test; its versioned index and every project's index are deleted afterwards."""
    alias = f"poimen-test-{unique_name.replace('_', '-')}"
    yield alias
    with contextlib.suppress(Exception):
        await delete_indexes(opensearch_client, f"{alias}-v*,{alias}-p-*")


async def delete_indexes(client: AsyncOpenSearch, pattern: str) -> None:
    """Delete every index `pattern` matches, by name: a wildcard delete is refused where destructive ops need names."""
    names = sorted(await client.indices.get_settings(index=pattern))
    if names:
        await client.indices.delete(index=",".join(names))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="session")
def noida_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """noida-db's Elasticsearch 8 API (Lucene-exact BM25) on a free loopback port, for this session."""
    binary = files("noida_db").joinpath("noida-db")
    port = free_port()
    data_dir = tmp_path_factory.mktemp("noida")
    command = [str(binary), "start", "--only", "elasticsearch", "--host", "127.0.0.1"]
    command += ["--elasticsearch-port", str(port), "--data-dir", str(data_dir)]
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                with urllib.request.urlopen(url, timeout=1) as response:
                    json.load(response)
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"noida-db did not start on {url} (exit code {process.poll()})")
                time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


@pytest.fixture(name="client", params=["osmem", "noida"])
async def client_of_each_emulator(request: pytest.FixtureRequest) -> AsyncIterator[AsyncOpenSearch]:
    """`client`: an opensearch-py client of osmem-server (or `OPENSEARCH_URL`), then of noida-db (Lucene BM25).

    Import it into a test module to run its tests on both emulators.
    """
    from opensearchpy import AsyncOpenSearch  # noqa: PLC0415 - the type is imported for checking only above

    url = request.getfixturevalue("opensearch_url" if request.param == "osmem" else "noida_url")
    opened = AsyncOpenSearch(hosts=[url], timeout=30)
    yield opened
    await opened.close()
