"""The row-level security scope: setting names agree with the policies (migrations 0004 and 0007), cross-project paths are few and named."""

from __future__ import annotations

import ast
import importlib.util
import typing
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from app.config import ConfigurationError
from app.engines.postgres_roles import RUNTIME_ROLE, runtime_url
from app.engines.postgres_scope import (
    ALL_PROJECTS,
    PROJECTS_SETTING,
    SCOPE_SETTING,
    SET_LOCAL_ALL_PROJECTS,
    SET_LOCAL_PROJECTS,
    MaintenanceReason,
)
from app.wiring.engines import refuse_another_model

REPOSITORY = Path(__file__).resolve().parents[2]
POLICIES_MIGRATION = REPOSITORY / "migrations" / "versions" / "2026-12-01_scope_once_per_statement_0007.py"
"""The migration that wrote the policies' current expressions (0004 created them)."""


def load_migration() -> typing.Any:
    spec = importlib.util.spec_from_file_location("scope_once_per_statement_0007", POLICIES_MIGRATION)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_adapter_sets_exactly_the_settings_the_policies_read() -> None:
    migration = load_migration()

    assert f"current_setting('{PROJECTS_SETTING}', true)" in migration.PROJECT_SCOPE
    assert f"(SELECT current_setting('{SCOPE_SETTING}', true)) = '{ALL_PROJECTS}'" == migration.MAINTENANCE_SCOPE
    assert f"set_config('{PROJECTS_SETTING}'" in SET_LOCAL_PROJECTS
    assert f"set_config('{SCOPE_SETTING}', '{ALL_PROJECTS}', true)" in SET_LOCAL_ALL_PROJECTS


def test_both_settings_are_transaction_local() -> None:
    # set_config's third argument `true` is SET LOCAL: nothing outlives the transaction on a pooled connection.
    assert SET_LOCAL_PROJECTS.rstrip(")").endswith("true")
    assert SET_LOCAL_ALL_PROJECTS.rstrip(")").endswith("true")


def cross_project_calls() -> list[tuple[str, str]]:
    """(module, reason) of every `all_projects_transaction(...)` call in `app/`."""
    calls = []
    for path in sorted((REPOSITORY / "app").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "all_projects_transaction":
                reasons = [k.value for k in node.keywords if k.arg == "reason" and isinstance(k.value, ast.Constant)]
                calls.append((path.relative_to(REPOSITORY).as_posix(), str(reasons[0].value) if reasons else "?"))
    return calls


def test_only_the_named_maintenance_paths_span_projects() -> None:
    # A new cross-project path must name itself in `MaintenanceReason` and in docs/security.md.
    calls = cross_project_calls()
    assert sorted(reason for _, reason in calls) == sorted(typing.get_args(MaintenanceReason))
    assert {module for module, _ in calls} <= {
        "app/engines/postgres.py",
        "app/engines/postgres_catalog.py",
        "app/engines/postgres_outbox.py",
    }
    documented = (REPOSITORY / "docs" / "security.md").read_text()
    assert all(f"`{reason}`" in documented for reason in typing.get_args(MaintenanceReason))


def test_the_runtime_url_swaps_the_user_and_drops_the_password() -> None:
    owner = "postgresql+asyncpg://postgres:secret@/postgres?host=/data/postgres"

    url = make_url(runtime_url(owner))

    assert (url.username, url.password, url.database, dict(url.query)) == (
        RUNTIME_ROLE,
        None,
        "postgres",
        {"host": "/data/postgres"},
    )


def test_a_model_other_than_the_stored_vectors_one_is_refused_naming_both() -> None:
    refuse_another_model(None, serving="all-MiniLM-L6-v2")  # nothing stored yet: any model may start
    refuse_another_model("all-MiniLM-L6-v2", serving="all-MiniLM-L6-v2")

    with pytest.raises(ConfigurationError) as refused:
        refuse_another_model("all-MiniLM-L6-v2", serving="/models/other-384")

    assert "EMBEDDING_MODEL=all-MiniLM-L6-v2" in str(refused.value)
    assert "'/models/other-384'" in str(refused.value)
