"""The soak's samples, its verdicts against the issue's targets, and the report (markdown + plot)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Final

from load_server import machine_line, open_descriptors, postgres_client_connections, rss_bytes, scrape_metrics
from loadgen import markdown_table, percentile, ratio, verdict

if TYPE_CHECKING:
    from pathlib import Path

    from load_server import ServiceUnderTest
    from soak_workload import SoakWorkload

BACKLOG_METRIC: Final = "poimen_lexical_outbox_backlog"
TARGET_RSS_GROWTH: Final = 0.10
# "No growth" read with the noise of what is legitimately in use at a given instant: sockets of the
# client's keep-alive pool (up to 64) come and go with the load, and so do pool checkouts.
DESCRIPTOR_SLACK: Final = 8
CONNECTION_SLACK: Final = 2
TARGET_P95_SPREAD: Final = 1.5  # "p95 flat": the slowest window's p95 at most this times the fastest one's


def sample_service(service: ServiceUnderTest, workload: SoakWorkload, *, elapsed_s: float) -> dict[str, Any]:
    """One sample: the server's process, its PostgreSQL, its outbox and the searches since the last sample."""
    window = workload.take_window()
    return {
        "elapsed_s": round(elapsed_s, 1),
        "rss_mib": round(rss_bytes(service.pid) / 2**20, 1),
        "open_descriptors": open_descriptors(service.pid),
        "postgres_connections": postgres_client_connections(service.data_dir / "postgres"),
        "outbox_backlog": scrape_metrics(service.url).get(BACKLOG_METRIC, math.nan),
        "searches": len(window.latencies_ms),
        "cache_hits": window.cached,
        "search_p95_ms": round(percentile(window.latencies_ms, 0.95), 2),
        "search_errors": sum(count for status, count in window.status_counts.items() if status != 200)
        + window.transport_errors,
    }


def summarize(
    samples: list[dict[str, Any]], verification: dict[str, Any], *, warmup_samples: int
) -> list[dict[str, Any]]:
    """The soak targets, measured from the first sample after warm-up to the last one.

    `samples` ends with three samples taken after the load: when it stopped, once the outbox drained, and
    once the load's client had disconnected (descriptors are judged there: the sockets of requests still in
    flight when an open-loop run stops are not the service's).
    """
    under_load = samples[warmup_samples:-1]  # from the baseline to the end of the load
    baseline, last = under_load[0], samples[-1]
    rss_growth = ratio(last["rss_mib"] - baseline["rss_mib"], baseline["rss_mib"])
    descriptor_growth = last["open_descriptors"] - baseline["open_descriptors"]
    connections = [s["postgres_connections"] for s in samples[warmup_samples:] if s["postgres_connections"] is not None]
    connection_growth = connections[-1] - connections[0] if connections else math.nan
    p95s = [s["search_p95_ms"] for s in under_load[1:] if s["searches"] > 0 and not math.isnan(s["search_p95_ms"])]
    spread = ratio(max(p95s), min(p95s)) if p95s else math.nan
    missing = (
        verification["lost"]
        + verification["stale_revision"]
        + verification["deleted_but_present"]
        + verification["not_lexically_indexed"]
    )
    return [
        {
            "target": f"RSS growth after warm-up < {TARGET_RSS_GROWTH:.0%}",
            "measured": f"{baseline['rss_mib']} -> {last['rss_mib']} MiB ({rss_growth:+.1%})",
            "holds": rss_growth < TARGET_RSS_GROWTH,
        },
        {
            "target": f"no descriptor growth (at most {DESCRIPTOR_SLACK}: keep-alive sockets)",
            "measured": f"{baseline['open_descriptors']} -> {last['open_descriptors']} ({descriptor_growth:+d})",
            "holds": descriptor_growth <= DESCRIPTOR_SLACK,
        },
        {
            "target": f"no PostgreSQL connection growth (at most {CONNECTION_SLACK}: pool checkouts)",
            "measured": f"{connections[0]} -> {connections[-1]}" if connections else "not sampled",
            "holds": None if not connections else connection_growth <= CONNECTION_SLACK,
        },
        {
            "target": f"search p95 flat: slowest window <= {TARGET_P95_SPREAD:g}x the fastest after warm-up",
            "measured": f"{min(p95s)}..{max(p95s)} ms ({spread}x)" if p95s else "no windows",
            "holds": None if not p95s else spread <= TARGET_P95_SPREAD,
        },
        {
            "target": "nothing lost: every acknowledged write present at its revision and indexed, deletes gone",
            "measured": f"{missing} of {verification['documents_checked']} wrong "
            f"({verification['uncertain_left_out']} uncertain left out)",
            "holds": missing == 0,
        },
    ]


