"""build_plan: request options over routing over defaults, entity filters, validation."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from app.config import Settings
from app.domain.errors import InvalidQueryError
from app.domain.models import LEXICAL_LEG, SEMANTIC_LEG, FusionMethod, SearchStrategy
from app.knobs import QUERY_MAX_CHARS_CEILING, SearchKnobs
from app.query.optimizer import QueryOptimizer
from app.query.planner import SearchOptions, build_plan, unused_options
from app.query.validation import validate_query_text

NOW = datetime(2025, 3, 12, 15, 30, tzinfo=UTC)
OPTIMIZER = QueryOptimizer(clock=lambda: NOW)
ALL_STRATEGIES = "hybrid,semantic,lexical,cascading"


def knobs(**values) -> SearchKnobs:
    """Knobs for these tests: RRF k=60, semantic weight 0.6, routing off and to every strategy, unless given."""
    base = {
        "ranking_algorithm": "rrf",
        "rrf_k_constant": 60,
        "hybrid_semantic_weight": 0.6,
        "query_optimization_enabled": False,
        "query_routing_strategies": ALL_STRATEGIES,
    }
    return SearchKnobs(**{**base, **values})


ROUTED = knobs(query_optimization_enabled=True)


def plan_for(query: str, defaults: SearchKnobs = ROUTED, **options):
    return build_plan(
        OPTIMIZER.analyze(query), SearchOptions(project=options.pop("project", "demo"), **options), defaults
    )


# --- strategy ------------------------------------------------------------------------------------


def test_routing_enabled_follows_the_optimizer() -> None:
    plan = plan_for("#networking @devops")

    assert plan.strategy is SearchStrategy.LEXICAL
    assert plan.strategy_confidence == 0.85


def test_routing_disabled_uses_the_configured_strategy() -> None:
    plan = plan_for("#networking @devops", knobs(search_strategy=SearchStrategy.SEMANTIC))

    assert plan.strategy is SearchStrategy.SEMANTIC
    assert plan.strategy_confidence == 1.0


def test_explicit_strategy_beats_routing() -> None:
    plan = plan_for("#networking @devops", strategy=SearchStrategy.HYBRID)

    assert plan.strategy is SearchStrategy.HYBRID
    assert plan.strategy_confidence == 1.0


# --- texts, limits, fusion -----------------------------------------------------------------------


def test_plan_carries_the_optimizer_texts_and_defaults() -> None:
    plan = plan_for("How do I deploy to K8s?")

    assert plan.semantic_text == "how do i deploy to kubernetes?"
    assert plan.lexical_query.text == "deploy k8s kubernetes"
    assert plan.filters.project_id == "demo"
    assert (plan.limit, plan.semantic_retrieve_k, plan.lexical_retrieve_k, plan.cascading_multiplier) == (10, 50, 50, 4)
    assert (plan.lexical_timeout_s, plan.semantic_timeout_s) == (2.0, 5.0)
    assert plan.max_chunks_per_document is None
    assert plan.min_score is None


def test_request_limit_and_retrieve_k_apply_and_retrieve_k_covers_the_limit() -> None:
    assert plan_for("kubernetes pods memory", limit=5).limit == 5
    assert plan_for("kubernetes pods memory", limit=80).semantic_retrieve_k == 80
    assert plan_for("kubernetes pods memory", retrieve_k=200).lexical_retrieve_k == 200


def test_fuzzy_comes_from_defaults_unless_the_request_says() -> None:
    assert plan_for("kubernetes pods memory", knobs(lexical_fuzziness=True)).lexical_query.fuzzy
    assert not plan_for("kubernetes pods memory", knobs(lexical_fuzziness=True), fuzzy=False).lexical_query.fuzzy


def test_plain_rrf_is_unweighted_by_default() -> None:
    plan = plan_for("kubernetes pods memory")

    assert plan.fusion.method is FusionMethod.RRF
    assert plan.fusion.rrf_k == 60
    assert dict(plan.fusion.weights) == {}


def test_weighted_fusion_gets_the_default_weights() -> None:
    plan = plan_for("kubernetes pods memory", fusion_method=FusionMethod.WEIGHTED)

    assert dict(plan.fusion.weights) == pytest.approx({SEMANTIC_LEG: 0.6, LEXICAL_LEG: 0.4})


def test_one_given_weight_sets_the_other_to_its_complement() -> None:
    plan = plan_for("kubernetes pods memory", semantic_weight=0.3, rrf_k=20)

    assert dict(plan.fusion.weights) == pytest.approx({SEMANTIC_LEG: 0.3, LEXICAL_LEG: 0.7})
    assert plan.fusion.rrf_k == 20
    assert dict(plan_for("kubernetes pods", lexical_weight=0.25).fusion.weights) == pytest.approx(
        {SEMANTIC_LEG: 0.75, LEXICAL_LEG: 0.25}
    )


@pytest.mark.parametrize("strategy", [SearchStrategy.LEXICAL, SearchStrategy.SEMANTIC, SearchStrategy.CASCADING])
def test_a_strategy_asked_for_that_fuses_nothing_refuses_fusion_options(strategy: SearchStrategy) -> None:
    with pytest.raises(InvalidQueryError) as error:
        plan_for("kubernetes pods", strategy=strategy, lexical_weight=0.3)

    assert error.value.field == "weights.lexical"  # as the request spells it
    assert f"strategy {strategy.value}" in error.value.message


def test_rrf_k_beside_a_fusion_asked_for_other_than_rrf_is_refused() -> None:
    with pytest.raises(InvalidQueryError) as asked:
        plan_for("kubernetes pods", fusion_method=FusionMethod.ZSCORE, rrf_k=20)

    assert asked.value.field == "rrf_k"
    assert "fusion zscore" in asked.value.message


def test_rrf_k_the_knobs_fusion_does_not_read_is_unused_not_refused() -> None:
    # RANKING_ALGORITHM may come from a flag that differs per request: the same request must not flip to a 400.
    options = SearchOptions(project="demo", strategy=SearchStrategy.HYBRID, rrf_k=20)
    plan = build_plan(OPTIMIZER.analyze("kubernetes pods"), options, knobs(ranking_algorithm="weighted"))
    rrf = build_plan(OPTIMIZER.analyze("kubernetes pods"), options, knobs(ranking_algorithm="rrf"))

    assert plan.fusion.method is FusionMethod.WEIGHTED
    assert plan.fusion.rrf_k == 60  # the knobs', not the request's 20: it does not shape the plan (nor its cache key)
    assert unused_options(options, plan) == ("rrf_k",)
    assert (rrf.fusion.rrf_k, unused_options(options, rrf)) == (20, ())


def test_routing_to_a_strategy_that_fuses_nothing_leaves_the_fusion_options_unused() -> None:
    options = {"fusion_method": FusionMethod.WEIGHTED, "semantic_weight": 0.9}

    routed = plan_for("fix port 2024", **options)

    assert routed.strategy is SearchStrategy.CASCADING
    assert routed.fusion == plan_for("fix port 2024").fusion
    assert unused_options(SearchOptions(project="demo", **options), routed) == ("fusion_method", "semantic_weight")
    assert unused_options(SearchOptions(project="demo", **options), plan_for("kubernetes pods", **options)) == ()


# --- filters -------------------------------------------------------------------------------------


def test_request_filters_reach_the_plan() -> None:
    plan = plan_for("kubernetes pods memory", levels=("L1",), tags=("ops",), source_prefix="runbooks/", min_score=0.01)

    assert plan.filters.levels == ("L1",)
    assert plan.filters.tags == ("ops",)
    assert plan.filters.source_prefix == "runbooks/"
    assert plan.min_score == 0.01


def test_query_tags_join_the_tag_filter() -> None:
    plan = plan_for("#networking policies for ingress", tags=("ops", "networking"))

    assert plan.filters.tags == ("ops", "networking")
    assert plan_for("#networking #dns policies").filters.tags == ("networking", "dns")


def test_excluded_words_are_a_filter_of_every_leg() -> None:
    plan = plan_for('consumer lag -kafka NOT "dead letter"', strategy=SearchStrategy.HYBRID)

    assert plan.filters.excluded_terms == ("kafka", "dead letter")
    assert plan.filters.excluded_terms == plan.lexical_query.excluded_terms
    assert plan_for("consumer lag").filters.excluded_terms == ()


def test_query_year_becomes_an_event_time_range() -> None:
    plan = plan_for("fix port 2024")

    assert plan.filters.event_time_from == datetime(2024, 1, 1, tzinfo=UTC)
    assert plan.filters.event_time_to == datetime(2025, 1, 1, tzinfo=UTC)
    # Read from the words only: undated chunks stay (a claim "in 2001" must not empty an undated corpus).
    assert plan.filters.include_undated


def test_query_dates_intersect_the_request_range() -> None:
    plan = plan_for(
        "fix port 2024", date_from=datetime(2024, 6, 1, tzinfo=UTC), date_to=datetime(2026, 1, 1, tzinfo=UTC)
    )

    assert plan.filters.event_time_from == datetime(2024, 6, 1, tzinfo=UTC)
    assert plan.filters.event_time_to == datetime(2025, 1, 1, tzinfo=UTC)
    assert not plan.filters.include_undated  # the caller asked for dates: strict


def test_request_range_wins_when_query_dates_do_not_overlap() -> None:
    plan = plan_for(
        "fix port 2024", date_from=datetime(2022, 1, 1, tzinfo=UTC), date_to=datetime(2023, 1, 1, tzinfo=UTC)
    )

    assert plan.filters.event_time_from == datetime(2022, 1, 1, tzinfo=UTC)
    assert plan.filters.event_time_to == datetime(2023, 1, 1, tzinfo=UTC)


def test_a_query_range_wholly_before_year_1_is_kept_empty_not_dropped() -> None:
    analysis = OPTIMIZER.analyze("what did we paint last month", now=datetime(1, 1, 20, tzinfo=UTC))
    start_of_calendar = datetime.min.replace(tzinfo=UTC)

    plan = build_plan(analysis, SearchOptions(project="p"), ROUTED)
    with_range = build_plan(analysis, SearchOptions(project="p", date_from=datetime(2020, 1, 1, tzinfo=UTC)), ROUTED)

    assert (plan.filters.event_time_from, plan.filters.event_time_to) == (start_of_calendar, start_of_calendar)
    assert plan.filters.include_undated
    # Beside a range the request asks for, it misses that range: the request's wins, as any query date's would.
    assert (with_range.filters.event_time_from, with_range.filters.event_time_to) == (
        datetime(2020, 1, 1, tzinfo=UTC),
        None,
    )


def test_naive_request_dates_are_utc() -> None:
    plan = plan_for("kubernetes pods memory", date_from=datetime(2024, 1, 1))  # noqa: DTZ001 - the point of the test

    assert plan.filters.event_time_from == datetime(2024, 1, 1, tzinfo=UTC)
    assert not plan.filters.include_undated


def test_no_date_range_no_undated_flag() -> None:
    assert not plan_for("kubernetes pods memory").filters.include_undated


def test_entity_filters_can_be_turned_off() -> None:
    plan = plan_for("#networking changes in 2024", knobs(query_entity_extraction=False))

    assert plan.filters.tags == ()
    assert plan.filters.event_time_from is None


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({}, None),
        ({"collapse": True}, 1),
        ({"collapse": True, "max_chunks_per_document": 3}, 3),
        ({"max_chunks_per_document": 2}, 2),
    ],
)
def test_collapse_options(options, expected) -> None:
    assert plan_for("kubernetes pods memory", **options).max_chunks_per_document == expected


def test_collapse_false_overrides_a_collapsing_default() -> None:
    defaults = knobs(max_chunks_per_document=2)

    assert plan_for("kubernetes pods memory", defaults).max_chunks_per_document == 2
    assert plan_for("kubernetes pods memory", defaults, collapse=False).max_chunks_per_document is None


# --- validation ----------------------------------------------------------------------------------


@pytest.mark.parametrize("query", ["", "   ", "\n\t"])
def test_empty_query_is_rejected(query: str) -> None:
    with pytest.raises(InvalidQueryError) as error:
        plan_for(query)

    assert error.value.field == "query"


def test_over_long_query_is_rejected_before_analysis() -> None:
    with pytest.raises(InvalidQueryError) as error:
        validate_query_text("x" * 2001, max_chars=2000)

    assert error.value.field == "query"
    validate_query_text("x" * 2000, max_chars=2000)


def test_the_query_length_limit_is_the_knob() -> None:
    knobs = ROUTED
    assert knobs.query_max_chars == 8000
    paragraph = "A whole paragraph of an argument, said again and again. " * 140  # 7,840 characters

    assert plan_for(paragraph).limit == knobs.rrf_final_k
    with pytest.raises(InvalidQueryError) as error:
        plan_for(paragraph, knobs.model_copy(update={"query_max_chars": 1000}))
    assert error.value.field == "query"


def test_query_length_knob_is_validated() -> None:
    with pytest.raises(ValidationError, match="query_max_chars"):
        SearchKnobs(query_max_chars=0)
    with pytest.raises(ValidationError, match="query_max_chars"):
        SearchKnobs(query_max_chars=QUERY_MAX_CHARS_CEILING + 1)


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"limit": 0}, "limit"),
        ({"limit": 101}, "limit"),
        ({"semantic_weight": -0.1}, "weights.semantic"),
        ({"lexical_weight": float("nan")}, "weights.lexical"),
        ({"semantic_weight": 0.0, "lexical_weight": 0.0}, "weights.semantic"),
        ({"rrf_k": 0}, "rrf_k"),
        ({"retrieve_k": 0}, "retrieve_k"),
        ({"min_score": float("inf")}, "min_score"),
        ({"min_score": 1.01}, "min_score"),
        ({"min_score": -0.5}, "min_score"),
        ({"max_chunks_per_document": 0}, "collapse"),
        ({"project": " "}, "project"),
        (
            {"date_from": datetime(2025, 1, 1, tzinfo=UTC), "date_to": datetime(2024, 1, 1, tzinfo=UTC)},
            "filters.date_from",
        ),
        ({"tags": ("ok", "a\x00b")}, "filters.tags[1]"),
        ({"levels": ("L\x00",)}, "filters.level[0]"),
        ({"source_prefix": "runbooks/\x00"}, "filters.source_prefix"),
    ],
)
def test_invalid_options_name_the_field(options, field: str) -> None:
    with pytest.raises(InvalidQueryError) as error:
        plan_for("kubernetes pods memory", **options)

    assert error.value.field == field
    assert error.value.message.startswith(field)  # the words name it as the request spells it, too


@pytest.mark.parametrize(
    ("options", "field", "words"),
    [
        (
            {"semantic_weight": 0.0, "lexical_weight": 0.0},
            "weights.semantic",
            "weights.semantic and weights.lexical must not both be 0",
        ),
        (
            {"lexical_weight": 2.0},
            "weights.lexical",
            "weights.lexical given alone must be at most 1 (weights.semantic gets 1 - it); got 2.0",
        ),
        ({"max_chunks_per_document": 0}, "collapse", "collapse must be at least 1; got 0"),
        ({"tags": ("ok", " ")}, "filters.tags[1]", "filters.tags[1] is blank (only white space, ' ')"),
        (
            {"date_from": datetime(2025, 1, 1, tzinfo=UTC), "date_to": datetime(2024, 1, 1, tzinfo=UTC)},
            "filters.date_from",
            "filters.date_from must be before filters.date_to; got 2025-01-01T00:00:00+00:00 and 2024-01-01T00:00:00+00:00",
        ),
    ],
)
def test_a_refused_option_is_worded_as_the_request_spells_it(options, field: str, words: str) -> None:
    # The words said `semantic_weight and lexical_weight must not both be 0` of a request that sent `weights`.
    with pytest.raises(InvalidQueryError) as error:
        plan_for("kubernetes pods memory", **options)

    assert error.value.field == field
    assert words in error.value.message
    assert "_weight" not in error.value.message
    assert "max_chunks" not in error.value.message


def test_knobs_become_the_plan_defaults() -> None:
    settings = Settings(
        _env_file=None,
        search_strategy=SearchStrategy.CASCADING,
        query_optimization_enabled=False,
        ranking_algorithm=FusionMethod.WEIGHTED,
        rrf_k_constant=30,
        hybrid_semantic_weight=0.7,
        rrf_retrieve_k=40,
        lexical_retrieve_k=60,
        rrf_final_k=7,
        cascading_lexical_multiplier=3,
        lexical_timeout_ms=1500,
        semantic_timeout_ms=2500,
        max_chunks_per_document=0,
        lexical_fuzziness=True,
    )

    plan = build_plan(OPTIMIZER.analyze("kubernetes pods memory"), SearchOptions(project="p"), settings)

    assert plan.strategy is SearchStrategy.CASCADING
    assert plan.fusion.method is FusionMethod.WEIGHTED
    assert plan.fusion.rrf_k == 30
    assert plan.fusion.weights == pytest.approx({"semantic": 0.7, "lexical": 0.3})
    assert (plan.semantic_retrieve_k, plan.lexical_retrieve_k, plan.limit) == (40, 60, 7)
    assert plan.cascading_multiplier == 3
    assert (plan.lexical_timeout_s, plan.semantic_timeout_s) == (1.5, 2.5)
    assert plan.max_chunks_per_document is None
    assert plan.lexical_query.fuzzy


def test_both_knob_weights_are_normalised_and_one_alone_leaves_the_rest() -> None:
    analysis = OPTIMIZER.analyze("kubernetes pods memory")
    options = SearchOptions(project="p", fusion_method=FusionMethod.WEIGHTED)

    both = build_plan(analysis, options, SearchKnobs(hybrid_semantic_weight=0.6, hybrid_lexical_weight=0.6))
    lexical_only = build_plan(analysis, options, SearchKnobs(hybrid_lexical_weight=0.8))
    semantic_only = build_plan(analysis, options, SearchKnobs(hybrid_semantic_weight=0.8))

    assert both.fusion.weights == pytest.approx({"semantic": 0.5, "lexical": 0.5})
    assert lexical_only.fusion.weights == pytest.approx({"semantic": 0.2, "lexical": 0.8})
    assert semantic_only.fusion.weights == pytest.approx({"semantic": 0.8, "lexical": 0.2})


def test_routing_only_reaches_the_routable_strategies() -> None:
    optimizer = QueryOptimizer()
    defaults = knobs(query_optimization_enabled=True, query_routing_strategies="lexical")

    tagged = build_plan(optimizer.analyze("#networking @devops"), SearchOptions(project="p"), defaults)
    dated = build_plan(optimizer.analyze("fix port 2024"), SearchOptions(project="p"), defaults)

    assert tagged.strategy is SearchStrategy.LEXICAL
    assert dated.strategy is SearchStrategy.HYBRID
    assert dated.strategy_confidence == 1.0
