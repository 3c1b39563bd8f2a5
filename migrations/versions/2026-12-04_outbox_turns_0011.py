"""The lexical outbox by project and version: each project's oldest entries, for claims that take turns.

Workers claimed the oldest entries of every project together (`lexical_outbox_version_idx`), so one tenant's
backlog held another's next write out of the lexical index until all of it was indexed. A claim now takes
each project's oldest entries in turn (`app.engines.postgres_outbox_sql.CLAIM_QUEUED`), which reads a
project's entries by version: without this index, by its primary key, every queued entry of the project at
every claim (a reindex of a large project queues all of its documents).

The outbox holds what is not indexed yet, usually a few rows: the index is built in the migration's
transaction. The release before ignores it.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-04
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from alembic import op

if TYPE_CHECKING:
    from collections.abc import Sequence

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("CREATE INDEX IF NOT EXISTS lexical_outbox_project_version_idx ON lexical_outbox (project_id, version)")


def downgrade() -> None:
    op.drop_index("lexical_outbox_project_version_idx", table_name="lexical_outbox")
