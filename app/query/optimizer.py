"""Query optimizer: reads one raw query into a `QueryAnalysis` (entities, question type, route). Pure.

Stages, as in `reference/query-optimization-engine.md` Part 1: normalize, tokenize, extract entities,
analyse characteristics, classify the question, route to a strategy with a confidence. No I/O: the
clock, the abbreviation table and the listed names are injected, and every regex is compiled once at import.
"""

from __future__ import annotations

import re
from collections import Counter
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Final

from app.domain.calendar_words import MONTHS, is_year
from app.domain.capitals import telling_capitals
from app.domain.models import (
    LexicalQuery,
    QueryAnalysis,
    QueryEntities,
    QuestionType,
    SearchStrategy,
)
from app.domain.tags import tag_key
from app.query.abbreviations import load_abbreviations
from app.query.dates import (
    date_direction,
    date_span,
    event_time_range,
    months_named,
    relative_dates_named,
    without_negated_dates,
)
from app.query.intent import (
    CALENDAR_OR_FUNCTION_WORDS,
    NO_LISTED_NAMES,
    ListedNames,
    names_someone,
    read_intent,
)
from app.query.query_tokens import QueryToken, as_prose, as_written, collapsed_query, quoted_phrases, tokenize
from app.query.vocabulary import (
    ANYWHERE_RULES,
    COMPARATIVE_WORDS,
    FACTUAL_FIRST,
    FIRST_TOKEN_RULES,
    NEGATION_WORDS,
    STOPWORDS,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Iterable, Mapping, Sequence

SHORT_QUERY_TOKENS: Final = 3
"""The reference routes queries with fewer tokens than this to LEXICAL. We do not: on a held-out
nutrition set (short queries) that cut Recall@100 from 0.32 to 0.27 (docs/evaluation.md, "Round 2")."""
PASSAGE_QUERY_TOKENS: Final = 32
"""From this many tokens a query is a passage (an agent pasting a paragraph), read as prose: quotes,
`-word`, `NOT`, `#`/`@` and dates in it are not syntax or filters, and it always runs hybrid. A quoted
phrase in a paragraph is a quotation, not an exact-match demand, and must not empty the lexical leg."""
MAX_LEXICAL_TERMS: Final = 1024
"""A lexical query keeps at most this many distinct content words, the most frequent in the query first
(then in order of appearance). Only a bound on the cost of a query far above the default 8,000 characters
(~600 distinct words): BM25's idf already weighs the words, and a cap of 128 cost SciFact abstracts of
~135 distinct words up to 0.19 nDCG@10 each (docs/evaluation.md, "Round 2")."""

# Routing confidences (reference Part 1, Stage 6). Clear signals score high; the default is "reasonable".
CONFIDENCE_PROCEDURAL: Final = 0.95
CONFIDENCE_TROUBLESHOOTING: Final = 0.95
CONFIDENCE_DATES_CASCADING: Final = 0.9
CONFIDENCE_SPECIAL_SYNTAX: Final = 0.85
CONFIDENCE_PASSAGE: Final = 0.85
CONFIDENCE_NAVIGATIONAL: Final = 0.85
CONFIDENCE_DEFAULT: Final = 0.8

_WHITESPACE: Final = re.compile(r"\s+")
_NUMBER: Final = re.compile(r"\d+(?:\.\d+)*")


def _utc_now() -> datetime:
    return datetime.now(UTC)


class QueryOptimizer:
    """The six-stage query reader. Thread-safe and stateless after construction.

    `clock` returns "now" for relative dates ("last week"); naive datetimes are taken as UTC.
    `abbreviations` maps lowercase abbreviations to expansions; the bundled table by default.
    `listed_names` are names read as one name each in any case ("blue harbor"); a deployment's list.
    """

    def __init__(
        self,
        *,
        clock: Callable[[], datetime] = _utc_now,
        abbreviations: Mapping[str, str] | None = None,
        listed_names: Iterable[str] = (),
    ) -> None:
        self._clock = clock
        table = load_abbreviations() if abbreviations is None else abbreviations
        self._abbreviations: dict[str, str] = {key.lower(): value.lower() for key, value in table.items()}
        names = tuple(listed_names)
        self._listed_names: ListedNames = ListedNames.of(names) if names else NO_LISTED_NAMES
        # A listed name that is a month's ("April Tours" is two words; "April" alone one) is not a date where named.
        self._listed_words = frozenset(
            words[0] for group in self._listed_names.by_first_word.values() for words in group if len(words) == 1
        )

    def analyze(
        self,
        raw_query: str,
        *,
        now: datetime | None = None,
        classify: bool = True,
        known_names: Collection[str] = (),
    ) -> QueryAnalysis:
        """Read `raw_query` and decide how to search it. Never raises; validation belongs to the planner.

        `now` resolves relative dates ("last week") in its own time zone; None means the optimizer's clock.
        With `classify` False (`QUERY_QUESTION_CLASSIFICATION=false`) every query is of type `open`.
        `known_names` (lowercase): names the caller knows, such as a project's speakers. Each is a name wherever
        the query says it; one that is a calendar or function word too (May, June, Will) only where written as a
        name (`names_someone`: capitalised, undated by its context), and there it is no date ("What did April
        say?" names no month). The words that would be such names are `name_candidates`, whoever is known.

        `token_count` counts every word-like token, stop words and `#tags` included (the reference counts
        `["how", "do", "i", ...]`), so "#networking @devops" is a 2-token query.
        """
        collapsed = collapsed_query(raw_query)
        normalized = collapsed.lower()
        tokens = tokenize(collapsed)
        is_passage = len(tokens) >= PASSAGE_QUERY_TOKENS
        if is_passage:
            tokens = [as_prose(token) for token in tokens]
        token_texts = tuple(token.text for token in tokens)

        phrases = () if is_passage else quoted_phrases(collapsed)
        excluded_phrases = () if is_passage else quoted_phrases(collapsed, excluded=True)
        excluded_terms = _dedupe(
            [*(token.word for token in tokens if token.excluded and not token.in_phrase), *excluded_phrases]
        )
        entity_tokens = [token for token in tokens if token.is_free_word]
        syntax_tokens = [] if is_passage else entity_tokens
        # Tags and mentions as written, lowered as stored tags and titles are (`tag_key`), not as words are indexed.
        sigils = [(token.text[0], as_written(collapsed, token)) for token in syntax_tokens if token.text[0] in "#@"]
        tags = _dedupe(tag_key(word) for sigil, word in sigils if sigil == "#")
        mentions = _dedupe(word.lower() for sigil, word in sigils if sigil == "@")
        plain_tokens = [token for token in entity_tokens if token.text[0] not in "#@"]
        plain_words = [token.text for token in plain_tokens]
        # "yesterday's notes", "2024's roadmap" name their date.
        words_read = [word.removesuffix("'s") for word in plain_words]
        # One rule for where a capital says something, for names and dates alike ("Thanks. May I ask ...").
        capitals = telling_capitals(collapsed)
        telling = [_capital_tells(collapsed, token, capitals) for token in plain_tokens]
        candidates = self._name_candidates(collapsed, plain_tokens, words_read, telling=telling)
        known = frozenset(known_names) | self._listed_words
        named = {index for index, name in candidates.items() if name in known}
        # A month with a capital that says something is one a plain day beside dates ("do May 3").
        capitalised_at = frozenset(index for index, word in enumerate(words_read) if word in MONTHS and telling[index])
        # A year in a paragraph is a fact, not a filter; a speaker's name is no date where it names her.
        date_words = (
            []
            if is_passage
            else without_negated_dates(
                ["" if index in named else word for index, word in enumerate(words_read)], capitalised_at=capitalised_at
            )
        )
        years = tuple(int(word) for word in _dedupe(date_words) if is_year(word))
        numbers = _dedupe(word for word in plain_words if _NUMBER.fullmatch(word) and not is_year(word))
        months = months_named(date_words, capitalised_at=capitalised_at)
        relative_dates = relative_dates_named(date_words, capitalised_at=capitalised_at)
        expansions = {
            token.word: self._abbreviations[token.word]
            for token in tokens
            if not (token.excluded or token.operator) and token.word in self._abbreviations
        }
        entities = QueryEntities(
            years=years,
            months=months,
            phrases=phrases,
            tags=tags,
            mentions=mentions,
            numbers=numbers,
            relative_dates=relative_dates,
            expansions=expansions,
            excluded_terms=excluded_terms,
        )

        has_special_syntax = bool(tags or mentions or phrases)
        has_date_filters = bool(years or months or relative_dates)
        has_negation = bool(excluded_terms) or any(word in NEGATION_WORDS for word in plain_words)
        question_type = (
            _classify([token.text for token in tokens if not (token.excluded or token.operator)])
            if classify
            else QuestionType.OPEN
        )
        strategy, confidence = _route(
            is_passage=is_passage,
            has_special_syntax=has_special_syntax,
            has_date_filters=has_date_filters,
            question_type=question_type,
        )
        event_time_from, event_time_to = event_time_range(
            years=years,
            months=months,
            relative_dates=relative_dates,
            now=now or self._clock(),
            direction=date_direction(date_words, capitalised_at=capitalised_at),
            span=date_span(date_words, capitalised_at=capitalised_at),
        )
        counted_back = any(expression.endswith(" ago") for expression in relative_dates)  # "3 days ago" read
        names_read = {candidates[index] for index in named} | {
            name for name in known_names if name not in CALENDAR_OR_FUNCTION_WORDS
        }
        intent = read_intent(
            collapsed, known_names=names_read, listed=self._listed_names, ago_read_as_date=counted_back
        )
        return QueryAnalysis(
            raw_query=raw_query,
            normalized=normalized,
            tokens=token_texts,
            entities=entities,
            has_special_syntax=has_special_syntax,
            has_date_filters=has_date_filters,
            has_negation=has_negation,
            token_count=len(tokens),
            question_type=question_type,
            strategy=strategy,
            confidence=confidence,
            search_text=self._search_text(collapsed, tokens) or normalized,
            lexical_query=self._lexical_query(
                tokens, phrases, excluded_terms, max_terms=MAX_LEXICAL_TERMS, weigh_repeats=is_passage
            ),
            event_time_from=event_time_from,
            event_time_to=event_time_to,
            asks_when=intent.asks_when,
            asks_latest=intent.asks_latest,
            names=intent.names,
            name_candidates=tuple(dict.fromkeys(candidates.values())),
        )

    @staticmethod
    def _name_candidates(
        collapsed: str, plain_tokens: Sequence[QueryToken], words_read: Sequence[str], *, telling: Sequence[bool]
    ) -> dict[int, str]:
        """Per index of `words_read`, the calendar or function words written as names there (`names_someone`).

        `telling`: per index, whether the word's capital says something (`telling_capitals`).
        """
        return {
            index: word
            for index, (token, word) in enumerate(zip(plain_tokens, words_read, strict=True))
            if word in CALENDAR_OR_FUNCTION_WORDS
            and names_someone(as_written(collapsed, token), words_read, index, capital_tells=telling[index])
        }

    def _search_text(self, collapsed: str, tokens: Sequence[QueryToken]) -> str:
        """The wording for the embedder: syntax and excluded words dropped, abbreviations expanded."""
        pieces: list[str] = []
        position = 0
        for token in tokens:
            gap = collapsed[position : token.start]
            if token.excluded and gap.rstrip('"').endswith("-"):
                gap = gap.rstrip('"')[:-1]  # the `-` of `-word` or `-"a phrase"` goes with it
            pieces.append(gap.replace('"', ""))
            if not (token.excluded or token.operator):
                pieces.append(self._abbreviations.get(token.word, token.word))
            position = token.end
        pieces.append(collapsed[position:].replace('"', ""))
        return _WHITESPACE.sub(" ", "".join(pieces).lower()).strip()

    def _lexical_query(
        self,
        tokens: Sequence[QueryToken],
        phrases: tuple[str, ...],
        excluded_terms: tuple[str, ...],
        *,
        max_terms: int,
        weigh_repeats: bool,
    ) -> LexicalQuery:
        """Free words (stop words dropped unless nothing else is left) plus expansions, phrases, exclusions.

        At most `max_terms` distinct words, the most frequent first (ties: first seen), then expansions.
        With `weigh_repeats` (a passage) each kept word stays as often as the query says it, so the
        lexical leg can weigh what a paragraph repeats: a paragraph's BM25 query lost 0.05 nDCG@10
        without it (docs/evaluation.md, "Query term frequency"). A short query's words count once:
        weighing repeated stems there cost SciFact claims 0.007.
        """
        free_words = [token.word for token in tokens if token.is_free_word]
        content_words = [word for word in free_words if word not in STOPWORDS] or free_words
        distinct = _dedupe(content_words)
        if len(distinct) > max_terms:
            counts = Counter(content_words)
            salient = set(sorted(distinct, key=lambda word: -counts[word])[:max_terms])  # stable: ties keep order
            distinct = tuple(word for word in distinct if word in salient)
        expanded = [
            part for word in distinct if word in self._abbreviations for part in self._abbreviations[word].split()
        ]
        if weigh_repeats:
            kept = set(distinct)
            words = [*(word for word in content_words if word in kept), *expanded]
        else:
            words = list(_dedupe([*distinct, *expanded]))
        return LexicalQuery(
            text=" ".join(words),
            phrases=phrases,
            excluded_terms=excluded_terms,
            weigh_repeats=weigh_repeats,
        )


def _dedupe(items: Iterable[str]) -> tuple[str, ...]:
    """Items in first-seen order without repeats."""
    return tuple(dict.fromkeys(items))


def _capital_tells(collapsed: str, token: QueryToken, telling: Collection[int]) -> bool:
    """Whether the token's word, as written, starts at one of the `telling` offsets (its `#`/`@` sigil skipped)."""
    return token.end - len(as_written(collapsed, token)) in telling


def _classify(tokens: Sequence[str]) -> QuestionType:
    """First-token rules of the reference, then indicator words anywhere, then tags mean navigation."""
    words = [token for token in tokens if token[0] not in "#@"]
    first = words[0] if words else ""
    if first in FACTUAL_FIRST:  # reference: "what ... difference" is comparative
        return QuestionType.COMPARATIVE if COMPARATIVE_WORDS.intersection(words) else QuestionType.FACTUAL
    by_first_token = next((kind for indicators, kind in FIRST_TOKEN_RULES if first in indicators), None)
    if by_first_token is not None:
        return by_first_token
    anywhere = next((kind for indicators, kind in ANYWHERE_RULES if indicators.intersection(words)), None)
    if anywhere is not None:
        return anywhere
    if len(words) < len(tokens):  # "#networking @devops", "#networking documents": looking for tagged things
        return QuestionType.NAVIGATIONAL
    return QuestionType.OPEN


def _route(  # noqa: PLR0911 - one return per branch of the reference tree
    *, is_passage: bool, has_special_syntax: bool, has_date_filters: bool, question_type: QuestionType
) -> tuple[SearchStrategy, float]:
    """The reference decision tree, in its order, less its short-query branch, after the passage rule.

    Neither deviation may lose recall to save time: a passage needs both legs (its lexical leg alone
    scored 0.29 nDCG@10 on a held-out argument set where hybrid scored 0.52), and a short query is
    answered by hybrid too (see `SHORT_QUERY_TOKENS`).
    """
    if is_passage:
        return SearchStrategy.HYBRID, CONFIDENCE_PASSAGE
    if has_special_syntax and has_date_filters:
        return SearchStrategy.CASCADING, CONFIDENCE_DATES_CASCADING
    if has_special_syntax:
        return SearchStrategy.LEXICAL, CONFIDENCE_SPECIAL_SYNTAX
    if has_date_filters:
        return SearchStrategy.CASCADING, CONFIDENCE_DATES_CASCADING
    if question_type is QuestionType.NAVIGATIONAL:
        return SearchStrategy.CASCADING, CONFIDENCE_NAVIGATIONAL
    if question_type is QuestionType.PROCEDURAL:
        return SearchStrategy.HYBRID, CONFIDENCE_PROCEDURAL
    if question_type is QuestionType.TROUBLESHOOTING:
        return SearchStrategy.HYBRID, CONFIDENCE_TROUBLESHOOTING
    return SearchStrategy.HYBRID, CONFIDENCE_DEFAULT
