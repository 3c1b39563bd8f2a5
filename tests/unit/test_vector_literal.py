"""The text form of a vector sent to pgvector keeps every float32 exactly."""

from __future__ import annotations

import numpy as np

from app.engines.postgres_rows import vector_literal


def test_every_float32_survives_the_text_round_trip() -> None:
    generator = np.random.default_rng(7)
    values = np.concatenate(
        [generator.standard_normal(2000), generator.uniform(-1e-30, 1e-30, 200), [0.0, -0.0, 1.0, 3.4e38]]
    ).astype(np.float32)

    literal = vector_literal(values.tolist())

    parsed = np.array(
        [float(part) for part in literal.removeprefix("[").removesuffix("]").split(",")], dtype=np.float32
    )
    assert np.array_equal(parsed, values)


def test_the_literal_is_a_bracketed_comma_list() -> None:
    assert vector_literal([1.0, 0.5, -0.25]) == "[1,0.5,-0.25]"
    assert vector_literal([]) == "[]"