def render_plot(samples: list[dict[str, Any]], path: Path) -> Path:
    """RSS, descriptors and connections, outbox backlog and p95 over time, one panel each."""
    import matplotlib as mpl  # noqa: PLC0415 - only the report needs it

    mpl.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415 - after choosing the headless backend

    minutes = [s["elapsed_s"] / 60 for s in samples]
    figure, axes = plt.subplots(2, 2, figsize=(10, 6), sharex=True)
    panels = (
        (axes[0][0], "server RSS (MiB)", ["rss_mib"]),
        (axes[0][1], "open descriptors / PostgreSQL connections", ["open_descriptors", "postgres_connections"]),
        (axes[1][0], "outbox backlog (documents)", ["outbox_backlog"]),
        (axes[1][1], "search p95 per window (ms)", ["search_p95_ms"]),
    )
    for axis, title, keys in panels:
        for key in keys:
            values = [math.nan if s[key] is None else s[key] for s in samples]
            axis.plot(minutes, values, marker="o", label=key)
        axis.set_title(title, fontsize=10)
        axis.set_ylim(bottom=0)
        if len(keys) > 1:
            axis.legend(fontsize=8)
    for axis in axes[1]:
        axis.set_xlabel("minutes")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=80)
    plt.close(figure)
    return path


def render_markdown(summary: dict[str, Any], plot_name: str) -> str:
    """The report: machine, workload, targets with verdicts, samples table, plot."""
    columns = [
        "elapsed_s",
        "rss_mib",
        "open_descriptors",
        "postgres_connections",
        "outbox_backlog",
        "searches",
        "cache_hits",
        "search_p95_ms",
        "search_errors",
    ]
    mix = ", ".join(f"{kind} {share:.0%}" for kind, share in summary["mix"].items())
    operations = ", ".join(
        f"{kind} " + "/".join(f"{outcome} {count}" for outcome, count in outcomes.items())
        for kind, outcomes in summary["operations"].items()
    )
    return "\n".join(
        [
            f"# Soak: {summary['label']}\n",
            f"Command: `{summary['command']}`  ",
            machine_line(summary["machine"]),
            (
                f"Workload: {summary['rate_per_s']:g} operations/s for {summary['duration_s']:g} s, open loop ({mix}); "
                f"{summary['documents_at_start']} SciFact abstracts at start (search_hit repeats {summary.get('cache_hit_texts', 20)} texts "
                f"in a second project of {summary.get('reference_documents', 0)} abstracts that nothing writes to); query cache on. "
                f"The first {summary['warmup_samples']} sample(s) are warm-up; the last three are taken when the load "
                f"stops, once the outbox drained ({summary['outbox_drained_after_s']} s later) and once the load's "
                "client disconnected.\n"
            ),
            f"Operations: {operations}.\n",
            "## Targets\n",
            markdown_table(
                ["target", "measured", "verdict"],
                [[t["target"], t["measured"], verdict(holds=t["holds"])] for t in summary["targets"]],
            ),
            "## Samples\n",
            markdown_table(columns, [[s[c] for c in columns] for s in summary["samples"]]),
            f"![soak samples]({plot_name})\n",
        ]
    )
