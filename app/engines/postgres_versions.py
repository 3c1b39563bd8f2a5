"""Document versions after a save: each project's generation moved on past the versions just written.

A write gives a document one past its project's generation and past its own version (`UPSERT_DOCUMENT`),
so the generation must reach the highest version a save gave, or a document deleted and written again
would get a version it had before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from sqlalchemy import text

if TYPE_CHECKING:
    from collections.abc import Mapping

    from sqlalchemy.ext.asyncio import AsyncConnection

    from app.domain.models import DocumentKey

BUMP_GENERATIONS_PAST: Final = (
    "INSERT INTO project_generations AS g (project_id, generation) "
    "SELECT project_id, floor FROM unnest(CAST(:projects AS text[]), CAST(:floors AS bigint[])) "
    "AS f(project_id, floor) ORDER BY project_id "
    "ON CONFLICT (project_id) DO UPDATE SET generation = greatest(g.generation + 1, EXCLUDED.generation)"
)
"""`BUMP_GENERATIONS` (`app.engines.postgres_sql`) for a save: each project's generation also reaches its highest
new document version (`floors`)."""


async def bump_generations_past(connection: AsyncConnection, versions: Mapping[DocumentKey, int]) -> None:
    """Move each project's generation on, to at least its highest of `versions` (the versions just written)."""
    floors: dict[str, int] = {}
    for (project_id, _), version in versions.items():
        floors[project_id] = max(version, floors.get(project_id, 0))
    await connection.execute(text(BUMP_GENERATIONS_PAST), {"projects": list(floors), "floors": list(floors.values())})
