"""Memory awareness, pure parts: reading a question's intent, evidence boosts, the per-session cap, `as_of`."""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec
import pytest

from app.api.search_requests import SearchRequest
from app.domain.models import Chunk, FusedHit, SearchStrategy
from app.domain.reordering import EvidencePreferences
from app.knobs import SearchKnobs
from app.query.intent import read_intent, title_names
from app.query.optimizer import QueryOptimizer
from app.query.planner import SearchOptions, build_plan
from app.retrieval import evidence
from app.retrieval.diversity import cap_per_session
from app.retrieval.evidence import mentions_date, mentions_date_kept, prefer_evidence

MAY_8: datetime = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
JUNE_1: datetime = datetime(2023, 6, 1, 9, 0, tzinfo=UTC)


def hit(
    chunk_id: str, score: float, *, text: str = "", speaker: str = "", event_time: datetime | None = None
) -> FusedHit:
    chunk = Chunk(
        chunk_id=chunk_id,
        document_id=f"doc-{chunk_id}",
        project_id="p",
        text=text or chunk_id,
        source=f"{chunk_id}.md",
        level="L1",
        breadcrumb=(f"1:56 pm on 8 May, 2023 | {speaker}",) if speaker else (),
        section_title="",
        position=0,
        event_time=event_time,
    )
    return FusedHit(chunk=chunk, score=score, ranks={}, leg_scores={}, contributions={"semantic": score})


def order(hits: list[FusedHit]) -> list[str]:
    return [each.chunk_id for each in hits]


@pytest.mark.parametrize(
    ("query", "asks_when"),
    [
        ("When did Caroline go to the LGBTQ support group?", True),
        ("What year did Melanie start painting?", True),
        ("How long ago was Caroline's 18th birthday?", True),
        ("What did Caroline research?", False),
        ("How do I rotate certificates?", False),
        ("Differentiation is skewed when insulin signaling is suppressed.", False),
    ],
)
def test_when_questions_are_recognised(query: str, *, asks_when: bool) -> None:
    assert read_intent(query).asks_when is asks_when


def test_latest_questions_are_recognised() -> None:
    assert read_intent("What is Melanie's current job?").asks_latest
    assert not read_intent("What was Melanie's first job?").asks_latest


def test_names_are_capitalised_words_that_are_not_question_words_or_months() -> None:
    intent = read_intent("When did Caroline and Melanie's kids visit Paris in May?")

    assert intent.names == ("caroline", "melanie", "paris")


@pytest.mark.parametrize(
    ("query", "names"),
    [
        ("what did Caroline say last Fri", ("caroline",)),
        ("what happened on Tues", ()),
        ("Weds standup notes", ()),
        ("what did we do last Sun", ()),
        ("notes since Mon", ()),
        ("Sun's notes from last Thurs", ("sun",)),  # a weekday's short form that is also a name, as a name
        ("what did Sun say", ("sun",)),
        ("what did Thu and Mon decide", ("thu", "mon")),
    ],
)
def test_a_weekday_said_short_is_a_date_not_a_name(query: str, names: tuple[str, ...]) -> None:
    # As the full weekday names are; "Sun", "Mon" and "Thu" are also people's names, so only beside a date word.
    analysis = QueryOptimizer(clock=lambda: MAY_8).analyze(query)

    assert analysis.names == names


def test_a_name_may_start_with_a_letter_of_any_script() -> None:
    intent = read_intent("What did Élodie tell Seán and Ørsted's Ángel yesterday?")

    assert intent.names == ("elodie", "sean", "orsted", "angel")  # folded as the lexical engines fold words


@pytest.mark.parametrize(("query", "title"), [("What did Jose say?", "José"), ("What did José say?", "Jose")])
def test_a_name_matches_with_or_without_its_accents(query: str, title: str) -> None:
    names = read_intent(query).names

    assert names == ("jose",)
    assert evidence.names_in(f"2023-05-08 | {title}", names)
    assert title_names(f"2023-05-08 | {title}") == {"jose"}


def test_known_names_are_found_in_any_case() -> None:
    assert read_intent("what did mel paint", known_names={"mel"}).names == ("mel",)


@pytest.mark.parametrize(
    ("text", "dated"),
    [
        ("I went to a support group yesterday.", True),
        ("We moved here 4 years ago.", True),
        ("I ran a charity race last Saturday", True),
        ("See you on 12 June!", True),
        ("WE MET LAST WEEKEND, IN MARCH", True),
        ("Back in 1998 it was different", True),
        ("It May Work", False),
        ("That painting is lovely, what inspired it?", False),
    ],
)
def test_date_mentions(text: str, *, dated: bool) -> None:
    assert mentions_date(text) is dated


def test_a_texts_date_is_read_once_and_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    reads: list[str] = []

    def counting(text: str) -> bool:
        reads.append(text)
        return mentions_date(text)

    monkeypatch.setattr(evidence, "mentions_date", counting)
    monkeypatch.setattr(evidence, "_dated_by_text_hash", {})
    texts = ["I went yesterday", "a lovely painting", "I went yesterday", "a lovely painting", "last week"]

    answers = [mentions_date_kept(text) for text in texts]

    assert answers == [True, False, True, False, True]
    assert reads == ["I went yesterday", "a lovely painting", "last week"]


