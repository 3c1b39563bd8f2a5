"""The plan choice of the vector leg: exact scan or HNSW graph, from a project's rows and its table's."""

from __future__ import annotations

import pytest

from app.engines.vector_plan import exact_scan_limit, prefers_exact_scan


@pytest.mark.parametrize(
    ("project_rows", "table_rows", "exact"),
    [
        (10_000, 111_050, True),  # the mid-sized tenant the planner sent to the graph (18.5 ms, recall 0.97)
        (100_000, 111_050, False),  # the large tenant beside it: the graph (3.8 ms; exact 90 ms)
        (1_000, 111_050, True),
        (50, 111_050, True),
        (10_000, 10_000, False),  # one tenant of 10,000 chunks: the graph, as the scale curve measured
        (1_951, 1_951, True),  # the load benchmark's one project: exact, as the planner chose too
        (1_000_000, 1_000_000, False),
        (50_000, 1_000_000, True),
    ],
)
def test_the_exact_scan_serves_projects_small_for_their_share_of_the_table(
    project_rows: int, table_rows: int, exact: bool
) -> None:
    assert prefers_exact_scan(project_rows=project_rows, table_rows=table_rows, ef_search=100) is exact


def test_a_larger_ef_search_makes_the_graph_dearer() -> None:
    assert not prefers_exact_scan(project_rows=30_000, table_rows=111_050, ef_search=100)
    assert prefers_exact_scan(project_rows=30_000, table_rows=111_050, ef_search=400)


def test_a_stale_table_estimate_below_the_project_reads_as_the_whole_table() -> None:
    # Before PostgreSQL's first ANALYZE the estimate is 0: the project is then all the table holds.
    assert prefers_exact_scan(project_rows=2_000, table_rows=0, ef_search=100)
    assert not prefers_exact_scan(project_rows=20_000, table_rows=0, ef_search=100)


def test_the_count_limit_is_the_largest_project_still_read_exactly() -> None:
    limit = exact_scan_limit(table_rows=111_050, ef_search=100)

    assert prefers_exact_scan(project_rows=limit, table_rows=111_050, ef_search=100)
    assert not prefers_exact_scan(project_rows=limit + 1, table_rows=111_050, ef_search=100)
    assert exact_scan_limit(table_rows=-1.0, ef_search=100) == 0
