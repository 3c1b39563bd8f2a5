"""The scale curve as a picture: p50/p95 per strategy and HNSW recall@10 against corpus size."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import matplotlib as mpl

mpl.use("Agg")  # files only, no display
import matplotlib.pyplot as plt

if TYPE_CHECKING:
    from pathlib import Path

STRATEGIES = ("hybrid", "semantic", "lexical")


def plot_scale_curve(json_path: Path) -> Path:
    """Write `<json stem>.png` beside the JSON and return its path."""
    summary = json.loads(json_path.read_text(encoding="utf-8"))
    sizes = summary["sizes"]
    chunks = [entry["chunks"] for entry in sizes]
    figure, (latency_axis, stage_axis, recall_axis) = plt.subplots(1, 3, figsize=(16, 4.4))
    for strategy in STRATEGIES:
        for cut, style in (("p50", "-o"), ("p95", "--x")):
            values = [entry["latency"][strategy]["end_to_end_ms"][cut] for entry in sizes]
            latency_axis.plot(chunks, values, style, label=f"{strategy} {cut}")
    latency_axis.set_xscale("log")
    latency_axis.set_xlabel("chunks")
    latency_axis.set_ylabel("ms, HTTP end to end, one client")
    latency_axis.set_title("Query latency, one client (machine: see the JSON)")
    latency_axis.legend(fontsize=7)
    latency_axis.grid(visible=True, alpha=0.3)
    # The legs' own cost, without the query embedding (the same at every size).
    for strategy, stage, label in (("semantic", "semantic", "vector leg"), ("lexical", "lexical", "lexical leg")):
        values = [entry["latency"][strategy]["stage_p50_ms"][stage] for entry in sizes]
        stage_axis.plot(chunks, values, "-o", label=f"{label} p50 (server stage)")
    stage_axis.plot(
        chunks,
        [entry["latency"]["hybrid"]["stage_p50_ms"]["embed"] for entry in sizes],
        "-o",
        label="query embedding p50",
    )
    stage_axis.set_xscale("log")
    stage_axis.set_xlabel("chunks")
    stage_axis.set_ylabel("ms")
    stage_axis.set_title("Where the time goes (server stages)")
    stage_axis.legend(fontsize=7)
    stage_axis.grid(visible=True, alpha=0.3)
    ef_keys = sorted({key for entry in sizes for key in entry["recall"] if key.startswith(("vector_ef", "halfvec_ef"))})
    for key in ef_keys:
        points = [(entry["chunks"], entry["recall"][key]["recall_at_10"]) for entry in sizes if key in entry["recall"]]
        recall_axis.plot([p[0] for p in points], [p[1] for p in points], "-o", label=key.replace("_ef", " ef_search="))
    recall_axis.axhline(0.95, color="grey", linestyle=":", label="target 0.95")
    recall_axis.set_xscale("log")
    recall_axis.set_xlabel("chunks")
    recall_axis.set_ylabel("HNSW recall@10 vs exact")
    recall_axis.set_title("HNSW recall@10 (m=16, ef_construction=64)")
    recall_axis.legend(fontsize=7)
    recall_axis.grid(visible=True, alpha=0.3)
    figure.tight_layout()
    output = json_path.with_suffix(".png")
    figure.savefig(output, dpi=110)
    plt.close(figure)
    return output


def _mebibytes(value: float) -> str:
    return f"{value / 2**20:,.0f}"


def markdown_table(json_path: Path) -> str:
    """The scale curve's numbers as markdown tables (latency, then build/size/recall)."""
    sizes = json.loads(json_path.read_text(encoding="utf-8"))["sizes"]
    lines = [
        "| chunks | strategy | p50 ms | p95 ms | p99 ms | server stage p50 ms (embed / vector / lexical) |",
        "|---:|---|---:|---:|---:|---|",
    ]
    for entry in sizes:
        for strategy in STRATEGIES:
            latency = entry["latency"][strategy]
            cuts, stages = latency["end_to_end_ms"], latency["stage_p50_ms"]
            lines.append(
                f"| {entry['chunks']:,} | {strategy} | {cuts['p50']} | {cuts['p95']} | {cuts['p99']} | "
                f"{stages['embed']} / {stages['semantic']} / {stages['lexical']} |"
            )
    lines += [
        "",
        (
            "| chunks | COPY s | HNSW build s | HNSW MiB | chunks table+indexes MiB | PG dir MiB | tantivy MiB "
            "| tantivy index s | server RSS MiB | recall@10 ef 40 / 100 / 200 | halfvec recall@10 ef 100, MiB, build s "
            "| exact ms/query |"
        ),
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---:|",
    ]
    for entry in sizes:
        postgres, recall, disk = entry["postgres"], entry["recall"], entry["disk_bytes"]
        sweep = " / ".join(
            str(recall[key]["recall_at_10"]) if key in recall else "-"
            for key in ("vector_ef40", "vector_ef100", "vector_ef200")
        )
        halfvec = (
            f"{recall['halfvec_ef100']['recall_at_10']}, {_mebibytes(recall['halfvec_index_bytes'])}, "
            f"{recall['halfvec_build_s']}"
            if "halfvec_ef100" in recall
            else "-"
        )
        lines.append(
            f"| {entry['chunks']:,} | {postgres['copy_s']} | {postgres['hnsw_build_s']} | "
            f"{_mebibytes(postgres['hnsw_index_bytes'])} | {_mebibytes(postgres['chunks_total_bytes'])} | "
            f"{_mebibytes(disk['postgres'])} | {_mebibytes(disk['tantivy'])} | {entry['lexical_index_s']} | "
            f"{_mebibytes(entry['server_rss_bytes'])} | {sweep} | {halfvec} | {recall['exact_sql_ms_mean']} |"
        )
    return "\n".join(lines) + "\n"
