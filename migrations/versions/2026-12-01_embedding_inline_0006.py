"""Chunk embeddings stored in the row (`STORAGE MAIN`) instead of pgvector's default out-of-line TOAST.

pgvector gives `vector` the `EXTERNAL` storage: a chunk row past about 2 kB (a 384-dimensional vector
is 1.5 kB, plus the text) moves its vector into the TOAST table. Every distance the vector search
computes from the heap then first fetches the vector through the TOAST index: a sequential scan of a
small project read 4,452 buffers for 1,385 chunks, and an HNSW search re-reads each returned row's
vector the same way. With `MAIN` the vector stays in the row and TOAST moves the text out first (it
compresses; a vector does not): the same scan reads 347 buffers and takes 1.2 ms instead of 2.8 ms
(docs/benchmarks/threads.md). A vector too large for a page still goes out of line, as before.

Only rows written from now on take the new layout (a storage mode applies when a row is written);
`VACUUM FULL chunks` or re-ingesting rewrites older ones (docs/operations.md).

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from alembic import op

if TYPE_CHECKING:
    from collections.abc import Sequence

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("ALTER TABLE chunks ALTER COLUMN embedding SET STORAGE MAIN")


def downgrade() -> None:
    op.execute("ALTER TABLE chunks ALTER COLUMN embedding SET STORAGE EXTERNAL")
