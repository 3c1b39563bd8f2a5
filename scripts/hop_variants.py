"""The several-hop variants `tune_hops.py` measures: pure re-orderings of one query's cached fused hits.

Each variant takes (query text, main hits, sub-query lookup) and returns document ids best first.
"""

from __future__ import annotations

import itertools
import json
import re
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from app.query.intent import NOT_NAMES
from app.query.vocabulary import STOPWORDS

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from datetime import datetime
    from pathlib import Path

    Lookup = Callable[[str], list["Ranked"]]
    Variant = Callable[[str, list["Ranked"], Lookup], list[str]]


class Ranked(NamedTuple):
    """One fused hit, lean: its document, fused score (higher is better) and event time."""

    document_id: str
    score: float
    event_time: datetime | None


def turn_of(document_id: str) -> tuple[str, int] | None:
    """`conv-26:D3:7` -> (`conv-26:D3`, 7); None for an id that is not a turn."""
    session, _, turn = document_id.rpartition(":")
    return (session, int(turn)) if session and turn.isdigit() else None


@dataclass(frozen=True)
class Turns:
    """Every turn of the corpus by session, so neighbours outside the candidates can be pulled in."""

    by_session: dict[str, set[int]]

    @classmethod
    def read(cls, dataset: Path) -> Turns:
        by_session: dict[str, set[int]] = defaultdict(set)
        with (dataset / "corpus.jsonl").open(encoding="utf-8") as lines:
            for line in lines:
                if line.strip() and (turn := turn_of(json.loads(line)["_id"])) is not None:
                    by_session[turn[0]].add(turn[1])
        return cls(dict(by_session))

    def neighbours(self, document_id: str, window: int) -> list[str]:
        turn = turn_of(document_id)
        if turn is None:
            return []
        session, number = turn
        present = self.by_session.get(session, set())
        return [
            f"{session}:{other}"
            for offset in range(1, window + 1)
            for other in (number - offset, number + offset)
            if other in present
        ]


def ordered(scores: dict[str, float]) -> list[str]:
    return [document for document, _ in sorted(scores.items(), key=lambda item: (-item[1], item[0]))]


# (a) neighbour / session expansion


def share_neighbours(hits: Sequence[Ranked], *, share: float, window: int, turns: Turns) -> list[str]:
    """Each hit gains `share` x the best positive score among its candidate neighbours within `window` turns."""
    return [hit.document_id for hit in shared_scores(hits, share=share, window=window, turns=turns)]


def shared_scores(hits: Sequence[Ranked], *, share: float, window: int, turns: Turns) -> list[Ranked]:
    """`share_neighbours` with the new scores, best first."""
    scores = {hit.document_id: hit.score for hit in hits}
    shared = []
    for hit in hits:
        near = [scores[n] for n in turns.neighbours(hit.document_id, window) if n in scores]
        shared.append(hit._replace(score=hit.score + share * max([0.0, *near])))
    return sorted(shared, key=lambda hit: (-hit.score, hit.document_id))


def share_session(hits: Sequence[Ranked], *, share: float, top: int) -> list[str]:
    """Each hit gains `share` x the best positive score among the other top-`top` hits of its session (event time)."""
    best: dict[object, list[float]] = defaultdict(list)
    for hit in hits[:top]:
        best[hit.event_time].append(hit.score)
    shared = {}
    for hit in hits:
        others = sorted(best.get(hit.event_time, []), reverse=True)
        if hit.score in others:
            others.remove(hit.score)
        shared[hit.document_id] = hit.score + share * max([0.0, *others[:1]])
    return ordered(shared)


def pull_neighbours(hits: Sequence[Ranked], *, top: int, window: int, drop: float, turns: Turns) -> list[str]:
    """The neighbours (within `window` turns) of the top-`top` hits join at their source's score minus `drop`."""
    scores = {hit.document_id: hit.score for hit in hits}
    for hit in hits[:top]:
        for neighbour in turns.neighbours(hit.document_id, window):
            scores[neighbour] = max(scores.get(neighbour, float("-inf")), hit.score - drop)
    return ordered(scores)


def _side_scores(hit: Ranked, scores: dict[str, float], window: int) -> tuple[list[float], list[float]]:
    """The candidate scores of the turns within `window` before and after `hit` (0 where not a candidate)."""
    turn = turn_of(hit.document_id)
    if turn is None:
        return [], []
    session, number = turn
    offsets = range(1, window + 1)
    before = [scores.get(f"{session}:{number - offset}", 0.0) for offset in offsets]
    after = [scores.get(f"{session}:{number + offset}", 0.0) for offset in offsets]
    return before, after


def share_one_sided(hits: Sequence[Ranked], *, back: float, forward: float, window: int) -> list[str]:
    """Round 3: a hit gains `back` x the best earlier neighbour or `forward` x the best later one, the larger."""
    scores = {hit.document_id: hit.score for hit in hits}
    shared = {}
    for hit in hits:
        before, after = _side_scores(hit, scores, window)
        shared[hit.document_id] = hit.score + max(0.0, back * max([0.0, *before]), forward * max([0.0, *after]))
    return ordered(shared)


