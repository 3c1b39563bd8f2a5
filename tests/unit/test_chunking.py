from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from app.ingestion import chunking
from app.ingestion.chunking import (
    ChunkingPolicy,
    chunk_markdown,
    first_heading,
    split_long_text,
)
from app.ingestion.front_matter import split_front_matter

if TYPE_CHECKING:
    from app.domain.models import ChunkDraft


def chunk(text: str, *, title: str = "Doc", max_chars: int = 1000, overlap_chars: int = 0, min_chars: int = 0):
    return chunk_markdown(title=title, text=text, max_chars=max_chars, overlap_chars=overlap_chars, min_chars=min_chars)


def shape(drafts: list[ChunkDraft]) -> list[tuple[str, tuple[str, ...], str, str, int]]:
    return [(d.text, d.breadcrumb, d.section_title, d.level, d.position) for d in drafts]


def test_plain_text_without_headings_is_one_document_level_chunk() -> None:
    drafts = chunk("Just a note about DNS.\nSecond line.", title="Notes")

    assert shape(drafts) == [("Just a note about DNS.\nSecond line.", ("Notes",), "Notes", "L0", 0)]


def test_nested_headings_give_breadcrumbs_levels_and_positions() -> None:
    text = (
        "Preamble.\n"
        "# Kubernetes\n"
        "About k8s.\n"
        "## Port conflicts\n"
        "Use another port.\n"
        "## DNS\n"
        "Check CoreDNS.\n"
        "# Docker\n"
        "About docker.\n"
    )

    drafts = chunk(text, title="Networking")

    assert shape(drafts) == [
        ("Preamble.", ("Networking",), "Networking", "L0", 0),
        ("About k8s.", ("Networking", "Kubernetes"), "Kubernetes", "L1", 1),
        ("Use another port.", ("Networking", "Kubernetes", "Port conflicts"), "Port conflicts", "L2", 2),
        ("Check CoreDNS.", ("Networking", "Kubernetes", "DNS"), "DNS", "L2", 3),
        ("About docker.", ("Networking", "Docker"), "Docker", "L1", 4),
    ]


def test_levels_are_relative_to_the_top_heading_present() -> None:
    drafts = chunk("## Top\nA.\n#### Skipped a level\nB.\n", title="T")

    assert [(d.breadcrumb, d.level) for d in drafts] == [
        (("T", "Top"), "L1"),
        (("T", "Top", "Skipped a level"), "L2"),
    ]


def test_top_heading_equal_to_the_title_is_not_repeated() -> None:
    drafts = chunk("# Port  Forwarding\nIntro.\n## Steps\nRun it.\n", title="port forwarding")

    assert [(d.breadcrumb, d.section_title, d.level) for d in drafts] == [
        (("port forwarding",), "port forwarding", "L0"),
        (("port forwarding", "Steps"), "Steps", "L1"),
    ]


def test_hash_lines_inside_fenced_code_are_not_headings() -> None:
    text = "# Setup\n```bash\n# install it\npip install x\n```\n~~~\n## not a heading either\n~~~\nDone.\n"

    drafts = chunk(text, title="T")

    assert len(drafts) == 1
    assert drafts[0].breadcrumb == ("T", "Setup")
    assert drafts[0].text == "```bash\n# install it\npip install x\n```\n~~~\n## not a heading either\n~~~\nDone."


def test_a_longer_closing_fence_closes_and_a_shorter_one_does_not() -> None:
    text = "````\n```\n# inside\n````\n# Outside\nBody.\n"

    drafts = chunk(text, title="T")

    assert [d.breadcrumb for d in drafts] == [("T",), ("T", "Outside")]
    assert drafts[0].text == "````\n```\n# inside\n````"


def test_unclosed_fence_runs_to_the_end() -> None:
    drafts = chunk("Intro.\n```\n# comment\n", title="T")

    assert shape(drafts) == [("Intro.\n```\n# comment", ("T",), "T", "L0", 0)]


def test_hashtags_and_indented_hashes_are_not_headings() -> None:
    drafts = chunk("#k8s is a tag\n    # indented code\n#\nText.\n", title="T")

    assert len(drafts) == 1
    assert drafts[0].text == "#k8s is a tag\n    # indented code\n#\nText."


