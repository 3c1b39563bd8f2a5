"""The embedder of a command that embeds nothing: the real model, loaded only at the first embedding."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from app.config import ConfigurationError, Settings
from app.wiring.deferred_embedder import DeferredEmbedder
from app.wiring.engines import embedder_options

if TYPE_CHECKING:
    from pathlib import Path

    from app.engines.embedder import ServingEmbedder

pytestmark = [pytest.mark.integration]


def deferred(data_dir: Path, **settings: object) -> DeferredEmbedder:
    configured = Settings(poimen_data_dir=data_dir, **settings)
    return DeferredEmbedder(configured, options=embedder_options(configured))


async def test_the_model_loads_at_the_first_embedding_and_embeds_as_one_loaded_at_start(
    data_dir: Path, embedder: ServingEmbedder
) -> None:
    model = deferred(data_dir)
    named = (model.model_name, model.dimensions, model.loaded)

    vector = await model.embed_query("postgres replication lag")
    model.close()

    assert named == (embedder.model_name, embedder.dimensions, False)
    assert model.loaded
    assert vector == pytest.approx(await embedder.embed_query("postgres replication lag"), abs=1e-6)


async def test_a_model_of_other_dimensions_than_configured_is_refused_at_the_first_embedding(data_dir: Path) -> None:
    model = deferred(data_dir, embedding_dimensions=768)

    with pytest.raises(ConfigurationError, match="EMBEDDING_DIMENSIONS=768 but all-MiniLM-L6-v2 embeds in 384"):
        await model.embed_documents(["text"])

    assert not model.loaded
