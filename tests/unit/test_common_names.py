"""Common names: a project's speakers are left out of the semantic leg's query, nothing else is."""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import pytest

from app.domain.errors import EngineUnavailableError, InvalidQueryError
from app.domain.models import Chunk, EmbeddedChunk, StoredDocument
from app.engines.memory import InMemoryDocumentStore
from app.engines.memory_lexical import InMemoryLexicalIndex
from app.engines.memory_vectors import InMemoryVectorIndex
from app.knobs import SearchKnobs
from app.query.intent import title_names, without_names
from app.query.optimizer import QueryOptimizer
from app.query.planner import SearchOptions, build_plan
from app.search import common_names
from app.search.cache import QueryCache
from app.search.calls import SearchCall, SearchOutcome
from app.search.common_names import CommonNames, common_title_words
from app.search.knob_source import FixedKnobs
from app.search.service import SearchService
from tests.unit.test_evaluation_runner import BagOfWordsEmbedder

if TYPE_CHECKING:
    from collections.abc import Sequence

CREATED = datetime(2026, 12, 1, tzinfo=UTC)
TURN_TITLES = [f"1:56 pm on {day} May, 2023 | {speaker}" for day in range(1, 11) for speaker in ("Caroline", "Melanie")]


def test_title_names_are_its_capitalised_words_read_as_names_are_read() -> None:
    assert title_names("1:56 pm on 8 May, 2023 | Caroline's") == {"caroline"}  # the dated month is no name


def test_a_title_month_is_a_name_only_where_no_date_stands_by_it() -> None:
    assert title_names("1:56 pm on 8 May, 2023 | May") == {"may"}
    assert title_names("Notes of June") == {"notes"}


def test_the_month_of_many_turns_is_no_common_name_and_a_speaker_named_like_it_is() -> None:
    # Every LoCoMo conversation had its sessions' months among its "speakers" ("may", "july", ...).
    with_may = [*TURN_TITLES, *(f"2 pm on {day} May, 2023 | May" for day in range(1, 11))]

    assert common_title_words(TURN_TITLES, min_share=0.1) == {"caroline", "melanie"}
    assert common_title_words(with_may, min_share=0.1) == {"caroline", "melanie", "may"}


def test_a_plain_word_common_in_sentence_case_titles_is_no_common_name() -> None:
    # "cells" is in every title but capitalised in one of 20: a claim starting "Cells ..." keeps it.
    titles = ["Cells lacking clpC", *(f"T cells in mice, study {number}" for number in range(19))]

    assert common_title_words(titles, min_share=0.1) == {"t"}


@pytest.mark.parametrize(
    ("text", "names", "expected"),
    [
        ("What did Caroline research?", {"caroline"}, "What did research?"),
        ("When did Melanie's kids meet caroline?", {"caroline", "melanie"}, "When did kids meet ?"),
        ("What did Caroline research?", set(), "What did Caroline research?"),
        ("Caroline", {"caroline"}, "Caroline"),  # nothing but names: the names are the query
        ("Is Carolineville near?", {"caroline"}, "Is Carolineville near?"),  # whole words only
    ],
)
def test_without_names(text: str, names: set[str], expected: str) -> None:
    assert without_names(text, names) == expected


def test_a_word_some_title_case_titles_capitalise_is_content_not_a_name() -> None:
    # A nutrition corpus: "Cancer" capitalised in 30 Title Case titles, lowercase in 50 others.
    titles = [
        *(f"Dietary Fiber and Colon Cancer, Cohort {number}" for number in range(30)),
        *(f"Soy intake and breast cancer risk, trial {number}" for number in range(50)),
        *TURN_TITLES,
    ]

    common = common_title_words(titles, min_share=0.1)

    assert "cancer" not in common
    assert {"colon", "caroline", "melanie"} <= common  # capitalised wherever they appear


def test_a_name_few_documents_carry_is_a_topic_whatever_its_share() -> None:
    # Three runbooks: "Postgres" titles one of three documents (a third), but only one.
    runbooks = ["Postgres Runbook", "Kafka Runbook", "Redis Runbook"]
    more_turns = [f"2 pm on {day} June, 2023 | Caroline" for day in range(1, 10)]

    assert common_title_words(runbooks, min_share=0.1) == frozenset()
    assert "caroline" not in common_title_words(more_turns, min_share=0.1)  # 9 documents
    assert "caroline" in common_title_words([*more_turns, TURN_TITLES[0]], min_share=0.1)  # 10


def test_speakers_are_common_title_words_and_a_rare_word_is_not() -> None:
    titles = [*TURN_TITLES, "3 pm on 2 June, 2023 | Gina"]

    common = common_title_words(titles, min_share=0.1)

    assert {"caroline", "melanie"} <= common
    assert "gina" not in common  # 1 of 21 titles
    assert common_title_words([], min_share=0.1) == frozenset()
    assert common_title_words(titles, min_share=1.5) == frozenset()


