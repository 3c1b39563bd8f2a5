"""A query's words as the optimizer reads them: word-like tokens, quoted phrases, `-word` and `NOT` exclusions. Pure."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from app.domain.mark_characters import MARK_CHARACTERS
from app.domain.text_forms import canonical_text, lower_as_analyzers

# Word-like tokens: `k8s`, `ci/cd`, `port-forward`, `node.js`, `c++`, `#tag`, `@team`, `don't`, `किताब`, `مُحَمَّد`.
_WORD_RUN: Final = rf"\w[\w{MARK_CHARACTERS}]*"  # `\w` holds no mark: a vowel sign or haraka would cut the word
_TOKEN: Final = re.compile(rf"[#@]?{_WORD_RUN}(?:[./+'&-]{_WORD_RUN})*\+*")
_PHRASE: Final = re.compile(r'"([^"]*)"')
_QUOTES: Final = str.maketrans({**dict.fromkeys("\u201c\u201d\u201e\u00ab\u00bb", '"'), "\u2019": "'"})
"""Typographic double quotes as `"`; the typographic apostrophe (U+2019, what phones and word processors type) as
`'`, so "wasn\u2019t" is one word that negates a date as "wasn't" is, not "wasn" and "t". Both lexical engines
already read the two alike (tantivy splits at either, OpenSearch's `apostrophe` filter cuts at either). Not the
modifier letter apostrophe (U+02BC): a letter inside Ukrainian words, which tantivy keeps in the word."""
_NOT_OPERATOR: Final = "NOT"  # only the upper-case operator excludes; "not" in prose is just negation
_WHITESPACE: Final = re.compile(r"\s+")


def collapsed_query(raw_query: str) -> str:
    """`raw_query` in canonical form, typographic quotes and apostrophes as ASCII ones, whitespace collapsed."""
    return _WHITESPACE.sub(" ", canonical_text(raw_query).translate(_QUOTES)).strip()


def is_query_word(text: str) -> bool:
    """Whether `text` is one word as queries are split (`k8s`, `ci/cd`, `node.js`): what an abbreviation can be."""
    return _TOKEN.fullmatch(text) is not None and text[0] not in "#@"


@dataclass(frozen=True, slots=True)
class QueryToken:
    """One token of the whitespace-collapsed query; `start`/`end` index that string."""

    text: str  # lowercase, sigil kept
    start: int
    end: int
    in_phrase: bool
    excluded: bool = False  # `-word` or the operand of `NOT`
    operator: bool = False  # the `NOT` itself

    @property
    def word(self) -> str:
        """The token without its `#`/`@` sigil."""
        return self.text.lstrip("#@")

    @property
    def is_free_word(self) -> bool:
        """A token that is neither syntax, excluded, nor part of a quoted phrase."""
        return not (self.excluded or self.operator or self.in_phrase)


def tokenize(collapsed: str) -> list[QueryToken]:
    """Split into word-like tokens, marking phrase members, `-word` exclusions and `NOT word` operands."""
    phrase_spans = [match.span(1) for match in _PHRASE.finditer(collapsed)]
    excluded_spans = [match.span(1) for match in _PHRASE.finditer(collapsed) if _is_excluded_quote(collapsed, match)]
    matches = list(_TOKEN.finditer(collapsed))
    tokens: list[QueryToken] = []
    exclude_next = False
    for match in matches:
        start, end = match.span()
        in_phrase = any(span_start <= start < span_end for span_start, span_end in phrase_spans)
        # A dash before a number is a sign or a list ("-5 degrees", "E2f-1, -2, -3"), not an exclusion.
        dashed = (
            start > 0
            and collapsed[start - 1] == "-"
            and (start == 1 or collapsed[start - 2] in ' ("')
            and not match.group()[0].isdigit()
        )
        is_operator = not in_phrase and match.group() == _NOT_OPERATOR
        excluded = (not in_phrase and not is_operator and (dashed or exclude_next)) or any(
            span_start <= start < span_end for span_start, span_end in excluded_spans
        )
        exclude_next = is_operator
        tokens.append(
            QueryToken(
                text=lower_as_analyzers(match.group()),  # what the lexical engines index for the word
                start=start,
                end=end,
                in_phrase=in_phrase,
                excluded=excluded,
                operator=is_operator,
            )
        )
    return tokens


def as_written(collapsed: str, token: QueryToken) -> str:
    """The token's word as the query spells it, without its `#`/`@` sigil."""
    return collapsed[token.start : token.end].lstrip("#@")


def as_prose(token: QueryToken) -> QueryToken:
    """A passage's token as a plain word: no phrase membership, exclusion, operator or `#`/`@` sigil."""
    return QueryToken(text=token.word, start=token.start, end=token.end, in_phrase=False)


def quoted_phrases(collapsed: str, *, excluded: bool = False) -> tuple[str, ...]:
    """Quoted phrases to require (or with `excluded`, the `-"..."` / `NOT "..."` ones to exclude).

    Lowercase and whitespace-collapsed; empty quotes are ignored.
    """
    found = (
        lower_as_analyzers(_WHITESPACE.sub(" ", match.group(1)).strip())
        for match in _PHRASE.finditer(collapsed)
        if _is_excluded_quote(collapsed, match) == excluded
    )
    return tuple(dict.fromkeys(phrase for phrase in found if _TOKEN.search(phrase)))


def _is_excluded_quote(collapsed: str, quote: re.Match[str]) -> bool:
    """Whether a quoted phrase is written `-"..."` or `NOT "..."`: a phrase to exclude, not to require."""
    before = collapsed[: quote.start()]
    for marker in ("-", f"{_NOT_OPERATOR} "):
        if before.endswith(marker):
            preceding = before[: -len(marker)]
            return not preceding or preceding[-1] in " ("
    return False
