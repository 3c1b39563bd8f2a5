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
    figure, (latency_axis, recall_axis) = plt.subplots(1, 2, figsize=(11, 4.2))
    for strategy in STRATEGIES:
        for cut, style in (("p50", "-o"), ("p95", "--x")):
            values = [entry["latency"][strategy]["end_to_end_ms"][cut] for entry in sizes]
            latency_axis.plot(chunks, values, style, label=f"{strategy} {cut}")
    latency_axis.set_xscale("log")
    latency_axis.set_xlabel("chunks")
    latency_axis.set_ylabel("ms, HTTP end to end, one client")
    latency_axis.set_title("Query latency (shared, busy 2-core machine)")
    latency_axis.legend(fontsize=7)
    latency_axis.grid(visible=True, alpha=0.3)
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
