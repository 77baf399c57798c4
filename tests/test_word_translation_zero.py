"""Word-translation P@1 on the real F8K-ML vocabulary and MUSE dictionaries: the evaluator finds translations
that are there and finds none that are not. Configs trained without a lexicon score ~0 (docs/results.md
section 5); this tells that apart from a measurement artefact (tokens the lexicon never matches, a wrong
target language, rows out of step with the lexicon's indices)."""

from __future__ import annotations

import pytest
import torch

from polyvse.alignment import filter_lexicon, muse_lexicon
from polyvse.data.registry import load_dataset
from polyvse.data.splits import resolve_split
from polyvse.evaluation.words import word_translation_by_language
from polyvse.model.checkpoint import Checkpoint
from polyvse.model.torch_model import PolyvseModel
from polyvse.modules import JointEmbeddingModel, ModelConfig
from polyvse.modules.text_input import CaptionEncoder
from polyvse_train.objectives.translator import vocabulary_rows

LANGS = ["en", "de", "fr", "cs", "zh"]


@pytest.fixture(scope="module")
def f8kml_captions(shared_data) -> CaptionEncoder:
    """The vocabulary of F8K-ML's official training captions, as `polyvse train` builds it."""
    corpus = load_dataset("f8k-ml", shared_data).filter(langs=LANGS)
    train_ids, _ = resolve_split(corpus)
    texts: dict[str, list[str]] = {}
    for c in corpus.captions:
        if c.photo_id in train_ids:
            texts.setdefault(c.lang, []).append(c.text)
    return CaptionEncoder.build(texts)


@pytest.fixture()
def f8kml_model(f8kml_captions) -> PolyvseModel:
    """An untrained model over that vocabulary: random word vectors in [-0.1, 0.1], as every config starts."""
    torch.manual_seed(0)
    model = JointEmbeddingModel(
        ModelConfig(vocab_size=len(f8kml_captions.vocab), image_dim=4, embed_dim=4, word_dim=32, hidden_dim=4)
    )
    return PolyvseModel(
        Checkpoint(
            model=model.eval(), captions=f8kml_captions, backbone="b", feature_key="k", ten_crop=False, languages=LANGS
        )
    )


def test_words_of_other_languages_with_no_tie_to_english_score_at_chance(f8kml_model, shared_data):
    result = word_translation_by_language(f8kml_model, shared_data, skip_missing=True)
    assert set(result) == {"de", "fr", "cs", "zh"}  # every language has held-out words in the vocabulary
    n_en = len(vocabulary_rows(f8kml_model.captions.vocab, "en"))
    for lang, entry in result.items():
        assert entry["n_words"] >= 10 and entry["n_vocab"] > 100, lang
        assert entry["p_at_1"] <= 100 * 3 / entry["n_words"] + 100 * 20 / n_en, lang  # chance, with slack


def test_held_out_words_placed_at_their_translation_are_found(f8kml_model, shared_data):
    """The same vocabulary, with every held-out source word moved onto (near) an English translation: the
    evaluator must score ~100. A tokenisation or target-space artefact would keep it near 0."""
    vocab = f8kml_model.captions.vocab
    weight = f8kml_model.model.text_encoder.embed.weight
    en = vocabulary_rows(vocab, "en")
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for lang in ("de", "fr", "cs", "zh"):
            src = vocabulary_rows(vocab, lang)
            _, kept = filter_lexicon(muse_lexicon(shared_data, lang, "en", "test"), src, en)
            for s, t in dict(reversed(kept)).items():  # each source word -> its first translation in the vocabulary
                weight[src[s]] = weight[en[t]] + 1e-3 * torch.randn(weight.shape[1], generator=g)
    result = word_translation_by_language(f8kml_model, shared_data, skip_missing=True)
    for lang, entry in result.items():
        assert entry["p_at_1"] >= 90, (lang, entry)
