"""Fuzz the live API document with schemathesis: every operation, valid and invalid inputs, stateful link sequences.

Starts `python -m app serve` on the embedded engines (a throwaway data folder, a free loopback port) unless
`--url` names a running service, seeds one document, runs `schemathesis run` against
`/schema/openapi.json`, and prints the example count, the duration and the findings (failures by check and
operation, plus tracebacks in the service log). Exit status 0 only when nothing was found.

    python scripts/fuzz_api.py --duration-s 240 --seed 1              # the long run (time-bounded)
    python scripts/fuzz_api.py --max-examples 8 --seed 7 --auth jwt   # a bounded run, as the test does
    python scripts/fuzz_api.py --url http://127.0.0.1:8000 --duration-s 60

With `--auth jwt` the service runs with AUTH_MODE=jwt and a random HS256 secret, and every request carries
a token for all projects with the search, ingest and admin scopes.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import jwt
import loopback_service

REPOSITORY = Path(__file__).resolve().parent.parent
CHECKS = (
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_headers_conformance",
    "response_schema_conformance",
)
PHASES = ("examples", "coverage", "fuzzing", "stateful")
READY_TIMEOUT_S = 120.0
SEED_DOCUMENT = {
    "id": "runbooks/backups.md",
    "source": "runbooks/backups.md",
    "title": "Backups",
    "text": "# Backups\n\nThe nightly backup runs at 02:00 and keeps 14 days.\n\n## Restore\n\nUse pg_restore.",
}


def _token(secret: str) -> str:
    claims = {"sub": "fuzzer", "exp": int(time.time()) + 24 * 3600, "projects": "*", "scope": "search ingest admin"}
    return jwt.encode(claims, secret, algorithm="HS256")


def _start_service(data_dir: Path, log_path: Path, *, auth_secret: str | None) -> tuple[subprocess.Popen[bytes], str]:
    environment = {
        key: value
        for key, value in os.environ.items()
        if key not in {"DATABASE_URL", "OPENSEARCH_URL", "POIMEN_FLAGS_FILE", "AUTH_MODE", "JWT_SECRET"}
    }
    environment.update(
        {
            "POIMEN_DATA_DIR": str(data_dir),
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "OUTBOX_POLL_INTERVAL_S": "0.1",
            # This checkout's code, whichever checkout the interpreter's editable install points at.
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPOSITORY), os.environ.get("PYTHONPATH")])),
        }
    )
    if auth_secret is not None:
        environment.update({"AUTH_MODE": "jwt", "JWT_SECRET": auth_secret})
    try:
        # cwd not the checkout: its .env must not leak into the run
        return loopback_service.start(
            [sys.executable, "-m", "app"],
            environment=environment,
            cwd=data_dir.parent,
            log_path=log_path,
            timeout_s=READY_TIMEOUT_S,
        )
    except loopback_service.StartFailedError as error:
        sys.exit(str(error))


def _schemathesis_command(arguments: argparse.Namespace, url: str, report: Path, token: str | None) -> list[str]:
    command = [
        str(Path(sys.executable).parent / "schemathesis"),
        "run",
        f"{url}/schema/openapi.json",
        "--checks",
        ",".join(arguments.checks),
        "--phases",
        ",".join(arguments.phases),
        "--seed",
        str(arguments.seed),
        "--workers",
        str(arguments.workers),
        "--request-timeout",
        "30",
        "--generation-database",
        "none",  # no example database: a run depends on its seed only
        "--report",
        "json",
        "--report-json-path",
        str(report),
        "--no-color",
    ]
    if arguments.max_examples is not None:
        command += ["--max-examples", str(arguments.max_examples)]
    if arguments.duration_s is not None:
        command += ["--max-time", str(arguments.duration_s)]
    if token is not None:
        command += ["--header", f"Authorization: Bearer {token}"]
    return command


def _server_errors_in_log(log_path: Path | None) -> int:
    if log_path is None or not log_path.exists():
        return 0
    return log_path.read_text(errors="replace").count("Traceback")


INTERPRETER_BUG = "AST constructor recursion depth mismatch"
"""A spurious SystemError of CPython 3.11's `ast.parse` (gh-106905) that hypothesis can hit while it describes a
lambda for a strategy's repr: an error of the fuzzer's own process, never a finding about the service."""
RUNS_ON_INTERPRETER_BUG = 2


def _only_interpreter_bug(report: dict[str, Any], output: str) -> bool:
    """Whether the run's only trouble is `INTERPRETER_BUG`: no finding, and every error is it."""
    errors = report.get("errors", [])
    return bool(errors) and not report.get("failures") and output.count(INTERPRETER_BUG) >= len(errors)


def _read_report(path: Path, output: str) -> dict[str, Any]:
    """schemathesis's JSON report; when it wrote none, or an empty or cut-off one (it crashed while writing it:
    seen once in CI, an empty file), its output's tail stands as the run's one error."""
    try:
        report: dict[str, Any] = json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {"errors": [output[-2000:]]}
    return report