def share_decayed(hits: Sequence[Ranked], *, share: float, window: int, decay: float) -> list[str]:
    """Round 3: as `share_neighbours`, a neighbour `d` turns away counting `decay ** (d - 1)` of its score."""
    scores = {hit.document_id: hit.score for hit in hits}
    shared = {}
    for hit in hits:
        before, after = _side_scores(hit, scores, window)
        weighted = [decay**index * score for side in (before, after) for index, score in enumerate(side)]
        shared[hit.document_id] = hit.score + share * max([0.0, *weighted])
    return ordered(shared)


def share_summed(hits: Sequence[Ranked], *, share: float, window: int) -> list[str]:
    """Round 3: a hit gains `share` x the sum (not the best) of its neighbours' positive scores."""
    scores = {hit.document_id: hit.score for hit in hits}
    shared = {}
    for hit in hits:
        before, after = _side_scores(hit, scores, window)
        shared[hit.document_id] = hit.score + share * sum(max(0.0, score) for score in (*before, *after))
    return ordered(shared)


# (b) query decomposition


_WORD = re.compile(r"[A-Za-z][\w'\u2019-]*")


def _names(text: str) -> list[str]:
    """The query's capitalised words that read as names (in order, once each)."""
    found = []
    for match in _WORD.finditer(text):
        word = re.sub(r"['\u2019]s?$", "", match.group())
        if word[:1].isupper() and word.lower() not in NOT_NAMES and word not in found:
            found.append(word)
    return found


def by_names(text: str) -> list[str]:
    """One sub-query per name when a question names several: the others (and "and"/"both") taken out."""
    names = _names(text)
    if len(names) < 2:
        return []
    subs = []
    for name in names:
        sub = text
        for other in names:
            if other != name:
                sub = re.sub(rf"\b{re.escape(other)}(['\u2019]s)?\b", " ", sub)
        sub = re.sub(r"\b(and|or|both)\b", " ", sub)
        subs.append(re.sub(r"\s+", " ", sub).strip())
    return subs


def by_conjunctions(text: str) -> list[str]:
    """Clauses split at commas, "and", "or", "both"; each clause lacking the question's names gets them."""
    parts = [part.strip(" ?.!") for part in re.split(r",|;|\band\b|\bor\b|\bboth\b", text)]
    names = _names(text)
    parts = [part for part in parts if any(word not in names for word in content_words(part))]
    if len(parts) < 2:
        return []
    return [" ".join([*(n for n in names if n not in part), part]) for part in parts]


def content_words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text) if w.lower() not in STOPWORDS and w.lower() not in NOT_NAMES]


def by_phrases(text: str) -> list[str]:
    """Runs of content words (split at stop words), each with the question's names: "Melanie pottery kids"."""
    names = _names(text)
    runs: list[list[str]] = [[]]
    for word in _WORD.findall(text):
        bare = re.sub(r"['\u2019]s?$", "", word)
        if word.lower() in STOPWORDS or word.lower() in NOT_NAMES or bare in names:
            if runs[-1]:
                runs.append([])
            continue
        runs[-1].append(word)
    phrases = [" ".join(run) for run in runs if run]
    if len(phrases) < 2:
        return []
    return [" ".join([*names, phrase]) for phrase in phrases]


def decomposers() -> dict[str, Callable[[str], list[str]]]:
    return {"names": by_names, "conjunctions": by_conjunctions, "phrases": by_phrases}


def rrf_merge(main: Sequence[Ranked], subs: Sequence[Sequence[Ranked]], *, k: int, weight: float) -> list[str]:
    """RRF (1-based ranks) of the main list (weight 1) and the sub-query lists (`weight` shared among them)."""
    scores: dict[str, float] = defaultdict(float)
    for rank, hit in enumerate(main, start=1):
        scores[hit.document_id] += 1 / (k + rank)
    for sub in subs:
        for rank, hit in enumerate(sub, start=1):
            scores[hit.document_id] += weight / len(subs) / (k + rank)
    return ordered(scores)


def score_merge(main: Sequence[Ranked], subs: Sequence[Sequence[Ranked]], *, weight: float) -> list[str]:
    """Main fused score + `weight` x the mean of the sub-queries' fused scores (a list's floor where absent)."""
    lists = [main, *subs]
    floors = [min((hit.score for hit in hits), default=0.0) for hits in lists]
    by_list = [{hit.document_id: hit.score for hit in hits} for hits in lists]
    documents = {hit.document_id for hits in lists for hit in hits}
    scores = {}
    for document in documents:
        sub_scores = [by_list[i].get(document, floors[i]) for i in range(1, len(lists))]
        scores[document] = by_list[0].get(document, floors[0]) + weight * sum(sub_scores) / len(subs)
    return ordered(scores)


def interleave(main: Sequence[Ranked], subs: Sequence[Sequence[Ranked]], *, keep: int) -> list[str]:
    """The main list's top `keep`, then one hit of each list in turn (main first), skipping repeats."""
    result = [hit.document_id for hit in main[:keep]]
    seen = set(result)
    cursors = [iter(main[keep:]), *(iter(sub) for sub in subs)]
    while cursors:
        for cursor in list(cursors):
            for hit in cursor:
                if hit.document_id not in seen:
                    seen.add(hit.document_id)
                    result.append(hit.document_id)
                    break
            else:
                cursors.remove(cursor)
    return result


