"""Row-level security reads the transaction's scope once per statement, not once per row.

Migration 0004's policies call `current_setting(...)` and parse the project list (`text[]`) in the
row filter itself, so a sequential scan (the vector search of a project too small for the HNSW index,
where an exact scan is cheaper) evaluated both for every row it read. As scalar subqueries the same
expressions become InitPlans: evaluated once when the statement starts, then compared per row. What
a transaction may see and write does not change; only how often the scope is read. A vector search
over a 1,951-chunk project: 1.72 -> 1.46 ms per statement (docs/benchmarks/threads.md).

The outer `CAST(... AS text[])` keeps `= ANY (...)` an array comparison: `ANY ((SELECT ...))` alone
would read as `ANY (subquery)`, comparing text to each row of the subquery.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from alembic import op

if TYPE_CHECKING:
    from collections.abc import Sequence

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

PROJECT_TABLES = ("documents", "chunks", "lexical_outbox", "project_generations")
PROJECT_SCOPE = (
    "project_id = ANY (CAST((SELECT CAST(NULLIF(current_setting('poimen.project_ids', true), '') AS text[])) "
    "AS text[]))"
)
MAINTENANCE_SCOPE = "(SELECT current_setting('poimen.scope', true)) = 'all_projects'"
PER_ROW_PROJECT_SCOPE = "project_id = ANY (CAST(NULLIF(current_setting('poimen.project_ids', true), '') AS text[]))"
PER_ROW_MAINTENANCE_SCOPE = "current_setting('poimen.scope', true) = 'all_projects'"
"""Migration 0004's expressions, restored by `downgrade`."""


def _alter(project_scope: str, maintenance_scope: str) -> None:
    for table in PROJECT_TABLES:
        op.execute(f"ALTER POLICY project_scope ON {table} USING ({project_scope}) WITH CHECK ({project_scope})")
        op.execute(
            f"ALTER POLICY maintenance_scope ON {table} USING ({maintenance_scope}) WITH CHECK ({maintenance_scope})"
        )


def upgrade() -> None:
    _alter(PROJECT_SCOPE, MAINTENANCE_SCOPE)


def downgrade() -> None:
    _alter(PER_ROW_PROJECT_SCOPE, PER_ROW_MAINTENANCE_SCOPE)
