"""Tag keys: `documents.tag_keys` and `chunks.tag_keys`, what a tag filter compares.

A filter on tag `kubernetes` (or the query `#kubernetes`, which the optimizer lowercases) never found a
document tagged `Kubernetes`: filters compared the tags as written. Tags stay as written; filters now
compare `app.domain.tags.tag_key` of each side, which the application computes and writes. PostgreSQL's
own `lower()` depends on the database's locale (under "C" it lowers only ASCII), so it cannot be the
definition: the lexical engines lower every letter.

The columns are added empty (NULL, no table rewrite). Filters read a NULL as the row's tags lowered by
PostgreSQL (`app.engines.postgres_sql.tag_keys_sql`), which is right wherever PostgreSQL lowers a tag as
the application does: every tag on a UTF-8 locale, every ASCII tag under "C". So only the rows holding a
tag the two lower differently are updated, in one statement per table; updating every row would rewrite
every chunk and insert it into the HNSW index again. Row-level security is forced on both tables, so the
migration declares the maintenance scope for its transaction.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-02
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import ARRAY

# The application's own definition: the keys written here must equal those it writes from now on.
from app.domain.tags import tag_key

if TYPE_CHECKING:
    from collections.abc import Sequence

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("documents", "chunks")

DISTINCT_TAGS = "SELECT tag, lower(tag) FROM (SELECT DISTINCT unnest(tags) AS tag FROM {table}) AS distinct_tags"
FILL_KEYS = (
    "UPDATE {table} SET tag_keys = ARRAY(SELECT DISTINCT coalesce(keyed.key, lower(own.tag)) "
    "FROM unnest(tags) AS own(tag) "
    "LEFT JOIN unnest(CAST(:tags AS text[]), CAST(:keys AS text[])) AS keyed(tag, key) ON keyed.tag = own.tag) "
    "WHERE tags && CAST(:tags AS text[])"
)
"""Key every row holding one of `:tags` (those PostgreSQL lowers otherwise); its other tags, PostgreSQL's way."""


def upgrade() -> None:
    for table in TABLES:
        op.add_column(table, sa.Column("tag_keys", ARRAY(sa.Text()), nullable=True))
    bind = op.get_bind()
    bind.execute(sa.text("SELECT set_config('poimen.scope', 'all_projects', true)"))
    for table in TABLES:
        lowered = bind.execute(sa.text(DISTINCT_TAGS.format(table=table))).all()
        keyed = {tag: tag_key(tag) for tag, by_postgres in lowered if tag_key(tag) != by_postgres}
        if keyed:
            parameters = {"tags": list(keyed), "keys": list(keyed.values())}
            bind.execute(sa.text(FILL_KEYS.format(table=table)), parameters)


def downgrade() -> None:
    for table in TABLES:
        op.drop_column(table, "tag_keys")
