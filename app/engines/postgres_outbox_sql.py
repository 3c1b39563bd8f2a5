"""The lexical outbox's statements as its workers drain it: claim, read, release, complete, count.

The statements that queue documents run in a write's transaction and live with it (`app.engines.postgres_sql`).
"""

from __future__ import annotations

from typing import Final

from app.engines.postgres_sql import STORED_CHUNK_COLUMNS

SELECT_OUTBOX_STATS: Final = (
    "SELECT count(*) FILTER (WHERE version <= coalesce(CAST(:through AS bigint), version)) AS backlog, "
    "coalesce(extract(epoch FROM now() - min(queued_at)), 0) AS oldest_age_s, "
    "coalesce(max(version), 0) AS newest_version FROM lexical_outbox"
)

CLAIM_QUEUED: Final = (
    "WITH picked AS (SELECT project_id, document_id FROM lexical_outbox "
    "WHERE claimed_until IS NULL OR claimed_until < now() ORDER BY version LIMIT :limit FOR UPDATE SKIP LOCKED) "
    "UPDATE lexical_outbox o SET claimed_until = now() + make_interval(secs => :lease_s) FROM picked "
    "WHERE o.project_id = picked.project_id AND o.document_id = picked.document_id "
    "RETURNING o.project_id, o.document_id, o.version"
)
"""Lease up to `:limit` entries no one holds (or whose lease ran out), oldest change first.

`SKIP LOCKED` lets any number of workers, in any process, claim at once without taking each other's rows.
"""

RELEASE_CLAIMS: Final = (
    "UPDATE lexical_outbox o SET claimed_until = NULL "
    "FROM unnest(CAST(:projects AS text[]), CAST(:documents AS text[]), CAST(:versions AS bigint[])) "
    "AS claimed(project_id, document_id, version) "
    "WHERE o.project_id = claimed.project_id AND o.document_id = claimed.document_id AND o.version = claimed.version"
)

SELECT_QUEUED_CHUNKS: Final = (
    f"SELECT {STORED_CHUNK_COLUMNS} FROM chunks "  # noqa: S608 - constant column list
    "JOIN unnest(CAST(:projects AS text[]), CAST(:documents AS text[])) "
    "AS queued(project_id, document_id) USING (project_id, document_id) "
    "ORDER BY project_id, document_id, position, chunk_id"
)

COMPLETE_OUTBOX: Final = (
    "WITH done AS (DELETE FROM lexical_outbox o "
    "USING unnest(CAST(:projects AS text[]), CAST(:documents AS text[]), CAST(:versions AS bigint[])) "
    "AS claimed(project_id, document_id, version) "
    "WHERE o.project_id = claimed.project_id AND o.document_id = claimed.document_id "
    "AND o.version <= claimed.version RETURNING o.project_id, o.document_id) "
    "UPDATE chunks c SET lexically_indexed = true FROM done "
    "WHERE c.project_id = done.project_id AND c.document_id = done.document_id AND NOT c.lexically_indexed"
)
