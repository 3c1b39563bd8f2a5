"""A project's embedded lexical index lost or damaged under `poimen serve` is refilled from PostgreSQL by itself.

Lost: its folder deleted. The first search answered `degraded`, every later one an empty lexical leg that
said nothing (not degraded, `/readyz` ready, the project's stats "lexically indexed") until someone ran
`poimen reindex`. Damaged: a segment file cut short. Searches degraded for ever, `poimen reindex` could
not heal it (every write to the project failed on the damaged segment), and, the outbox retrying the
project's entries first, no other project's writes reached the lexical index either.
"""

from __future__ import annotations

import shutil
import time
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from app.engines.tantivy_folders import project_folder

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from tests.integration.conftest import ServiceProcess

pytestmark = [pytest.mark.slow, pytest.mark.integration]

PROJECT = "repaired"
OTHER_PROJECT = "bystander"
WORDS = ["kestrelwing", "marmotfold", "otterglen", "puffinrock", "quokkavale"]
REPAIR_TIMEOUT_S = 60.0


def write(service: ServiceProcess, project: str, words: list[str]) -> None:
    documents = [{"id": word, "text": f"# {word}\n\nThe {word} runbook restarts the worker."} for word in words]
    response = httpx.post(f"{service.url}/v1/projects/{project}/documents", json={"documents": documents}, timeout=30)
    assert response.status_code == 201, response.text


def lexical_search(service: ServiceProcess, project: str, word: str) -> dict[str, Any]:
    body = {"query": word, "project": project, "strategy": "lexical", "limit": 10}
    response = httpx.post(f"{service.url}/v1/search", json=body, timeout=30)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def found(answer: dict[str, Any]) -> list[str]:
    return [hit["document_id"] for hit in answer["results"]]


def wait_until_every_word_is_found_lexically(service: ServiceProcess, project: str, words: list[str]) -> list[str]:
    """Search each word until it finds its document on the lexical leg; every silent miss seen meanwhile.

    A silent miss is an answer that is not degraded yet finds nothing: the lexical leg said it searched.
    """
    silent_misses = []
    deadline = time.monotonic() + REPAIR_TIMEOUT_S
    remaining = list(words)
    while remaining and time.monotonic() < deadline:
        word = remaining[0]
        answer = lexical_search(service, project, word)
        if not answer["degraded"] and found(answer) == [word]:
            remaining.pop(0)
            continue
        if not answer["degraded"] and not answer["results"]:
            silent_misses.append(word)
        time.sleep(0.2)
    assert not remaining, f"not found lexically within {REPAIR_TIMEOUT_S} s: {remaining}\n{service.log_tail(5)}"
    return silent_misses


def test_a_project_folder_deleted_under_the_service_is_refilled_without_a_reindex(
    poimen_service: Callable[..., ServiceProcess], poimen_data_dir: Path
) -> None:
    service = poimen_service(QUERY_CACHE_MAX_SIZE="0")  # every search reaches the engines
    write(service, PROJECT, WORDS)
    wait_until_every_word_is_found_lexically(service, PROJECT, WORDS)  # its index is open in the service

    shutil.rmtree(project_folder(poimen_data_dir / "lexical", PROJECT))
    first = lexical_search(service, PROJECT, "runbook")
    silent_misses = wait_until_every_word_is_found_lexically(service, PROJECT, WORDS)

    assert first["degraded"]
    assert silent_misses == []
    assert sorted(found(lexical_search(service, PROJECT, "worker"))) == sorted(WORDS)


def test_a_damaged_project_index_is_rebuilt_and_blocks_no_other_project(
    poimen_service: Callable[..., ServiceProcess], poimen_data_dir: Path
) -> None:
    service = poimen_service(QUERY_CACHE_MAX_SIZE="0")  # every search reaches the engines
    write(service, PROJECT, WORDS)
    wait_until_every_word_is_found_lexically(service, PROJECT, WORDS)
    folder = project_folder(poimen_data_dir / "lexical", PROJECT)

    for segment_file in folder.glob("*.idx"):  # what a torn write or a bad disk leaves
        with segment_file.open("r+b") as damaged:
            damaged.truncate(10)
    first = lexical_search(service, PROJECT, "runbook")
    write(service, PROJECT, ["newtcreek"])  # queued first: the outbox takes the damaged project's entry first
    write(service, OTHER_PROJECT, ["wombatridge"])
    wait_until_every_word_is_found_lexically(service, OTHER_PROJECT, ["wombatridge"])
    wait_until_every_word_is_found_lexically(service, PROJECT, [*WORDS, "newtcreek"])

    assert first["degraded"]
    assert sorted(found(lexical_search(service, PROJECT, "worker"))) == sorted([*WORDS, "newtcreek"])


def test_a_project_folder_lost_while_the_service_was_stopped_is_refilled_at_start(
    poimen_service: Callable[..., ServiceProcess], poimen_data_dir: Path
) -> None:
    first = poimen_service(QUERY_CACHE_MAX_SIZE="0")
    write(first, PROJECT, WORDS)
    write(first, OTHER_PROJECT, ["wombatridge"])
    wait_until_every_word_is_found_lexically(first, PROJECT, WORDS)
    wait_until_every_word_is_found_lexically(first, OTHER_PROJECT, ["wombatridge"])
    first.stop()

    shutil.rmtree(project_folder(poimen_data_dir / "lexical", PROJECT))  # a restore of `postgres/` alone, say
    second = poimen_service(QUERY_CACHE_MAX_SIZE="0")
    silent_misses = wait_until_every_word_is_found_lexically(second, PROJECT, WORDS)

    assert silent_misses == []
    assert sorted(found(lexical_search(second, PROJECT, "worker"))) == sorted(WORDS)
    assert found(lexical_search(second, OTHER_PROJECT, "wombatridge")) == ["wombatridge"]
    assert "queued again from PostgreSQL: 5 documents" in second.log_path.read_text(errors="replace")
