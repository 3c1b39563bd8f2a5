"""Schema-driven fuzzing of the live service, bounded for CI: `scripts/fuzz_api.py` with a fixed seed and count.

The script starts `python -m app serve` on the embedded engines (this checkout's code), seeds a document and
runs schemathesis against `/schema/openapi.json`: every operation, the coverage, fuzzing (valid and invalid
inputs) and stateful phases (sequences through the document's OpenAPI links: ingest -> read / list / stats /
search -> delete -> read), with the checks `CHECKS`. Auth off, and AUTH_MODE=jwt with a token that may do
everything (so the fuzzed inputs reach the handlers). About 15 s per run; the long run is the same script
with `--duration-s` (numbers in docs/reliability.md).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[2]
SEED = 7
EXAMPLES_PER_OPERATION = 25
CHECKS = (
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_headers_conformance",
    "response_schema_conformance",
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.mark.parametrize("auth", ["off", "jwt"])
def test_fuzzing_finds_no_server_error_and_no_contract_violation(tmp_path: Path, auth: str) -> None:
    summary_path = tmp_path / "summary.json"

    run = subprocess.run(
        [
            sys.executable,
            str(REPOSITORY / "scripts" / "fuzz_api.py"),
            f"--auth={auth}",
            f"--seed={SEED}",
            f"--max-examples={EXAMPLES_PER_OPERATION}",
            f"--checks={','.join(CHECKS)}",
            "--phases=examples,coverage,fuzzing,stateful",
            f"--summary-json={summary_path}",
        ],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )

    assert summary_path.exists(), run.stdout + run.stderr
    summary = json.loads(summary_path.read_text())
    assert (summary["server_errors"], summary["server_tracebacks"]) == (0, 0), run.stdout
    assert summary["failures"] == [], run.stdout
    assert summary["errors"] == [], run.stdout
    assert summary["operations_tested"] == summary["operations_total"] >= 15
    assert summary["examples"] >= 1000
    assert summary["phases"]["stateful"] == "success"
    # With auth on, the token must let the fuzzed requests through: many are answered, not all 401.
    assert summary["accepted_valid_examples"] >= 50
