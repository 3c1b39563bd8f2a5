"""Initial schema: documents, chunks with pgvector embeddings (HNSW cosine), lexical outbox.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import sqlalchemy as sa
from alembic import context, op
from pgvector.sqlalchemy import VECTOR
from sqlalchemy.dialects import postgresql

if TYPE_CHECKING:
    from collections.abc import Sequence

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

DEFAULT_EMBEDDING_DIMENSIONS = 384


def embedding_dimensions() -> int:
    return int(context.config.attributes.get("embedding_dimensions") or DEFAULT_EMBEDDING_DIMENSIONS)


def upgrade() -> None:
    op.execute("CREATE EXTENSION IF NOT EXISTS vector")
    op.create_table(
        "documents",
        sa.Column("project_id", sa.Text(), nullable=False),
        sa.Column("document_id", sa.Text(), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("content_hash", sa.Text(), nullable=False),
        sa.Column("tags", postgresql.ARRAY(sa.Text()), server_default=sa.text("'{}'::text[]"), nullable=False),
        sa.Column("event_time", sa.DateTime(timezone=True), nullable=True),
        sa.Column("metadata", postgresql.JSONB(), server_default=sa.text("'{}'::jsonb"), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.PrimaryKeyConstraint("project_id", "document_id", name="documents_pkey"),
    )
    op.create_table(
        "chunks",
        sa.Column("project_id", sa.Text(), nullable=False),
        sa.Column("chunk_id", sa.Text(), nullable=False),
        sa.Column("document_id", sa.Text(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("level", sa.Text(), nullable=False),
        sa.Column("breadcrumb", postgresql.ARRAY(sa.Text()), server_default=sa.text("'{}'::text[]"), nullable=False),
        sa.Column("section_title", sa.Text(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("tags", postgresql.ARRAY(sa.Text()), server_default=sa.text("'{}'::text[]"), nullable=False),
        sa.Column("event_time", sa.DateTime(timezone=True), nullable=True),
        sa.Column("chunk_hash", sa.Text(), nullable=False),
        sa.Column("embedding", VECTOR(embedding_dimensions()), nullable=False),
        sa.Column("embedding_model", sa.Text(), nullable=False),
        sa.Column("lexically_indexed", sa.Boolean(), server_default=sa.text("false"), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.PrimaryKeyConstraint("project_id", "chunk_id", name="chunks_pkey"),
        sa.ForeignKeyConstraint(
            ["project_id", "document_id"],
            ["documents.project_id", "documents.document_id"],
            name="chunks_document_fkey",
            ondelete="CASCADE",
        ),
    )
    op.create_index(
        "chunks_embedding_hnsw_idx",
        "chunks",
        ["embedding"],
        postgresql_using="hnsw",
        postgresql_with={"m": 16, "ef_construction": 64},
        postgresql_ops={"embedding": "vector_cosine_ops"},
    )
    # No index on project_id alone: the primary key (project_id, chunk_id) already serves it.
    op.create_index("chunks_project_document_idx", "chunks", ["project_id", "document_id"])
    op.create_index(
        "chunks_source_idx", "chunks", ["project_id", "source"], postgresql_ops={"source": "text_pattern_ops"}
    )
    op.create_index("chunks_hash_idx", "chunks", ["chunk_hash", "embedding_model"])
    op.execute("CREATE SEQUENCE lexical_outbox_version_seq")
    op.create_table(
        "lexical_outbox",
        sa.Column("project_id", sa.Text(), nullable=False),
        sa.Column("document_id", sa.Text(), nullable=False),
        sa.Column(
            "version", sa.BigInteger(), server_default=sa.text("nextval('lexical_outbox_version_seq')"), nullable=False
        ),
        sa.Column("queued_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.PrimaryKeyConstraint("project_id", "document_id", name="lexical_outbox_pkey"),
    )
    op.create_index("lexical_outbox_version_idx", "lexical_outbox", ["version"])


def downgrade() -> None:
    op.drop_table("lexical_outbox")
    op.execute("DROP SEQUENCE lexical_outbox_version_seq")
    op.drop_table("chunks")
    op.drop_table("documents")
