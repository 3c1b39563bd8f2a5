"""The example of clients/python/README.md runs, both halves, against a live service."""

from __future__ import annotations

import asyncio
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "clients" / "python" / "README.md"


def test_the_client_readme_example_runs_against_the_live_service(service_url: str) -> None:
    blocks = README.read_text().split("```python\n")[1:]
    assert len(blocks) == 1
    example = blocks[0].split("```", 1)[0]
    namespace: dict[str, object] = {}

    exec(compile(example.replace("http://127.0.0.1:8080", service_url), str(README), "exec"), namespace)  # noqa: S102
    asyncio.run(namespace["main"]())  # type: ignore[operator]

    answer, page = namespace["answer"], namespace["page"]
    assert "runbook-1" in [hit.document_id for hit in answer.results]  # type: ignore[attr-defined]
    assert answer.query_analysis is not None  # type: ignore[attr-defined]
    assert "runbook-1" in [document.id for document in page.items]  # type: ignore[attr-defined]
