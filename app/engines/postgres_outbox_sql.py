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
    "WITH RECURSIVE queued(project_id) AS ((SELECT project_id FROM lexical_outbox ORDER BY project_id LIMIT 1) "
    "UNION ALL SELECT (SELECT o.project_id FROM lexical_outbox o WHERE o.project_id > queued.project_id "
    "ORDER BY o.project_id LIMIT 1) FROM queued WHERE queued.project_id IS NOT NULL), "
    "turns AS (SELECT free.project_id, free.document_id, free.version, "
    "row_number() OVER (PARTITION BY free.project_id ORDER BY free.version) AS turn FROM queued "
    "CROSS JOIN LATERAL (SELECT o.project_id, o.document_id, o.version FROM lexical_outbox o "
    "WHERE o.project_id = queued.project_id AND (o.claimed_until IS NULL OR o.claimed_until < now()) "
    "ORDER BY o.version LIMIT :limit FOR UPDATE SKIP LOCKED) AS free), "
    "picked AS (SELECT project_id, document_id FROM turns ORDER BY turn, version LIMIT :limit) "
    "UPDATE lexical_outbox o SET claimed_until = now() + make_interval(secs => :lease_s) FROM picked "
    "WHERE o.project_id = picked.project_id AND o.document_id = picked.document_id "
    "RETURNING o.project_id, o.document_id, o.version"
)
"""Lease up to `:limit` entries no one holds (or whose lease ran out), projects taking turns: every project's
oldest change, oldest first, then every project's second, and so on. Oldest change first across projects let
one tenant's backlog (10,000 documents written in 35 s) hold another's next write out of the lexical index
until all of it was indexed (26 s); now that write waits for one entry of each other project.

The projects with entries are found by a loose scan of the primary key (one descent each), and each project's
oldest `:limit` free entries read from `lexical_outbox_project_version_idx`: at most `:limit` rows a project.
`SKIP LOCKED` lets any number of workers, in any process, claim at once without taking each other's rows;
rows one locks and does not pick are freed when its statement's transaction ends.
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
