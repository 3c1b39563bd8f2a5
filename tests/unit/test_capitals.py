"""Where a word's capital says something (`telling_capitals`): inside a sentence of a text not in Title Case."""

from __future__ import annotations

import pytest

from app.domain.capitals import is_title_case, telling_capitals


def telling_words(text: str) -> list[str]:
    return [text[start:].split(maxsplit=1)[0].strip("?.,") for start in sorted(telling_capitals(text))]


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("What did Caroline do May 3?", ["Caroline", "May"]),
        ("Thanks. May I ask what Caroline did?", ["I", "Caroline"]),  # "May" opens the second sentence
        ('She said: "May we go?" and Will nodded', ["Will"]),  # quotes between the colon and the word
        ("Quick one! March went where?", []),
        ("What did Dr. May say?", ["Dr", "May"]),  # a title's full stop ends no sentence
        ("what happened may 3", []),
        ("How May 3 Replicas Fail", []),  # Title Case: the capitals are the style's
        ("WHAT DID MAY SAY", []),
    ],
)
def test_a_capital_tells_only_inside_a_sentence_of_a_text_not_in_title_case(text: str, words: list[str]) -> None:
    assert telling_words(text) == words


@pytest.mark.parametrize(
    ("words", "title_case"),
    [
        (["How", "May", "3", "Replicas", "Fail"], True),
        (["Can", "Dec", "1", "Builds", "Pass", "on", "Arm"], True),  # minor words may stay lowercase
        (["Caroline", "May", "3"], False),  # two capitals are as likely two names
        (["What", "did", "Caroline", "Do"], False),
        (["k8s", "Pod", "Restarts", "Today"], False),
    ],
)
def test_title_case_capitalises_every_word_but_minor_ones(words: list[str], *, title_case: bool) -> None:
    assert is_title_case(words) is title_case