def test_closing_hashes_are_removed_from_heading_text() -> None:
    drafts = chunk("## Install ##\nSteps.\n", title="T")

    assert drafts[0].section_title == "Install"


def test_front_matter_is_stripped_and_never_a_heading() -> None:
    text = "---\ntitle: Runbook\ntags: [ops, k8s]\n---\nBody text.\n"

    drafts = chunk(text, title="Runbook")

    assert shape(drafts) == [("Body text.", ("Runbook",), "Runbook", "L0", 0)]


def test_front_matter_fields_are_parsed() -> None:
    text = "---\ntitle: 'Runbook'\ntags: [ops, k8s]\naliases:\n  - rb\n  - \"run book\"\nnested:\n  a: 1\n---\nBody"

    fields, body = split_front_matter(text)

    assert fields == {
        "title": "Runbook",
        "tags": ("ops", "k8s"),
        "aliases": ("rb", "run book"),
    }  # a nested mapping is not read
    assert body == "Body"


def test_a_quoted_flow_list_item_keeps_its_commas() -> None:
    fields, _ = split_front_matter("---\ntags: [\"a,b\", c, 'd, e',]\n---\nBody")

    assert fields == {"tags": ("a,b", "c", "d, e")}


def test_unclosed_front_matter_is_plain_text() -> None:
    fields, body = split_front_matter("---\nnot closed\n")

    assert fields == {}
    assert body == "---\nnot closed\n"


def test_heading_without_body_makes_no_chunk_but_stays_in_breadcrumbs() -> None:
    drafts = chunk("# Empty\n\n## Child\nChild text.\n# Also empty\n", title="T")

    assert shape(drafts) == [("Child text.", ("T", "Empty", "Child"), "Child", "L2", 0)]


def test_document_of_only_headings_keeps_the_headings_as_text() -> None:
    drafts = chunk("# One\n## Two\n", title="T")

    assert shape(drafts) == [("# One\n## Two", ("T",), "T", "L0", 0)]


def test_front_matter_only_gives_no_chunks() -> None:
    assert chunk("---\ntitle: x\n---\n  \n") == []


def test_crlf_line_endings_are_normalised() -> None:
    drafts = chunk("# A\r\nLine one.\r\nLine two.\r\n# B\r\nOther.\r\n", title="T")

    assert shape(drafts) == [
        ("Line one.\nLine two.", ("T", "A"), "A", "L1", 0),
        ("Other.", ("T", "B"), "B", "L1", 1),
    ]


def test_non_ascii_headings_and_text_survive_unchanged() -> None:
    drafts = chunk("# Café ☕\nÜber naïve 🚀 résumé.\n## 東京\n東京は日本の首都です。\n", title="Überblick")

    assert shape(drafts) == [
        ("Über naïve 🚀 résumé.", ("Überblick", "Café ☕"), "Café ☕", "L1", 0),
        ("東京は日本の首都です。", ("Überblick", "Café ☕", "東京"), "東京", "L2", 1),
    ]


def test_empty_title_is_left_out_of_the_breadcrumb() -> None:
    drafts = chunk("Intro.\n# A\nBody.\n", title="  ")

    assert [(d.breadcrumb, d.section_title, d.level) for d in drafts] == [((), "", "L0"), (("A",), "A", "L1")]


def test_long_section_splits_at_sentences_with_overlap() -> None:
    text = "Alpha one two. Beta three four. Gamma five six. Delta seven."

    drafts = chunk(text, max_chars=32, overlap_chars=16)

    assert [d.text for d in drafts] == [
        "Alpha one two. Beta three four.",
        "Beta three four. Gamma five six.",
        "Gamma five six. Delta seven.",
    ]
    assert [d.position for d in drafts] == [0, 1, 2]
    assert {d.breadcrumb for d in drafts} == {("Doc",)}


def test_overlap_never_repeats_a_sentence_longer_than_the_overlap() -> None:
    text = "Alpha one two. Beta three four. Gamma five six."

    drafts = chunk(text, max_chars=32, overlap_chars=10)

    assert [d.text for d in drafts] == ["Alpha one two. Beta three four.", "Gamma five six."]


