"""Row-level security: every table that holds project rows shows a transaction only its own projects.

Two permissive policies per table (PostgreSQL ORs them), for every command, reading and writing:
- `project_scope`: the row's `project_id` is in `poimen.project_ids`, the text array literal the
  adapter sets with `SET LOCAL` at the start of each transaction (`app.engines.postgres_scope`);
- `maintenance_scope`: the transaction declared `poimen.scope = 'all_projects'`, which only the
  paths that span projects by design do (outbox draining, outbox stats, listing projects, the
  embedding cache; docs/security.md).
A transaction that set neither sees and writes nothing. `FORCE ROW LEVEL SECURITY` holds the table
owner to the policies too (a deployment that runs the service as the owner); superusers and
`BYPASSRLS` roles are never held, hence the embedded runtime role (`app.engines.postgres_roles`).
Unset, `current_setting(..., true)` is NULL; set once and ended with its transaction it is `''`:
`NULLIF` makes both "no project".

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from alembic import op

if TYPE_CHECKING:
    from collections.abc import Sequence

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

PROJECT_TABLES = ("documents", "chunks", "lexical_outbox", "project_generations")
PROJECT_SCOPE = "project_id = ANY (CAST(NULLIF(current_setting('poimen.project_ids', true), '') AS text[]))"
MAINTENANCE_SCOPE = "current_setting('poimen.scope', true) = 'all_projects'"


def upgrade() -> None:
    for table in PROJECT_TABLES:
        op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
        op.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")
        op.execute(f"CREATE POLICY project_scope ON {table} USING ({PROJECT_SCOPE}) WITH CHECK ({PROJECT_SCOPE})")
        op.execute(
            f"CREATE POLICY maintenance_scope ON {table} USING ({MAINTENANCE_SCOPE}) WITH CHECK ({MAINTENANCE_SCOPE})"
        )


def downgrade() -> None:
    for table in PROJECT_TABLES:
        op.execute(f"DROP POLICY maintenance_scope ON {table}")
        op.execute(f"DROP POLICY project_scope ON {table}")
        op.execute(f"ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY")
        op.execute(f"ALTER TABLE {table} DISABLE ROW LEVEL SECURITY")
