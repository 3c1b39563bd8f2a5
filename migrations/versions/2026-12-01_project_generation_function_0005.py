"""A project's generation in one statement: `poimen_project_generation(project_id)`.

The query cache reads the project's generation before every search (read-your-writes across
replicas). Through a scoped transaction that read took four round trips (BEGIN, the scope, the SELECT,
ROLLBACK); this function takes one, outside any transaction. It runs as its caller (`SECURITY INVOKER`,
the default), so row-level security still holds it: it scopes itself to the one project it is asked
for with `set_config(..., true)` and puts the caller's scope back before it returns (a `SET` clause on
the function would do that too, but PostgreSQL lets only a superuser attach one for a custom setting).
Called inside a caller's transaction it therefore leaves that transaction's scope as it was (an error
aborts the transaction anyway), and called alone its scope ends with its statement.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from alembic import op

if TYPE_CHECKING:
    from collections.abc import Sequence

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

CREATE_FUNCTION = """
CREATE FUNCTION poimen_project_generation(requested_project_id text) RETURNS bigint
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    callers_scope text := current_setting('poimen.project_ids', true);
    found bigint;
BEGIN
    PERFORM set_config('poimen.project_ids', CAST(ARRAY[requested_project_id] AS text), true);
    found := (SELECT generation FROM project_generations WHERE project_id = requested_project_id);
    PERFORM set_config('poimen.project_ids', coalesce(callers_scope, ''), true);
    RETURN found;
END
$$
"""


def upgrade() -> None:
    op.execute(CREATE_FUNCTION)


def downgrade() -> None:
    op.execute("DROP FUNCTION poimen_project_generation(text)")