def test_the_kept_answers_are_forgotten_at_once_when_full(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(evidence, "DATED_TEXTS_KEPT", 2)
    monkeypatch.setattr(evidence, "_dated_by_text_hash", {})

    answers = [mentions_date_kept(text) for text in ("today", "a painting", "last week")]

    assert answers == [True, False, True]
    assert evidence._dated_by_text_hash == {hash("last week"): True}


def test_a_when_question_lifts_the_hit_that_carries_a_date_above_a_slightly_better_one() -> None:
    hits = [hit("plain", 2.0, text="the support group was powerful"), hit("dated", 1.0, text="I went yesterday")]

    boosted = prefer_evidence(hits, EvidencePreferences(prefer_dated=True, date_boost=1.5))

    assert order(boosted) == ["dated", "plain"]
    assert boosted[0].score == pytest.approx(2.5)
    assert boosted[0].contributions["date"] == 1.5


def test_a_strong_lead_survives_the_date_boost() -> None:
    hits = [hit("plain", 4.0, text="the support group"), hit("dated", 1.0, text="yesterday")]

    assert order(prefer_evidence(hits, EvidencePreferences(prefer_dated=True, date_boost=1.5))) == ["plain", "dated"]


def test_speaker_and_mention_boosts_match_whole_names_only() -> None:
    hits = [
        hit("other", 1.0, speaker="Melanie", text="I love Carolines' art"),
        hit("said", 0.8, speaker="Caroline", text="a talk"),
        hit("named", 0.7, speaker="Melanie", text="Caroline gave a talk"),
    ]
    preferences = EvidencePreferences(names=("caroline",), entity_boost=0.5, mention_boost=0.2)

    boosted = prefer_evidence(hits, preferences)

    assert order(boosted) == ["said", "other", "named"]
    assert boosted[0].contributions["entity"] == 0.5
    assert "mention" in boosted[2].contributions


def test_recency_prefers_the_newest_dated_hit() -> None:
    hits = [hit("old", 1.0, event_time=MAY_8), hit("new", 0.9, event_time=JUNE_1), hit("undated", 0.95)]

    boosted = prefer_evidence(hits, EvidencePreferences(prefer_recent=True, recency_boost=0.5))

    assert order(boosted) == ["new", "old", "undated"]


def test_no_preferences_leave_the_ranking_unchanged() -> None:
    hits = [hit("a", 1.0, text="yesterday"), hit("b", 2.0)]

    assert prefer_evidence(hits, EvidencePreferences(date_boost=1.5)) == hits  # not a when question


def test_the_session_cap_moves_extra_hits_of_one_session_down_without_dropping_any() -> None:
    hits = [
        hit("s1-a", 3.0, event_time=MAY_8),
        hit("s1-b", 2.9, event_time=MAY_8),
        hit("s1-c", 2.8, event_time=MAY_8),
        hit("s2-a", 1.0, event_time=JUNE_1),
        hit("undated", 0.5),
    ]

    assert order(cap_per_session(hits, 2)) == ["s1-a", "s1-b", "s2-a", "undated", "s1-c"]


def test_the_session_cap_refuses_zero() -> None:
    with pytest.raises(ValueError, match="cap"):
        cap_per_session([], 0)


def test_as_of_resolves_relative_dates_against_the_memory_clock_not_the_server_clock() -> None:
    optimizer = QueryOptimizer(clock=lambda: datetime(2030, 1, 1, tzinfo=UTC))

    analysis = optimizer.analyze("what did we decide last month", now=datetime(2023, 6, 15, tzinfo=UTC))

    assert analysis.event_time_from == datetime(2023, 5, 1, tzinfo=UTC)
    assert analysis.event_time_to == datetime(2023, 6, 1, tzinfo=UTC)


def test_the_plan_asks_for_the_date_boost_only_for_when_questions_fused_by_zscore() -> None:
    optimizer = QueryOptimizer(clock=lambda: MAY_8)
    knobs = SearchKnobs(evidence_speaker_boost=0.0)  # the date boost alone
    options = SearchOptions(project="p")

    when = build_plan(optimizer.analyze("When did Caroline paint a sunrise?"), options, knobs)
    what = build_plan(optimizer.analyze("What did Caroline paint?"), options, knobs)
    lexical = build_plan(
        optimizer.analyze("When did Caroline paint a sunrise?"),
        SearchOptions(project="p", strategy=SearchStrategy.LEXICAL),
        knobs,
    )

    assert when.evidence.prefer_dated
    assert when.evidence.date_boost == knobs.evidence_date_boost
    assert not what.evidence.changes_ranking
    assert not lexical.evidence.changes_ranking

    assert when.session_cap is None


def test_by_default_a_question_naming_a_speaker_asks_for_the_speaker_boost_and_other_names_do_not() -> None:
    analysis = QueryOptimizer().analyze("What did Caroline say about BRCA1?")
    options = SearchOptions(project="p")

    plan = build_plan(analysis, options, SearchKnobs(), common_names={"caroline", "melanie"})

    assert plan.evidence.names == ("caroline",)  # BRCA1 is in no title: it boosts nothing
    assert plan.evidence.entity_boost == SearchKnobs().evidence_speaker_boost > 0
    assert not build_plan(analysis, options, SearchKnobs()).evidence.changes_ranking
    every_name = build_plan(analysis, options, SearchKnobs(semantic_common_name_share=0.0)).evidence
    assert every_name.names == ("caroline", "brca1")


def test_the_search_request_reads_as_of_and_refuses_a_malformed_one() -> None:
    request = msgspec.json.decode(
        b'{"project": "p", "query": "q", "as_of": "2023-06-15T00:00:00Z"}', type=SearchRequest
    )

    assert request.as_of == datetime(2023, 6, 15, tzinfo=UTC)
    with pytest.raises(msgspec.ValidationError, match="as_of"):
        msgspec.json.decode(b'{"project": "p", "query": "q", "as_of": "last tuesday"}', type=SearchRequest)
