"""The tantivy query tree of a `LexicalQuery` and its `Filters`, and the field weights it scores with.

User text never reaches tantivy's query parser: the query is analyzed into plain terms here and the
tree built from them, so `foo:(bar*` or an unbalanced quote is just the words `foo` and `bar`.
Filters are zero-scoring clauses, so a filtered hit keeps the BM25 score it has unfiltered.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import tantivy

from app.domain.chunk_filters import has_source_prefix
from app.domain.models import ScoredHit
from app.domain.tags import tag_keys
from app.domain.text_forms import analysis_form
from app.engines.lexical_context import DEFAULT_CONTEXT_BOOST
from app.engines.tantivy_schema import (
    CHUNK_ID,
    CONTENT,
    CONTEXT,
    EVENT_TIME_US,
    LEVEL,
    PAYLOAD,
    SOURCE,
    SOURCE_KEYWORD,
    TAGS,
    TAGS_TEXT,
    decode_chunk,
    epoch_microseconds,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

    from app.domain.models import Filters, LexicalQuery

FUZZY_MIN_TERM_CHARS: Final = 3  # OpenSearch AUTO fuzziness allows no edit below 3 characters
MAX_PREFIX_BYTES: Final = 900
"""The longest source prefix (UTF-8 bytes) a regular expression matches: tantivy refuses one of over 1,000 states,
about a state a byte. A longer prefix is searched by its first `MAX_PREFIX_BYTES` and the hits checked (`top_hits`)."""
MAX_HITS_CHECKED: Final = 10_000
"""The most hits `top_hits` reads to find `top_k` it keeps (of the project, with all of a long source prefix)."""

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class FieldBoosts:
    """Per-field weights of the free-text terms (the reference `multi_match` has content^2, title^1.5).

    The title and section path are not fields of their own: they lead the content field
    (`titled_text`). Scored apart at content's weight they outranked the text, and in one field they
    did better on both data sets (SciFact train lexical nDCG@10 0.673 -> 0.704, LoCoMo tuning
    Recall@10 0.687 -> 0.706; docs/evaluation.md). Tags weigh 1.0 like the source, half the content:
    a tag names what a whole document is about, so a tag match should find the chunk without
    outranking one that discusses it. `fuzzy` is the constant score of a term matched only within one
    edit (an exact match scores BM25). `context` weighs the chunk's own context: low, so a term found
    only there ranks the chunk below one that says it itself (tuned in docs/evaluation.md).
    """

    content: float = 2.0
    source: float = 1.0
    tags: float = 1.0
    context: float = DEFAULT_CONTEXT_BOOST
    fuzzy: float = 0.5

    def own_fields(self) -> tuple[tuple[str, float], ...]:
        """The free-text fields of the chunk itself with their boosts (what an excluded term checks)."""
        return (
            (CONTENT, self.content),
            (SOURCE, self.source),
            (TAGS_TEXT, self.tags),
        )

    def searched_fields(self) -> tuple[tuple[str, float], ...]:
        """Every free-text field a query term is scored on, with its boost (a zero boost is skipped)."""
        fields = self.own_fields()
        return (*fields, (CONTEXT, self.context)) if self.context > 0 else fields


class TantivyQueryBuilder:
    """Builds query trees for one schema, analyzer and set of boosts; holds no index and does no I/O."""

    def __init__(self, schema: tantivy.Schema, analyzer: tantivy.TextAnalyzer, boosts: FieldBoosts) -> None:
        self._schema = schema
        self._analyzer = analyzer
        self._boosts = boosts

    def build(self, query: LexicalQuery, filters: Filters) -> tantivy.Query | None:
        """The whole query tree, or None when nothing can match (no searchable term, empty chunk_ids)."""
        text_query = self._text_query(query)
        filter_clauses = self._filter_clauses(filters)
        if text_query is None or filter_clauses is None:
            return None
        clauses = [(tantivy.Occur.Must, text_query)]
        clauses.extend((tantivy.Occur.Must, tantivy.Query.const_score_query(clause, 0.0)) for clause in filter_clauses)
        excluded_terms = tuple(dict.fromkeys((*query.excluded_terms, *filters.excluded_terms)))
        clauses.extend((tantivy.Occur.MustNot, clause) for clause in self._excluded_clauses(excluded_terms))
        return tantivy.Query.boolean_query(clauses)

    def _text_query(self, query: LexicalQuery) -> tantivy.Query | None:
        """OR of the analyzed terms over the searched fields, AND every phrase; None when both are empty.

        A term weighs once, or with `query.weigh_repeats` as many times as the text holds it (a boost).
        """
        terms = self._analyzer.analyze(analysis_form(query.text))
        weights = Counter(terms) if query.weigh_repeats else dict.fromkeys(terms, 1)
        clauses = [
            (tantivy.Occur.Should, self._weighted(self._term_clause(term, fuzzy=query.fuzzy), weight))
            for term, weight in weights.items()
        ]
        for phrase in query.phrases:
            phrase_query = self._phrase_query(CONTENT, phrase)
            if phrase_query is not None:
                clauses.append((tantivy.Occur.Must, tantivy.Query.boost_query(phrase_query, self._boosts.content)))
        if not clauses:
            return None
        return tantivy.Query.boolean_query(clauses)

    @staticmethod
    def _weighted(clause: tantivy.Query, weight: int) -> tantivy.Query:
        return clause if weight == 1 else tantivy.Query.boost_query(clause, float(weight))

    def _term_clause(self, term: str, *, fuzzy: bool) -> tantivy.Query:
        """One analyzed term: the sum of its boosted BM25 over every searched field.

        With `fuzzy`, a term within one edit in the content also matches, at a small constant score
        that an exact match (scored by BM25 through the max) never falls below.
        """
        exact = tantivy.Query.boolean_query(
            [
                (
                    tantivy.Occur.Should,
                    tantivy.Query.boost_query(tantivy.Query.term_query(self._schema, field, term), boost),
                )
                for field, boost in self._boosts.searched_fields()
            ]
        )
        if not fuzzy or len(term) < FUZZY_MIN_TERM_CHARS:
            return exact
        near = tantivy.Query.fuzzy_term_query(self._schema, CONTENT, term, distance=1)
        return tantivy.Query.disjunction_max_query([exact, tantivy.Query.boost_query(near, self._boosts.fuzzy)])

    def _phrase_query(self, field: str, phrase: str) -> tantivy.Query | None:
        """The analyzed words of `phrase` at their relative positions (a dropped stop word leaves a gap)."""
        tokens = self._analyzer.pre_tokenize(analysis_form(phrase)).tokens
        if not tokens:
            return None
        if len(tokens) == 1:
            # tantivy panics on a one-word phrase query; a term query means the same.
            return tantivy.Query.term_query(self._schema, field, tokens[0].text)
        first = tokens[0].position
        return tantivy.Query.phrase_query(
            self._schema, field, [(token.position - first, token.text) for token in tokens]
        )

    def _excluded_clauses(self, excluded_terms: Sequence[str]) -> list[tantivy.Query]:
        """One clause per excluded term (a multi-word one as a phrase), over the chunk's own fields.

        A term only the context holds (e.g. the previous turn's words) does not exclude the chunk.
        """
        clauses = []
        for excluded in excluded_terms:
            for field, _ in self._boosts.own_fields():
                field_query = self._phrase_query(field, excluded)
                if field_query is not None:
                    clauses.append(field_query)
        return clauses

    def _filter_clauses(self, filters: Filters) -> list[tantivy.Query] | None:
        """Clauses every hit must satisfy, or None when `filters` can match nothing."""
        if filters.chunk_ids is not None and not filters.chunk_ids:
            return None
        schema = self._schema
        # No clause names the project: its index holds its chunks alone (one index per project), so such a
        # clause selected every document, at a quarter of the search's time; `top_hits` checks each hit's.
        clauses: list[tantivy.Query] = []
        if filters.levels:
            clauses.append(tantivy.Query.term_set_query(schema, LEVEL, list(filters.levels)))
        clauses.extend(tantivy.Query.term_query(schema, TAGS, key) for key in tag_keys(filters.tags))
        if filters.source_prefix:
            prefix = _indexable_prefix(filters.source_prefix)
            clauses.append(tantivy.Query.regex_query(schema, SOURCE_KEYWORD, _regex_literal(prefix) + "(?s:.)*"))
        if filters.event_time_from is not None or filters.event_time_to is not None:
            clauses.append(self._time_window_clause(filters))
        if filters.chunk_ids is not None:
            clauses.append(tantivy.Query.term_set_query(schema, CHUNK_ID, list(filters.chunk_ids)))
        return clauses

    def _time_window_clause(self, filters: Filters) -> tantivy.Query:
        """`[event_time_from, event_time_to)`, or an undated chunk too when `filters.include_undated`."""
        lower = epoch_microseconds(filters.event_time_from) if filters.event_time_from is not None else None
        upper = epoch_microseconds(filters.event_time_to) if filters.event_time_to is not None else None
        window = tantivy.Query.range_query(
            self._schema,
            EVENT_TIME_US,
            tantivy.FieldType.Integer,
            lower_bound=lower,
            upper_bound=upper,
            include_lower=True,
            # tantivy rejects an exclusive unbounded side; `to` itself is exclusive.
            include_upper=upper is None,
        )
        if not filters.include_undated:
            return window
        undated = tantivy.Query.boolean_query(
            [
                (tantivy.Occur.Must, tantivy.Query.all_query()),
                (tantivy.Occur.MustNot, tantivy.Query.exists_query(EVENT_TIME_US)),
            ]
        )
        return tantivy.Query.boolean_query([(tantivy.Occur.Should, window), (tantivy.Occur.Should, undated)])


def top_hits(searcher: tantivy.Searcher, query: tantivy.Query, *, top_k: int, filters: Filters) -> list[ScoredHit]:
    """The best `top_k` hits of `query` (built for `filters`) in `filters.project_id`, read back from their payloads.

    A hit of another project is dropped: a project's index holds none, unless its folder came to hold two
    projects' (a copied folder, a file system that ignores case); the query does not name the project. So is a
    hit that does not start with all of a source prefix past `MAX_PREFIX_BYTES`, which was searched by its start.
    While fewer than `top_k` are left and more may follow, more are asked for.
    """
    prefix = filters.source_prefix
    long_prefix = prefix is not None and prefix != _indexable_prefix(prefix)
    limit = top_k
    while True:
        found = searcher.search(query, limit, count=False).hits
        hits = [
            ScoredHit(chunk=decode_chunk(searcher.doc(address)[PAYLOAD][0]), score=score) for score, address in found
        ]
        kept = [hit for hit in hits if hit.chunk.project_id == filters.project_id]
        if len(kept) < len(hits):
            logger.warning("the lexical index of project %r holds another project's chunks", filters.project_id)
        if long_prefix:
            kept = [hit for hit in kept if has_source_prefix(hit.chunk.source, filters)]
        if len(kept) == len(hits) or len(kept) >= top_k or len(found) < limit or limit >= MAX_HITS_CHECKED:
            return kept[:top_k]
        limit = min(limit * 4, MAX_HITS_CHECKED)


def _indexable_prefix(prefix: str) -> str:
    """The longest start of `prefix` within `MAX_PREFIX_BYTES` bytes of UTF-8 (`prefix` itself when short)."""
    if len(prefix) * 4 <= MAX_PREFIX_BYTES:
        return prefix
    return prefix.encode()[:MAX_PREFIX_BYTES].decode(errors="ignore")


def _regex_literal(text: str) -> str:
    r"""`text` as a regex matching itself: every non-alphanumeric becomes a `\x{..}` escape."""
    return "".join(char if char.isalnum() else f"\\x{{{ord(char):x}}}" for char in text)
