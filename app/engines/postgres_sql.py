"""The SQL the PostgreSQL adapters run: statement text and the `WHERE` clause of a `Filters`.

Hand-written so the hot path stays a prepared statement (asyncpg caches them per connection, keyed
by text) with no ORM in between. Only constant fragments are ever interpolated; values are always
bound parameters. Tables are in `app.engines.schema`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from app.domain.ascii_folding import COMBINING_MARKS, UNDECOMPOSABLE, fold_to_ascii
from app.domain.tags import tag_keys
from app.domain.text_forms import ANALYSIS_DROPPED, ANALYSIS_LETTERS, SOUTH_EAST_ASIAN_LETTERS, analysis_form
from app.engines.cjk import CJK_CHARACTERS, spaced_cjk

if TYPE_CHECKING:
    from app.domain.models import Filters

CHUNK_COLUMNS: Final = (
    "chunk_id, document_id, project_id, text, source, level, breadcrumb, section_title, position, tags, "
    "event_time, chunk_hash"
)
"""What a search hit needs: everything but the context, which only the lexical indexes read."""
_QUALIFIED_CHUNK_COLUMNS: Final = ", ".join(f"chunk.{column.strip()}" for column in CHUNK_COLUMNS.split(","))
STORED_CHUNK_COLUMNS: Final = f"{CHUNK_COLUMNS}, context"
"""What the store hands back (`get_document`, `claim_outbox`): the chunk with its context."""


def tag_keys_sql(alias: str = "") -> str:
    """A row's tag keys: `tag_keys`, or for a row without (NULL) its tags lowered by PostgreSQL.

    NULL is a row written before migration 0008 (or by a replica of the version before, during the
    rollout) whose tags PostgreSQL lowers exactly as `app.domain.tags.tag_key` does; the migration keyed
    every row where the two disagree (under the "C" locale, a tag with a non-ASCII capital).
    """
    return f"COALESCE({alias}tag_keys, CAST(lower(CAST({alias}tags AS text)) AS text[]))"


def filter_sql(filters: Filters, parameters: dict[str, object], *, exclusions: bool = True) -> str:
    """SQL conditions (after `project_id = :project_id`) for every filter; fills `parameters`.

    Each combination of filters is its own statement text, so each gets a plan fit for it. With
    `exclusions` False the excluded terms are left out (`exclusion_sql` gives them apart).
    """
    conditions = ["project_id = :project_id"]
    parameters["project_id"] = filters.project_id
    if filters.levels:
        conditions.append("level = ANY(CAST(:levels AS text[]))")
        parameters["levels"] = list(filters.levels)
    if filters.tags:
        conditions.append(f"{tag_keys_sql()} @> CAST(:tag_keys AS text[])")
        parameters["tag_keys"] = list(tag_keys(filters.tags))
    if filters.source_prefix:
        conditions.append("source LIKE :source_pattern")
        parameters["source_pattern"] = like_prefix(filters.source_prefix)
    window = []
    if filters.event_time_from is not None:
        window.append("event_time >= :event_time_from")
        parameters["event_time_from"] = filters.event_time_from
    if filters.event_time_to is not None:
        window.append("event_time < :event_time_to")
        parameters["event_time_to"] = filters.event_time_to
    if window:
        within = " AND ".join(window)
        conditions.append(f"({within} OR event_time IS NULL)" if filters.include_undated else within)
    if filters.chunk_ids is not None:
        conditions.append("chunk_id = ANY(CAST(:chunk_ids AS text[]))")
        parameters["chunk_ids"] = list(filters.chunk_ids)
    exclusion = exclusion_sql(filters, parameters) if exclusions else None
    if exclusion is not None:
        conditions.append(exclusion)
    return " AND ".join(conditions)


def exclusion_sql(filters: Filters, parameters: dict[str, object]) -> str | None:
    """The condition a chunk meets when it holds none of `filters.excluded_terms`; None without any."""
    excluded = [term for term in dict.fromkeys(filters.excluded_terms) if term.strip()]
    return _excluded_terms_sql(excluded, parameters) if excluded else None


def _words(expression: str) -> str:
    """`expression` with every run of non-alphanumerics made one space: tantivy's simple tokenizer's words.

    PostgreSQL's parser would otherwise keep a path (`runbooks/kafka.md`) or a URL as one token.
    """
    return f"regexp_replace({expression}, '[^[:alnum:]]+', ' ', 'g')"


def _comparable(expression: str) -> str:
    """`expression` as the lexical engines read it, in SQL: folded to ASCII, CJK characters words of their own.

    In `app.domain.text_forms.analysis_form` first (format characters and diacritics dropped, letters mapped, a
    space before each Thai, Lao, Khmer or Burmese letter), then folded as `app.domain.ascii_folding` folds, each
    Han or Hiragana character spaced (`app.engines.cjk`). Before `_words`, so folded words are ASCII whatever the
    database's locale says a letter is. `normalize` needs a UTF-8 database (CloudNativePG's, the embedded one's).
    """
    single = {letter: ascii_form for letter, ascii_form in UNDECOMPOSABLE.items() if len(ascii_form) == 1}
    single.update(ANALYSIS_LETTERS)
    original = expression
    expression = f"regexp_replace({expression}, '[{ANALYSIS_DROPPED}]', '', 'g')"
    for letter, ascii_form in UNDECOMPOSABLE.items():
        if len(ascii_form) > 1:
            expression = f"replace({expression}, '{letter}', '{ascii_form}')"
    translated = f"translate({expression}, '{''.join(single)}', '{''.join(single.values())}')"
    folded = f"regexp_replace(normalize({translated}, NFKD), '[{COMBINING_MARKS}]', '', 'g')"
    spaced = f"regexp_replace({folded}, '([{CJK_CHARACTERS}])', ' \\1 ', 'g')"
    spaced = f"regexp_replace({spaced}, '([{SOUTH_EAST_ASIAN_LETTERS}])', ' \\1', 'g')"
    # ASCII text (one byte per character) has nothing to fold or space: most chunks skip the work.
    return f"CASE WHEN octet_length({original}) = char_length({original}) THEN {original} ELSE {spaced} END"


_OWN_FIELDS: Final = (
    _words(_comparable("array_to_string(breadcrumb, ' ') || ' ' || text")),
    _words(_comparable("source")),
    _words(_comparable("array_to_string(tags, ' ')")),
)
"""What an excluded term is looked for in: the chunk's titled text, its source and its tags (the lexical
indexes' own fields; never the context)."""


