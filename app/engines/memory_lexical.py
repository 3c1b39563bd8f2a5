"""A pure-Python BM25 `LexicalIndex`: the reference fake for unit tests of the use cases.

It keeps the same contract as the tantivy adapter (fields, boosts, stop words, stemming, phrases,
exclusions, fuzzy, filters, BM25 statistics per project) over a dict, recomputing statistics per
query: fine for the few hundred chunks a test holds, not for production. Its stemmer is a light
suffix stripper, not Snowball, so its scores and some stems differ from tantivy's; only the
behaviour is the same.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.domain.errors import EngineUnavailableError
from app.domain.models import ScoredHit
from app.engines.lexical_context import DEFAULT_CONTEXT_BOOST, lexical_text
from app.engines.memory_analysis import analyze, holds_phrase
from app.engines.memory_filters import chunk_matches

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from app.domain.models import Chunk, DocumentChunks, Filters, LexicalQuery

ENGINE_NAME = "memory-lexical"
BM25_K1 = 1.2
BM25_B = 0.75
FUZZY_MIN_TERM_CHARS = 3

CONTENT = "content"  # the chunk's breadcrumb and text (app.engines.lexical_context)
SOURCE = "source"
TAGS = "tags"  # searched as words, like tantivy's `tags_text`
CONTEXT = "context"  # the chunk's own context (app.engines.lexical_context)
OWN_FIELDS = (CONTENT, SOURCE, TAGS)
"""The chunk's own fields: an excluded term is looked for here only, not in the context."""
DEFAULT_BOOSTS: dict[str, float] = {  # as tantivy_index
    CONTENT: 2.0,
    SOURCE: 1.0,
    TAGS: 1.0,
    CONTEXT: DEFAULT_CONTEXT_BOOST,
}
DEFAULT_FUZZY_BOOST = 0.5


def _within_one_edit(left: str, right: str) -> bool:
    """Levenshtein distance <= 1, counting a swap of neighbours as one edit (as tantivy's fuzzy does)."""
    if left == right:
        return True
    if abs(len(left) - len(right)) > 1:
        return False
    if len(left) == len(right):
        differences = [index for index, (a, b) in enumerate(zip(left, right, strict=True)) if a != b]
        if len(differences) == 1:
            return True
        swapped = len(differences) == 2 and differences[1] == differences[0] + 1  # noqa: PLR2004 - a transposition
        return (
            swapped and left[differences[0]] == right[differences[1]] and left[differences[1]] == right[differences[0]]
        )
    shorter, longer = sorted((left, right), key=len)
    return any(longer[:index] + longer[index + 1 :] == shorter for index in range(len(longer)))


@dataclass(frozen=True, slots=True)
class _IndexedChunk:
    """A chunk with each searched field analyzed once, at write time (tags: one list per tag)."""

    chunk: Chunk
    fields: dict[str, tuple[tuple[tuple[int, str], ...], ...]]

    @classmethod
    def of(cls, chunk: Chunk) -> _IndexedChunk:
        def values(texts: Iterable[str]) -> tuple[tuple[tuple[int, str], ...], ...]:
            return tuple(tuple(analyze(text)) for text in texts)

        text = lexical_text(chunk)
        return cls(
            chunk=chunk,
            fields={
                CONTENT: values([text.content]),
                SOURCE: values([chunk.source]),
                TAGS: values(chunk.tags),
                CONTEXT: values([text.context]),
            },
        )

    def terms(self, field: str) -> list[str]:
        return [term for value in self.fields[field] for _, term in value]

    def has_phrase(self, field: str, phrase: Sequence[tuple[int, str]]) -> bool:
        return any(holds_phrase(value, phrase) for value in self.fields[field])


