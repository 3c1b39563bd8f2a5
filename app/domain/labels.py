"""Names shared by metrics, responses and logs: the stages of a search and the rollout arms."""

from __future__ import annotations

from typing import Final

STAGE_OPTIMIZE: Final = "optimize"
STAGE_EMBED: Final = "embed"
STAGE_SEMANTIC: Final = "semantic"
STAGE_LEXICAL: Final = "lexical"
STAGE_FUSION: Final = "fusion"
STAGE_RERANK: Final = "rerank"
STAGE_TOTAL: Final = "total"
STAGES: Final = frozenset(
    {STAGE_OPTIMIZE, STAGE_EMBED, STAGE_SEMANTIC, STAGE_LEXICAL, STAGE_FUSION, STAGE_RERANK, STAGE_TOTAL}
)

LEXICAL_UNCONFIRMED: Final = "lexical_unconfirmed"
"""A degraded reason: the lexical hits stand unchecked against the store (it failed or was slow), so one of
them may be a document deleted or changed since the lexical index last caught up."""

HYBRID_ARM: Final = "hybrid"
SEMANTIC_ARM: Final = "semantic"
CONTROL_ARM: Final = "control"
"""The arm label of requests that chose their strategy themselves: no rollout applies to them."""
ARMS: Final = frozenset({HYBRID_ARM, SEMANTIC_ARM, CONTROL_ARM})
NO_ARM: Final = "none"
"""The arm label of work that serves no search (the outbox worker's engine errors)."""
