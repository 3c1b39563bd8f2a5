"""A libpq-style `DATABASE_URL` (`sslmode=...`), against the real embedded PostgreSQL over TCP.

The embedded server listens on a unix socket only, where TLS is never asked for (libpq and asyncpg alike);
a relay on 127.0.0.1 forwards TCP to it, so the client speaks to a server that offers no TLS, as a server
with `ssl = off` does. `sslmode=require` made the service die with `TypeError: connect() got an unexpected
keyword argument 'sslmode'`, and `poimen migrate` failed on any `postgresql://` URL (`No module named
'psycopg'`).
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, urlsplit

import certifi
import pytest
from sqlalchemy import text

from app.domain.errors import EngineUnavailableError
from app.engines.pgvector import create_postgres_engine
from app.engines.postgres_errors import translate_errors
from tests.integration.conftest import run_cli

if TYPE_CHECKING:
    from collections.abc import Iterator

pytestmark = pytest.mark.integration

DATABASE = "tls_modes"


async def _relay(socket_path: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    server_reader, server_writer = await asyncio.open_unix_connection(socket_path)

    async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        try:
            while data := await source.read(65536):
                sink.write(data)
                await sink.drain()
        finally:
            sink.close()

    await asyncio.gather(pipe(reader, server_writer), pipe(server_reader, writer), return_exceptions=True)


@pytest.fixture(scope="module")
def tcp_port(postgres_url: str) -> Iterator[int]:
    """A port on 127.0.0.1 relayed to the session PostgreSQL's unix socket, with a database of this module's own."""
    socket_folder = Path(parse_qs(urlsplit(postgres_url).query)["host"][0])
    socket_path = str(next(socket_folder.glob(".s.PGSQL.*")))
    loop = asyncio.new_event_loop()
    started = loop.run_until_complete(asyncio.start_server(lambda r, w: _relay(socket_path, r, w), "127.0.0.1", 0))
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    port: int = started.sockets[0].getsockname()[1]
    owner = create_postgres_engine(postgres_url, pool_size=2)

    async def create_database() -> None:
        async with owner.connect() as connection:
            await connection.execution_options(isolation_level="AUTOCOMMIT")
            await connection.execute(text(f"DROP DATABASE IF EXISTS {DATABASE}"))
            await connection.execute(text(f"CREATE DATABASE {DATABASE}"))
        await owner.dispose()

    asyncio.run(create_database())
    yield port
    loop.call_soon_threadsafe(started.close)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(timeout=10)
    for task in asyncio.all_tasks(loop):
        task.cancel()
    loop.run_until_complete(asyncio.sleep(0))
    loop.close()


def tcp_url(port: int, query: str) -> str:
    return f"postgresql://postgres:secretpw@127.0.0.1:{port}/{DATABASE}?{query}"


@pytest.mark.parametrize("mode", ["disable", "allow", "prefer"])
async def test_a_mode_that_does_not_insist_on_tls_connects_in_plain_text(tcp_port: int, mode: str) -> None:
    engine = create_postgres_engine(tcp_url(tcp_port, f"sslmode={mode}"), pool_size=2)
    try:
        async with engine.connect() as connection:
            encrypted = (
                await connection.execute(text("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()"))
            ).scalar_one()
    finally:
        await engine.dispose()

    assert encrypted is False


@pytest.mark.parametrize(
    "query", ["sslmode=require", f"sslmode=verify-full&sslrootcert={certifi.where()}", "ssl=require"]
)
async def test_a_mode_that_insists_on_tls_is_refused_by_a_server_without_it_in_one_line(
    tcp_port: int, query: str
) -> None:
    engine = create_postgres_engine(tcp_url(tcp_port, query), pool_size=2)
    try:
        with pytest.raises(EngineUnavailableError) as raised, translate_errors(engine="postgresql"):
            async with engine.connect() as connection:
                await connection.execute(text("SELECT 1"))
    finally:
        await engine.dispose()

    assert raised.value.message.startswith("postgresql does not offer TLS"), raised.value.message
    assert "sslmode" in raised.value.message
    assert "secretpw" not in raised.value.message


@pytest.mark.slow
def test_migrate_connects_with_sslmode_prefer_and_refuses_require_in_one_line(tcp_port: int, tmp_path: Path) -> None:
    migrated = run_cli("migrate", data_dir=tmp_path / "data", DATABASE_URL=tcp_url(tcp_port, "sslmode=prefer"))
    refused = run_cli("migrate", data_dir=tmp_path / "data", DATABASE_URL=tcp_url(tcp_port, "sslmode=require"))

    assert migrated.returncode == 0, migrated.stderr
    assert "schema at head" in migrated.stderr
    assert refused.returncode == 1, refused.stderr
    assert refused.stderr.startswith("poimen migrate: postgresql does not offer TLS"), refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert "secretpw" not in refused.stderr
