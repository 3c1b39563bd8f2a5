"""Later pages across replicas: each replica holds the rankings it made; another one says its page is a new ranking.

Two `SearchService`s over one store stand for two replicas behind a load balancer, each with its own query
cache, as every replica has.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from app.domain.models import Chunk, DocumentChunks, EmbeddedChunk, SearchStrategy, StoredDocument
from app.engines.memory import InMemoryDocumentStore
from app.engines.memory_lexical import InMemoryLexicalIndex
from app.engines.memory_vectors import InMemoryVectorIndex
from app.knobs import SearchKnobs
from app.query.planner import SearchOptions
from app.search.cache import QueryCache
from app.search.calls import SearchCall
from app.search.knob_source import FixedKnobs
from app.search.paging import SearchPage
from app.search.service import SearchService
from tests.unit.test_common_names import one_chunk_document
from tests.unit.test_evaluation_runner import BagOfWordsEmbedder

CREATED = datetime(2024, 5, 8, tzinfo=UTC)
PROJECT = "pages"


async def note(number: int, text: str) -> tuple[StoredDocument, list[EmbeddedChunk]]:
    chunk = Chunk(
        chunk_id=f"n{number}#0",
        document_id=f"n{number}",
        project_id=PROJECT,
        text=text,
        source="notes",
        level="L0",
        breadcrumb=(),
        section_title="",
        position=0,
        chunk_hash=f"h{number}-{text}",
    )
    vector = await BagOfWordsEmbedder().embed_query(text)
    return one_chunk_document(chunk, title=""), [EmbeddedChunk(chunk, vector, "m")]


def replica(store: InMemoryDocumentStore, lexical: InMemoryLexicalIndex | None = None) -> SearchService:
    return SearchService.over(
        vector=InMemoryVectorIndex(store),
        lexical=lexical or InMemoryLexicalIndex(),
        embedder=BagOfWordsEmbedder(),
        store=store,
        knobs=FixedKnobs(SearchKnobs()),
        cache=QueryCache(ttl_s=3600, max_size=100),
    )


async def test_a_later_page_from_a_replica_without_the_first_pages_ranking_says_so() -> None:
    store = InMemoryDocumentStore()
    await store.save_documents([await note(number, f"harbour crane log {number}") for number in range(6)])
    first_replica, other_replica = replica(store), replica(store)
    call = SearchCall(
        query="harbour crane",
        options=SearchOptions(project=PROJECT, limit=2),
        auth_scope="t",
        caller_key="t",
        page=SearchPage(offset=0),
    )
    first = await first_replica.search(call)
    await store.save_documents([await note(9, "harbour crane log, newest")])  # a write between pages
    later = replace(call, page=SearchPage(offset=first.next_offset or 0, generation=first.generation))

    same_replica = await first_replica.search(later)
    another_replica = await other_replica.search(later)
    unwritten = await other_replica.search(replace(later, page=SearchPage(offset=2, generation=None)))

    assert first.ranking_changed is False
    assert same_replica.ranking_changed is False  # cut from the first page's ranking, which it holds
    assert another_replica.ranking_changed is True  # cut from today's ranking: hits may repeat or be missed
    assert unwritten.ranking_changed is False  # an offset without a generation asks for today's ranking


async def test_a_later_page_from_another_replica_reads_the_query_as_the_first_page_did() -> None:
    # The project's speakers (common title names, left out of the semantic query) are each replica's own
    # 5-minute read: a replica that read them before the speakers' turns were written ranked the first page
    # with the name, another one cut the next page from a ranking without it, and served hits of the first
    # page again while saying `ranking_changed: false`.
    store = InMemoryDocumentStore()
    await store.save_documents([await note(number, f"quiet harbour evening {number}") for number in range(12)])
    first_replica, other_replica = replica(store), replica(store)
    naming = SearchCall(
        query="What did Caroline bake?",
        options=SearchOptions(project=PROJECT, limit=4, strategy=SearchStrategy.SEMANTIC),
        auth_scope="t",
        caller_key="t",
    )
    await first_replica.search(naming)  # reads the titles now: nobody is named in them yet
    for number in range(20, 44):
        document, embedded = await note(number, "Caroline said hello" if number % 2 else "I bake rye bread")
        await store.save_documents([(replace(document, title=f"1:56 pm on 8 May, 2023 | Caroline {number}"), embedded)])
    paged = replace(naming, page=SearchPage(offset=0))

    first = await first_replica.search(paged)
    # What its cursor carries (`app/api/search_routes.py`).
    later = replace(
        paged, page=SearchPage(offset=first.next_offset or 0, generation=first.generation, speakers=first.speakers)
    )
    from_first = await first_replica.search(later)
    from_other = await other_replica.search(later)

    chunk_ids = [[hit.chunk.chunk_id for hit in outcome.result.hits] for outcome in (first, from_first, from_other)]
    assert from_other.ranking_changed is False
    assert set(chunk_ids[0]).isdisjoint(chunk_ids[2])  # no hit of the first page again
    assert chunk_ids[2] == chunk_ids[1]  # the page the first replica cuts from its own ranking
    assert from_other.plan.semantic_text == first.plan.semantic_text


async def test_a_later_page_cut_from_another_ranking_at_the_same_generation_says_so() -> None:
    # The outbox writes the lexical index, then moves the project's generation on: between the two, a
    # replica ranking the query again sees another lexical leg at the same generation, and its page could
    # repeat hits of the first page while saying `ranking_changed: false`.
    store = InMemoryDocumentStore()
    texts = ["crane crane crane", "harbour crane", "crane operator manual for the harbour", "the harbour crane log"]
    notes = [await note(number, text) for number, text in enumerate([*texts, "old crane", "crane"])]
    await store.save_documents(notes)
    written = InMemoryLexicalIndex()  # the lexical index as the other replica reads it, written meanwhile
    await written.replace_documents(
        [DocumentChunks(PROJECT, document.document_id, document.chunks) for document, _ in notes]
    )
    first_replica, other_replica = replica(store), replica(store, written)
    call = SearchCall(
        query="crane harbour",
        options=SearchOptions(project=PROJECT, limit=2, strategy=SearchStrategy.HYBRID),
        auth_scope="t",
        caller_key="t",
        page=SearchPage(offset=0),
    )
    first = await first_replica.search(call)
    later = replace(
        call,
        page=SearchPage(offset=first.next_offset or 0, generation=first.generation, served=first.served_digest),
    )

    from_first = await first_replica.search(later)
    from_other = await other_replica.search(later)

    assert first.served_digest is not None
    assert from_first.ranking_changed is False  # its own ranking, cached
    assert from_other.generation == first.generation
    # Ranked without the lexical leg n1, n0 | n3, ...; with it n1, n3 | n2, n0, ...: n3 would be served twice.
    assert [hit.chunk.chunk_id for hit in first.result.hits] == ["n1#0", "n0#0"]
    assert from_other.ranking_changed is True  # another ranking: its earlier hits are not those served