def decomposed(decompose: Callable[[str], list[str]], merge: Callable[..., list[str]], **options: float) -> Variant:
    def apply(text: str, main: list[Ranked], lookup: Lookup) -> list[str]:
        subs = [lookup(sub) for sub in decompose(text)]
        if not subs:
            return [hit.document_id for hit in main]
        return merge(main, subs, **options)

    return apply


def variants(dataset: Path) -> dict[str, Variant]:
    """Every variant measured, the unchanged ranking first."""
    grid: dict[str, Variant] = {"default (unchanged)": lambda _t, main, _l: [hit.document_id for hit in main]}
    return {**grid, **neighbour_variants(Turns.read(dataset)), **decomposition_variants()}


def neighbour_variants(turns: Turns) -> dict[str, Variant]:
    """(a): sharing among candidates, by turn window or session, and pulling neighbours in."""
    grid: dict[str, Variant] = {}
    # round 1, then round 2 refined around round 1's best (the grids exactly as measured)
    shares = [
        *itertools.product((1, 2, 3), (0.05, 0.1, 0.2, 0.3, 0.5)),
        *itertools.product((2, 3, 4), (0.15, 0.25, 0.4)),
    ]
    for window, share in shares:
        grid[f"share neighbours w={window} a={share}"] = lambda _t, main, _l, s=share, w=window: share_neighbours(
            main, share=s, window=w, turns=turns
        )
    for top, share in itertools.product((10, 30), (0.05, 0.1, 0.2, 0.3)):
        grid[f"share session top={top} a={share}"] = lambda _t, main, _l, s=share, n=top: share_session(
            main, share=s, top=n
        )
    pulls = [
        *itertools.product((1, 3, 5), (1, 2), (0.25, 0.5, 1.0, 2.0)),
        *itertools.product((1, 2), (2, 3), (1.5, 2.5, 3.0)),
    ]
    for top, window, drop in pulls:
        grid[f"pull neighbours top={top} w={window} drop={drop}"] = lambda _t, main, _l, n=top, w=window, d=drop: (
            pull_neighbours(main, top=n, window=w, drop=d, turns=turns)
        )
    for (window, share), drop in itertools.product(((2, 0.2), (3, 0.2), (2, 0.3)), (2.0, 2.5)):
        grid[f"share w={window} a={share} + pull top=1 w=2 drop={drop}"] = (
            lambda _t, main, _l, s=share, w=window, d=drop: pull_neighbours(
                shared_scores(main, share=s, window=w, turns=turns), top=1, window=2, drop=d, turns=turns
            )
        )
    grid.update(neighbour_shape_variants(turns))
    return grid


def neighbour_shape_variants(turns: Turns) -> dict[str, Variant]:
    """Round 3 (2026-12-01): other shapes of neighbour sharing around the default (w=2, a=0.4); none beat it."""
    grid: dict[str, Variant] = {}
    for back, forward in itertools.product((0.2, 0.3, 0.4, 0.5, 0.6), repeat=2):
        grid[f"one-sided w=2 back={back} forward={forward}"] = lambda _t, main, _l, b=back, f=forward: share_one_sided(
            main, back=b, forward=f, window=2
        )
    for share, window, decay in itertools.product((0.4, 0.5, 0.6), (2, 3), (0.5, 0.75)):
        grid[f"decayed a={share} w={window} decay={decay}"] = lambda _t, main, _l, a=share, w=window, d=decay: (
            share_decayed(main, share=a, window=w, decay=d)
        )
    for share, window in itertools.product((0.15, 0.2, 0.25, 0.3, 0.4), (1, 2, 3)):
        grid[f"summed a={share} w={window}"] = lambda _t, main, _l, a=share, w=window: share_summed(
            main, share=a, window=w
        )
    for first, second in itertools.product((0.3, 0.4), (0.1, 0.2, 0.3)):
        grid[f"twice a={first} then a={second} w=2"] = lambda _t, main, _l, a=first, b=second: share_neighbours(
            shared_scores(main, share=a, window=2, turns=turns), share=b, window=2, turns=turns
        )
    return grid


def decomposition_variants() -> dict[str, Variant]:
    """(b): each decomposer's sub-query lists fused with the main one by RRF, by score, or interleaved."""
    grid: dict[str, Variant] = {}
    for name, decompose in decomposers().items():
        for k, weight in itertools.product((5, 60), (0.25, 0.5, 1.0)):
            grid[f"decompose {name} rrf k={k} w={weight}"] = decomposed(decompose, rrf_merge, k=k, weight=weight)
        for weight in (0.1, 0.25, 0.5):
            grid[f"decompose {name} score w={weight}"] = decomposed(decompose, score_merge, weight=weight)
        for keep in (3, 5, 7):
            grid[f"decompose {name} interleave keep={keep}"] = decomposed(decompose, interleave, keep=keep)
    return grid
