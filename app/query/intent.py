"""What a memory question is after beyond its words: a time (*when*), the latest state, and the names it holds. Pure.

Dependency-light on purpose: names are capitalised words of the query, plus, in any case, the names a
deployment lists (`ListedNames`: product names, multi-word names, read as one name each) and any name the
caller already knows (e.g. a project's speakers), so no model or tagger is loaded per query. Names are
lowercase and folded to ASCII as the lexical engines fold words (`José` and `Jose` are one name), wherever
they are read: in queries, titles and the texts the boosts match.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from app.domain.ascii_folding import fold_to_ascii
from app.domain.calendar_words import MONTHS
from app.query.dates import is_month_named_by_date
from app.query.vocabulary import STOPWORDS, WEEKDAYS

if TYPE_CHECKING:
    from collections.abc import Collection, Iterable, Mapping, Sequence

_APOSTROPHES: Final = "'\u2019"
_WORD: Final = re.compile(rf"[^\W\d_][\w{_APOSTROPHES}.-]*")  # a word starts with a letter, any script
_POSSESSIVE: Final = re.compile(rf"(?:[{_APOSTROPHES}]s|[{_APOSTROPHES}])$")
_WORD_OR_NUMBER: Final = re.compile(rf"\w[\w{_APOSTROPHES}.-]*")  # what dates a month in a title: "8 May, 2023"

WHEN_OPENINGS: Final = (
    ("when",),
    ("what", "date"),
    ("what", "year"),
    ("what", "month"),
    ("what", "day"),
    ("what", "time"),
    ("which", "year"),
    ("which", "month"),
    ("which", "day"),
    ("how", "long", "ago"),
)
"""Question openings that ask for a point in time (lowercase word sequences)."""
WHEN_ANYWHERE: Final = frozenset({"ago"})
"""Words that ask for a time wherever they stand ("how long ago"); not "when", which in a claim opens a
clause ("... is skewed when insulin signaling is suppressed": 20 of 1,109 SciFact claims)."""
LATEST_WORDS: Final = frozenset({"latest", "current", "currently", "recent", "recently", "now", "newest", "nowadays"})
"""Words asking for the state as it is now, not as it once was."""
NOT_NAMES: Final = frozenset({
    "what", "when", "where", "who", "whom", "whose", "why", "which", "how", "would", "could", "should", "did",
    "does", "do", "is", "are", "was", "were", "has", "have", "had", "can", "will", "might", "may", "i", "in",
    "on", "at", "after", "before", "during", "since", "the", "a", "an", "and", "or", "if", "besides", "apart",
    "other", "according", "given", "based", "considering", "both", "not", "yes", "no", "mr", "mrs", "ms", "dr",
    "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday",
})  # fmt: skip
"""Capitalised words that are question words, sentence openers, titles or calendar words, never names."""
WEEKDAYS_ALSO_NAMES: Final = frozenset({"mon", "thu", "sun"})
"""Short weekday forms that are people's names too (Sun Li, Thu Tran): a date only after `WEEKDAY_LEADS`. The other
short forms ("Tues", "Weds", "Fri") are calendar words, never names, as the full weekday names are."""
WEEKDAY_LEADS: Final = frozenset({"last", "on", "since", "until", "till", "every", "each", "next", "this"})
"""Words after which a short weekday form is the day ("last Sun", "on Mon"), not someone ("from Sun", "by Thu")."""
CALENDAR_OR_FUNCTION_WORDS: Final = NOT_NAMES | STOPWORDS | frozenset(MONTHS) | frozenset(WEEKDAYS)
"""Words capitalisation alone never makes a name; one that is a project's speaker (May, June, Will) may be one
(`names_someone`)."""
_CAPITALISED_ANYWAY: Final = frozenset({"i", "mr", "mrs", "ms", "dr"})
"""Words always written with a capital: theirs says nothing of a name."""


def names_someone(written: str, words: Sequence[str], index: int, *, capital_tells: bool) -> bool:
    """Whether a calendar or function word (`CALENDAR_OR_FUNCTION_WORDS`) is written as a name at `index` of `words`.

    `words` are the query's words as the date reader reads them (lowercase, numbers among them), `written` the
    word as the query spells it, `capital_tells` whether its capital says something (`telling_capitals`: inside a
    sentence of a query not in Title Case). Evidence, not a guess: it is capitalised, is no modal, question or stop
    word whose capital says nothing ("May I ...", "Thanks. Will it ...", "How May Caroline Help"), and its context
    does not date it ("in May", "May 3", "since May 2024", "last May", `is_month_named_by_date`; "last Sun",
    `WEEKDAY_LEADS`). The word is then a name only where the caller knows it is one: a project's speaker.
    """
    word = words[index]
    if (
        word in _CAPITALISED_ANYWAY
        or not written[:1].isupper()
        or (not capital_tells and word in NOT_NAMES | STOPWORDS)
    ):
        return False
    if word in WEEKDAYS:
        return not (index > 0 and words[index - 1] in WEEKDAY_LEADS)
    return not is_month_named_by_date(words, index)


def name_words(name: str) -> tuple[str, ...]:
    """The words the reader sees in `name`, as names are compared ("Blue Harbor" -> ("blue", "harbor"))."""
    return tuple(name_form(match.group()) for match in _WORD.finditer(name))


def name_form(word: str) -> str:
    """`word` as names are compared: without a possessive, lowercase, folded to ASCII (`Élodie's` -> `elodie`)."""
    return fold_to_ascii(_bare(word).lower())


def is_readable_name(name: str) -> bool:
    """Whether `name` is all words the reader sees (each starts with a letter), so a query can contain it."""
    return _WORD.search(name) is not None and not _WORD.sub("", name).strip()


@dataclass(frozen=True, slots=True)
class ListedNames:
    """Names a deployment lists, found in any case and each read as one name, however many words it has.

    `by_first_word` maps a name's first word to the word sequences of the names starting with it, longest
    first, so "blue harbor tours" wins over "blue harbor" where both are listed.
    """

    by_first_word: Mapping[str, tuple[tuple[str, ...], ...]]

    @classmethod
    def of(cls, names: Iterable[str]) -> ListedNames:
        """Index `names` (any case); a name with no word the reader sees is skipped (the loader refuses it)."""
        grouped: dict[str, list[tuple[str, ...]]] = {}
        for words in dict.fromkeys(name_words(name) for name in names):
            if words:
                grouped.setdefault(words[0], []).append(words)
        return cls({first: tuple(sorted(group, key=len, reverse=True)) for first, group in grouped.items()})

    def length_at(self, lowered: Sequence[str], index: int) -> int:
        """How many words of `lowered` from `index` on form a listed name (0: none)."""
        for words in self.by_first_word.get(lowered[index], ()):
            if tuple(lowered[index : index + len(words)]) == words:
                return len(words)
        return 0


NO_LISTED_NAMES: Final = ListedNames({})


@dataclass(frozen=True, slots=True)
class QueryIntent:
    """`asks_when`: the question wants a time; `asks_latest`: the current state; `names`: lowercase names."""

    asks_when: bool = False
    asks_latest: bool = False
    names: tuple[str, ...] = ()


def read_intent(
    raw_query: str,
    *,
    known_names: Collection[str] = (),
    listed: ListedNames = NO_LISTED_NAMES,
    ago_read_as_date: bool = False,
) -> QueryIntent:
    """Read `raw_query`'s intent. `known_names` (lowercase) and `listed` names are found in any case.

    `ago_read_as_date`: the query's "ago" ends a count back the date reader took as a range ("3 days ago"). It
    then names the question's time instead of asking it ("what did we talk about 3 days ago"): the range holds
    the evidence, and the boost for turns whose text carries a date would only favour any turn saying
    "yesterday" in it. An "ago" that is no date ("4 years ago", "how long ago") still asks *when*: its answer is
    a telling that says "4 years ago".
    """
    words = [match.group() for match in _WORD.finditer(raw_query)]
    lowered = [word.lower() for word in words]
    asks_when = any(tuple(lowered[: len(opening)]) == opening for opening in WHEN_OPENINGS) or (
        not ago_read_as_date and bool(WHEN_ANYWHERE.intersection(lowered))
    )
    asks_latest = bool(LATEST_WORDS.intersection(lowered))
    names = named_entities(words, known_names=known_names, listed=listed)
    return QueryIntent(asks_when=asks_when, asks_latest=asks_latest, names=names)


def _bare(word: str) -> str:
    """A word without its possessive `'s` and trailing full stops."""
    return _POSSESSIVE.sub("", word).rstrip(".")


def named_entities(
    words: list[str], *, known_names: Collection[str] = (), listed: ListedNames = NO_LISTED_NAMES
) -> tuple[str, ...]:
    """Lowercase names in `words`, first seen first.

    A name is a listed name (its words in a row, any case; one name, words joined by a space), a
    capitalised word that is no question word, stop word, month or weekday (a possessive `'s` dropped;
    `_is_weekday`), or any word in `known_names`, whatever its case.
    """
    bare_words = [_bare(word) for word in words]
    lowered_words = [fold_to_ascii(bare.lower()) for bare in bare_words]
    found: list[str] = []
    index = 0
    while index < len(words):
        span = listed.length_at(lowered_words, index) if listed.by_first_word else 0
        if span:
            found.append(" ".join(lowered_words[index : index + span]))
            index += span
            continue
        bare, lowered = bare_words[index], lowered_words[index]
        index += 1
        if not lowered:
            continue
        capitalised = bare[0].isupper() and lowered not in NOT_NAMES and lowered not in STOPWORDS
        if lowered in known_names or (capitalised and lowered not in MONTHS and not _is_weekday(lowered_words, index)):
            found.append(lowered)
    return tuple(dict.fromkeys(found))


def _is_weekday(lowered_words: Sequence[str], after: int) -> bool:
    """Whether the word before `after` is a weekday said short: "Fri", or "Sun" after "last", "on", "since", ..."""
    word = lowered_words[after - 1]
    if word not in WEEKDAYS:
        return False
    return word not in WEEKDAYS_ALSO_NAMES or (after > 1 and lowered_words[after - 2] in WEEKDAY_LEADS)


def title_names(title: str) -> set[str]:
    """The capitalised words of `title`, lowercase and read as `named_entities` reads a query's (`'s` dropped).

    Only capitalised ones: in a sentence-case title ("Cells lacking ... in sporulation") the common words are
    plain words, and a name a query starts with by chance must not match them. Nor a month its context dates
    ("1:56 pm on 8 May, 2023 | Caroline"): a month of many turns is no speaker, and a speaker named May is.
    """
    return {name_form(word) for word in _title_words_undated(title) if word[0].isupper()}


def title_words(title: str) -> set[str]:
    """Every word of `title`, in any case, lowercase and read as `title_names` reads them (dated months left out)."""
    return {name_form(word) for word in _title_words_undated(title)}


def _title_words_undated(title: str) -> list[str]:
    """The words of `title` the reader sees, less the month names its numbers or prepositions date."""
    around = list(_WORD_OR_NUMBER.finditer(title))
    lowered = [_bare(match.group()).lower() for match in around]
    dated = {match.start() for index, match in enumerate(around) if is_month_named_by_date(lowered, index)}
    return [match.group() for match in _WORD.finditer(title) if match.start() not in dated]


def without_names(text: str, names: Collection[str]) -> str:
    """`text` without its words that are one of `names` (lowercase, as `named_entities` gives them), any case.

    A possessive goes with its name ("Caroline's" -> ""); spaces are collapsed. A text that would be left
    empty is returned as it was: a query of nothing but names still means those names.
    """
    if not names:
        return text
    kept = _WORD.sub(lambda match: "" if name_form(match.group()) in names else match.group(), text)
    return " ".join(kept.split()) or text
