"""Replay every evaluation query through the query reader: the dates it reads and whether it asks *when*.

No engines, no model: each LoCoMo question is read by `QueryOptimizer.analyze` against its conversation's
clock (the day after its latest session, as `poimen eval` sends it as `as_of`), each SciFact claim against a
fixed clock (`poimen eval` sends none; a claim reading a date at all is what matters). A LoCoMo question is read
as the service reads it: again with its conversation's speakers (its common title names) where it writes one of
them as a name that a month or modal word spells ("What did May say?"). Every query of
`queries.jsonl` is read, judged or not (1,986 LoCoMo, 1,109 SciFact). For a LoCoMo question whose words give
an event-time range, the replay counts its evidence turns (`queries_meta.jsonl`) whose session lies in it.

    .venv/bin/python scripts/replay_query_dates.py --output /tmp/dates-before.jsonl
    (change the reader)
    .venv/bin/python scripts/replay_query_dates.py --output /tmp/dates-after.jsonl --against /tmp/dates-before.jsonl

With `--against`, every query read differently is printed (old, then new), with the count per data set and
a warning for each one whose range now leaves out evidence it kept.
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from pathlib import Path

from app.evaluation.datasets import load_dataset, read_corpus
from app.evaluation.ingest import conversation_clock
from app.knobs import SearchKnobs
from app.query.optimizer import QueryOptimizer
from app.search.common_names import common_title_words

DATASETS = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"
SCIFACT_CLOCK = datetime(2025, 3, 12, 15, 30, tzinfo=UTC)  # any fixed moment: a claim should read no date


def _jsonl(path: Path) -> list[dict[str, object]]:
    with path.open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


def _locomo_sessions(folder: Path) -> tuple[dict[str, datetime], dict[str, datetime], dict[str, frozenset[str]]]:
    """Per conversation its clock, per turn id its session's moment, per conversation its speakers."""
    dataset = load_dataset(folder, split="test")
    documents = list(read_corpus(dataset))
    turns = {document.document_id: document.event_time for document in documents if document.event_time}
    clocks = {project.removeprefix("eval-locomo-"): moment for project, moment in conversation_clock(documents).items()}
    titles: dict[str, list[str]] = {}
    for document in documents:
        titles.setdefault(document.project_id.removeprefix("eval-locomo-"), []).append(document.title)
    share = SearchKnobs().semantic_common_name_share
    speakers = {group: common_title_words(group_titles, min_share=share) for group, group_titles in titles.items()}
    return clocks, turns, speakers


def _reading(
    optimizer: QueryOptimizer, text: str, now: datetime, speakers: frozenset[str] = frozenset()
) -> dict[str, object]:
    analysis = optimizer.analyze(text, now=now)
    if named := speakers.intersection(analysis.name_candidates):  # as `SearchService` reads it again
        analysis = optimizer.analyze(text, now=now, known_names=named)
    entities = analysis.entities
    return {
        "relative_dates": list(entities.relative_dates),
        "years": list(entities.years),
        "months": list(entities.months),
        "from": analysis.event_time_from.isoformat() if analysis.event_time_from else None,
        "to": analysis.event_time_to.isoformat() if analysis.event_time_to else None,
        "asks_when": analysis.asks_when,
    }


def replay(datasets: Path) -> list[dict[str, object]]:
    """One reading per query of LoCoMo and SciFact, in file order."""
    optimizer = QueryOptimizer()
    rows: list[dict[str, object]] = []
    clocks, turns, speakers = _locomo_sessions(datasets / "locomo")
    meta = {str(record["_id"]): record for record in _jsonl(datasets / "locomo" / "queries_meta.jsonl")}
    for query in _jsonl(datasets / "locomo" / "queries.jsonl"):
        query_id, text = str(query["_id"]), str(query["text"])
        group = str(meta[query_id]["sample_id"])
        row: dict[str, object] = {"dataset": "locomo", "id": query_id, "text": text}
        row |= _reading(optimizer, text, clocks[group], speakers[group])
        if row["from"] is not None or row["to"] is not None:
            evidence = [str(turn) for turn in meta[query_id].get("evidence") or []]  # type: ignore[attr-defined]
            start = datetime.fromisoformat(str(row["from"])) if row["from"] else datetime.min.replace(tzinfo=UTC)
            end = datetime.fromisoformat(str(row["to"])) if row["to"] else datetime.max.replace(tzinfo=UTC)
            row["evidence"] = len(evidence)
            row["evidence_in_range"] = sum(1 for turn in evidence if turn in turns and start <= turns[turn] < end)
        rows.append(row)
    for query in _jsonl(datasets / "scifact" / "queries.jsonl"):
        row = {"dataset": "scifact", "id": str(query["_id"]), "text": str(query["text"])}
        rows.append(row | _reading(optimizer, str(query["text"]), SCIFACT_CLOCK))
    return rows


def compare(rows: list[dict[str, object]], before: list[dict[str, object]]) -> int:
    """Print each query read differently; return how many of them lost evidence they kept."""
    old = {(str(row["dataset"]), str(row["id"])): row for row in before}
    changed = {"locomo": 0, "scifact": 0}
    losses = 0
    for row in rows:
        previous = old.get((str(row["dataset"]), str(row["id"])))
        if previous == row:
            continue
        changed[str(row["dataset"])] += 1
        print(f"{row['dataset']} {row['id']}: {row['text']}")
        print(f"  before: {_summary(previous)}")
        print(f"  after:  {_summary(row)}")
        kept_before = int(previous.get("evidence_in_range", previous.get("evidence", 0))) if previous else 0  # type: ignore[call-overload]
        kept_after = int(row.get("evidence_in_range", row.get("evidence", kept_before)))  # type: ignore[call-overload]
        if "evidence_in_range" in row and kept_after < kept_before:
            losses += 1
            print(f"  LOSES EVIDENCE: {kept_after} of {row['evidence']} turns in range (before: {kept_before})")
    total = {name: sum(1 for row in rows if row["dataset"] == name) for name in changed}
    print(
        f"read differently: LoCoMo {changed['locomo']} of {total['locomo']}, SciFact {changed['scifact']} of {total['scifact']}"
    )
    return losses


def _summary(row: dict[str, object] | None) -> str:
    if row is None:
        return "(absent)"
    keys = ("relative_dates", "years", "months", "from", "to", "asks_when", "evidence_in_range", "evidence")
    return ", ".join(f"{key}={row[key]}" for key in keys if key in row and row[key] not in ([], None))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=Path, default=DATASETS, help="folder holding locomo/ and scifact/")
    parser.add_argument("--output", type=Path, required=True, help="where to write one reading per line")
    parser.add_argument("--against", type=Path, help="an earlier --output to compare with")
    arguments = parser.parse_args()
    rows = replay(arguments.datasets)
    arguments.output.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    if arguments.against is not None:
        losses = compare(rows, _jsonl(arguments.against))
        raise SystemExit(1 if losses else 0)


if __name__ == "__main__":
    main()
