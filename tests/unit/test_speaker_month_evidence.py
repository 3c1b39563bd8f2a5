"""The speaker boost for a project's speaker named like a month (May, June): her name, never a month a text dates.

Every LoCoMo-style title is "1:56 pm on 8 May, 2023 | Caroline": matched as a word, a speaker May was named by every
turn of every May session, whoever said it. A month with a day of the month or a year beside it is the month, in a
title (entity boost) and in a turn's text (mention boost), as it is in a query (`is_month_named_by_date`).
"""

from __future__ import annotations

import pytest

from app.domain.models import Chunk, FusedHit
from app.domain.reordering import EvidencePreferences
from app.retrieval.evidence import names_in, prefer_evidence


def turn(chunk_id: str, score: float, *, title: str, text: str = "a talk") -> FusedHit:
    chunk = Chunk(
        chunk_id=chunk_id,
        document_id=f"doc-{chunk_id}",
        project_id="p",
        text=text,
        source=f"{chunk_id}.md",
        level="L0",
        breadcrumb=(title,),
        section_title="",
        position=0,
    )
    return FusedHit(chunk=chunk, score=score, ranks={}, leg_scores={}, contributions={"semantic": score})


@pytest.mark.parametrize(
    "text",
    [
        "1:56 pm on 8 May, 2023 | Caroline",
        "we met on May 8, 2023",
        "since May 2023",
        "on the 8th May",
        "May 8: the picnic",
    ],
)
def test_a_month_a_day_or_year_dates_does_not_name_may(text: str) -> None:
    assert not names_in(text, ("may",))


@pytest.mark.parametrize("text", ["1:56 pm on 8 May, 2023 | May", "I told May about it", "May's painting, 8 May 2023"])
def test_may_written_as_her_name_still_names_her(text: str) -> None:
    assert names_in(text, ("may",))


def test_the_speaker_boost_goes_to_her_turns_only_not_to_every_turn_of_may() -> None:
    hits = [
        turn("caroline", 1.0, title="1:56 pm on 8 May, 2023 | Caroline"),
        turn("may", 0.9, title="1:56 pm on 8 May, 2023 | May"),
        turn("dated", 0.8, title="2:10 pm on 9 June, 2023 | Caroline", text="See you on 8 May, 2023!"),
    ]
    preferences = EvidencePreferences(names=("may",), entity_boost=0.5, mention_boost=0.2)

    boosted = prefer_evidence(hits, preferences)

    assert [hit.chunk_id for hit in boosted] == ["may", "caroline", "dated"]
    assert [set(hit.contributions) - {"semantic"} for hit in boosted] == [{"entity"}, set(), set()]
