"""Document versions are counted per project: each project's generation starts at its highest version.

Versions were drawn from one sequence for every project (`document_version_seq`), so the versions of two
writes of one project told its tenant how many documents every other project wrote in between. A write now
gives a document one past its project's generation (and past its own version), and moves the generation to
at least that version (`app.engines.postgres_sql.UPSERT_DOCUMENT`). This raises each project's generation to
its highest stored version, once, so a document deleted and written again after the upgrade still gets a
higher version than any it had. Raising a generation only makes the query cache miss once.

The sequence and the column default stay: a replica of the release before writes with them until it is
replaced, and a write of the new release still goes past the version it gave.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-03
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import sqlalchemy as sa
from alembic import op

if TYPE_CHECKING:
    from collections.abc import Sequence

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

RAISE_GENERATIONS = (
    "INSERT INTO project_generations AS g (project_id, generation) "
    "SELECT project_id, max(version) FROM documents GROUP BY project_id ORDER BY project_id "
    "ON CONFLICT (project_id) DO UPDATE SET generation = greatest(g.generation, EXCLUDED.generation)"
)


def upgrade() -> None:
    bind = op.get_bind()
    # Row-level security is forced on the owner too: without the maintenance scope it would see no row.
    bind.execute(sa.text("SELECT set_config('poimen.scope', 'all_projects', true)"))
    bind.execute(sa.text(RAISE_GENERATIONS))


def downgrade() -> None:
    """Nothing to undo: generations only grow, and the release before reads them as they are."""
