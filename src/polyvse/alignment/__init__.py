"""Word-level cross-lingual alignment: MUSE lexicons, Procrustes, CSLS, RCSLS and their evaluation.

Used by AME (``LexiconAligner``: the RCSLS alignment loss kept during retrieval training, alignment ratio) and the
Translator configuration (SVD/Procrustes + RCSLS initialisation of the language map). Nothing here loads or
assumes pretrained word vectors: every function takes embedding tensors given by the caller.

Convention: rows are vectors and maps act on the right, ``mapped = X @ W``.
Training and evaluation take their lexicon pairs from ``muse_lexicon`` (train / test parts, disjoint by
source word); the MUSE split files at hand are RECONSTRUCTED (see ``lexicon``), not the official ones.
"""

from ..csls.vocabulary import csls_retrieve, csls_scores, knn_mean_similarity, nn_retrieve
from .ame import LexiconAligner, vocabulary_words
from .lexicon import (
    HELD_OUT_RANKS,
    LEXICON_PARTS,
    MUSE_SPLITS,
    filter_lexicon,
    muse_lexicon,
    muse_paths,
    read_muse_dictionary,
    split_lexicon,
)
from .procrustes import nearest_orthogonal, procrustes
from .rcsls import RCSLSLoss, fit_rcsls, rcsls_loss, spectral_projection
from .word_translation import alignment_ratio, group_lexicon, word_translation_p_at_1

__all__ = [
    "HELD_OUT_RANKS",
    "LEXICON_PARTS",
    "LexiconAligner",
    "MUSE_SPLITS",
    "RCSLSLoss",
    "alignment_ratio",
    "csls_retrieve",
    "csls_scores",
    "filter_lexicon",
    "fit_rcsls",
    "group_lexicon",
    "knn_mean_similarity",
    "muse_lexicon",
    "muse_paths",
    "nearest_orthogonal",
    "nn_retrieve",
    "procrustes",
    "rcsls_loss",
    "read_muse_dictionary",
    "spectral_projection",
    "split_lexicon",
    "vocabulary_words",
    "word_translation_p_at_1",
]
