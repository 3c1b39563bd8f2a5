"""Tag keys lowered letter by letter: the rows holding `İ` or a capital `Σ` in a tag are keyed again.

`app.domain.tags.tag_key` lowered with `str.lower`, which reads context: `İstanbul` became `i̇stanbul`
(an `i` and a combining dot) and a word-final `Σ` a `ς`, where OpenSearch's `lowercase` normalizer (and
tantivy's) lowers one letter at a time: `istanbul`, `οδοσ`. On OpenSearch such a tag was never found, even
spelt exactly. `tag_key` now lowers letter by letter; this keys again every row holding a tag whose key
changed (and, as 0008 did, every other tag of those rows the application's way), and queues those rows'
documents for the lexical index, whose tantivy filter field holds the keys. Other rows are not touched.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-03
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import sqlalchemy as sa
from alembic import op

# The application's own definitions: the keys written here must equal those it writes from now on.
from app.domain.tags import tag_key
from app.domain.text_forms import canonical_tag

if TYPE_CHECKING:
    from collections.abc import Sequence

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("documents", "chunks")

DISTINCT_TAGS = "SELECT tag, lower(tag) FROM (SELECT DISTINCT unnest(tags) AS tag FROM {table}) AS distinct_tags"
FILL_KEYS = (
    "UPDATE {table} SET tag_keys = ARRAY(SELECT DISTINCT coalesce(keyed.key, lower(own.tag)) "
    "FROM unnest(tags) AS own(tag) "
    "LEFT JOIN unnest(CAST(:tags AS text[]), CAST(:keys AS text[])) AS keyed(tag, key) ON keyed.tag = own.tag) "
    "WHERE tags && CAST(:changed AS text[])"
)
"""Key every row holding one of `:changed` from `:tags` -> `:keys`, other tags PostgreSQL's way (`keyed_again`)."""
QUEUE_DOCUMENTS = (
    "INSERT INTO lexical_outbox (project_id, document_id) "
    "SELECT project_id, document_id FROM documents WHERE tags && CAST(:tags AS text[]) "
    "ON CONFLICT (project_id, document_id) DO UPDATE "
    "SET version = nextval('lexical_outbox_version_seq'), queued_at = now(), claimed_until = NULL"
)
MARK_NOT_INDEXED = (
    "UPDATE chunks SET lexically_indexed = false WHERE tags && CAST(:tags AS text[]) AND lexically_indexed"
)


def keyed_again(lowered: Sequence[tuple[str, str]]) -> dict[str, str]:
    """Tag -> key for the tags whose key changed, and every tag PostgreSQL lowers otherwise than `tag_key`.

    A row holding any of them gets all its keys from this map or from PostgreSQL's `lower`, which is then
    right for its other tags (they are neither).
    """
    return {
        tag: tag_key(tag)
        for tag, by_postgres in lowered
        if tag_key(tag) != by_postgres or tag_key(tag) != canonical_tag(tag).lower()
    }


def upgrade() -> None:
    bind = op.get_bind()
    bind.execute(sa.text("SELECT set_config('poimen.scope', 'all_projects', true)"))
    changed: set[str] = set()
    for table in TABLES:
        lowered = [(row[0], row[1]) for row in bind.execute(sa.text(DISTINCT_TAGS.format(table=table))).all()]
        keyed = keyed_again(lowered)
        # Only rows holding a tag whose key changed are written: the others' keys are right already.
        in_table = sorted(tag for tag in keyed if tag_key(tag) != canonical_tag(tag).lower())
        changed.update(in_table)
        if in_table:
            parameters = {"tags": list(keyed), "keys": list(keyed.values()), "changed": in_table}
            bind.execute(sa.text(FILL_KEYS.format(table=table)), parameters)
    if changed:
        bind.execute(sa.text(QUEUE_DOCUMENTS), {"tags": sorted(changed)})
        bind.execute(sa.text(MARK_NOT_INDEXED), {"tags": sorted(changed)})


def downgrade() -> None:
    """Nothing to undo: the keys stay correct for the letter-by-letter rule a later upgrade applies again."""
