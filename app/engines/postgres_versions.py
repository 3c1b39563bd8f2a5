"""Document versions in a save: those it replaces, read and checked; the generations moved past the new ones.

A conditional write (`If-Match`) checks the version under its document's lock, embeds, then saves; a delete by
selection or of the project takes no document lock, so the save checks that version again (`check_replacing`),
and reads which documents it replaces and which it creates (`stored_versions`).

A write gives a document one past its project's generation and past its own version (`UPSERT_DOCUMENT`),
so the generation must reach the highest version a save gave, or a document deleted and written again
would get a version it had before.

The release before migration 0010 drew every version from `document_version_seq`, and runs again beside
this one: its replicas serve until the rolling update replaces them, and a `helm rollback` brings it back.
A version it draws must lie above every version this release gave, or a document's version goes down
and may name content a client read earlier (a stale `If-Match` then overwrites what it never saw). So a
save also moves the sequence up to the highest version it gave. Only with `nextval` (the runtime role has
`USAGE` on the sequence, not `UPDATE` for `setval`): one step per write at most, as every version this
release gives is at most one past the sequence once it keeps up; a wider gap (an import of versions from
another installation, or writes of a release of 0010 before this) is closed `SEQUENCE_STEPS_PER_SAVE` at a time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from sqlalchemy import text

from app.domain.errors import VersionConflictError
from app.engines.postgres_rows import key_parameters
from app.engines.postgres_sql import BUMP_GENERATIONS, SELECT_DOCUMENT_STATES

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from sqlalchemy.ext.asyncio import AsyncConnection

    from app.domain.document_versions import DocumentKey

SEQUENCE_STEPS_PER_SAVE: Final = 100_000
"""The most `nextval` calls one save makes to bring `document_version_seq` up to its versions (about 0.1 s)."""

BUMP_GENERATIONS_PAST: Final = (
    "WITH raised AS (INSERT INTO project_generations AS g (project_id, generation) "
    "SELECT project_id, floor FROM unnest(CAST(:projects AS text[]), CAST(:floors AS bigint[])) "
    "AS f(project_id, floor) ORDER BY project_id "
    "ON CONFLICT (project_id) DO UPDATE SET generation = greatest(g.generation + 1, EXCLUDED.generation) "
    "RETURNING g.project_id, g.generation), "
    "stepped AS (SELECT count(nextval('document_version_seq')) AS steps FROM generate_series(1, least("
    "CAST(:steps AS bigint), CAST(:top AS bigint) - coalesce(pg_sequence_last_value('document_version_seq'), 0)))) "
    "SELECT raised.project_id, raised.generation FROM raised CROSS JOIN stepped"
)
"""`BUMP_GENERATIONS` (`app.engines.postgres_sql`) for a save: each project's generation also reaches its highest
new document version (`floors`), and `document_version_seq` the highest of all (`top`), by up to `steps`."""


async def stored_versions(connection: AsyncConnection, keys: Sequence[DocumentKey]) -> dict[DocumentKey, int]:
    """The version of each of these documents that is stored; run in a save's transaction after its project locks.

    A delete by selection (or of the project) takes those locks too, but no document lock: it may have removed a
    document between the writer's read and its save, so what a save replaces (or creates) is read here.
    """
    rows = await connection.execute(text(SELECT_DOCUMENT_STATES), key_parameters(list(keys)))
    return {(row.project_id, row.document_id): int(row.version) for row in rows}


def check_replacing(stored: Mapping[DocumentKey, int], replacing: Mapping[DocumentKey, int]) -> None:
    """Raise `VersionConflictError` unless each document is still `stored` at the version given (0: absent).

    `stored` is what `stored_versions` read in the save's transaction.
    """
    for key in replacing:
        if stored.get(key, 0) != replacing[key]:
            raise VersionConflictError.changed_since_read(
                key[1], read_version=replacing[key], current_version=stored.get(key)
            )


async def bump_generations_past(connection: AsyncConnection, versions: Mapping[DocumentKey, int]) -> dict[str, int]:
    """Move each project's generation on, to at least its highest of `versions` (the versions just written).

    And the release before's version sequence up to the highest of them (see the module's docstring).
    Returns each project's generation now.
    """
    floors: dict[str, int] = {}
    for (project_id, _), version in versions.items():
        floors[project_id] = max(version, floors.get(project_id, 0))
    parameters = {
        "projects": list(floors),
        "floors": list(floors.values()),
        "top": max(floors.values(), default=0),
        "steps": SEQUENCE_STEPS_PER_SAVE,
    }
    rows = await connection.execute(text(BUMP_GENERATIONS_PAST), parameters)
    return {row.project_id: int(row.generation) for row in rows}


async def bump_generations(connection: AsyncConnection, project_ids: set[str]) -> None:
    """Move each project's generation on by one (`BUMP_GENERATIONS`): a delete, a completed outbox entry."""
    await connection.execute(text(BUMP_GENERATIONS), {"projects": sorted(project_ids)})
