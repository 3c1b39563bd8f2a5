"""The search knobs: declared once, with their defaults and constraints.

`Settings` (env, `app/config.py`) builds on this model, so each knob is read from its flat env name
(`RRF_K_CONSTANT`, `SEARCH_STRATEGY`, ...); the flags file overlays it while the service runs
(`app/search/flags.py`); the planner takes it. Nothing else declares a default for these values.

Reference names that mean one of ours are aliases (`FINAL_RESULT_K` is `RRF_FINAL_K`): setting both to
different values is an error. `RANKING_ALGORITHM=weighted_linear` (the reference's value) is `weighted`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from app.domain.models import FusionMethod, SearchStrategy

KNOB_ALIASES: Final[Mapping[str, str]] = {"final_result_k": "rrf_final_k"}
"""Reference name -> our name. Both are accepted wherever a knob is set (env, flags file)."""

RANKING_ALGORITHM_ALIASES: Final[Mapping[str, str]] = {
    "weighted_linear": FusionMethod.WEIGHTED.value,
    "z_score": FusionMethod.ZSCORE.value,
    "z-score": FusionMethod.ZSCORE.value,
}
STRATEGY_NAMES: Final = ",".join(strategy.value for strategy in SearchStrategy)
QUERY_MAX_CHARS_CEILING: Final = 100_000
"""The most `QUERY_MAX_CHARS` may allow; the HTTP schema refuses longer input before it is analysed."""


def is_blank(value: object) -> bool:
    """True for an empty or blank string: a value that sets nothing, as if it were not given (`FOO=` in env).

    Helm and compose write `FOO: ""` for a value left out, so the default (or a source below) applies.
    """
    return isinstance(value, str) and not value.strip()


class KnobConflictError(ValueError):
    """An alias and its knob were both set, to different values."""


def resolve_aliases(values: Mapping[str, Any]) -> dict[str, Any]:
    """`values` with reference aliases renamed to our knob names; raises `KnobConflictError` on a conflict.

    Keys are compared case-insensitively; two spellings of one number ("3" and 3) do not conflict.
    """
    resolved = dict(values)
    for alias, name in KNOB_ALIASES.items():
        alias_key = next((key for key in resolved if key.lower() == alias), None)
        if alias_key is None:
            continue
        value = resolved.pop(alias_key)
        if value is None:
            continue
        name_key = next((key for key in resolved if key.lower() == name), None)
        if name_key is not None and resolved[name_key] is not None and str(resolved[name_key]) != str(value):
            message = f"{alias.upper()}={value} and {name.upper()}={resolved[name_key]} disagree: set only one"
            raise KnobConflictError(message)
        resolved[name_key or name] = value
    return resolved


class SearchKnobs(BaseModel):
    """Every knob that shapes a search; hot-reloadable through the flags file.

    Weights: `hybrid_semantic_weight` alone gives the lexical leg `1 - semantic`; `hybrid_lexical_weight`
    alone gives the semantic leg `1 - lexical`; both set are normalised to sum 1 (`leg_weights`).
    Per-leg retrieve k: unset means `rrf_retrieve_k`.
    """

    model_config = ConfigDict(frozen=True, allow_inf_nan=False)  # `QUERY_CACHE_TTL_SECS=inf`: never expire

    search_strategy: SearchStrategy = SearchStrategy.HYBRID
    # z-score fusion at semantic weight 0.45 had the largest smallest margin over the SciFact and LoCoMo
    # targets on the tuning data (docs/evaluation.md). RRF, when asked for, uses a small k: the
    # reference's k=60 loses to BM25 alone on conversations.
    ranking_algorithm: FusionMethod = FusionMethod.ZSCORE
    rrf_k_constant: int = Field(default=5, ge=1, le=10000)
    rrf_retrieve_k: int = Field(default=50, ge=1, le=1000)
    semantic_retrieve_k: int | None = Field(default=None, ge=1, le=1000)
    lexical_retrieve_k: int | None = Field(default=None, ge=1, le=1000)
    rrf_final_k: int = Field(default=10, ge=1, le=100)
    hybrid_semantic_weight: float = Field(default=0.45, ge=0.0, le=1.0)  # tuned: docs/evaluation.md
    hybrid_lexical_weight: float | None = Field(default=None, ge=0.0, le=1.0)
    cascading_lexical_multiplier: int = Field(default=4, ge=1, le=100)
    # Routing on, but only to the strategies listed: always-hybrid beat full routing on SciFact and LoCoMo
    # (docs/evaluation.md), while short `#tag`/`@mention`/quoted queries still go to the lexical leg (not
    # passages, not merely short queries: docs/evaluation.md "Round 2").
    query_optimization_enabled: bool = True
    query_routing_strategies: str = "lexical"
    query_question_classification: bool = True
    query_entity_extraction: bool = True
    # Agents search with whole paragraphs: 8,000 characters passed every held-out argument query (the
    # longest is ~5,500). Each leg takes what it can (the model reads its first ~256 word pieces).
    query_max_chars: int = Field(default=8000, ge=1, le=QUERY_MAX_CHARS_CEILING)
    lexical_fuzziness: bool = False
    lexical_timeout_ms: int = Field(default=2000, ge=1)
    semantic_timeout_ms: int = Field(default=5000, ge=1)
    max_chunks_per_document: int = Field(default=0, ge=0)
    # Memory awareness (`app/retrieval/evidence.py`), added to the z-score fusion score. A *when* question
    # prefers hits that carry a date: LoCoMo tuning Recall@10 +0.0095, temporal +0.061 at 1.5 (docs/evaluation.md
    # "Round 2: memory awareness"). A hit whose title names someone the query names gains the speaker boost:
    # it lost until the speakers left the semantic query (`semantic_common_name_share`), then won at 0.5
    # (LoCoMo tuning +0.0076 [+0.0021, +0.0136], SciFact train +0.0001; "Speaker boost, again"). The others
    # lost or did nothing on the tuning data, so they are off.
    evidence_date_boost: float = Field(default=1.5, ge=0.0, le=10.0)
    evidence_speaker_boost: float = Field(default=0.5, ge=0.0, le=10.0)
    evidence_mention_boost: float = Field(default=0.0, ge=0.0, le=10.0)
    evidence_recency_boost: float = Field(default=0.0, ge=0.0, le=10.0)
    session_diversity_cap: int = Field(default=0, ge=0, le=100)  # 0: off
    # A turn gains this share of the best positive fused score among the candidate turns at most
    # `neighbour_window_turns` away (ids `<sequence>:<n>`; `app/retrieval/neighbours.py`). LoCoMo at 0.4 / 2
    # turns: Recall@10 +0.031 on the tuning conversations, +0.030 held out, all ten +0.030 with no category
    # down more than 0.003 (docs/evaluation.md "Several hops"): on by default. Only dated turns of one
    # session share, so other corpora are untouched. 0: off.
    neighbour_score_share: float = Field(default=0.4, ge=0.0, le=1.0)
    neighbour_window_turns: int = Field(default=2, ge=1, le=20)
    # A name of the query found in the titles of at least this share of the project's documents (a speaker of a
    # conversation) is left out of the semantic leg's query (`app/search/common_names.py`). LoCoMo: semantic
    # leg Recall@10 +0.10, default +0.018 (docs/evaluation.md "Common names"); SciFact unchanged. 0: off.
    semantic_common_name_share: float = Field(default=0.1, ge=0.0, le=1.0)
    query_cache_ttl_secs: float = Field(default=3600, ge=0)
    hybrid_rollout_percent: float = Field(default=100.0, ge=0.0, le=100.0)
    rollout_shadow_enabled: bool = False
    # Requests per second per caller (rollout caller key) before 429 + Retry-After; 0: no limit.
    rate_limit_per_caller_rps: float = Field(default=0.0, ge=0.0)
    rate_limit_burst: int = Field(default=20, ge=1, le=10000)
    # Refused authentications (401/403) per second per client address before a refusal is answered 429 +
    # Retry-After instead (`app/api/guards.py`); a valid token is never limited by it. 0: no limit.
    rate_limit_refused_auth_per_address_rps: float = Field(default=1.0, ge=0.0)
    rate_limit_refused_auth_burst: int = Field(default=30, ge=1, le=10000)

    @model_validator(mode="before")
    @classmethod
    def _aliases(cls, data: Any) -> Any:  # noqa: ANN401 - pydantic hands the raw input over untyped
        return resolve_aliases(data) if isinstance(data, Mapping) else data

    @field_validator("*", mode="before")
    @classmethod
    def _no_boolean_numbers(cls, value: object, info: ValidationInfo) -> object:
        # pydantic reads True as 1: YAML's `on`/`yes` or a flagd variant `true` made a 1 % rollout, silently.
        annotation = cls.model_fields[info.field_name].annotation if info.field_name else None
        if isinstance(value, bool) and {int, float} & set(get_args(annotation) or (annotation,)):
            message = f"a boolean ({str(value).lower()}) is not a number"
            raise ValueError(message)
        return value

    @field_validator("search_strategy", mode="before")
    @classmethod
    def _strategy_name(cls, value: object) -> object:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("ranking_algorithm", mode="before")
    @classmethod
    def _ranking_algorithm_name(cls, value: object) -> object:
        if not isinstance(value, str):
            return value
        name = value.strip().lower()
        return RANKING_ALGORITHM_ALIASES.get(name, name)

    @field_validator("query_routing_strategies")
    @classmethod
    def _known_strategies(cls, value: str) -> str:
        names = [name.strip().lower() for name in value.split(",") if name.strip()]
        unknown = [name for name in names if name not in {strategy.value for strategy in SearchStrategy}]
        if unknown:
            message = f"unknown strategies {unknown}; expected a comma-separated subset of {STRATEGY_NAMES}"
            raise ValueError(message)
        if not names:
            # `,` routed no query, while a blank value (unset before it gets here) routes to the default's: a slip.
            message = (
                f"names no strategy ({value!r}); expected a comma-separated subset of {STRATEGY_NAMES}"
                " (to route no query, set QUERY_OPTIMIZATION_ENABLED=false)"
            )
            raise ValueError(message)
        return ",".join(names)

    @model_validator(mode="after")
    def _weights_not_both_zero(self) -> SearchKnobs:
        semantic, lexical = self.leg_weights()
        if semantic == 0 and lexical == 0:
            message = "HYBRID_SEMANTIC_WEIGHT and HYBRID_LEXICAL_WEIGHT must not both be 0"
            raise ValueError(message)
        return self

    @property
    def routable_strategies(self) -> frozenset[SearchStrategy]:
        """The strategies the optimizer may route a query to (`QUERY_ROUTING_STRATEGIES`)."""
        return frozenset(SearchStrategy(name) for name in self.query_routing_strategies.split(",") if name)

    def leg_weights(self) -> tuple[float, float]:
        """(semantic, lexical) weights for weighted and z-score fusion, as the class docstring resolves them."""
        semantic, lexical = self.hybrid_semantic_weight, self.hybrid_lexical_weight
        if lexical is None:
            return semantic, 1.0 - semantic
        if "hybrid_semantic_weight" not in self.model_fields_set:
            return 1.0 - lexical, lexical
        total = semantic + lexical
        return (semantic / total, lexical / total) if total > 0 else (0.0, 0.0)

    def retrieve_k(self) -> tuple[int, int]:
        """(semantic, lexical) candidates per leg."""
        return (self.semantic_retrieve_k or self.rrf_retrieve_k, self.lexical_retrieve_k or self.rrf_retrieve_k)


KNOB_NAMES: Final = tuple(SearchKnobs.model_fields)


def knob_name(key: str) -> str | None:
    """Our knob name for a key in any spelling (`RRF_K_CONSTANT`, `rrf-k-constant`, `FINAL_RESULT_K`), else None."""
    name = key.strip().lower().replace("-", "_")
    name = KNOB_ALIASES.get(name, name)
    return name if name in KNOB_NAMES else None