class InMemoryLexicalIndex:
    """`LexicalIndex` over a dict, scored with BM25 (k1=1.2, b=0.75) per field like tantivy."""

    name = ENGINE_NAME

    def __init__(self, *, boosts: dict[str, float] | None = None, fuzzy_boost: float = DEFAULT_FUZZY_BOOST) -> None:
        self._boosts = dict(boosts or DEFAULT_BOOSTS)
        self._fuzzy_boost = fuzzy_boost
        self._documents: dict[tuple[str, str], tuple[_IndexedChunk, ...]] = {}
        self._closed = False

    async def search(self, query: LexicalQuery, *, top_k: int, filters: Filters) -> list[ScoredHit]:
        """Return at most `top_k` chunks of the project matching `query` and `filters`, best first."""
        self._check_open()
        query_terms = [term for _, term in analyze(query.text)]
        weights = Counter(query_terms) if query.weigh_repeats else dict.fromkeys(query_terms, 1)
        phrases = [analyzed for analyzed in (analyze(phrase) for phrase in query.phrases) if analyzed]
        excluded = [analyzed for analyzed in (analyze(term) for term in query.excluded_terms) if analyzed]
        if top_k <= 0 or not (weights or phrases):
            return []
        # The project's chunks only: its BM25 statistics are its own, as in tantivy's index per project.
        project = [
            indexed
            for (project_id, _), chunks in self._documents.items()
            if project_id == filters.project_id
            for indexed in chunks
        ]
        statistics = _FieldStatistics(project)
        hits = []
        for indexed in project:
            if not chunk_matches(indexed.chunk, filters):
                continue
            if any(indexed.has_phrase(field, words) for words in excluded for field in OWN_FIELDS):
                continue
            if not all(indexed.has_phrase(CONTENT, words) for words in phrases):
                continue
            term_scores = [
                (self._term_score(indexed, term, statistics, fuzzy=query.fuzzy), weight)
                for term, weight in weights.items()
            ]
            if not phrases and not any(score is not None for score, _ in term_scores):
                continue
            score = sum(weight * score for score, weight in term_scores if score is not None)
            score += sum(
                self._boosts[CONTENT] * statistics.bm25(indexed, CONTENT, term)
                for words in phrases
                for _, term in words
            )
            hits.append(ScoredHit(chunk=indexed.chunk, score=score))
        hits.sort(key=lambda hit: (-hit.score, hit.chunk_id))
        return hits[:top_k]

    async def replace_documents(self, documents: Sequence[DocumentChunks]) -> None:
        """Make each document's chunks exactly the given set; an empty set removes the document."""
        self._check_open()
        for document in documents:
            key = (document.project_id, document.document_id)
            if document.chunks:
                self._documents[key] = tuple(_IndexedChunk.of(chunk) for chunk in document.chunks)
            else:
                self._documents.pop(key, None)

    async def delete_project(self, project_id: str) -> None:
        """Remove every chunk of the project."""
        self._check_open()
        for key in [key for key in self._documents if key[0] == project_id]:
            del self._documents[key]

    async def ping(self) -> None:
        """Return unless closed."""
        self._check_open()

    async def close(self) -> None:
        """Make every later call raise `EngineUnavailableError` (simulates the engine going down)."""
        self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            message = "the in-memory lexical index is closed"
            raise EngineUnavailableError(message, engine=ENGINE_NAME)

    def _term_score(
        self, indexed: _IndexedChunk, term: str, statistics: _FieldStatistics, *, fuzzy: bool
    ) -> float | None:
        """Boosted BM25 of `term` summed over the fields, or the fuzzy constant; None when it does not match."""
        matched = [field for field in self._boosts if term in indexed.terms(field)]
        exact = sum(self._boosts[field] * statistics.bm25(indexed, field, term) for field in matched)
        near = (
            fuzzy
            and len(term) >= FUZZY_MIN_TERM_CHARS
            and any(_within_one_edit(term, word) for word in indexed.terms(CONTENT))
        )
        if near:
            return max(exact, self._fuzzy_boost)
        return exact if matched else None


class _FieldStatistics:
    """Document frequencies and average lengths per field over one project's chunks (as tantivy: an index each)."""

    def __init__(self, chunks: Sequence[_IndexedChunk]) -> None:
        self._count = len(chunks)
        self._document_frequency: dict[tuple[str, str], int] = {}
        self._average_length: dict[str, float] = {}
        for field in (*OWN_FIELDS, CONTEXT):
            total = 0
            for indexed in chunks:
                terms = indexed.terms(field)
                total += len(terms)
                for term in set(terms):
                    self._document_frequency[field, term] = self._document_frequency.get((field, term), 0) + 1
            self._average_length[field] = total / self._count if self._count else 0.0

    def bm25(self, indexed: _IndexedChunk, field: str, term: str) -> float:
        terms = indexed.terms(field)
        frequency = terms.count(term)
        if not frequency:
            return 0.0
        containing = self._document_frequency.get((field, term), 0)
        idf = math.log(1 + (self._count - containing + 0.5) / (containing + 0.5))
        average = self._average_length[field] or 1.0
        norm = BM25_K1 * (1 - BM25_B + BM25_B * len(terms) / average)
        return idf * (BM25_K1 + 1) * frequency / (frequency + norm)
