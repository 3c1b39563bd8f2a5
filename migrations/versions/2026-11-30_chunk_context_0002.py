"""Chunk context: `chunks.context`, the text that helps find a chunk without being part of it.

The previous turn of a conversation, for example: embedded with the chunk and indexed lexically at a
low boost, never returned as chunk text. Existing rows get "" (what they were embedded with when their
document had no context; a document with context is re-embedded anyway when ingested again).

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import sqlalchemy as sa
from alembic import op

if TYPE_CHECKING:
    from collections.abc import Sequence

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # A constant default: PostgreSQL adds the column without rewriting the table.
    op.add_column("chunks", sa.Column("context", sa.Text(), server_default=sa.text("''"), nullable=False))


def downgrade() -> None:
    op.drop_column("chunks", "context")
