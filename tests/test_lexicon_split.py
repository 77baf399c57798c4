"""The MUSE lexicon's train/test split (polyvse.alignment.muse_lexicon) and that no training use of a lexicon
sees a test source word: AME's aligner and lexicon initialisation, the Translator's Procrustes/RCSLS map."""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace

import pytest
import torch

from conftest import write_muse_full
from polyvse.alignment import HELD_OUT_RANKS, muse_lexicon, muse_paths, read_muse_dictionary, split_lexicon
from polyvse.modules import JointEmbeddingModel, ModelConfig
from polyvse.modules.text_input import CaptionEncoder
from polyvse_train.config import TrainConfig

START, END = HELD_OUT_RANKS


def test_split_lexicon_is_disjoint_by_source_word_and_keeps_every_pair():
    pairs = [("a", "x"), ("b", "y"), ("a", "z"), ("c", "x"), ("d", "w"), ("c", "v"), ("e", "u")]
    train, test = split_lexicon(pairs, held_out=(1, 3))  # ranks: a 0, b 1, c 2, d 3, e 4
    assert test == [("b", "y"), ("c", "x"), ("c", "v")]  # every translation of a held-out word
    assert train == [("a", "x"), ("a", "z"), ("d", "w"), ("e", "u")]  # before AND after the held-out band
    assert {s for s, _ in train}.isdisjoint(s for s, _ in test)
    with pytest.raises(ValueError):
        split_lexicon(pairs, held_out=(3, 3))


@pytest.mark.parametrize("src,tgt", [("de", "en"), ("fr", "en"), ("cs", "en"), ("zh", "en"), ("en", "de")])
def test_real_muse_test_part_is_the_reconstructed_file_and_train_is_the_rest(shared_data, src, tgt):
    full = read_muse_dictionary(muse_paths(shared_data, src, tgt, "full"))
    train, test = muse_lexicon(shared_data, src, tgt, "train"), muse_lexicon(shared_data, src, tgt, "test")
    assert test == read_muse_dictionary(muse_paths(shared_data, src, tgt, "5000-6500"))
    assert len({s for s, _ in test}) == END - START
    assert {s for s, _ in train}.isdisjoint(s for s, _ in test)
    assert Counter(train) + Counter(test) == Counter(full)
    assert set(read_muse_dictionary(muse_paths(shared_data, src, tgt, "0-5000"))) <= set(train)


def test_pairs_without_split_files_get_the_same_rule(shared_data):
    """fr-de (the Translator's lexicon) has only a full file: its test part is ranks 5000-6499 all the same."""
    assert not muse_paths(shared_data, "fr", "de", "5000-6500", check=False).exists()
    order = list(dict.fromkeys(s for s, _ in read_muse_dictionary(muse_paths(shared_data, "fr", "de"))))
    assert {s for s, _ in muse_lexicon(shared_data, "fr", "de", "test")} == set(order[START:END])
    with pytest.raises(ValueError):
        muse_lexicon(shared_data, "fr", "de", "full")


# -- training uses ------------------------------------------------------------------------------------------
# vocabulary: source words around both edges of the held-out band, and all their targets
TRAIN_RANKS = [0, 1, START - 2, START - 1, END, END + 1]
TEST_RANKS = [START, START + 1, START + 2, END - 1]


def _model_and_data(src: str, tgt: str, word_dim: int = 8):
    ranks = TRAIN_RANKS + TEST_RANKS
    enc = CaptionEncoder.build({tgt: [" ".join(f"t{i}" for i in ranks)], src: [" ".join(f"s{i}" for i in ranks)]})
    model = JointEmbeddingModel(
        ModelConfig(vocab_size=len(enc.vocab), image_dim=4, embed_dim=4, word_dim=word_dim, hidden_dim=4)
    )
    return model, SimpleNamespace(captions=enc), enc.vocab


def _source_words(vocab, lang: str, rows) -> set[str]:
    return {vocab.id_to_token(int(r))[len(lang) + 1 :] for r in rows}


def test_ame_aligner_and_lexicon_init_never_use_a_test_source_word(tmp_path):
    from polyvse_train.objectives.word_alignment import build_aligner

    write_muse_full(tmp_path, "de", "en")
    model, data, vocab = _model_and_data("de", "en")
    cfg = TrainConfig(languages=["en", "de"], align=True, word_init="muse", word_dim=8)
    aligner = build_aligner(cfg, model, data, tmp_path)
    src_ids = aligner.src_ids["de"]
    trained = _source_words(vocab, "de", src_ids[aligner.train_pairs["de"][:, 0]])
    assert trained == {f"s{i}" for i in TRAIN_RANKS}
    evaluated = _source_words(vocab, "de", src_ids[aligner.eval_pairs["de"][:, 0]])
    assert evaluated == {f"s{i}" for i in TEST_RANKS}

    weight = model.text_encoder.embed.weight
    before = weight.detach().clone()
    assert aligner.lexicon_init() == len(TRAIN_RANKS)
    for i in TEST_RANKS:  # the held-out words keep their random start ...
        row = vocab.token_to_id(f"de:s{i}")
        assert torch.equal(weight[row], before[row])
    for i in TRAIN_RANKS:  # ... the training words start at their translation
        assert torch.equal(weight[vocab.token_to_id(f"de:s{i}")], before[vocab.token_to_id(f"en:t{i}")])


def test_translator_lexicon_map_is_fitted_on_train_source_words_only(tmp_path):
    from polyvse_train.objectives.translator import lexicon_rows

    write_muse_full(tmp_path, "fr", "de")
    _, data, vocab = _model_and_data("fr", "de")
    src_rows, _, pairs = lexicon_rows(tmp_path, vocab, "fr", "de")
    assert _source_words(vocab, "fr", src_rows[pairs[:, 0]]) == {f"s{i}" for i in TRAIN_RANKS}
