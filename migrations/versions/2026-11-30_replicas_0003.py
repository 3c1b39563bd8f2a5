"""Many replicas on one database: outbox leases, document versions, project generations.

- `lexical_outbox.claimed_until`: a claim is a lease (`FOR UPDATE SKIP LOCKED` picks unclaimed or
  expired rows), so several processes drain one outbox and a crashed claimer's rows come back.
- `documents.version`: a value of `document_version_seq` taken on every write, so versions only grow,
  across deletes and re-creations too; an agent updates safely with an expected version.
- `project_generations`: bumped in the transaction of every write that changes what a project's
  searches answer; every replica reads it to key its query cache (read-your-writes across replicas).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import sqlalchemy as sa
from alembic import op

if TYPE_CHECKING:
    from collections.abc import Sequence

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("lexical_outbox", sa.Column("claimed_until", sa.DateTime(timezone=True), nullable=True))
    op.execute(sa.schema.CreateSequence(sa.Sequence("document_version_seq")))
    # Existing documents get distinct versions from the sequence (a volatile default rewrites the table once).
    op.add_column(
        "documents",
        sa.Column(
            "version", sa.BigInteger(), server_default=sa.text("nextval('document_version_seq')"), nullable=False
        ),
    )
    op.create_table(
        "project_generations",
        sa.Column("project_id", sa.Text(), nullable=False),
        sa.Column("generation", sa.BigInteger(), server_default=sa.text("1"), nullable=False),
        sa.PrimaryKeyConstraint("project_id", name="project_generations_pkey"),
    )


def downgrade() -> None:
    op.drop_table("project_generations")
    op.drop_column("documents", "version")
    op.execute(sa.schema.DropSequence(sa.Sequence("document_version_seq")))
    op.drop_column("lexical_outbox", "claimed_until")
