"""Build a paragraph-query variant of SciFact in BEIR layout: every query is a whole abstract.

Agents often search with a paragraph; SciFact's claims are one sentence. This variant asks with the
text of an abstract D (no title) and judges relevant the *other* abstracts that support or refute the
same claim as D (SciFact's qrels, same split). D itself stays in the corpus: the query id is D's id,
and `poimen eval` drops a hit whose id equals the query id, so D never counts either way. Abstracts
without a co-judged abstract are not asked.

The corpus file is linked, not copied, and the output folder is named like the source, so an
evaluation data dir that already holds SciFact is reused (the ingest marker matches). Nothing derived
is meant to be committed: write to a temporary folder.

    python scripts/paragraph_queries.py --dataset ../shared/datasets/scifact --output /tmp/para
    poimen eval --dataset /tmp/para/scifact --split train --data-dir /tmp/sci ...
"""

from __future__ import annotations

import argparse
import csv
import json
from collections import defaultdict
from pathlib import Path

SPLITS = ("train", "test")


def co_relevant(qrels_file: Path) -> dict[str, set[str]]:
    """Per abstract, the other abstracts judged relevant to one of its claims."""
    by_claim: dict[str, set[str]] = defaultdict(set)
    with qrels_file.open(encoding="utf-8", newline="") as rows:
        for line_number, row in enumerate(csv.reader(rows, delimiter="\t")):
            if line_number == 0 or len(row) < 3 or int(row[2]) <= 0:
                continue
            by_claim[row[0]].add(row[1])
    others: dict[str, set[str]] = defaultdict(set)
    for documents in by_claim.values():
        for document in documents:
            others[document] |= documents - {document}
    return {document: related for document, related in others.items() if related}


def build(source: Path, output: Path, *, max_query_chars: int | None) -> dict[str, int]:
    """Write the variant under `output/<source name>`; returns the number of queries per split."""
    target = output / source.resolve().name
    (target / "qrels").mkdir(parents=True, exist_ok=True)
    corpus_link = target / "corpus.jsonl"
    if not corpus_link.exists():
        corpus_link.symlink_to((source / "corpus.jsonl").resolve())
    texts: dict[str, str] = {}
    with (source / "corpus.jsonl").open(encoding="utf-8") as corpus:
        for line in corpus:
            record = json.loads(line)
            texts[str(record["_id"])] = " ".join(str(record.get("text", "")).split())
    counts: dict[str, int] = {}
    asked: dict[str, str] = {}
    for split in SPLITS:
        related = co_relevant(source / "qrels" / f"{split}.tsv")
        kept = {
            document: others
            for document, others in sorted(related.items())
            if texts.get(document) and (max_query_chars is None or len(texts[document]) <= max_query_chars)
        }
        with (target / "qrels" / f"{split}.tsv").open("w", encoding="utf-8") as qrels:
            qrels.write("query-id\tcorpus-id\tscore\n")
            for document, others in kept.items():
                asked[document] = texts[document]
                qrels.writelines(f"{document}\t{other}\t1\n" for other in sorted(others))
        counts[split] = len(kept)
    with (target / "queries.jsonl").open("w", encoding="utf-8") as queries:
        queries.writelines(json.dumps({"_id": query_id, "text": text}) + "\n" for query_id, text in asked.items())
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", type=Path, required=True, help="SciFact in BEIR layout")
    parser.add_argument("--output", type=Path, required=True, help="a temporary folder for the variant")
    parser.add_argument(
        "--max-query-chars", type=int, default=None, help="leave out longer abstracts (to compare with a limit)"
    )
    arguments = parser.parse_args()
    counts = build(arguments.dataset, arguments.output, max_query_chars=arguments.max_query_chars)
    print(json.dumps(counts))


if __name__ == "__main__":
    main()