def test_the_plan_embeds_the_query_without_common_names_and_the_lexical_query_keeps_them() -> None:
    analysis = QueryOptimizer().analyze("What did Caroline tell Gina about painting?")

    plan = build_plan(analysis, SearchOptions(project="p"), SearchKnobs(), common_names={"caroline", "melanie"})

    assert plan.semantic_text == "what did tell gina about painting?"  # the optimizer lowercases
    assert "caroline" in plan.lexical_query.text.lower()
    assert build_plan(analysis, SearchOptions(project="p"), SearchKnobs()).semantic_text == analysis.search_text


class CountingTitles:
    def __init__(self, titles: Sequence[str], *, error: Exception | None = None) -> None:
        self.titles = list(titles)
        self.error = error
        self.reads: list[tuple[str, int]] = []

    async def document_titles(self, project_id: str, *, limit: int) -> list[str]:
        self.reads.append((project_id, limit))
        if self.error is not None:
            raise self.error
        return self.titles[:limit]


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def test_a_projects_common_names_are_read_once_then_again_after_the_ttl() -> None:
    titles, clock = CountingTitles(TURN_TITLES), Clock()
    names = CommonNames(titles, clock=clock)

    first = await names.of("p", min_share=0.1)
    again = await names.of("p", min_share=0.1)
    clock.now = common_names.TTL_S + 1
    later = await names.of("p", min_share=0.1)

    assert first == again == later
    assert {"caroline", "melanie"} <= first
    assert titles.reads == [("p", common_names.TITLES_READ), ("p", common_names.TITLES_READ)]


async def test_the_names_are_read_again_once_per_later_generation_and_kept_for_earlier_ones() -> None:
    titles = CountingTitles(TURN_TITLES)
    names = CommonNames(titles)

    await names.of("p", min_share=0.1, generation=4)
    await names.of("p", min_share=0.1, generation=4)
    await names.of("p", min_share=0.1, generation=6)  # written since: read again
    await names.of("p", min_share=0.1, generation=5)  # a search that read the generation before that write
    await names.of("p", min_share=0.1)  # the store could not say its generation: the last read serves

    assert len(titles.reads) == 2


async def test_another_share_reads_again_and_a_share_of_zero_reads_nothing() -> None:
    titles = CountingTitles(TURN_TITLES)
    names = CommonNames(titles)

    assert await names.of("p", min_share=0) == frozenset()
    await names.of("p", min_share=0.1)
    await names.of("p", min_share=0.6)  # each speaker is in half the titles

    assert len(titles.reads) == 2
    assert "caroline" not in await names.of("p", min_share=0.6)


async def test_a_store_that_cannot_answer_leaves_every_name_in(caplog: pytest.LogCaptureFixture) -> None:
    names = CommonNames(CountingTitles(TURN_TITLES, error=EngineUnavailableError("down", engine="store")))

    with caplog.at_level(logging.WARNING, logger="app.search.common_names"):
        assert await names.of("p", min_share=0.1) == frozenset()

    assert "keeps every name" in caplog.text


class RecordingEmbedder(BagOfWordsEmbedder):
    def __init__(self) -> None:
        super().__init__()
        self.queries: list[str] = []

    async def embed_query(self, text: str, *, scope: str = "") -> list[float]:
        self.queries.append(text)
        return await super().embed_query(text)


def turn(number: int, speaker: str, text: str) -> Chunk:
    return Chunk(
        chunk_id=f"conv:D1:{number}#0",
        document_id=f"conv:D1:{number}",
        project_id="memory",
        text=text,
        source="conv",
        level="turn",
        breadcrumb=(f"1:56 pm on 8 May, 2023 | {speaker}",),
        section_title="",
        position=0,
        chunk_hash=f"h{number}",
    )


def one_chunk_document(chunk: Chunk, *, title: str) -> StoredDocument:
    """A stored document of one chunk, undated, written at `CREATED`."""
    return StoredDocument(
        project_id=chunk.project_id,
        document_id=chunk.document_id,
        source=chunk.source,
        title=title,
        content_hash=chunk.chunk_hash,
        tags=(),
        event_time=None,
        metadata={},
        chunks=(chunk,),
        lexically_indexed=False,
        created_at=CREATED,
        updated_at=CREATED,
    )


async def speaker_service(
    knobs: SearchKnobs, store: InMemoryDocumentStore | None = None, cache: QueryCache[SearchOutcome] | None = None
) -> tuple[SearchService, RecordingEmbedder]:
    """A service over 20 turns (into `store`), Caroline's and Melanie's in turn; its embedder records what it embeds."""
    store, embedder = store if store is not None else InMemoryDocumentStore(), RecordingEmbedder()
    chunks = [turn(1, "Caroline", "I painted a sunrise"), turn(2, "Melanie", "I ran a charity race")]
    chunks += [turn(number, ("Caroline", "Melanie")[number % 2], f"small talk {number}") for number in range(3, 21)]
    for chunk in chunks:
        document = one_chunk_document(chunk, title=chunk.breadcrumb[0])
        await store.save_documents([(document, [EmbeddedChunk(chunk, await embedder.embed_query(chunk.text), "m")])])
    embedder.queries.clear()
    service = SearchService.over(
        vector=InMemoryVectorIndex(store),
        lexical=InMemoryLexicalIndex(),
        embedder=embedder,
        store=store,
        knobs=FixedKnobs(knobs),
        cache=cache,
    )
    return service, embedder