def summarize(report: dict[str, Any], *, wall_s: float, tracebacks: int, output: str) -> dict[str, Any]:
    """The run's numbers and findings, from schemathesis's JSON report."""
    failures = [
        {"code": item["code"], "title": item["title"], "count": item["count"], "operations": item["operations"]}
        for item in report.get("failures", [])
    ]
    server_errors = sum(item["count"] for item in failures if item["code"] == "ST101")  # not_a_server_error
    errors = report.get("errors", [])
    accepted = sum(
        counts.get("accepted", 0) for rates in report.get("valid_rates", {}).values() for counts in rates.values()
    )
    return {
        "schemathesis_version": report.get("schemathesis_version"),
        "seed": report.get("seed"),
        "operations_total": report.get("operations", {}).get("total"),
        "operations_tested": report.get("operations", {}).get("tested"),
        "examples": report.get("test_cases", {}).get("generated"),
        "duration_s": round(report.get("running_time", wall_s), 1),
        "stop_reason": report.get("stop_reason"),
        "phases": {name: phase.get("status") for name, phase in report.get("phases", {}).items()},
        "accepted_valid_examples": accepted,
        "warnings": {name: items for name, items in report.get("warnings", {}).items() if items},
        "server_errors": server_errors,
        "server_tracebacks": tracebacks,
        "failures": failures,
        "errors": [str(error)[:500] for error in errors],
        "clean": not failures and not errors and tracebacks == 0,
        "output_tail": "" if not failures and not errors else output[-6000:],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--url", help="a running service (default: start one on the embedded engines)")
    parser.add_argument("--auth", choices=("off", "jwt"), default="off", help="the service's AUTH_MODE (own service)")
    parser.add_argument("--token", help="bearer token for --url with auth on")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--duration-s", type=int, help="time budget: fuzzing and stateful repeat until spent")
    parser.add_argument("--max-examples", type=int, help="examples per operation (the bounded run)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--checks", type=lambda text: text.split(","), default=list(CHECKS))
    parser.add_argument("--phases", type=lambda text: text.split(","), default=list(PHASES))
    parser.add_argument("--summary-json", type=Path, help="also write the summary here")
    arguments = parser.parse_args()
    if arguments.duration_s is None and arguments.max_examples is None:
        parser.error("give --duration-s, --max-examples or both")

    with tempfile.TemporaryDirectory(prefix="poimen-fuzz-") as folder:
        work = Path(folder)
        process, log_path, token = None, None, arguments.token
        if arguments.url is None:
            secret = secrets.token_urlsafe(48) if arguments.auth == "jwt" else None
            log_path = work / "service.log"
            process, url = _start_service(work / "data", log_path, auth_secret=secret)
            token = None if secret is None else _token(secret)
        else:
            url = arguments.url.rstrip("/")
        try:
            headers = {} if token is None else {"Authorization": f"Bearer {token}"}
            httpx.post(
                f"{url}/v1/projects/demo/documents", json=SEED_DOCUMENT, headers=headers, timeout=60
            ).raise_for_status()
            report_path = work / "report.json"
            for attempt in range(1, RUNS_ON_INTERPRETER_BUG + 1):
                started = time.monotonic()
                run = subprocess.run(
                    _schemathesis_command(arguments, url, report_path, token),
                    cwd=work,
                    capture_output=True,
                    text=True,
                    check=False,
                )
                wall_s = time.monotonic() - started
                report = _read_report(report_path, run.stdout + run.stderr)
                if not _only_interpreter_bug(report, run.stdout + run.stderr) or attempt == RUNS_ON_INTERPRETER_BUG:
                    break
                print(f"schemathesis hit {INTERPRETER_BUG!r} (CPython gh-106905), not the service: running again")
        finally:
            if process is not None:
                loopback_service.stop(process)
        summary = summarize(
            report, wall_s=wall_s, tracebacks=_server_errors_in_log(log_path), output=run.stdout + run.stderr
        )
        if summary["server_tracebacks"] and log_path is not None:
            summary["output_tail"] += "\n--- service log ---\n" + log_path.read_text(errors="replace")[-6000:]

    print(
        f"schemathesis {summary['schemathesis_version']}, seed {summary['seed']}, auth {arguments.auth}: "
        f"{summary['examples']} examples over {summary['operations_tested']} operations in {summary['duration_s']} s; "
        f"server errors {summary['server_errors']}, server tracebacks {summary['server_tracebacks']}, "
        f"findings {len(summary['failures'])}"
    )
    print(
        f"  valid examples the service accepted: {summary['accepted_valid_examples']}; warnings: {summary['warnings']}"
    )
    print(f"  phases: {', '.join(f'{name} {status}' for name, status in summary['phases'].items())}")
    for failure in summary["failures"]:
        print(f"  {failure['code']} {failure['title']} x{failure['count']}: {', '.join(failure['operations'])}")
    for error in summary["errors"]:
        print(f"  error: {error}")
    if summary["output_tail"]:
        print(summary["output_tail"])
    if arguments.summary_json is not None:
        arguments.summary_json.write_text(json.dumps(summary, indent=2))
    return 0 if summary["clean"] else 1


if __name__ == "__main__":
    sys.exit(main())
