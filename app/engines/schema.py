"""SQLAlchemy Core tables of the source of truth: documents, their chunks (with embeddings) and the lexical outbox.

`migrations/` creates exactly this schema (a contract test compares them). The embedding column's
dimension is fixed per database by the first migration (`-x dimensions=N`, default 384);
`build_metadata` gives the same tables for another dimension.
"""

from __future__ import annotations

from typing import Final

from pgvector.sqlalchemy import VECTOR
from sqlalchemy import (
    ARRAY,
    BigInteger,
    Boolean,
    Column,
    DateTime,
    ForeignKeyConstraint,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    Sequence,
    Table,
    Text,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB

DEFAULT_EMBEDDING_DIMENSIONS: Final = 384
"""all-MiniLM-L6-v2, the default model."""

HNSW_M: Final = 16
HNSW_EF_CONSTRUCTION: Final = 64
OUTBOX_VERSION_SEQUENCE: Final = "lexical_outbox_version_seq"
DOCUMENT_VERSION_SEQUENCE: Final = "document_version_seq"


def build_metadata(embedding_dimensions: int = DEFAULT_EMBEDDING_DIMENSIONS) -> MetaData:
    """The tables `documents`, `chunks`, `lexical_outbox` and `project_generations`, `vector(N)` embeddings."""
    metadata = MetaData()
    document_version = Sequence(DOCUMENT_VERSION_SEQUENCE, metadata=metadata)
    Table(
        "documents",
        metadata,
        Column("project_id", Text, nullable=False),
        Column("document_id", Text, nullable=False),
        Column("source", Text, nullable=False),
        Column("title", Text, nullable=False),
        Column("content_hash", Text, nullable=False),
        Column("tags", ARRAY(Text), nullable=False, server_default=text("'{}'::text[]")),
        # `app.domain.tags.tag_key` of each tag, written by the application: what tag filters compare
        # (PostgreSQL's own lower() depends on the database's locale, and lowers only ASCII under "C").
        # NULL: a row from before migration 0008 that PostgreSQL's lower() keys alike (`tag_keys_sql`).
        Column("tag_keys", ARRAY(Text)),
        Column("event_time", DateTime(timezone=True)),
        Column("metadata", JSONB, nullable=False, server_default=text("'{}'::jsonb")),
        Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
        Column("updated_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
        # Counted per project on every write (`UPSERT_DOCUMENT`): versions only grow, across deletes and
        # re-creations, and say nothing of other projects' writes. The sequence default is the release before 0010's.
        Column("version", BigInteger, document_version, nullable=False, server_default=document_version.next_value()),
        PrimaryKeyConstraint("project_id", "document_id", name="documents_pkey"),
    )
    Table(
        "chunks",
        metadata,
        Column("project_id", Text, nullable=False),
        # "<document_id>#<position>": unique within a project only.
        Column("chunk_id", Text, nullable=False),
        Column("document_id", Text, nullable=False),
        Column("text", Text, nullable=False),
        Column("source", Text, nullable=False),
        Column("level", Text, nullable=False),
        Column("breadcrumb", ARRAY(Text), nullable=False, server_default=text("'{}'::text[]")),
        Column("section_title", Text, nullable=False),
        Column("position", Integer, nullable=False),
        Column("tags", ARRAY(Text), nullable=False, server_default=text("'{}'::text[]")),
        # `app.domain.tags.tag_key` of each tag, written by the application: what tag filters compare
        # (PostgreSQL's own lower() depends on the database's locale, and lowers only ASCII under "C").
        # NULL: a row from before migration 0008 that PostgreSQL's lower() keys alike (`tag_keys_sql`).
        Column("tag_keys", ARRAY(Text)),
        Column("event_time", DateTime(timezone=True)),
        Column("chunk_hash", Text, nullable=False),
        # Text that helps find the chunk without being part of it (e.g. the previous turn of a
        # conversation): embedded with the chunk and indexed lexically at a low boost, never returned.
        # Declared last in the table by migration 0002; column order does not matter to the code.
        Column("context", Text, nullable=False, server_default=text("''")),
        Column("embedding", VECTOR(embedding_dimensions), nullable=False),
        Column("embedding_model", Text, nullable=False),
        Column("lexically_indexed", Boolean, nullable=False, server_default=text("false")),
        Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
        Column("updated_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
        PrimaryKeyConstraint("project_id", "chunk_id", name="chunks_pkey"),
        ForeignKeyConstraint(
            ["project_id", "document_id"],
            ["documents.project_id", "documents.document_id"],
            name="chunks_document_fkey",
            ondelete="CASCADE",
        ),
        Index(
            "chunks_embedding_hnsw_idx",
            "embedding",
            postgresql_using="hnsw",
            postgresql_with={"m": HNSW_M, "ef_construction": HNSW_EF_CONSTRUCTION},
            postgresql_ops={"embedding": "vector_cosine_ops"},
        ),
        # No index on project_id alone: the primary key (project_id, chunk_id) already serves it.
        Index("chunks_project_document_idx", "project_id", "document_id"),
        # text_pattern_ops serves the source-prefix filter (`LIKE 'prefix%'`) in any collation.
        Index("chunks_source_idx", "project_id", "source", postgresql_ops={"source": "text_pattern_ops"}),
        Index("chunks_hash_idx", "chunk_hash", "embedding_model"),
    )
    outbox_version = Sequence(OUTBOX_VERSION_SEQUENCE, metadata=metadata)
    Table(
        "lexical_outbox",
        metadata,
        Column("project_id", Text, nullable=False),
        Column("document_id", Text, nullable=False),
        # Bumped on every change; a worker completes only the version it claimed (or older).
        Column("version", BigInteger, outbox_version, nullable=False, server_default=outbox_version.next_value()),
        Column("queued_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
        # A claim is a lease: until then no other worker takes the row; a new version clears it.
        Column("claimed_until", DateTime(timezone=True)),
        PrimaryKeyConstraint("project_id", "document_id", name="lexical_outbox_pkey"),
        Index("lexical_outbox_version_idx", "version"),
        # Each project's oldest entries: claims take them project by project (`CLAIM_QUEUED`, migration 0011).
        Index("lexical_outbox_project_version_idx", "project_id", "version"),
    )
    Table(
        "project_generations",
        metadata,
        Column("project_id", Text, nullable=False),
        # Bumped with every write that changes a project's answers: the query cache's key on every replica.
        Column("generation", BigInteger, nullable=False, server_default=text("1")),
        PrimaryKeyConstraint("project_id", name="project_generations_pkey"),
    )
    return metadata


metadata: Final = build_metadata()
"""The schema at the default dimension; what alembic compares against."""

documents: Final = metadata.tables["documents"]
chunks: Final = metadata.tables["chunks"]
lexical_outbox: Final = metadata.tables["lexical_outbox"]
project_generations: Final = metadata.tables["project_generations"]
