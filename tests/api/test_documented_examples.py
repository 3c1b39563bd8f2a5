"""The `curl` examples of README.md and docs/*.md, run in their order against the real app.

Each `curl` to `localhost:8080` in a ```bash block is parsed (method, headers, body, URL) and sent through the
test client; the project `demo` becomes this test's own. An example that needs a token (`${TOKEN}`) is left
to the auth tests. What the prose beside them promises is checked: a success status, the reference
search shape, chunks with breadcrumbs and levels, the fields a `jq` filter of the example reads.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.api.conftest import wait_indexed

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SEARCH_FIELDS = {"query", "project", "search_strategy", "strategy_confidence", "results", "metrics"}
HIT_FIELDS = {"rank", "final_score", "semantic_score", "lexical_score", "score_breakdown", "text", "source", "level",
              "breadcrumb", "document_id"}  # fmt: skip


@dataclass(frozen=True)
class CurlExample:
    """One documented `curl` call, and the `jq` paths piped after it (if any)."""

    where: str
    method: str
    path: str
    headers: dict[str, str] = field(default_factory=dict)
    body: str | None = None
    jq_paths: tuple[tuple[str, ...], ...] = ()


def bash_commands(markdown: str) -> list[str]:
    """The shell commands of a document's ```bash blocks, continuation lines and multi-line quotes joined."""
    commands: list[str] = []
    for block in re.findall(r"```bash\n(.*?)```", markdown, re.DOTALL):
        pending = ""
        for line in block.splitlines():
            if not pending and (not line.strip() or line.lstrip().startswith("#")):
                continue
            pending = f"{pending}\n{line}" if pending else line
            if pending.endswith("\\"):
                pending = pending[:-1]
                continue
            try:
                shlex.split(pending, comments=True)
            except ValueError:  # a quote still open: the command goes on
                continue
            commands.append(pending)
            pending = ""
    return commands


def jq_paths(filter_text: str) -> tuple[tuple[str, ...], ...]:
    """`.a.b, .c` -> (("a", "b"), ("c",)): the plain paths of a jq filter."""
    return tuple(tuple(part for part in path.strip().split(".") if part) for path in filter_text.split(","))


def parse_curl(command: str, where: str) -> CurlExample | None:
    """The call a `curl` command makes to the local service, or None when it is no such call."""
    words = shlex.split(command, comments=True)
    if not words or words[0] != "curl" or "${" in command:
        return None
    pipeline = words[words.index("|") + 1 :] if "|" in words else []
    words = words[: words.index("|")] if "|" in words else words
    method, headers, body, url = "GET", {}, None, None
    arguments = iter(words[1:])
    for word in arguments:
        if word == "-X":
            method = next(arguments)
        elif word == "-H":
            name, value = next(arguments).split(":", 1)
            headers[name.strip()] = value.strip()
        elif word in {"-d", "--data"}:
            body = next(arguments)
            method = "POST" if method == "GET" else method
        elif word.startswith("-"):
            continue
        else:
            url = word
    if url is None or not url.startswith("localhost:8080/"):
        return None
    parts = urlsplit(f"http://{url}")
    path = f"{parts.path}?{parts.query}" if parts.query else parts.path
    paths = jq_paths(pipeline[1]) if pipeline[:1] == ["jq"] else ()
    return CurlExample(where, method, path, headers, body, paths)


def documented_examples() -> list[CurlExample]:
    examples = []
    for document in DOCUMENTS:
        for command in bash_commands(document.read_text()):
            example = parse_curl(command, document.relative_to(ROOT).as_posix())
            if example is not None:
                examples.append(example)
    return examples


def own_project(text: str, project: str) -> str:
    return re.sub(r"(?<=/projects/)demo\b|(?<=project=)demo\b|(?<=\"project\": \")demo(?=\")", project, text)


def check_answer(example: CurlExample, answer: Any) -> None:
    """What the docs beside the example promise of its answer."""
    if example.path.startswith(("/memory/query", "/v1/search")):
        assert set(answer) >= SEARCH_FIELDS, example
        assert answer["results"], example
        for hit in answer["results"]:
            assert set(hit) >= HIT_FIELDS, example
        if example.body is not None and '"explain": true' in example.body:
            assert answer["query_analysis"] is not None, example
            assert answer["leg_rankings"] is not None, example
    elif re.fullmatch(r"/v1/projects/[^/]+/documents/[^/?]+", example.path) and example.method == "GET":
        assert answer["chunks"], example
        for chunk in answer["chunks"]:
            assert chunk["breadcrumb"], example
            assert chunk["level"], example
    for path in example.jq_paths:
        value = answer
        for key in path:
            assert key in value, (example, path)
            value = value[key]


def test_the_docs_hold_curl_examples_of_the_main_calls() -> None:
    examples = documented_examples()

    calls = {(example.method, example.path.split("?")[0]) for example in examples}

    assert ("POST", "/v1/projects/demo/documents") in calls
    assert ("GET", "/memory/query") in calls
    assert ("POST", "/v1/search") in calls
    assert ("GET", "/admin/flags") in calls
    assert ("GET", "/metrics") in calls


async def test_every_documented_curl_example_answers_as_documented(api_client, unique_name) -> None:
    examples = documented_examples()

    for example in examples:
        body = None if example.body is None else own_project(example.body, unique_name).encode()
        response = await api_client.request(
            example.method, own_project(example.path, unique_name), headers=example.headers, content=body
        )

        assert 200 <= response.status_code < 300, (example, response.text)
        if response.headers.get("content-type", "").startswith("application/json"):
            check_answer(example, response.json())
        else:
            assert example.path == "/metrics", example
            assert "poimen_" in response.text
        if example.method == "POST" and example.path.endswith("/documents"):
            for written in response.json()["documents"]:
                await wait_indexed(api_client, unique_name, written["id"])


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (
            "curl -s -X POST localhost:8080/v1/search -H 'content-type: application/json' -d '{\n  \"query\": \"a\"}'",
            CurlExample("x", "POST", "/v1/search", {"content-type": "application/json"}, '{\n  "query": "a"}'),
        ),
        (
            "curl -s localhost:8080/admin/flags | jq '.version, .flags.hybrid_rollout_percent'",
            CurlExample("x", "GET", "/admin/flags", jq_paths=(("version",), ("flags", "hybrid_rollout_percent"))),
        ),
        ('curl -s -H "Authorization: Bearer ${TOKEN}" localhost:8080/memory/query', None),
        ("kubectl apply -f k8s/dev/poimen-memory.yaml", None),
    ],
)
def test_curl_commands_are_read_as_a_shell_would(command: str, expected: CurlExample | None) -> None:
    assert parse_curl(command, "x") == expected