def _excluded_terms_sql(excluded: list[str], parameters: dict[str, object]) -> str:
    """A chunk holding none of `excluded` in its own fields, matched by PostgreSQL's `english` text search.

    Both sides read as the lexical engines read them: `-zurich` also excludes `Zürich`, `-東京` a chunk saying
    `東京で` (on a database whose locale knows Han letters: "C" does not, and such a term excludes nothing).

    Snowball English stems and a phrase for several words, as the lexical indexes read them; a term that is
    only stop words to PostgreSQL (whose list is longer than Lucene's: "about", "very") excludes nothing here.
    """
    terms = []
    for index, term in enumerate(excluded):
        parameters[f"excluded_{index}"] = spaced_cjk(fold_to_ascii(analysis_form(term)))
        terms.append(f"phraseto_tsquery('english', {_words(f':excluded_{index}')})")
    any_term = " || ".join(terms)
    held = " OR ".join(f"to_tsvector('english', {field}) @@ ({any_term})" for field in _OWN_FIELDS)
    return f"NOT ({held})"


def like_prefix(prefix: str) -> str:
    """A `LIKE` pattern matching every text that starts with `prefix` (its wildcards and escape escaped)."""
    escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped + "%"


def exact_search_sql(where: str) -> str:
    """Cosine distance to `:embedding` of every chunk matching `where`, nearest `:top_k` first (no index).

    `+ 0` keeps the planner off the HNSW index (it serves `ORDER BY embedding <=> ...` only): exact
    ranking. The nearest are picked by id and distance alone and only they are read whole, so sorting
    never carries the rows' text (a 10,000-chunk project: 5.4 ms, against 23 ms materialising every row
    first; docs/benchmarks/vector-plan.md).
    """
    return (
        "WITH nearest AS MATERIALIZED (SELECT chunk_id, embedding <=> CAST(:embedding AS vector) AS distance "  # noqa: S608 - only our own fragments
        f"FROM chunks WHERE {where} ORDER BY (embedding <=> CAST(:embedding AS vector)) + 0, chunk_id LIMIT :top_k) "
        f"SELECT {_QUALIFIED_CHUNK_COLUMNS}, nearest.distance FROM nearest "
        "JOIN chunks AS chunk ON chunk.project_id = :project_id AND chunk.chunk_id = nearest.chunk_id "
        "ORDER BY nearest.distance, nearest.chunk_id"
    )


