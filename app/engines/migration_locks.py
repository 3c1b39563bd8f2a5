"""How long a migration waits for a table's lock, and the refusal that names who holds it.

An `ALTER TABLE` waits for every transaction that touched its table to end, and while it waits, every later
query of that table waits behind it: a migration run beside one long transaction (an idle-in-transaction
session, a report, a `pg_dump`) stopped all serving traffic on the table until that transaction ended. So the
migration session sets `lock_timeout`: it gives up after `timeout_s`, which ends the queue behind it, rolls
back, backs off and tries again from the start, `attempts` times in all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from sqlalchemy import text

from app.engines.postgres_connect import create_asyncpg_engine
from app.engines.postgres_errors import sqlstate_in_chain

if TYPE_CHECKING:
    from collections.abc import Sequence

LOCK_NOT_AVAILABLE_SQLSTATE: Final = "55P03"
"""PostgreSQL's `lock_not_available`: what a statement that waited `lock_timeout` for a lock fails with."""
LOCK_HOLDERS_SHOWN: Final = 3


@dataclass(frozen=True, slots=True)
class LockWait:
    """The bounded wait of a migration for its locks: `attempts` tries of at most `timeout_s` each.

    Between tries it backs off `first_backoff_s`, doubling, at most `max_backoff_s`: long enough for a
    transaction about to end, short enough that the Job's deadline is not spent on one blocked table.
    """

    timeout_s: float = 5.0
    attempts: int = 5
    first_backoff_s: float = 1.0
    max_backoff_s: float = 30.0

    def backoff_s(self, failed_attempts: int) -> float:
        """The pause after the `failed_attempts`-th failed try (1-based)."""
        return float(min(self.first_backoff_s * 2.0 ** (failed_attempts - 1), self.max_backoff_s))

    @property
    def lock_timeout_setting(self) -> str:
        """`lock_timeout` as PostgreSQL reads it, in whole milliseconds (at least 1: 0 would switch it off)."""
        return f"{max(1, round(self.timeout_s * 1000))}ms"


def is_lock_timeout(error: BaseException) -> bool:
    """Whether `error` (or what it wraps) is a statement that gave up waiting for a lock (`lock_timeout`)."""
    return sqlstate_in_chain(error, LOCK_NOT_AVAILABLE_SQLSTATE)


# Granted locks on this database's relations, by other sessions, oldest transaction first. Another role's
# session shows no state or start to a role without pg_read_all_stats: those read as unknown.
LOCK_HOLDERS: Final = """
SELECT a.pid, a.usename AS user_name, a.application_name, a.state,
       floor(extract(epoch FROM now() - a.xact_start))::bigint AS transaction_s,
       string_agg(DISTINCT c.relname, ', ' ORDER BY c.relname) AS tables
FROM pg_locks l
JOIN pg_class c ON c.oid = l.relation
JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.granted AND l.pid <> pg_backend_pid() AND n.nspname = current_schema() AND c.relkind IN ('r', 'p')
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
GROUP BY a.pid, a.usename, a.application_name, a.state, a.xact_start
ORDER BY a.xact_start NULLS LAST, a.pid
LIMIT :shown
"""


async def lock_holders(database_url: str) -> list[str]:
    """One phrase per session holding a lock on a table of the schema (at most `LOCK_HOLDERS_SHOWN`)."""
    engine = create_asyncpg_engine(database_url)
    try:
        async with engine.connect() as connection:
            rows = (await connection.execute(text(LOCK_HOLDERS), {"shown": LOCK_HOLDERS_SHOWN})).all()
    finally:
        await engine.dispose()
    phrases = []
    for row in rows:
        state = row.state or "state unknown"
        age = "" if row.transaction_s is None else f" for {row.transaction_s} s"
        application = f", application {row.application_name!r}" if row.application_name else ""
        phrases.append(f"pid {row.pid} (user {row.user_name}{application}, {state}{age}, on {row.tables})")
    return phrases


def lock_timeout_message(wait: LockWait, holders: Sequence[str]) -> str:
    """The one-line refusal after the last try: what blocked, who held it, and what to do."""
    held_by = "; ".join(holders) if holders else "no session holds one now (the blocking transaction has ended)"
    return (
        f"a table the migration alters stayed locked by another transaction: {wait.attempts} tries each waited "
        f"MIGRATION_LOCK_TIMEOUT_S={wait.timeout_s:g} s for its lock and gave up (nothing was changed; serving "
        f"traffic queued behind each try at most that long). Locks held now: {held_by}. End that transaction "
        "(`SELECT pg_terminate_backend(<pid>)`) or wait for it, then run `poimen migrate` again; "
        "MIGRATION_LOCK_ATTEMPTS sets the tries"
    )
