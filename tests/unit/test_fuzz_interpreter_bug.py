"""`scripts/fuzz_api.py` runs schemathesis again only when its sole trouble is CPython's spurious AST SystemError."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
sys.path.insert(0, str(SCRIPTS))  # the scripts import each other by module name, as `python scripts/x.py` does
fuzz_api = importlib.import_module("fuzz_api")

BUG_OUTPUT = "SystemError: AST constructor recursion depth mismatch (before=66, after=97)"


def test_an_error_that_is_only_the_interpreter_bug_is_run_again() -> None:
    report = {"errors": [{"title": "Runtime Error", "count": 1}], "failures": []}

    assert fuzz_api._only_interpreter_bug(report, BUG_OUTPUT)


def test_any_other_error_or_a_finding_is_kept() -> None:
    error = {"errors": [{"title": "Runtime Error", "count": 1}], "failures": []}
    finding = {"errors": [{"title": "Runtime Error", "count": 1}], "failures": [{"code": "ST101"}]}
    two_errors = {"errors": [{"title": "Runtime Error"}, {"title": "Runtime Error"}], "failures": []}

    assert not fuzz_api._only_interpreter_bug(error, "SystemError: something else")
    assert not fuzz_api._only_interpreter_bug(finding, BUG_OUTPUT)
    assert not fuzz_api._only_interpreter_bug(two_errors, BUG_OUTPUT)
    assert not fuzz_api._only_interpreter_bug({"errors": [], "failures": []}, BUG_OUTPUT)