def exact_search_excluding_sql(where: str, exclusion: str) -> str:
    """`exact_search_sql` for a search with excluded terms: checks them nearest first, until `:top_k` pass.

    The exclusion reads and parses each chunk's text (`_excluded_terms_sql`): about 0.13 ms a chunk, 100
    times the distance. Every chunk matching `where` is ranked by distance (cheap), then the exclusion is
    checked along that order and the scan stops at the `:top_k`-th chunk that passes (the sorted subquery's
    order carries through the nested loop, so `LIMIT` ends it). A rare term costs `:top_k` checks, a
    common one about `:top_k` / (the share it leaves), all of them only when nearly everything is excluded.
    Over 1,000 SciFact abstracts (1,385 chunks), `top_k` 50: 13 ms for a rare term, 36 ms for `protein
    cells` (which leave 19 % of chunks), against 266 ms checking every chunk.
    """
    return (
        f"SELECT {_QUALIFIED_CHUNK_COLUMNS}, ranked.distance FROM "  # noqa: S608 - only our own fragments
        "(SELECT chunk_id, (embedding <=> CAST(:embedding AS vector)) + 0 AS distance "
        # `OFFSET 0` keeps the subquery (and its order) whole; `+ 0` keeps the planner off the HNSW index.
        f"FROM chunks WHERE {where} ORDER BY distance, chunk_id OFFSET 0) AS ranked "
        "CROSS JOIN LATERAL (SELECT * FROM chunks WHERE chunks.project_id = :project_id "
        f"AND chunks.chunk_id = ranked.chunk_id AND {exclusion}) AS chunk "
        "ORDER BY ranked.distance, ranked.chunk_id LIMIT :top_k"
    )


def nearest_search_sql(where: str) -> str:
    """The `:top_k` nearest chunks to `:embedding` matching `where` by the HNSW index, nearest first."""
    return (
        f"WITH nearest AS MATERIALIZED (SELECT {CHUNK_COLUMNS}, "  # noqa: S608 - only our own fragments
        f"embedding <=> CAST(:embedding AS vector) AS distance FROM chunks WHERE {where} "
        "ORDER BY embedding <=> CAST(:embedding AS vector) LIMIT :top_k) "
        # relaxed_order may return neighbours slightly out of order: sort them again.
        f"SELECT {CHUNK_COLUMNS}, distance FROM nearest ORDER BY distance, chunk_id"
    )


SESSIONS_PRESET: Final = (
    "SELECT current_setting('hnsw.iterative_scan', true) = 'relaxed_order' "
    "AND coalesce(current_setting('hnsw.ef_search', true), '0')::int >= :ef_search"
)
"""Whether this session already runs iterative scans with at least `:ef_search` (`create_postgres_engine`)."""

SET_LOCAL_HNSW: Final = (
    "SELECT set_config('hnsw.ef_search', :ef_search, true), set_config('hnsw.iterative_scan', 'relaxed_order', true)"
)
"""`set_config(..., true)` is SET LOCAL: it ends with the transaction, never leaks to the pool."""

SELECT_DOCUMENT: Final = (
    "SELECT source, title, content_hash, tags, event_time, metadata, created_at, updated_at, version, "
    "NOT EXISTS (SELECT 1 FROM lexical_outbox o WHERE o.project_id = d.project_id "
    "AND o.document_id = d.document_id) AS lexically_indexed "
    "FROM documents d WHERE project_id = :project_id AND document_id = :document_id"
)

SELECT_DOCUMENT_CHUNKS: Final = (
    f"SELECT {STORED_CHUNK_COLUMNS} FROM chunks "  # noqa: S608 - constant column list
    "WHERE project_id = :project_id AND document_id = :document_id ORDER BY position, chunk_id"
)

SELECT_DOCUMENT_STATES: Final = (
    "SELECT project_id, document_id, content_hash, version, "
    "NOT EXISTS (SELECT 1 FROM lexical_outbox o WHERE o.project_id = d.project_id "
    "AND o.document_id = d.document_id) AS lexically_indexed "
    "FROM documents d "
    "JOIN unnest(CAST(:projects AS text[]), CAST(:documents AS text[])) AS asked(project_id, document_id) "
    "USING (project_id, document_id)"
)
"""The stored content hash, version and lexical state (as SELECT_DOCUMENT reads it) of each asked document."""

LOCK_DOCUMENTS: Final = (
    "SELECT count(pg_advisory_xact_lock(key)) FROM (SELECT DISTINCT hashtextextended(name, 0) AS key "
    "FROM unnest(CAST(:names AS text[])) AS name ORDER BY key) AS ordered"
)
"""Transaction-level advisory locks on document names, taken in one global order so two writers never deadlock.

Every process writing to this database takes them, so writes of one document serialize in PostgreSQL,
in the order they asked; a hash collision only serializes two documents that did not need it.
"""

