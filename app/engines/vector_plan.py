"""Which way a project's vector search reads PostgreSQL: pgvector's HNSW graph or an exact scan. Pure.

All projects share one `chunks` table and one HNSW graph. A search walks the graph with a filtered,
iterative scan and keeps the neighbours that belong to the project, so the smaller the project's share
of the table, the more of the graph it walks for the same neighbours. PostgreSQL's planner does not
price that: in a table of 111,050 chunks it gave a 10,000-chunk project the graph (18.5 ms a search,
recall@50 0.97) where reading the project's own rows and sorting them by distance takes 5.4 ms and is
exact (docs/benchmarks/vector-plan.md). The model below prices both, with this machine's constants:

- the graph visits about `ef_search / share` entries, `share = project_rows / table_rows`, at about
  `HNSW_VISIT_US` each (a heap fetch and the row filter per entry);
- the exact scan computes one distance per project row, at about `EXACT_ROW_US` each.

The exact scan is cheaper when `project_rows * EXACT_ROW_US < ef_search * table_rows / project_rows *
HNSW_VISIT_US`, i.e. when `project_rows ** 2 < table_rows * ef_search * HNSW_VISIT_US / EXACT_ROW_US`.
A project that is the whole table (one tenant) keeps the graph above ~3,600 rows at `ef_search` 100,
as the planner chose; a tenant of a 111,050-chunk table is read exactly up to ~20,000 rows.
"""

from __future__ import annotations

import math
from typing import Final

HNSW_VISIT_US: Final = 20.0
"""Microseconds per graph entry an iterative HNSW scan visits, about: a 10,000-chunk tenant of 111,050 chunks
took 18.5 ms at `ef_search` 100 (17 us x 100 / 0.09), the 100,000-chunk tenant beside it 3.8 ms."""

EXACT_ROW_US: Final = 0.55
"""Microseconds per project row an exact scan spends (`exact_search_sql`: 1,000 rows 0.97 ms, 10,000 rows 5.4 ms)."""


def exact_scan_limit(*, table_rows: float, ef_search: int) -> int:
    """The most rows a project may have and still be read exactly, in a table of `table_rows` rows.

    Counting a project's rows stops here: past it, its exact count does not change the plan.
    """
    return math.isqrt(max(0, math.floor(max(table_rows, 0.0) * ef_search * HNSW_VISIT_US / EXACT_ROW_US)))


def prefers_exact_scan(*, project_rows: int, table_rows: float, ef_search: int) -> bool:
    """Whether an exact scan of the project's rows is cheaper than the HNSW graph (module docstring).

    `table_rows` below `project_rows` (a stale estimate: the table grew since PostgreSQL last counted it)
    is read as `project_rows`: the project is then the whole table, the case most in favour of the graph.
    """
    return project_rows <= exact_scan_limit(table_rows=max(table_rows, float(project_rows)), ef_search=ef_search)
