"""What the libraries log while an engine is down: at most one line per kind and interval, not one per attempt.

The real opensearch-py client against a closed port on 127.0.0.1, logging set up as `poimen serve` sets it.
"""

from __future__ import annotations

import io
import json
import socket

import pytest

from app.config import Settings
from app.domain.errors import EngineUnavailableError
from app.domain.models import Filters, LexicalQuery
from app.engines.opensearch import OpenSearchLexicalIndex
from app.engines.opensearch_lifecycle import create_opensearch_client
from app.observability.logs import configure_logging
from tests.unit.conftest import restore_root_logger  # noqa: F401 - fixture

SEARCHES = 5


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port  # closed again: nothing listens there


async def test_an_unreachable_opensearch_logs_one_client_line_not_one_per_attempt(
    restore_root_logger,  # noqa: F811 - the imported fixture
) -> None:
    stream = io.StringIO()
    configure_logging("INFO", json=True, stream=stream)
    # The default retries: each search is three attempts, each of which the client used to log.
    settings = Settings(_env_file=None, opensearch_url=f"http://127.0.0.1:{closed_port()}")
    client = create_opensearch_client(settings)
    index = OpenSearchLexicalIndex(client, index="poimen-chunks")
    try:
        for _ in range(SEARCHES):
            with pytest.raises(EngineUnavailableError):
                await index.search(LexicalQuery("anything"), top_k=5, filters=Filters("p"))
    finally:
        await client.close()

    records = [json.loads(line) for line in stream.getvalue().splitlines()]
    library = [record for record in records if record["logger"].startswith("opensearch")]
    assert settings.opensearch_max_retries == 2
    assert len(library) == 1, [record["message"] for record in library]
    assert library[0]["level"] == "WARNING"
    assert "ClientConnectorError: Cannot connect to host 127.0.0.1" in library[0]["message"]  # the cause stays