LOCK_PROJECTS: Final = (
    "SELECT count(pg_advisory_xact_lock(:namespace, key)) FROM (SELECT DISTINCT hashtext(project_id) AS key "
    "FROM unnest(CAST(:projects AS text[])) AS project_id ORDER BY key) AS ordered"
)
"""Transaction-level advisory locks on projects, in one global order, taken first by every write transaction.

Writes, deletes, outbox completions and reindexes touch chunks, outbox rows and the generation row in
different orders; holding the project first makes them take turns instead of deadlocking. The two-key
form never conflicts with the documents' one-key locks (`LOCK_DOCUMENTS`).
"""
PROJECT_LOCK_NAMESPACE: Final = 20261130


SELECT_DOCUMENT_TITLES: Final = (
    "SELECT title FROM documents WHERE project_id = :project_id ORDER BY document_id LIMIT :limit"
)
"""By id, the primary key's order: every replica reads the same titles of a project holding more than `:limit`."""

SELECT_PROJECT_SIZE: Final = (
    "SELECT greatest(reltuples, 0) AS table_rows, "
    "(SELECT count(*) FROM (SELECT 1 FROM chunks WHERE project_id = :project_id LIMIT :count_limit) AS counted) "
    "AS project_rows FROM pg_class WHERE oid = CAST('chunks' AS regclass)"
)
"""PostgreSQL's estimate of the table's rows (0 before its first ANALYZE) and the project's rows, counted up
to `:count_limit` (`app.engines.vector_plan`: past its limit a project's exact count does not matter)."""

SELECT_GENERATION: Final = "SELECT poimen_project_generation(:project_id)"
"""The project's generation (NULL: none yet) in one statement that scopes itself (migration 0005): no transaction."""

BUMP_GENERATIONS: Final = (
    "INSERT INTO project_generations AS g (project_id) "
    "SELECT DISTINCT project_id FROM unnest(CAST(:projects AS text[])) AS project_id ORDER BY project_id "
    "ON CONFLICT (project_id) DO UPDATE SET generation = g.generation + 1"
)
"""One new generation per listed project; run last in a write's transaction (it locks the project's row)."""

SELECT_CACHED_EMBEDDINGS: Final = (
    "SELECT DISTINCT ON (chunk_hash) chunk_hash, CAST(embedding AS text) AS embedding FROM chunks "
    "WHERE project_id = :project_id AND chunk_hash = ANY(CAST(:hashes AS text[])) AND embedding_model = :model"
)
"""One embedding `:project_id` stores per chunk hash under `:model`, as pgvector's text form."""

MARK_PROJECT_NOT_INDEXED: Final = (
    "UPDATE chunks SET lexically_indexed = false WHERE project_id = :project_id AND lexically_indexed"
)

PROJECT_IDS: Final = (
    "WITH RECURSIVE listed(project_id) AS ((SELECT project_id FROM documents ORDER BY project_id LIMIT 1) "
    "UNION ALL SELECT (SELECT d.project_id FROM documents d WHERE d.project_id > listed.project_id "
    "ORDER BY d.project_id LIMIT 1) FROM listed WHERE listed.project_id IS NOT NULL) "
    "SELECT project_id FROM listed WHERE project_id IS NOT NULL"
)
"""Every project holding a document, sorted: one primary-key descent per project (a loose index scan). `SELECT
DISTINCT` read every document's key: 500,000 documents in 200 projects 37.9 -> 2.3 ms, in 5,000 39.7 -> 33.1 ms."""

UPSERT_DOCUMENT: Final = (
    "INSERT INTO documents AS d (project_id, document_id, source, title, content_hash, tags, tag_keys, event_time, "
    "metadata, created_at, updated_at, version) VALUES (:project_id, :document_id, :source, :title, :content_hash, "
    "CAST(:tags AS text[]), CAST(:tag_keys AS text[]), :event_time, CAST(:metadata AS jsonb), :created_at, "
    ":updated_at, greatest(:version, (SELECT CASE WHEN coalesce(max(generation), 0) = CAST(:restore_left AS bigint) "
    "THEN CAST(:restore_before AS bigint) ELSE coalesce(max(generation), 0) END + 1 FROM project_generations "
    "WHERE project_id = :project_id))) ON CONFLICT (project_id, document_id) DO UPDATE SET source = EXCLUDED.source, "
    "title = EXCLUDED.title, content_hash = EXCLUDED.content_hash, tags = EXCLUDED.tags, tag_keys = EXCLUDED.tag_keys, "
    "event_time = EXCLUDED.event_time, metadata = EXCLUDED.metadata, updated_at = EXCLUDED.updated_at, "
    "version = greatest(d.version + 1, EXCLUDED.version)"
)
"""Insert or replace a document (keeping its first `created_at`); its version, per project (one sequence told a tenant
how many documents the others wrote), is past its own, its project's generation (or an import's `RestoreFloor`:
`restore_left`, `restore_before`, `DocumentStore.save_documents`) and at least the one it carries (an import's)."""

