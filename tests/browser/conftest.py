"""Browser tier: Debian's Chromium driven by Playwright against a real `poimen serve` on the embedded default.

Playwright's own browser download cannot run here, so the browser is the system `chromium` package
(`make install-tools` installs it in CI); without it these tests skip and say why.
`POIMEN_CONSOLE_SCREENSHOTS=<folder>` makes the tests write the README's screenshots into that folder.
In CI (`CI=true`) a missing browser fails instead: CI installs it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest
from playwright.sync_api import sync_playwright

from tests.integration.conftest import (
    ServiceProcess,
    cli_environment,
    free_port,
    poimen_executable,
    stop_leftover_postgres,
)

if TYPE_CHECKING:
    from collections.abc import Iterator

    from playwright.sync_api import Browser, Page

CHROMIUM = Path(os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",  # as root (CI) Chromium refuses its sandbox
    "--disable-gpu",
    "--disable-background-networking",  # no network but the service under test
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SCREENSHOTS_ENV = "POIMEN_CONSOLE_SCREENSHOTS"
PROJECT = "console-demo"

# A few conversation turns and notes: some share the query's words, some only its meaning.
DOCUMENTS = [
    {
        "id": "chat/s1/t1",
        "source": "chat/session-1",
        "title": "Session 1, turn 1",
        "tags": ["painting"],
        "text": "Melanie: I finally painted the lake at sunrise last weekend, all pinks and oranges.",
        "context": "Caroline: What have you been painting lately?",
    },
    {
        "id": "chat/s1/t2",
        "source": "chat/session-1",
        "title": "Session 1, turn 2",
        "text": "Caroline: That sounds lovely. I went to a support group meeting on Tuesday.",
    },
    {
        "id": "chat/s2/t1",
        "source": "chat/session-2",
        "title": "Session 2, turn 1",
        "text": "Her watercolour of dawn above still water hangs framed in our hallway.",
    },
    {
        "id": "notes/kayak",
        "source": "notes/outdoors",
        "title": "Kayak trip",
        "text": "# Kayak trip\n\nWe paddled across the lake before breakfast; the sunrise was worth the early start.",
    },
    {
        "id": "notes/pottery",
        "source": "notes/hobbies",
        "title": "Pottery class",
        "text": "# Pottery\n\nMelanie signed up for a pottery class and made a bowl with a blue glaze.",
    },
    {
        "id": "runbooks/ports",
        "source": "runbooks/k8s/networking.md",
        "title": "Networking",
        "tags": ["networking"],
        "text": "# Kubernetes\n\n## Port conflicts\n\nIf port 8080 is taken, find the process with lsof -i :8080.",
    },
]


def wait_indexed(url: str, document_ids: list[str], timeout_s: float = 30.0) -> None:
    """Wait until the outbox has put every document into the lexical index."""
    import time  # noqa: PLC0415

    deadline = time.monotonic() + timeout_s
    pending = set(document_ids)
    while pending and time.monotonic() < deadline:
        for document_id in list(pending):
            response = httpx.get(f"{url}/v1/projects/{PROJECT}/documents/{document_id}", timeout=5.0)
            if response.status_code == 200 and response.json()["lexically_indexed"]:
                pending.discard(document_id)
        time.sleep(0.1)
    assert not pending, f"not lexically indexed within {timeout_s} s: {sorted(pending)}"


def require_chromium() -> None:
    """Skip (fail in CI) before any service starts when there is no browser to drive."""
    if not CHROMIUM.exists():
        reason = f"no Chromium at {CHROMIUM}: apt-get install chromium (make install-tools does)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason}; CI installs it, so the browser tests must run there")
        pytest.skip(reason)


@contextmanager
def serving(**environment: str) -> Iterator[str]:
    """A `poimen serve` (`environment` added to its own) on a fresh embedded data folder holding `DOCUMENTS`."""
    root = Path(tempfile.mkdtemp(prefix="poimen-browser-"))
    data_dir = root / "data"
    port = free_port()
    log_path = root / "serve.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [poimen_executable(), "serve", "--host", "127.0.0.1", "--port", str(port)],
            cwd=root,  # not the checkout: its .env must not leak into the run
            env=cli_environment(data_dir, **environment),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    service = ServiceProcess(process=process, url=f"http://127.0.0.1:{port}", log_path=log_path)
    try:
        service.wait_ready()
        response = httpx.post(f"{service.url}/v1/projects/{PROJECT}/documents", json={"documents": DOCUMENTS})
        assert response.status_code == 201, response.text
        wait_indexed(service.url, [document["id"] for document in DOCUMENTS])
        yield service.url
    finally:
        service.stop()
        stop_leftover_postgres(data_dir)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def console_url() -> Iterator[str]:
    """A `poimen serve` on a fresh embedded data folder holding `DOCUMENTS`; its base URL."""
    require_chromium()
    with serving() as url:
        yield url


@pytest.fixture(scope="module")
def reranked_console_url() -> Iterator[str]:
    """The same, with the bundled learned ranker as its second stage (`RERANKER=learned`)."""
    require_chromium()
    with serving(RERANKER="learned") as url:
        yield url


@pytest.fixture(scope="module")
def browser(console_url: str) -> Iterator[Browser]:
    """Headless Debian Chromium (requested after the service, so a missing browser skips before it starts)."""
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@contextmanager
def console_tab(browser: Browser, url: str) -> Iterator[Page]:
    """A fresh tab at `url`'s `/console` once its script has started; fails the test on any script error."""
    context = browser.new_context(viewport={"width": 1440, "height": 1000}, base_url=url)
    tab = context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda error: errors.append(str(error)))
    tab.goto("/console")
    tab.wait_for_selector("body[data-ready='true']")
    yield tab
    context.close()
    assert errors == []


@pytest.fixture
def page(browser: Browser, console_url: str) -> Iterator[Page]:
    """A fresh console tab on the `console_url` service."""
    with console_tab(browser, console_url) as tab:
        yield tab


@pytest.fixture
def reranked_page(browser: Browser, reranked_console_url: str) -> Iterator[Page]:
    """A fresh console tab on the `reranked_console_url` service."""
    with console_tab(browser, reranked_console_url) as tab:
        yield tab


def screenshot(page: Page, name: str) -> None:
    """Write `<name>.png` into `$POIMEN_CONSOLE_SCREENSHOTS` when it is set (the README's pictures)."""
    folder = os.environ.get(SCREENSHOTS_ENV)
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=True)