ASKS_CAROLINE = SearchCall(
    query="What did Caroline paint?", options=SearchOptions(project="memory"), auth_scope="t", caller_key="t"
)


async def test_a_search_naming_a_speaker_embeds_the_question_without_the_name() -> None:
    service, embedder = await speaker_service(SearchKnobs())

    outcome = await service.search(ASKS_CAROLINE)

    assert embedder.queries == ["what did paint?"]
    assert outcome.plan.semantic_text == "what did paint?"
    assert outcome.plan.evidence.names == ("caroline",)


@pytest.mark.parametrize("hybrid_percent", [0.0, 100.0])
async def test_the_rollout_shadow_plans_with_the_served_searchs_common_names(hybrid_percent: float) -> None:
    # The served arm is semantic at 0 % (its shadow hybrid) and hybrid at 100 % (its shadow semantic).
    knobs = SearchKnobs(hybrid_rollout_percent=hybrid_percent, rollout_shadow_enabled=True)
    service, embedder = await speaker_service(knobs)

    await service.search(ASKS_CAROLINE)
    await service.drain_shadow()

    assert embedder.queries == ["what did paint?", "what did paint?"]  # served, then the shadow


class TitleCountingStore(InMemoryDocumentStore):
    def __init__(self) -> None:
        super().__init__()
        self.title_reads = 0

    async def document_titles(self, project_id: str, *, limit: int) -> list[str]:
        self.title_reads += 1
        return await super().document_titles(project_id, limit=limit)


@pytest.mark.parametrize("options", [SearchOptions(project="memory", limit=0), SearchOptions(project=" ")])
async def test_a_search_with_invalid_options_is_refused_before_any_title_is_read(options: SearchOptions) -> None:
    store = TitleCountingStore()
    service = SearchService.over(
        vector=InMemoryVectorIndex(store),
        lexical=InMemoryLexicalIndex(),
        embedder=BagOfWordsEmbedder(),
        store=store,
        knobs=FixedKnobs(SearchKnobs()),
    )
    call = SearchCall(query="What did Caroline paint?", options=options, auth_scope="t", caller_key="t")

    with pytest.raises(InvalidQueryError):
        await service.search(call)
    await service.search(replace(call, options=SearchOptions(project="memory")))  # a valid one reads them

    assert store.title_reads == 1


ASKS_GINA = replace(ASKS_CAROLINE, query="What did Gina paint?")


async def write_turns(store: InMemoryDocumentStore, numbers: range, speaker: str) -> None:
    for number in numbers:
        chunk = replace(turn(number, speaker, f"chat {number}"), breadcrumb=(f"2 pm on 8 June, 2023 | {speaker}",))
        document = one_chunk_document(chunk, title=chunk.breadcrumb[0])
        vector = await BagOfWordsEmbedder().embed_query(chunk.text)
        await store.save_documents([(document, [EmbeddedChunk(chunk, vector, "m")])])


@pytest.mark.parametrize("cache_ttl_s", [0, 60])
async def test_a_turn_that_makes_a_speaker_common_counts_at_the_next_search(cache_ttl_s: int) -> None:
    # The names were kept for five minutes whatever was written: the tenth turn of a new speaker (10 of 30
    # titles) left the name in the semantic query until then, and so did deleting that turn.
    store = InMemoryDocumentStore()
    cache: QueryCache[SearchOutcome] = QueryCache(ttl_s=cache_ttl_s, max_size=100)
    service, embedder = await speaker_service(SearchKnobs(query_cache_ttl_secs=cache_ttl_s), store, cache)
    await write_turns(store, range(21, 30), "Gina")
    await service.search(ASKS_GINA)  # 9 of her turns: not common

    await write_turns(store, range(30, 31), "Gina")
    await service.search(ASKS_GINA)
    await store.delete_document("memory", "conv:D1:30")
    await service.search(ASKS_GINA)

    assert embedder.queries == ["what did gina paint?", "what did paint?", "what did gina paint?"]


class GenerationCountingStore(InMemoryDocumentStore):
    def __init__(self) -> None:
        super().__init__()
        self.generation_reads = 0

    async def project_generation(self, project_id: str) -> int:
        self.generation_reads += 1
        return await super().project_generation(project_id)


async def test_with_the_cache_off_only_a_query_naming_someone_reads_the_generation() -> None:
    # The generation serves the cache key and the common names; with the cache off a query naming nobody
    # needs neither, and a read per search is a round trip to PostgreSQL on the hot path.
    store = GenerationCountingStore()
    service, _ = await speaker_service(SearchKnobs(query_cache_ttl_secs=0), store, QueryCache(ttl_s=0, max_size=100))
    store.generation_reads = 0

    await service.search(replace(ASKS_CAROLINE, query="a sunrise painting"))
    reads_without_names = store.generation_reads
    await service.search(ASKS_CAROLINE)

    assert (reads_without_names, store.generation_reads) == (0, 1)
