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
migration declares the maintenance scope for its session while it fills the keys.

The columns are committed before the keys are filled (an autocommit block), and the keys are filled in
batches of `BATCH_ROWS` rows, each its own transaction: `ADD COLUMN` locks its table against every reader and
writer until its transaction ends, and the migrations ran in one transaction, so every query of `chunks`
waited for the whole fill (about 650 rows/s where each row is rewritten: minutes on a large table). Now the
exclusive lock lasts as long as the `ADD COLUMN`; during the fill reads go on, and a write waits only for
the batch holding its row. A run stopped during the fill leaves the columns in place at revision 0007; the
next run adds them only if missing and fills again, to the same keys. Concurrent runs take turns on the
session's advisory lock (`migrations/env.py`), which the commit does not release.

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

KEY_COLUMNS = {"documents": "document_id", "chunks": "chunk_id"}
"""The second column of each table's primary key (the first is `project_id`): the fill walks the key in order."""
BATCH_ROWS = 1000
"""Rows keyed per transaction: a write of the old release waits at most one batch for its row (about 1.5 s)."""

DISTINCT_TAGS = "SELECT tag, lower(tag) FROM (SELECT DISTINCT unnest(tags) AS tag FROM {table}) AS distinct_tags"
FILL_KEYS = (
    "WITH batch AS (SELECT project_id, {key} FROM {table} WHERE tags && CAST(:tags AS text[]) "
    "AND (project_id, {key}) > (:after_project, :after_key) ORDER BY project_id, {key} LIMIT :batch_rows), "
    "filled AS (UPDATE {table} AS target SET tag_keys = ARRAY(SELECT DISTINCT coalesce(keyed.key, lower(own.tag)) "
    "FROM unnest(target.tags) AS own(tag) "
    "LEFT JOIN unnest(CAST(:tags AS text[]), CAST(:keys AS text[])) AS keyed(tag, key) ON keyed.tag = own.tag) "
    "FROM batch WHERE (target.project_id, target.{key}) = (batch.project_id, batch.{key}) RETURNING 1) "
    "SELECT project_id, {key} FROM batch ORDER BY project_id DESC, {key} DESC LIMIT 1"
)
"""Key the next `:batch_rows` rows after (`:after_project`, `:after_key`) holding one of `:tags` (those PostgreSQL
lowers otherwise); their other tags, PostgreSQL's way. Returns the last row's key, none past the end."""


def upgrade() -> None:
    for table in TABLES:
        op.add_column(table, sa.Column("tag_keys", ARRAY(sa.Text()), nullable=True), if_not_exists=True)
    with op.get_context().autocommit_block():
        bind = op.get_bind()
        bind.execute(sa.text("SELECT set_config('poimen.scope', 'all_projects', false)"))
        for table in TABLES:
            lowered = bind.execute(sa.text(DISTINCT_TAGS.format(table=table))).all()
            keyed = {tag: tag_key(tag) for tag, by_postgres in lowered if tag_key(tag) != by_postgres}
            if keyed:
                _fill_in_batches(bind, table, keyed)
        # Not in a `finally`: a failed statement (a lock timeout) must reach the caller as it is.
        bind.execute(sa.text("SELECT set_config('poimen.scope', '', false)"))


def _fill_in_batches(bind: sa.Connection, table: str, keyed: dict[str, str]) -> None:
    """Run `FILL_KEYS` batch after batch (each committed on its own) until no row is left."""
    statement = sa.text(FILL_KEYS.format(table=table, key=KEY_COLUMNS[table]))
    parameters: dict[str, object] = {"tags": list(keyed), "keys": list(keyed.values()), "batch_rows": BATCH_ROWS}
    after: tuple[str, str] = ("", "")  # before every key: project ids are never empty
    while True:
        last = bind.execute(statement, {**parameters, "after_project": after[0], "after_key": after[1]}).first()
        if last is None:
            return
        after = (last[0], last[1])


def downgrade() -> None:
    for table in TABLES:
        op.drop_column(table, "tag_keys")
