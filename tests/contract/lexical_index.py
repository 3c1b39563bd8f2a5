"""The `LexicalIndex` contract: behaviour every lexical adapter must show (tantivy, OpenSearch, the fake).

Use it by subclassing `LexicalIndexContract` in a `Test...` class and overriding the `index` fixture
with a fresh, empty index per test. Assertions are about behaviour (what matches, what ranks first,
what filters exclude), never exact scores across engines, so engines with different BM25 details all
pass; the one exact comparison is of an engine with itself (a project's scores do not depend on
another project's documents).

The helpers (`make_chunk`, `documents_of`, `index_chunks`, `search_ids`, ...) are importable for
adapter-specific tests.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime, timedelta, timezone
from typing import TYPE_CHECKING

import pytest

from app.domain.errors import EngineUnavailableError
from app.domain.models import Chunk, DocumentChunks, Filters, LexicalQuery
from app.domain.text_forms import lower_as_analyzers

if TYPE_CHECKING:
    from collections.abc import Iterable

    from app.domain.models import ScoredHit
    from app.domain.ports import LexicalIndex

PROJECT = "proj-alpha"
OTHER_PROJECT = "proj-beta"

# Text that looks like query syntax of some engine; each must be searched as plain words.
SYNTAX_LOOKING_QUERIES = (
    "foo:(bar*",
    '"unbalanced quote',
    "'; DROP TABLE chunks; --",
    "title:kubernetes AND (port OR",
    "a~2 b^3 c* ?d",
    "[1 TO 5] {x TO y}",
    "/regex.*/ \\ // \\\\",
    "+must -not && || !bang",
    "NOT",
    "AND OR",
    "😀🔥 🚀",
    "\x00\t\n",
    "field:",
    ":",
    '"',
    "*",
    "(((",
    ")))",
    "-",
)


def make_chunk(
    chunk_id: str,
    text: str,
    *,
    project_id: str = PROJECT,
    document_id: str | None = None,
    source: str = "notes/general.md",
    level: str = "L1",
    breadcrumb: tuple[str, ...] = ("notes",),
    section_title: str = "",
    position: int = 0,
    tags: tuple[str, ...] = (),
    event_time: datetime | None = None,
    chunk_hash: str | None = None,
    context: str = "",
) -> Chunk:
    """A chunk with test defaults; `document_id` defaults to `doc-<chunk_id>` (one chunk per document)."""
    return Chunk(
        chunk_id=chunk_id,
        document_id=document_id if document_id is not None else f"doc-{chunk_id}",
        project_id=project_id,
        text=text,
        source=source,
        level=level,
        breadcrumb=breadcrumb,
        section_title=section_title,
        position=position,
        tags=tags,
        event_time=event_time,
        chunk_hash=chunk_hash if chunk_hash is not None else f"hash-{chunk_id}",
        context=context,
    )


def documents_of(chunks: Iterable[Chunk]) -> list[DocumentChunks]:
    """Group chunks into full per-document chunk sets, in first-seen order."""
    grouped: dict[tuple[str, str], list[Chunk]] = defaultdict(list)
    for chunk in chunks:
        grouped[chunk.project_id, chunk.document_id].append(chunk)
    return [
        DocumentChunks(project_id=project_id, document_id=document_id, chunks=tuple(members))
        for (project_id, document_id), members in grouped.items()
    ]


def deletion_of(project_id: str, document_id: str) -> DocumentChunks:
    """A document whose chunk set is empty: applying it removes the document from the index."""
    return DocumentChunks(project_id=project_id, document_id=document_id, chunks=())


async def index_chunks(index: LexicalIndex, *chunks: Chunk) -> None:
    """Index the chunks, one `replace_documents` batch (each document gets exactly its listed chunks)."""
    await index.replace_documents(documents_of(chunks))


async def search_hits(
    index: LexicalIndex,
    text: str,
    *,
    top_k: int = 10,
    phrases: tuple[str, ...] = (),
    excluded_terms: tuple[str, ...] = (),
    fuzzy: bool = False,
    weigh_repeats: bool = False,
    filters: Filters | None = None,
) -> list[ScoredHit]:
    """Search `PROJECT` (or `filters`) and return the hits."""
    query = LexicalQuery(
        text=text, phrases=phrases, excluded_terms=excluded_terms, fuzzy=fuzzy, weigh_repeats=weigh_repeats
    )
    return await index.search(query, top_k=top_k, filters=filters or Filters(project_id=PROJECT))


async def search_ids(
    index: LexicalIndex,
    text: str,
    *,
    top_k: int = 10,
    phrases: tuple[str, ...] = (),
    excluded_terms: tuple[str, ...] = (),
    fuzzy: bool = False,
    weigh_repeats: bool = False,
    filters: Filters | None = None,
) -> list[str]:
    """Like `search_hits`, returning only the chunk ids, best first."""
    hits = await search_hits(
        index,
        text,
        top_k=top_k,
        phrases=phrases,
        excluded_terms=excluded_terms,
        fuzzy=fuzzy,
        weigh_repeats=weigh_repeats,
        filters=filters,
    )
    return [hit.chunk_id for hit in hits]


class LexicalIndexContract:
    """Behaviour every `LexicalIndex` adapter shows; subclasses provide a fresh empty `index`."""

    @pytest.fixture
    def index(self) -> LexicalIndex:
        raise NotImplementedError

    # --- matching and ranking ------------------------------------------------------------------

    async def test_term_match_ranks_the_matching_chunk_first(self, index: LexicalIndex) -> None:
        await index_chunks(
            index,
            make_chunk("c-forward", "Forward a local port to a kubernetes pod with kubectl port-forward."),
            make_chunk("c-vacuum", "Tune autovacuum thresholds on large postgres tables."),
            make_chunk("c-grafana", "Grafana dashboards show request latency per route."),
            make_chunk("c-pods", "List the pods of a namespace before you restart them."),
        )

        hits = await search_hits(index, "kubectl port forward")

        assert [hit.chunk_id for hit in hits][:1] == ["c-forward"]
        assert "c-vacuum" not in [hit.chunk_id for hit in hits]
        assert "c-grafana" not in [hit.chunk_id for hit in hits]

    async def test_scores_are_positive_and_best_first(self, index: LexicalIndex) -> None:
        await index_chunks(
            index,
            make_chunk("c-many", "replica lag replica lag replica lag on the primary replica"),
            make_chunk("c-one", "a replica can fall behind under heavy write load and long transactions"),
            make_chunk("c-none", "nothing relevant here at all"),
        )

        hits = await search_hits(index, "replica lag")

        assert [hit.chunk_id for hit in hits] == ["c-many", "c-one"]
        scores = [hit.score for hit in hits]
        assert all(score > 0 for score in scores)
        assert scores == sorted(scores, reverse=True)

    async def test_more_query_terms_matched_ranks_higher(self, index: LexicalIndex) -> None:
        await index_chunks(
            index,
            make_chunk("c-both", "rotate the vault token before it expires"),
            make_chunk("c-vault", "vault stores secrets for the cluster services"),
            make_chunk("c-token", "a token is a short string that proves identity"),
        )

        ids = await search_ids(index, "vault token")

        assert ids[0] == "c-both"
        assert set(ids) == {"c-both", "c-vault", "c-token"}

    async def test_stemming_matches_other_forms_of_a_word(self, index: LexicalIndex) -> None:
        await index_chunks(
            index,
            make_chunk("c-running", "The migration job is running on every node."),
            make_chunk("c-servers", "Restart all servers after the upgrade."),
            make_chunk("c-other", "Nothing to see in this chunk."),
        )

        assert await search_ids(index, "run") == ["c-running"]
        assert await search_ids(index, "runs") == ["c-running"]
        assert await search_ids(index, "server") == ["c-servers"]

    async def test_matching_ignores_case(self, index: LexicalIndex) -> None:
        await index_chunks(index, make_chunk("c-1", "PostgreSQL Replication Slots"))

        assert await search_ids(index, "postgresql REPLICATION") == ["c-1"]

    async def test_stop_words_alone_return_nothing(self, index: LexicalIndex) -> None:
        await index_chunks(index, make_chunk("c-1", "the cat is on the mat and it is there"))

        assert await search_ids(index, "the and of is it") == []
        assert await search_ids(index, "") == []
        assert await search_ids(index, "   \n\t ") == []

    async def test_stop_words_do_not_match_by_themselves(self, index: LexicalIndex) -> None:
        await index_chunks(
            index,
            make_chunk("c-deploy", "deploy the service"),
            make_chunk("c-stop", "the and of the and of the"),
        )

        assert await search_ids(index, "the deploy") == ["c-deploy"]

    async def test_unicode_words_match(self, index: LexicalIndex) -> None:
        await index_chunks(
            index,
            make_chunk("c-cafe", "Le café des développeurs ouvre à huit heures."),
            make_chunk("c-other", "Plain ascii text."),
        )

        assert await search_ids(index, "café") == ["c-cafe"]

    async def test_accents_are_folded_both_ways(self, index: LexicalIndex) -> None:
        # People type `zurich` and `resume` for `Zürich` and `résumé`; a Serbian team types `sta` for `šta`.
        await index_chunks(
            index,
            make_chunk("c-accented", "Zoë moved the résumé screening to Zürich; Đoković asked šta je bilo."),
            make_chunk("c-plain", "Chloe keeps the naive Bayes notes in the cafe."),
            make_chunk("c-other", "Plain ascii text."),
        )

        assert await search_ids(index, "zurich resume") == ["c-accented"]
        assert await search_ids(index, "ZOE") == ["c-accented"]
        assert await search_ids(index, "dokovic sta") == ["c-accented"]
        assert await search_ids(index, "Chloé naïve café") == ["c-plain"]
        assert await search_ids(index, "screening", phrases=("resume screening",)) == ["c-accented"]

    async def test_a_capital_sigma_is_found_lowered_letter_by_letter(self, index: LexicalIndex) -> None:
        # Lucene's LowerCaseFilter lowers `ΟΔΟΣ` to `οδοσ`; the query optimizer lowers queries so
        # (`lower_as_analyzers`), where `str.lower`'s `οδος` missed the word typed exactly as written.
        await index_chunks(
            index,
            make_chunk("c-greek", "Στην ΟΔΟΣ Ερμού είναι γεμάτη καταστήματα."),
            make_chunk("c-other", "Plain ascii text."),
        )

        assert await search_ids(index, lower_as_analyzers("ΟΔΟΣ")) == ["c-greek"]
        assert await search_ids(index, "ερμού", phrases=(lower_as_analyzers("ΟΔΟΣ Ερμού"),)) == ["c-greek"]
        assert await search_ids(index, "καταστηματα", excluded_terms=(lower_as_analyzers("ΟΔΟΣ"),)) == []

    async def test_a_tag_with_a_capital_sigma_filters_in_any_case(self, index: LexicalIndex) -> None:
        # OpenSearch's `lowercase` normalizer keys `ΟΔΟΣ` `οδοσ` (letter by letter); the filter sent
        # `str.lower`'s `οδος`, so even the exact spelling found nothing there.
        await index_chunks(
            index,
            make_chunk("c-odos", "street map", tags=("ΟΔΟΣ",)),
            make_chunk("c-untagged", "street names"),
        )

        for spelling in ("ΟΔΟΣ", "Οδοσ", "οδοσ"):
            tagged = Filters(project_id=PROJECT, tags=(spelling,))
            assert await search_ids(index, "street", filters=tagged) == ["c-odos"]

    async def test_a_tag_with_a_dotted_capital_i_filters_in_any_case(self, index: LexicalIndex) -> None:
        # Lucene's LowerCaseFilter lowers `İ` to `i` (Java's simple case mapping): `İstanbul` is keyed
        # `istanbul`, where `str.lower` gave an `i` and a combining dot.
        await index_chunks(
            index,
            make_chunk("c-istanbul", "ferry timetable", tags=("İstanbul",)),
            make_chunk("c-untagged", "ferry prices"),
        )

        for spelling in ("İstanbul", "İSTANBUL", "istanbul"):
            tagged = Filters(project_id=PROJECT, tags=(spelling,))
            assert await search_ids(index, "ferry", filters=tagged) == ["c-istanbul"]

    async def test_a_dotted_capital_i_in_the_text_is_found_as_an_i(self, index: LexicalIndex) -> None:
        # Turkish writes `İ` (U+0130) at the start of words; Lucene's LowerCaseFilter lowers it to `i`, where
        # tantivy's LowerCaser (Rust's `to_lowercase`) gave `i` and a combining dot, so no query found `İstanbul`.
        await index_chunks(
            index,
            make_chunk("c-istanbul", "Ferries leave İstanbul for İZMİR at noon."),
            make_chunk("c-other", "Plain ascii text."),
        )

        assert await search_ids(index, "istanbul") == ["c-istanbul"]
        assert await search_ids(index, lower_as_analyzers("İZMİR")) == ["c-istanbul"]
        assert await search_ids(index, "", phrases=(lower_as_analyzers("İstanbul for İzmir"),)) == ["c-istanbul"]
        assert await search_ids(index, "ferries", excluded_terms=("istanbul",)) == []

    async def test_a_final_sigma_is_found_by_the_capital_and_the_other_way_round(self, index: LexicalIndex) -> None:
        # A heading in capitals (`ΟΔΟΣ`, lowered `οδοσ`) and running text (`οδος`, with a final sigma) are one word.
        await index_chunks(
            index,
            make_chunk("c-capitals", "ΟΔΟΣ ΕΡΜΟΥ, ΑΘΗΝΑ"),  # noqa: RUF001
            make_chunk("c-small", "η οδος ερμου στην αθηνα"),
            make_chunk("c-other", "Plain ascii text."),
        )

        assert sorted(await search_ids(index, "οδος")) == ["c-capitals", "c-small"]
        assert sorted(await search_ids(index, lower_as_analyzers("ΟΔΟΣ"))) == ["c-capitals", "c-small"]
        assert sorted(await search_ids(index, "", phrases=("οδος ερμου",))) == ["c-capitals", "c-small"]
        assert await search_ids(index, "ερμου", excluded_terms=("οδος",)) == []

    async def test_marks_and_letter_forms_left_out_when_typing_are_folded_both_ways(self, index: LexicalIndex) -> None:
        # Arabic harakat and the tatweel, Hebrew points, the Greek tonos and the Russian `ё` are left out by most
        # people typing a query, and written in by others: either way the word is one word.
        await index_chunks(
            index,
            make_chunk("c-arabic", "ذَهَبَ مُحَمَّدٌ إِلَى المَكْتَبَةِ مـــع صديقه"),
            make_chunk("c-hebrew", "שָׁלוֹם לְכָל מִשְׁפָּחָה"),
            make_chunk("c-greek", "Η ΣΥΝΑΝΤΗΣΗ στην Αθήνα"),  # noqa: RUF001
            make_chunk("c-russian", "Ёлка стоит в зале"),
            make_chunk("c-plain", "ذهب علي إلى البيت שלום Αθηνα ελκα елка"),
            make_chunk("c-other", "Plain ascii text."),
        )

        assert await search_ids(index, "محمد") == ["c-arabic"]
        assert await search_ids(index, "المكتبة مع") == ["c-arabic"]  # harakat left out; the tatweel too
        assert set(await search_ids(index, "ذَهَبَ")) == {"c-arabic", "c-plain"}
        assert await search_ids(index, "משפחה") == ["c-hebrew"]
        assert set(await search_ids(index, "שָׁלוֹם")) == {"c-hebrew", "c-plain"}
        assert set(await search_ids(index, "αθηνα")) == {"c-greek", "c-plain"}
        assert await search_ids(index, "συναντηση") == ["c-greek"]
        assert set(await search_ids(index, "ёлка")) == {"c-russian", "c-plain"}
        assert await search_ids(index, "", phrases=("елка стоит",)) == ["c-russian"]

    async def test_format_characters_next_to_or_inside_a_word_do_not_hide_it(self, index: LexicalIndex) -> None:
        # Invisible marks that stay in stored text because they change how it renders: a left-to-right mark after
        # a Latin word in right-to-left text, bidi embeddings around a word, a zero-width joiner pasted into one.
        await index_chunks(
            index,
            make_chunk(
                "c-marked",
                "\u202b\u05e9\u05dc\u05d5\u05dd\u202c Kubernetes\u200e cluster; the micro\u200dservice restarts",
            ),
            make_chunk("c-other", "Plain ascii text."),
        )

        assert await search_ids(index, "kubernetes") == ["c-marked"]
        assert await search_ids(index, "\u05e9\u05dc\u05d5\u05dd") == ["c-marked"]  # shalom
        assert await search_ids(index, "microservice") == ["c-marked"]
        assert await search_ids(index, "", phrases=("kubernetes cluster",)) == ["c-marked"]

    async def test_chinese_and_japanese_characters_are_words(self, index: LexicalIndex) -> None:
        # No spaces between words: each Han and Hiragana character is a term, as Lucene's standard tokenizer has it.
        await index_chunks(
            index,
            make_chunk("c-tokyo", "東京で会議がありました。"),
            make_chunk("c-beijing", "北京的会议很长。"),
            make_chunk("c-katakana", "データベースの移行"),
            make_chunk("c-other", "Plain ascii text."),
        )

        assert await search_ids(index, "東") == ["c-tokyo"]
        assert (await search_ids(index, "東京"))[0] == "c-tokyo"  # 京 is in 北京 too
        assert set(await search_ids(index, "会議")) == {"c-tokyo", "c-beijing"}  # 会 is in both
        assert (await search_ids(index, "会議"))[0] == "c-tokyo"
        assert await search_ids(index, "データベース") == ["c-katakana"]  # a katakana run is one word
        assert await search_ids(index, "北京", phrases=("北京",)) == ["c-beijing"]

    async def test_thai_lao_khmer_and_burmese_words_inside_a_run_are_found(self, index: LexicalIndex) -> None:
        # Written without spaces between words: each letter with its vowel signs and tone marks is a term, as each
        # Han character is, so a word inside a longer run is found, and ranks the chunk holding it first.
        await index_chunks(
            index,
            make_chunk("c-thai", "ฉันชอบกินข้าวผัดกับเพื่อนที่ร้านอาหาร"),
            make_chunk("c-thai-other", "วันนี้ฝนตกหนักมาก"),
            make_chunk("c-lao", "ຂ້ອຍມັກກິນເຂົ້າໜຽວກັບໝູ່"),
            make_chunk("c-khmer", "ខ្ញុំចូលចិត្តញ៉ាំបាយជាមួយមិត្តភក្តិ"),
            make_chunk("c-burmese", "ကျွန်တော်ထမင်းစားတယ်"),
            make_chunk("c-other", "Plain ascii text."),
        )

        assert (await search_ids(index, "ข้าวผัด"))[0] == "c-thai"
        assert (await search_ids(index, "เพื่อน"))[0] == "c-thai"
        assert await search_ids(index, "", phrases=("ข้าวผัด",)) == ["c-thai"]
        assert await search_ids(index, "", phrases=("ผัดข้าว",)) == []  # the same letters in another order
        assert (await search_ids(index, "ເຂົ້າໜຽວ"))[0] == "c-lao"
        assert (await search_ids(index, "បាយ"))[0] == "c-khmer"
        assert (await search_ids(index, "ထမင်း"))[0] == "c-burmese"
        assert await search_ids(index, "", phrases=("ฝนตก",)) == ["c-thai-other"]
        assert "c-thai" not in await search_ids(index, "ร้านอาหาร", excluded_terms=("ข้าวผัด",))

    async def test_a_possessive_finds_the_name(self, index: LexicalIndex) -> None:
        await index_chunks(
            index,
            make_chunk("c-straight", "Caroline's adoption papers arrived."),
            make_chunk("c-curly", "We met at Melanie\u2019s pottery class."),
            make_chunk("c-other", "Plain ascii text."),
        )

        assert await search_ids(index, "caroline") == ["c-straight"]
        assert await search_ids(index, "Melanie") == ["c-curly"]
        assert (await search_ids(index, "Melanie's"))[0] == "c-curly"  # tantivy also matches the other `s`

    async def test_a_title_word_finds_a_chunk_that_never_repeats_it(self, index: LexicalIndex) -> None:
        # The chunker puts the document title and the section heading in the breadcrumb, not the text.
        await index_chunks(
            index,
            make_chunk(
                "c-title",
                "Use the commands below in order.",
                breadcrumb=("Runbooks", "Rotating certificates"),
                section_title="Rotating certificates",
            ),
            make_chunk(
                "c-other",
                "Use the commands below in order.",
                breadcrumb=("Runbooks", "Installing"),
                section_title="Installing",
            ),
        )

        assert await search_ids(index, "certificates") == ["c-title"]

    async def test_breadcrumb_match_counts(self, index: LexicalIndex) -> None:
        await index_chunks(
            index,
            make_chunk("c-crumb", "Steps follow.", breadcrumb=("Runbooks", "Elasticsearch", "Snapshots")),
            make_chunk("c-other", "Steps follow.", breadcrumb=("Runbooks", "Redis")),
        )

        assert await search_ids(index, "snapshots") == ["c-crumb"]

    async def test_a_term_found_only_in_a_tag_finds_the_chunk(self, index: LexicalIndex) -> None:
        # `#networking` plans a tag filter plus the word as a term: the chunk never says "networking".
        await index_chunks(
            index,
            make_chunk("c-tagged", "Open port 8080 on the load balancer.", tags=("networking",)),
            make_chunk("c-untagged", "Open port 8080 on the load balancer.", tags=("kitchen",)),
        )
        tagged = Filters(project_id=PROJECT, tags=("networking",))

        assert await search_ids(index, "networking") == ["c-tagged"]
        assert await search_ids(index, "networking", filters=tagged) == ["c-tagged"]

    async def test_a_term_only_in_the_chunk_context_finds_it_below_a_chunk_saying_it(self, index: LexicalIndex) -> None:
        # A conversational turn answers the question its context (the previous turn) asked.
        await index_chunks(
            index,
            make_chunk("c-answer", "Yes, three of them, all in the back garden.", context="Did you plant apple trees?"),
            make_chunk("c-says", "The apple trees by the road need pruning."),
            make_chunk("c-other", "The garden shed needs a new roof."),
        )

        assert await search_ids(index, "apple trees") == ["c-says", "c-answer"]

    async def test_a_neighbouring_chunks_words_do_not_find_a_chunk(self, index: LexicalIndex) -> None:
        # One document cut in three: each chunk is found by its own words (and the shared breadcrumb),
        # not by what the chunk next to it says (that cost SciFact accuracy; docs/evaluation.md).
        document = "doc-zookeeper"
        await index_chunks(
            index,
            make_chunk("c-first", "Zookeeper keeps a quorum of voters.", document_id=document, position=0),
            make_chunk("c-second", "Restart the leader node last.", document_id=document, position=1),
            make_chunk("c-third", "Check the disk usage weekly.", document_id=document, position=2),
        )

        assert await search_ids(index, "zookeeper quorum") == ["c-first"]
        assert await search_ids(index, "weekly disk") == ["c-third"]

    async def test_an_excluded_term_in_a_neighbour_does_not_exclude_the_chunk(self, index: LexicalIndex) -> None:
        document = "doc-deploy"
        await index_chunks(
            index,
            make_chunk("c-helm", "Deploy the release with a helm chart.", document_id=document, position=0),
            make_chunk("c-kubectl", "Deploy the release with kubectl apply.", document_id=document, position=1),
        )

        assert await search_ids(index, "deploy release", excluded_terms=("helm",)) == ["c-kubectl"]

    async def test_duplicate_query_terms_are_harmless(self, index: LexicalIndex) -> None:
        await index_chunks(index, make_chunk("c-1", "alerting rules"), make_chunk("c-2", "routing rules"))

        assert (await search_ids(index, "alerting alerting alerting"))[:1] == ["c-1"]

    async def test_a_repeated_term_weighs_once_unless_repeats_are_weighed(self, index: LexicalIndex) -> None:
        await index_chunks(index, make_chunk("c-1", "alerting rules"), make_chunk("c-2", "routing rules"))

        once = {hit.chunk_id: hit.score for hit in await search_hits(index, "alerting routing routing")}
        assert once["c-1"] == pytest.approx(once["c-2"])
        # Either order must follow the repeats, so no tie-break can pass this by chance.
        assert (await search_ids(index, "alerting routing routing", weigh_repeats=True))[:1] == ["c-2"]
        assert (await search_ids(index, "routing alerting alerting", weigh_repeats=True))[:1] == ["c-1"]

    async def test_weighing_repeats_scores_a_term_by_how_often_the_query_says_it(self, index: LexicalIndex) -> None:
        await index_chunks(index, make_chunk("c-1", "alerting rules"), make_chunk("c-2", "routing rules"))

        once = (await search_hits(index, "alerting", weigh_repeats=True))[0].score
        thrice = (await search_hits(index, "alerting alerting alerting", weigh_repeats=True))[0].score
        assert thrice == pytest.approx(3 * once, rel=1e-3)

    # --- phrases, exclusions, fuzzy ------------------------------------------------------------

    async def test_phrase_matches_only_adjacent_words(self, index: LexicalIndex) -> None:
        await index_chunks(
            index,
            make_chunk("c-adjacent", "First restart the nginx server, then check the logs."),
            make_chunk("c-apart", "The nginx config lives on the server under /etc."),
            make_chunk("c-reversed", "A server for nginx is not what we need."),
        )

        assert await search_ids(index, "", phrases=("nginx server",)) == ["c-adjacent"]
        assert await search_ids(index, "nginx", phrases=("nginx server",)) == ["c-adjacent"]
        assert set(await search_ids(index, "nginx server")) == {"c-adjacent", "c-apart", "c-reversed"}

    async def test_every_phrase_must_occur(self, index: LexicalIndex) -> None:
        await index_chunks(
            index,
            make_chunk("c-both", "open the load balancer, then drain the node pool"),
            make_chunk("c-one", "open the load balancer settings"),
        )

        assert await search_ids(index, "", phrases=("load balancer", "node pool")) == ["c-both"]

    async def test_excluded_term_removes_a_chunk(self, index: LexicalIndex) -> None:
        await index_chunks(
            index,
            make_chunk("c-helm", "deploy the release with a helm chart"),
            make_chunk("c-kubectl", "deploy the release with kubectl apply"),
        )

        assert await search_ids(index, "deploy release", excluded_terms=("helm",)) == ["c-kubectl"]
        assert set(await search_ids(index, "deploy release")) == {"c-helm", "c-kubectl"}

    async def test_words_joined_by_a_colon_are_found_and_excluded_one_by_one(self, index: LexicalIndex) -> None:
        await index_chunks(
            index,
            make_chunk("c-colon", "the job failed with error:timeout after the deploy"),
            make_chunk("c-disk", "the job failed with a disk full error"),
        )

        assert await search_ids(index, "timeout") == ["c-colon"]
        assert await search_ids(index, "job failed", excluded_terms=("timeout",)) == ["c-disk"]
        assert set(await search_ids(index, "error:timeout")) == {"c-colon", "c-disk"}

    async def test_words_joined_by_a_dot_comma_or_underscore_are_found_and_excluded_one_by_one(
        self, index: LexicalIndex
    ) -> None:
        # OpenSearch's standard tokenizer kept each of these one token (Unicode's word rules join letters or
        # digits across `.`, `,`, `;` and `_`); tantivy and the fake split them, so the engines disagreed.
        await index_chunks(
            index,
            make_chunk("c-dotted", "upgrade node.js on example.com to v2.1 for 1,000 users"),
            make_chunk("c-snake", "raise max_connections in postgresql.conf"),
            make_chunk("c-plain", "upgrade the users' postgresql server"),
        )

        assert await search_ids(index, "node") == ["c-dotted"]
        assert await search_ids(index, "example") == ["c-dotted"]
        assert await search_ids(index, "connections") == ["c-snake"]
        assert await search_ids(index, "conf") == ["c-snake"]
        assert sorted(await search_ids(index, "upgrade", excluded_terms=("js",))) == ["c-plain"]
        assert sorted(await search_ids(index, "postgresql", excluded_terms=("max",))) == ["c-plain"]

    async def test_excluded_terms_of_the_filters_remove_chunks_as_the_query_s_do(self, index: LexicalIndex) -> None:
        await index_chunks(
            index,
            make_chunk("c-helm", "deploy the release with a helm chart"),
            make_chunk("c-kubectl", "deploy the release with kubectl apply"),
            make_chunk("c-tagged", "deploy the release", tags=("helm",)),
        )

        excluded = await search_ids(
            index, "deploy release", filters=Filters(project_id=PROJECT, excluded_terms=("helm charts",))
        )

        assert sorted(excluded) == ["c-kubectl", "c-tagged"]
        assert await search_ids(
            index, "deploy release", filters=Filters(project_id=PROJECT, excluded_terms=("helm",))
        ) == ["c-kubectl"]

    async def test_only_excluded_terms_return_nothing(self, index: LexicalIndex) -> None:
        await index_chunks(index, make_chunk("c-1", "deploy with kubectl"))

        assert await search_ids(index, "", excluded_terms=("helm",)) == []

    async def test_fuzzy_matches_a_misspelling_only_when_asked(self, index: LexicalIndex) -> None:
        await index_chunks(
            index,
            make_chunk("c-k8s", "kubernetes schedules pods onto nodes"),
            make_chunk("c-other", "terraform plans infrastructure changes"),
        )

        assert await search_ids(index, "kubernetse", fuzzy=True) == ["c-k8s"]
        assert await search_ids(index, "kubernetse", fuzzy=False) == []

    async def test_fuzzy_keeps_the_exact_match_first(self, index: LexicalIndex) -> None:
        await index_chunks(
            index,
            make_chunk("c-exact", "the cluster has three nodes"),
            make_chunk("c-near", "the clusters have three nodes"),
            make_chunk("c-typo", "the clustre has three nodes"),
        )

        ids = await search_ids(index, "cluster", fuzzy=True)

        assert set(ids) == {"c-exact", "c-near", "c-typo"}
        assert ids[0] != "c-typo"

    @pytest.mark.parametrize("text", SYNTAX_LOOKING_QUERIES)
    async def test_syntax_looking_text_never_raises(self, index: LexicalIndex, text: str) -> None:
        await index_chunks(index, make_chunk("c-1", "foo bar baz kubernetes port drop table"))

        hits = await search_hits(index, text)
        await search_hits(index, "foo", phrases=(text,))
        await search_hits(index, "foo", excluded_terms=(text,))
        await search_hits(index, text, fuzzy=True)

        assert all(hit.chunk_id == "c-1" for hit in hits)

    async def test_syntax_looking_text_is_searched_as_words(self, index: LexicalIndex) -> None:
        await index_chunks(
            index,
            make_chunk("c-foobar", "foo meets bar in the middle"),
            make_chunk("c-table", "how to drop a table safely"),
            make_chunk("c-other", "nothing in common"),
        )

        assert await search_ids(index, "foo:(bar*") == ["c-foobar"]
        assert await search_ids(index, "'; DROP TABLE") == ["c-table"]
        assert await search_ids(index, '"unbalanced foo') == ["c-foobar"]

    # --- filters ---------------------------------------------------------------------------------

    async def test_project_filter_isolates_projects(self, index: LexicalIndex) -> None:
        await index_chunks(
            index,
            make_chunk("a-1", "shared secret rotation", project_id=PROJECT, document_id="same-doc"),
            make_chunk("b-1", "shared secret rotation", project_id=OTHER_PROJECT, document_id="same-doc"),
        )

        assert await search_ids(index, "secret rotation") == ["a-1"]
        assert await search_ids(index, "secret rotation", filters=Filters(project_id=OTHER_PROJECT)) == ["b-1"]
        assert await search_ids(index, "secret rotation", filters=Filters(project_id="proj-none")) == []

    async def test_per_project_statistics_equal_a_single_project_index(self, index: LexicalIndex) -> None:
        # Exact floats: another project's documents (more of them, longer, sharing the query's terms) must
        # not move this project's BM25 statistics (document count, average field length, document frequency).
        own = [
            make_chunk("a-1", "rotate the vault unseal keys", tags=("vault",), context="keys rotation"),
            make_chunk("a-2", "vault audit log rotation policy for keys"),
            make_chunk("a-3", "postgres backup schedule"),
        ]
        others = [
            make_chunk(
                f"b-{number}",
                f"vault keys rotation {'and more vault words ' * number} entry {number}",
                project_id=OTHER_PROJECT,
                tags=("vault",),
            )
            for number in range(12)
        ]
        queries = [("vault keys rotation", ()), ("unseal", ()), ("audit", ("log rotation",))]

        async def scores() -> list[list[tuple[str, float]]]:
            return [
                [(hit.chunk_id, hit.score) for hit in await search_hits(index, text, phrases=phrases)]
                for text, phrases in queries
            ]

        await index_chunks(index, *own)
        alone = await scores()
        await index_chunks(index, *others)
        beside_another = await scores()
        await index.delete_project(OTHER_PROJECT)
        after_its_deletion = await scores()

        assert [len(found) for found in alone] == [2, 1, 1]
        assert beside_another == alone
        assert after_its_deletion == alone

    async def test_levels_filter_keeps_any_listed_level(self, index: LexicalIndex) -> None:
        await index_chunks(
            index,
            make_chunk("c-l0", "backup policy", level="L0"),
            make_chunk("c-l1", "backup policy", level="L1"),
            make_chunk("c-l2", "backup policy", level="L2"),
        )

        ids = await search_ids(index, "backup", filters=Filters(project_id=PROJECT, levels=("L0", "L2")))

        assert set(ids) == {"c-l0", "c-l2"}

    async def test_tags_filter_requires_every_tag(self, index: LexicalIndex) -> None:
        await index_chunks(
            index,
            make_chunk("c-both", "incident review", tags=("ops", "postmortem")),
            make_chunk("c-ops", "incident review", tags=("ops",)),
            make_chunk("c-none", "incident review"),
        )

        both = await search_ids(index, "incident", filters=Filters(project_id=PROJECT, tags=("ops", "postmortem")))
        ops = await search_ids(index, "incident", filters=Filters(project_id=PROJECT, tags=("ops",)))

        assert both == ["c-both"]
        assert set(ops) == {"c-both", "c-ops"}

    async def test_tags_filter_ignores_case_and_hits_keep_the_tags_as_written(self, index: LexicalIndex) -> None:
        await index_chunks(
            index,
            make_chunk("c-k8s", "rolling restart", tags=("Kubernetes", "SRE")),
            make_chunk("c-other", "rolling restart", tags=("kubernetes-legacy",)),
        )

        lower = await search_hits(index, "restart", filters=Filters(project_id=PROJECT, tags=("kubernetes",)))
        upper = await search_ids(index, "restart", filters=Filters(project_id=PROJECT, tags=("KUBERNETES", "sre")))
        exact = await search_ids(index, "restart", filters=Filters(project_id=PROJECT, tags=("Kubernetes",)))

        assert [hit.chunk.chunk_id for hit in lower] == ["c-k8s"]
        assert lower[0].chunk.tags == ("Kubernetes", "SRE")
        assert upper == exact == ["c-k8s"]

    async def test_source_prefix_filter(self, index: LexicalIndex) -> None:
        await index_chunks(
            index,
            make_chunk("c-pods", "restart procedure", source="runbooks/k8s/pods.md"),
            make_chunk("c-db", "restart procedure", source="runbooks/db.md"),
            make_chunk("c-notes", "restart procedure", source="notes/runbooks/restart.md"),
            make_chunk("c-old", "restart procedure", source="runbooks-old/restart.md"),
        )

        ids = await search_ids(index, "restart", filters=Filters(project_id=PROJECT, source_prefix="runbooks/"))

        assert set(ids) == {"c-pods", "c-db"}

    async def test_source_prefix_is_literal_text(self, index: LexicalIndex) -> None:
        await index_chunks(
            index,
            make_chunk("c-literal", "restart procedure", source="a+b (v2)/x.md"),
            # What `a+b (v2)/` would match as a regular expression or a glob.
            make_chunk("c-regex", "restart procedure", source="aab v2/x.md"),
            make_chunk("c-glob", "restart procedure", source="a+b (v2)x.md"),
        )

        ids = await search_ids(index, "restart", filters=Filters(project_id=PROJECT, source_prefix="a+b (v2)/"))

        assert ids == ["c-literal"]

    async def test_a_source_prefix_as_long_as_a_source_filters_exactly(self, index: LexicalIndex) -> None:
        # A source and a prefix may be 1,024 characters: past what a regular expression or prefix query takes.
        long_source = "東京/" + "s" * 1021
        await index_chunks(
            index,
            *(
                make_chunk(f"c-{number}", "restart procedure", source=long_source[:-1] + character)
                for number, character in enumerate("abs")
            ),
            make_chunk("c-short", "restart procedure", source=long_source[:600]),
        )

        def prefixed(prefix: str) -> Filters:
            return Filters(project_id=PROJECT, source_prefix=prefix)

        assert await search_ids(index, "restart", filters=prefixed(long_source)) == ["c-2"]
        assert await search_ids(index, "restart", top_k=1, filters=prefixed(long_source)) == ["c-2"]
        assert await search_ids(index, "restart", filters=prefixed(long_source[:-1])) == ["c-0", "c-1", "c-2"]
        assert await search_ids(index, "restart", filters=prefixed(long_source[:600])) == [
            "c-0",
            "c-1",
            "c-2",
            "c-short",
        ]

    async def test_event_time_filter_is_inclusive_from_exclusive_to(self, index: LexicalIndex) -> None:
        start = datetime(2025, 1, 1, tzinfo=UTC)
        end = datetime(2026, 1, 1, tzinfo=UTC)
        await index_chunks(
            index,
            make_chunk("c-start", "quarterly report", event_time=start),
            make_chunk("c-mid", "quarterly report", event_time=datetime(2025, 6, 15, 12, tzinfo=UTC)),
            make_chunk("c-end", "quarterly report", event_time=end),
            make_chunk("c-before", "quarterly report", event_time=start - timedelta(milliseconds=1)),
            make_chunk("c-undated", "quarterly report"),
        )

        def window(time_from: datetime | None, time_to: datetime | None) -> Filters:
            return Filters(project_id=PROJECT, event_time_from=time_from, event_time_to=time_to)

        assert set(await search_ids(index, "report", filters=window(start, end))) == {"c-start", "c-mid"}
        assert set(await search_ids(index, "report", filters=window(start, None))) == {"c-start", "c-mid", "c-end"}
        assert set(await search_ids(index, "report", filters=window(None, start))) == {"c-before"}
        assert set(await search_ids(index, "report")) == {"c-start", "c-mid", "c-end", "c-before", "c-undated"}

    async def test_a_range_with_include_undated_keeps_undated_chunks_only(self, index: LexicalIndex) -> None:
        start = datetime(2025, 1, 1, tzinfo=UTC)
        await index_chunks(
            index,
            make_chunk("c-inside", "quarterly report", event_time=start),
            make_chunk("c-before", "quarterly report", event_time=start - timedelta(days=1)),
            make_chunk("c-undated", "quarterly report"),
        )
        window = Filters(
            project_id=PROJECT, event_time_from=start, event_time_to=start + timedelta(days=365), include_undated=True
        )
        since = Filters(project_id=PROJECT, event_time_from=start, include_undated=True)

        assert set(await search_ids(index, "report", filters=window)) == {"c-inside", "c-undated"}
        assert set(await search_ids(index, "report", filters=since)) == {"c-inside", "c-undated"}

    async def test_event_time_filter_compares_instants_across_offsets(self, index: LexicalIndex) -> None:
        moment = datetime(2025, 3, 1, 12, 0, 0, 500_000, tzinfo=UTC)
        plus_two = timezone(timedelta(hours=2))
        await index_chunks(index, make_chunk("c-1", "standup notes", event_time=moment.astimezone(plus_two)))

        inside = Filters(
            project_id=PROJECT,
            event_time_from=(moment - timedelta(milliseconds=100)).astimezone(plus_two),
            event_time_to=moment + timedelta(milliseconds=100),
        )
        after = Filters(project_id=PROJECT, event_time_from=moment + timedelta(milliseconds=100))

        assert await search_ids(index, "standup", filters=inside) == ["c-1"]
        assert await search_ids(index, "standup", filters=after) == []

    async def test_event_time_filter_is_exact_to_the_microsecond(self, index: LexicalIndex) -> None:
        # Within one millisecond: an engine keeping dates to the millisecond must still tell these apart.
        moment = datetime(2025, 3, 1, 12, 0, 0, 500, tzinfo=UTC)
        before_1970 = datetime(1969, 12, 31, 23, 59, 59, 999_500, tzinfo=UTC)
        await index_chunks(
            index,
            make_chunk("c-moment", "standup notes", event_time=moment),
            make_chunk("c-1969", "standup notes", event_time=before_1970),
        )

        one = timedelta(microseconds=1)
        for start, end, expected in [
            (moment, None, ["c-moment"]),
            (moment + one, None, []),
            (None, moment, ["c-1969"]),
            (None, moment + one, ["c-1969", "c-moment"]),
            (before_1970 + one, moment, []),
            (before_1970, before_1970 + one, ["c-1969"]),
            (before_1970 - one, before_1970, []),
        ]:
            filters = Filters(project_id=PROJECT, event_time_from=start, event_time_to=end)
            assert sorted(await search_ids(index, "standup", filters=filters)) == expected, (start, end)

    async def test_a_window_within_a_millisecond_still_fills_top_k(self, index: LexicalIndex) -> None:
        start = datetime(2025, 3, 1, 12, 0, 0, 400, tzinfo=UTC)
        await index_chunks(
            index,
            *(
                make_chunk(f"c-{number}", "standup notes", event_time=start + timedelta(microseconds=number * 100))
                for number in range(8)
            ),
        )
        filters = Filters(project_id=PROJECT, event_time_from=start + timedelta(microseconds=250))

        assert len(await search_ids(index, "standup", top_k=3, filters=filters)) == 3
        assert sorted(await search_ids(index, "standup", top_k=10, filters=filters)) == [f"c-{n}" for n in range(3, 8)]

    async def test_chunk_ids_filter_limits_to_those_chunks(self, index: LexicalIndex) -> None:
        await index_chunks(
            index,
            make_chunk("c-1", "disk pressure eviction"),
            make_chunk("c-2", "disk pressure eviction"),
            make_chunk("c-3", "disk pressure eviction"),
        )

        subset = await search_ids(index, "disk", filters=Filters(project_id=PROJECT, chunk_ids=("c-1", "c-3", "c-9")))
        none = await search_ids(index, "disk", filters=Filters(project_id=PROJECT, chunk_ids=()))

        assert set(subset) == {"c-1", "c-3"}
        assert none == []

    async def test_filters_combine(self, index: LexicalIndex) -> None:
        when = datetime(2025, 5, 5, tzinfo=UTC)
        await index_chunks(
            index,
            make_chunk(
                "c-fit", "cache warmup", level="L1", tags=("perf",), source="runbooks/cache.md", event_time=when
            ),
            make_chunk(
                "c-level", "cache warmup", level="L3", tags=("perf",), source="runbooks/cache.md", event_time=when
            ),
            make_chunk("c-tag", "cache warmup", level="L1", source="runbooks/cache.md", event_time=when),
            make_chunk("c-src", "cache warmup", level="L1", tags=("perf",), source="notes/cache.md", event_time=when),
        )
        filters = Filters(
            project_id=PROJECT,
            levels=("L1",),
            tags=("perf",),
            source_prefix="runbooks/",
            event_time_from=when - timedelta(days=1),
            event_time_to=when + timedelta(days=1),
        )

        assert await search_ids(index, "cache", filters=filters) == ["c-fit"]

    async def test_filters_do_not_reorder_hits(self, index: LexicalIndex) -> None:
        await index_chunks(
            index,
            make_chunk("c-strong", "quota quota quota limits", tags=("keep",)),
            make_chunk("c-weak", "quota limits for the storage buckets of every team", tags=("keep",)),
            make_chunk("c-dropped", "quota quota", tags=("drop",)),
        )

        unfiltered = [hit for hit in await search_hits(index, "quota") if hit.chunk_id != "c-dropped"]
        filtered = await search_hits(index, "quota", filters=Filters(project_id=PROJECT, tags=("keep",)))

        assert [hit.chunk_id for hit in filtered] == [hit.chunk_id for hit in unfiltered] == ["c-strong", "c-weak"]
        assert [hit.score for hit in filtered] == pytest.approx([hit.score for hit in unfiltered])

    async def test_top_k_is_respected(self, index: LexicalIndex) -> None:
        await index_chunks(index, *(make_chunk(f"c-{number}", f"log rotation step {number}") for number in range(6)))

        assert len(await search_ids(index, "rotation", top_k=2)) == 2
        assert len(await search_ids(index, "rotation", top_k=50)) == 6
        assert await search_ids(index, "rotation", top_k=0) == []

    # --- hits carry the whole chunk ------------------------------------------------------------

    async def test_hits_carry_every_chunk_field(self, index: LexicalIndex) -> None:
        chunk = make_chunk(
            "c-full",
            "Failover: promote the standby, then repoint the write endpoint.",
            document_id="doc-failover",
            source="runbooks/postgres/failover.md",
            level="L2",
            breadcrumb=("Runbooks", "PostgreSQL", "Failover — manual"),
            section_title="Manual failover",
            position=7,
            tags=("postgres", "ha"),
            event_time=datetime(2025, 2, 3, 4, 5, 6, tzinfo=timezone(timedelta(hours=-5))),
            chunk_hash="ab" * 32,
        )
        await index_chunks(index, chunk)

        hits = await search_hits(index, "promote standby")

        assert len(hits) == 1
        found = hits[0].chunk
        assert found == chunk
        assert found.breadcrumb == ("Runbooks", "PostgreSQL", "Failover — manual")
        assert isinstance(found.breadcrumb, tuple)
        assert isinstance(found.tags, tuple)
        assert found.event_time is not None
        assert found.event_time.tzinfo is not None
        assert found.event_time == chunk.event_time

    async def test_undated_chunk_round_trips_without_event_time(self, index: LexicalIndex) -> None:
        chunk = make_chunk("c-undated", "plain undated note", tags=(), breadcrumb=())
        await index_chunks(index, chunk)

        hits = await search_hits(index, "undated")

        assert [hit.chunk for hit in hits] == [chunk]

    # --- writes ----------------------------------------------------------------------------------

    async def test_replace_documents_replaces_exactly_that_documents_chunks(self, index: LexicalIndex) -> None:
        await index_chunks(
            index,
            make_chunk("d1-a", "alpha release notes", document_id="d1", position=0),
            make_chunk("d1-b", "alpha migration notes", document_id="d1", position=1),
            make_chunk("d2-a", "alpha onboarding notes", document_id="d2"),
        )

        await index_chunks(index, make_chunk("d1-c", "alpha rewritten notes", document_id="d1"))

        assert set(await search_ids(index, "alpha notes")) == {"d1-c", "d2-a"}

    async def test_replace_documents_is_idempotent(self, index: LexicalIndex) -> None:
        batch = documents_of(
            [
                make_chunk("d1-a", "beta feature flag", document_id="d1", position=0),
                make_chunk("d1-b", "beta feature rollout", document_id="d1", position=1),
                make_chunk("d2-a", "beta feature removal", document_id="d2"),
            ]
        )

        await index.replace_documents(batch)
        first = await search_ids(index, "beta feature")
        await index.replace_documents(batch)
        second = await search_ids(index, "beta feature")

        # Scores may drift: engines count deleted documents in BM25 statistics until segments merge.
        assert sorted(second) == sorted(first) == ["d1-a", "d1-b", "d2-a"]

    async def test_a_document_id_of_256_wide_characters_is_indexed_replaced_and_deleted(
        self, index: LexicalIndex
    ) -> None:
        long_id = "\u6771" * 256  # 768 bytes of UTF-8: OpenSearch refuses an `_id` over 512
        written = [
            DocumentChunks(
                project_id=PROJECT,
                document_id=long_id,
                chunks=tuple(make_chunk(f"{long_id}#{number}", text, document_id=long_id) for text in texts),
                outbox_version=version,
            )
            for version, number, texts in ((1, 0, ("kingfisher nest",)), (2, 1, ("heron nest",)), (3, 2, ()))
        ]

        await index.replace_documents(written[:1])
        first = await search_ids(index, "kingfisher")
        await index.replace_documents(written[1:2])
        replaced = (await search_ids(index, "kingfisher"), await search_ids(index, "heron"))
        await index.replace_documents(written[2:])

        assert first == [f"{long_id}#0"]
        assert replaced == ([], [f"{long_id}#1"])
        assert await search_ids(index, "heron nest") == []

    async def test_empty_chunk_set_deletes_the_document(self, index: LexicalIndex) -> None:
        await index_chunks(
            index,
            make_chunk("d1-a", "gamma cleanup", document_id="d1"),
            make_chunk("d2-a", "gamma cleanup", document_id="d2"),
        )

        await index.replace_documents([deletion_of(PROJECT, "d1")])

        assert await search_ids(index, "gamma") == ["d2-a"]

    async def test_deleting_a_document_leaves_the_same_id_in_another_project(self, index: LexicalIndex) -> None:
        await index_chunks(
            index,
            make_chunk("a-1", "delta runbook", document_id="shared-id"),
            make_chunk("b-1", "delta runbook", project_id=OTHER_PROJECT, document_id="shared-id"),
        )

        await index.replace_documents([deletion_of(PROJECT, "shared-id")])

        assert await search_ids(index, "delta") == []
        assert await search_ids(index, "delta", filters=Filters(project_id=OTHER_PROJECT)) == ["b-1"]

    async def test_deleting_an_unknown_document_is_harmless(self, index: LexicalIndex) -> None:
        await index_chunks(index, make_chunk("c-1", "epsilon"))

        await index.replace_documents([deletion_of(PROJECT, "never-indexed")])
        await index.replace_documents([])

        assert await search_ids(index, "epsilon") == ["c-1"]

    async def test_one_batch_writes_many_documents(self, index: LexicalIndex) -> None:
        chunks = [
            make_chunk(f"c-{number}", f"zeta item {number}", document_id=f"d-{number % 3}") for number in range(9)
        ]

        await index_chunks(index, *chunks)

        assert len(await search_ids(index, "zeta", top_k=100)) == 9

    async def test_delete_project_removes_only_that_project(self, index: LexicalIndex) -> None:
        await index_chunks(
            index,
            make_chunk("a-1", "eta service map", document_id="d1"),
            make_chunk("a-2", "eta service map", document_id="d2"),
            make_chunk("b-1", "eta service map", project_id=OTHER_PROJECT),
        )

        await index.delete_project(PROJECT)

        assert await search_ids(index, "eta service") == []
        assert await search_ids(index, "eta service", filters=Filters(project_id=OTHER_PROJECT)) == ["b-1"]
        await index.delete_project("proj-never-seen")

    async def test_project_can_be_reindexed_after_delete(self, index: LexicalIndex) -> None:
        chunk = make_chunk("a-1", "theta rebuild")
        await index_chunks(index, chunk)
        await index.delete_project(PROJECT)

        await index_chunks(index, chunk)

        assert await search_ids(index, "theta") == ["a-1"]

    async def test_ping_answers(self, index: LexicalIndex) -> None:
        await index.ping()


async def assert_unavailable(index: LexicalIndex) -> None:
    """Every port call raises `EngineUnavailableError` naming the adapter (e.g. after `close()`)."""
    with pytest.raises(EngineUnavailableError) as searched:
        await search_hits(index, "anything")
    with pytest.raises(EngineUnavailableError):
        await index_chunks(index, make_chunk("c-late", "late write"))
    with pytest.raises(EngineUnavailableError):
        await index.delete_project(PROJECT)
    with pytest.raises(EngineUnavailableError):
        await index.ping()
    assert searched.value.engine == index.name


class Holdings:
    """Which projects PostgreSQL holds a document of, as the wiring asks the store."""

    def __init__(self, *project_ids: str) -> None:
        self.project_ids = set(project_ids)

    async def holds(self, project_id: str) -> bool:
        return project_id in self.project_ids

    async def listed(self) -> list[str]:
        return sorted(self.project_ids)
