"""Grouping a batch by token length, so one long text does not make every short one as costly as itself."""

from __future__ import annotations

import pytest

from app.engines.embedder_onnx import PADDING_SLACK, PADDING_SLACK_TOKENS, length_groups


@pytest.mark.parametrize(
    "lengths",
    [[], [7], [12, 12, 12], [250, 9, 11, 10, 240, 64, 9], [3, 300, 4, 5, 120, 121, 122, 60, 30, 15]],
)
def test_every_position_is_in_exactly_one_group_within_the_slack(lengths: list[int]) -> None:
    groups = length_groups(lengths)

    assert sorted(position for group in groups for position in group) == list(range(len(lengths)))
    for group in groups:
        sizes = [lengths[position] for position in group]
        assert sizes == sorted(sizes)
        assert max(sizes) <= min(sizes) * PADDING_SLACK + PADDING_SLACK_TOKENS


def test_short_texts_are_not_grouped_with_a_long_one() -> None:
    groups = length_groups([250, 9, 11, 10, 240])

    assert groups == [[1, 3, 2], [4, 0]]


def test_equal_lengths_share_one_pass_in_their_original_order() -> None:
    assert length_groups([20, 20, 21, 20]) == [[0, 1, 3, 2]]