def test_long_sentence_without_punctuation_splits_between_words() -> None:
    text = " ".join(f"word{i}" for i in range(30))  # word0 .. word29, 5-6 chars each

    drafts = chunk(text, max_chars=40)

    assert all(len(d.text) <= 40 for d in drafts)
    assert " ".join(d.text for d in drafts) == text  # no overlap, no word cut
    assert drafts[0].text == "word0 word1 word2 word3 word4 word5"  # 35 chars; adding " word6" makes 41


def test_word_longer_than_max_is_cut_hard() -> None:
    drafts = chunk("x" * 25 + " tail", max_chars=10)

    assert [d.text for d in drafts] == ["x" * 10, "x" * 10, "xxxxx tail"]


def test_cjk_text_splits_at_full_stops_without_spaces() -> None:
    text = "一二三四。五六七八。九十。"

    drafts = chunk(text, max_chars=10)

    assert [d.text for d in drafts] == ["一二三四。五六七八。", "九十。"]


def test_every_chunk_respects_max_chars_on_messy_input() -> None:
    text = ("Sentence number one is here! " * 20) + ("\n\n" + "z" * 333) + "\n- item\n- item two\n"

    drafts = chunk(text, max_chars=100, overlap_chars=30)

    assert drafts
    assert all(1 <= len(d.text) <= 100 for d in drafts)
    assert [d.position for d in drafts] == list(range(len(drafts)))


def test_tiny_sibling_sections_merge_under_their_parent_keeping_sub_headings() -> None:
    text = "# Parent\n## A\nShort a.\n## B\nShort b.\n"

    drafts = chunk(text, title="T", min_chars=20)

    assert shape(drafts) == [("## A\n\nShort a.\n\n## B\n\nShort b.", ("T", "Parent"), "Parent", "L1", 0)]


def test_tiny_parent_intro_merges_into_its_first_child() -> None:
    text = "# K8s\nIntro.\n## Ports\nA long enough body about ports.\n"

    drafts = chunk(text, title="T", min_chars=20)

    assert shape(drafts) == [
        ("Intro.\n\n## Ports\n\nA long enough body about ports.", ("T", "K8s"), "K8s", "L1", 0),
    ]


def test_tiny_section_does_not_merge_across_parents() -> None:
    text = "# A\n## A1\nShort.\n# B\nShort too.\n"

    drafts = chunk(text, title="T", min_chars=50)

    assert [d.breadcrumb for d in drafts] == [("T", "A", "A1"), ("T", "B")]


def test_tiny_sections_do_not_merge_past_max_chars() -> None:
    text = "# A\n" + "a" * 15 + "\n# B\n" + "b" * 15 + "\n"

    drafts = chunk(text, title="T", max_chars=30, min_chars=20)

    assert [d.text for d in drafts] == ["a" * 15, "b" * 15]


def test_last_tiny_section_merges_into_the_previous_one() -> None:
    text = "# A\nA body that is long enough.\n# B\nTiny.\n"

    drafts = chunk(text, title="T", min_chars=10)

    assert shape(drafts) == [("# A\n\nA body that is long enough.\n\n# B\n\nTiny.", ("T",), "T", "L0", 0)]


def test_chunking_is_deterministic() -> None:
    text = "# A\n" + "Some sentence here. " * 50 + "\n## B\nMore.\n"

    first = chunk(text, max_chars=120, overlap_chars=40, min_chars=10)
    second = chunk(text, max_chars=120, overlap_chars=40, min_chars=10)

    assert first == second


def test_split_long_text_of_blank_text_is_empty() -> None:
    assert split_long_text(" \n ", max_chars=10, overlap_chars=0) == []


def test_first_heading_ignores_front_matter_and_code() -> None:
    text = "---\ntitle: x\n---\n```\n# code\n```\n## Real heading ##\n"

    assert first_heading(text) == "Real heading"
    assert first_heading("no heading") is None


