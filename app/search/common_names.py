"""Names many of a project's document titles share: the semantic leg's query leaves them out.

In agent memory a turn's title names who said it ("1:56 pm on 8 May, 2023 | Caroline"), and that title is
embedded with the turn. A question naming one of the two speakers then sits about as close to every turn
that speaker said, half the conversation, as to the turn it asks about: the name drowns the content in
the query's vector. A name found (capitalised) in the titles of at least `SEMANTIC_COMMON_NAME_SHARE` of a
project's documents, and of at least `MIN_NAME_DOCUMENTS` of them, tells the vectors nothing about which
of them is meant, so the semantic leg embeds the query without it (the lexical leg keeps it: BM25's idf
already weighs such a word down). LoCoMo, semantic leg: Recall@10 0.5359 -> 0.6383 (docs/evaluation.md,
"Common names"). A name that is content elsewhere (a gene in SciFact's claims) is in few titles and stays,
and so does a plain word that only some titles capitalise (Title Case titles): a name is capitalised
wherever it appears (`NAME_CAPITALISED_SHARE`).
Shares are of documents, not chunks: every chunk of a long runbook carries its title ("Postgres Runbook"),
which says nothing about how many of the project's documents name Postgres; and a project of a few
documents has no common names (one of three runbooks naming Postgres is a topic, not a speaker).

Titles are read from the store for at most `TITLES_READ` documents per project and kept per replica under
the project's generation (the query cache's, `QueryCache.read_generation`), for at most `TTL_S`. Every write
and delete, through any replica, moves the generation on in PostgreSQL, so a search after one reads the titles
again: a turn that makes a new speaker common (or deletes one's last turns) counts from the next search, where
it was left out for up to five minutes. During a re-read at the same generation (past `TTL_S`) other searches
keep the last answer. When the store cannot answer, no name is left out.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from app.domain.errors import EngineError
from app.domain.recent_reads import RecentReads
from app.query.intent import title_names, title_words

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from app.domain.ports import DocumentTitles

logger = logging.getLogger(__name__)

TITLES_READ: Final = 2000
"""Documents whose titles are read per project: enough to measure a share of a few per cent."""
TTL_S: Final = 300.0
PROJECTS_KEPT: Final = 4096
NAME_CAPITALISED_SHARE: Final = 0.9
"""Of the titles holding a word in any case, the share that must capitalise it for it to be a name."""
MIN_NAME_DOCUMENTS: Final = 10
"""Titles that must name a word, whatever the share, for it to be common (a conversation's speakers name
hundreds of turns; a knowledge base of a few runbooks names its topics in theirs)."""


def common_title_words(titles: Sequence[str], *, min_share: float) -> frozenset[str]:
    """The words capitalised in `min_share` of `titles` (at least `MIN_NAME_DOCUMENTS`) and in nearly all holding them.

    A word counts once per title. Capitalised where it appears (`NAME_CAPITALISED_SHARE` of the titles
    holding it in any case) is what a name is; a plain word that some titles capitalise (a Title Case
    title, a title's first word: "Cancer" in a nutrition corpus) is content, and stays in the query.
    No titles, or a share above 1, give no words.
    """
    if not titles or min_share > 1:
        return frozenset()
    capitalised: Counter[str] = Counter()
    anywhere: Counter[str] = Counter()
    for title in titles:
        capitalised.update(title_names(title))
        anywhere.update(title_words(title))
    least = max(min_share * len(titles), MIN_NAME_DOCUMENTS)
    return frozenset(
        word
        for word, count in capitalised.items()
        if count >= least and count >= NAME_CAPITALISED_SHARE * anywhere[word]
    )


@dataclass(frozen=True, slots=True)
class _Read:
    words: frozenset[str]
    min_share: float
    generation: int | None  # the project's generation read before its titles (None: unknown)

    def serves(self, *, min_share: float, generation: int | None) -> bool:
        """Whether these words answer a search at `min_share` that read `generation` (None: any will do)."""
        return self.min_share == min_share and (
            generation is None or (self.generation is not None and self.generation >= generation)
        )


class CommonNames:
    """Per project, the title words shared by at least a given share of its documents, kept per generation (`TTL_S`)."""

    def __init__(self, titles: DocumentTitles, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._titles = titles
        self._clock = clock
        self._reads: RecentReads[str, _Read] = RecentReads(ttl_s=TTL_S, max_keys=PROJECTS_KEPT)

    async def of(self, project_id: str, *, min_share: float, generation: int | None = None) -> frozenset[str]:
        """The project's common title words at `min_share`; none when `min_share` is 0 or the store fails.

        `generation` is the project's generation the search read (None: unknown): words kept from before it
        are read again, so no search uses names from before a write whose generation it has seen.
        """
        if min_share <= 0:
            return frozenset()
        now = self._clock()
        kept = self._reads.fresh(project_id, now)
        if kept is not None and kept.serves(min_share=min_share, generation=generation):
            return kept.words
        last = self._reads.last(project_id)
        if last is not None and last.serves(min_share=min_share, generation=generation):
            self._reads.hold(project_id, now)  # past the TTL only: others keep these words while this re-reads
        try:
            titles = await self._titles.document_titles(project_id, limit=TITLES_READ)
        except EngineError as error:
            logger.warning("document titles of %s unread (%s): the semantic query keeps every name", project_id, error)
            return frozenset() if last is None else last.words
        words = common_title_words(titles, min_share=min_share)
        self._reads.store(project_id, _Read(words, min_share, generation), now)
        return words