DELETE_REPLACED_CHUNKS: Final = (
    "DELETE FROM chunks c USING unnest(CAST(:document_projects AS text[]), CAST(:document_ids AS text[])) "
    "AS saved(project_id, document_id) "
    "WHERE c.project_id = saved.project_id AND c.document_id = saved.document_id "
    "AND NOT EXISTS (SELECT 1 FROM unnest(CAST(:keep_projects AS text[]), CAST(:keep_chunk_ids AS text[])) "
    "AS kept(project_id, chunk_id) WHERE kept.project_id = c.project_id AND kept.chunk_id = c.chunk_id)"
)
"""Delete the chunks of saved documents that are not in their new chunk sets."""

UPSERT_CHUNK: Final = (
    "INSERT INTO chunks AS c (project_id, chunk_id, document_id, text, source, level, breadcrumb, section_title, "
    "position, tags, tag_keys, event_time, chunk_hash, context, embedding, embedding_model, lexically_indexed) "
    "VALUES (:project_id, :chunk_id, :document_id, :text, :source, :level, CAST(:breadcrumb AS text[]), "
    ":section_title, :position, CAST(:tags AS text[]), CAST(:tag_keys AS text[]), :event_time, :chunk_hash, "
    ":context, CAST(:embedding AS vector), :embedding_model, false) "
    "ON CONFLICT (project_id, chunk_id) DO UPDATE SET document_id = EXCLUDED.document_id, text = EXCLUDED.text, "
    "source = EXCLUDED.source, level = EXCLUDED.level, breadcrumb = EXCLUDED.breadcrumb, "
    "section_title = EXCLUDED.section_title, position = EXCLUDED.position, tags = EXCLUDED.tags, "
    "tag_keys = EXCLUDED.tag_keys, "
    "event_time = EXCLUDED.event_time, chunk_hash = EXCLUDED.chunk_hash, context = EXCLUDED.context, "
    "embedding = EXCLUDED.embedding, "
    "embedding_model = EXCLUDED.embedding_model, lexically_indexed = false, updated_at = now() "
    # Unchanged rows are skipped: no new row version, no HNSW insert.
    "WHERE (c.document_id, c.text, c.source, c.level, c.breadcrumb, c.section_title, c.position, c.tags, "
    "c.event_time, c.chunk_hash, c.context, c.embedding_model) IS DISTINCT FROM (EXCLUDED.document_id, "
    "EXCLUDED.text, EXCLUDED.source, EXCLUDED.level, EXCLUDED.breadcrumb, EXCLUDED.section_title, "
    "EXCLUDED.position, EXCLUDED.tags, EXCLUDED.event_time, EXCLUDED.chunk_hash, EXCLUDED.context, "
    "EXCLUDED.embedding_model) "
    "OR c.embedding <> EXCLUDED.embedding"
)

QUEUE_DOCUMENTS: Final = (
    "INSERT INTO lexical_outbox (project_id, document_id) "
    "SELECT * FROM unnest(CAST(:projects AS text[]), CAST(:documents AS text[])) "
    "ON CONFLICT (project_id, document_id) DO UPDATE "
    "SET version = nextval('lexical_outbox_version_seq'), queued_at = now(), claimed_until = NULL"
)
"""Queue documents, or bump the version of those already queued so a running claim cannot complete them.

A bump also ends the lease: the new version is claimable at once (the lexical index refuses the older
write that may still be running, by its version).
"""

QUEUE_PROJECT: Final = (
    "WITH queued AS (INSERT INTO lexical_outbox (project_id, document_id) "
    "SELECT project_id, document_id FROM documents WHERE project_id = :project_id "
    "ON CONFLICT (project_id, document_id) DO UPDATE "
    "SET version = nextval('lexical_outbox_version_seq'), queued_at = now(), claimed_until = NULL RETURNING 1) "
    "SELECT count(*) FROM queued"
)