@pytest.mark.parametrize(
    ("max_chars", "overlap_chars", "min_chars"),
    [(0, 0, 0), (100, 100, 0), (100, -1, 0), (100, 10, -1)],
)
def test_impossible_policy_is_rejected(max_chars: int, overlap_chars: int, min_chars: int) -> None:
    with pytest.raises(ValueError, match="must"):
        ChunkingPolicy(max_chars=max_chars, overlap_chars=overlap_chars, min_chars=min_chars)


@pytest.mark.parametrize(
    "text",
    [
        "---\nImportant paragraph about sloths and their habits.\n---\n\nThe rest of the note about capybaras.",
        "---\n\nMeeting notes: the armadillo moved.\n\n---\nAfter the rule.",
        "---\nA chat line\n...\nThe next line.",
        # YAML, but prose: no front matter key.
        "---\nalice: did you fix the INC-48213 outage?\nbob: yes, I flushed the cache.\n---\nThe rest.",
        "---\nNote: the generator room floods every spring, bring waders.\n---\nThe rest.",
    ],
)
def test_a_block_between_rules_that_is_not_front_matter_is_text(text: str) -> None:
    fields, body = split_front_matter(text)
    words = " ".join(draft.text for draft in chunk(text, title="T"))

    assert fields == {}
    assert body == text
    assert all(word in words for word in ("sloths", "armadillo", "chat line", "INC-48213", "waders") if word in text)


def test_front_matter_lists_may_start_at_the_margin_and_the_block_may_be_empty() -> None:
    fields, body = split_front_matter("---\ntitle: x\n# a comment\ntags:\n- a\n- b\n---\nBody")

    assert fields == {"title": "x", "tags": ("a", "b")}
    assert body == "Body"
    assert split_front_matter("---\n---\nBody") == ({}, "Body")


def test_merging_many_small_sections_renders_each_section_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # Each merge rendered its whole group again: 800,000 one-line sections took 32 s of CPU for one request.
    rendered: list[str] = []
    original = chunking._rendered

    def counting(part, breadcrumb):
        rendered.append(part.text)
        return original(part, breadcrumb)

    monkeypatch.setattr(chunking, "_rendered", counting)
    sections = 2_000

    drafts = chunk("# h\nb\n" * sections, title="T")

    assert len(rendered) == sections
    assert sum(draft.text.count("b") for draft in drafts) >= sections


def test_a_fence_indented_four_spaces_is_code_text_and_headings_after_it_count() -> None:
    drafts = chunk(
        "# A\n\nSome text here.\n\n    ```\n    # Fake\n\n## Real\n\nThe real section with a margay.\n", title="T"
    )

    assert [draft.breadcrumb for draft in drafts if "margay" in draft.text] == [("T", "A", "Real")]


def test_a_block_with_a_front_matter_key_is_front_matter_even_beside_prose_keys() -> None:
    text = "---\ntitle: Notes\nalice: meet at noon\n...\nThe rest."

    assert split_front_matter(text) == ({"title": "Notes", "alice": "meet at noon"}, "The rest.")


def test_a_bare_dash_item_is_left_out_without_ending_the_list() -> None:
    # The items after a bare `-` (YAML's null) were dropped: the list ended there.
    fields, body = split_front_matter("---\ntitle: x\ntags:\n- a\n-\n- b\n  - c\n---\nBody")

    assert fields == {"title": "x", "tags": ("a", "b", "c")}
    assert body == "Body"


def test_a_nested_mapping_is_left_out_rather_than_stored_as_an_empty_list() -> None:
    text = "---\ntitle: x\nauthor:\n  name: Ana\n  email: ana@example.org\ndate: 2024-05-01\n---\nBody"

    assert split_front_matter(text) == ({"title": "x", "date": "2024-05-01"}, "Body")


def test_block_scalars_keep_or_fold_their_indented_lines() -> None:
    text = (
        "---\ntitle: x\nsummary: >\n  One folded\n  sentence.\n\n  A second paragraph.\n"
        "description: |-\n  line one\n  line two\ntags: [a]\n---\nBody"
    )

    fields, body = split_front_matter(text)

    assert fields == {
        "title": "x",
        "summary": "One folded sentence.\nA second paragraph.",
        "description": "line one\nline two",
        "tags": ("a",),
    }
    assert body == "Body"
