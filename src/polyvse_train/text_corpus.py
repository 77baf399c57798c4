"""Text-side data at scale in a training run (TrainConfig.text_corpus): load the caption tuples of photos
without an image in the run, and build the vocabulary with them (their caption–caption terms are the objectives' ``text_batch_loss``).

How the papers use such data, and what this does with it:
- Gella et al. (PARALLEL) and Calixto & Liu (MLMME) train on Multi30K (29k photos, task2's independent en/de
  descriptions; task1 has translations); MULE pretrains its universal embedding on paired sentences (LP)
  and keeps neighbourhood constraints between sentences of the same photo in any language. Their photos
  have images; here only F8K-ML's ~630 training photos do, so the other photos' captions enter as
  text-only tuples, and only in the terms that need no image: PARALLEL's caption–caption term (weight 1),
  MLMME's R_ML (weight 1 - beta), MULE's neighbourhood constraints on u and s (weight nc_weight; u only
  during the LP epochs). The image terms, and MULE's language classifier, see the image batches only.
- Interleaved, not extra steps: every image batch carries the epoch's text batches spread evenly over the
  steps (``polyvse_train.sampling.text_tuples``), so one optimiser step sums the image batch's loss and the text
  terms -- the papers' per-batch objective over photo tuples -- and the number of steps is unchanged.
  Text batches have ``batch_size`` tuples (same negatives, same hinge scale as the image batches) and the
  same per-language caption quotas; ``text_tuples_per_epoch`` caps the tuples of an epoch.

Vocabulary: the text corpus is training data, so its words may enter the vocabulary; to keep the vocabulary
bounded, a word that is not frequent enough in the image-training captions (``min_count``) enters only if
it occurs ``text_vocab_min_count`` times in the text corpus (0: never; the corpus words outside the
vocabulary are UNK). With ``text_corpus: none`` nothing here runs and the vocabulary is exactly as before.
"""

from __future__ import annotations

import logging
from array import array
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from polyvse.data.exclusion import EvaluationExclusion
from polyvse.data.types import Corpus
from polyvse.errors import DataError
from polyvse.modules.text_input import CaptionEncoder, tag_tokens
from polyvse.text.tokenize import tokenize
from polyvse.text.vocab import UNK, Vocabulary

log = logging.getLogger("polyvse.train")

#: tuples of the text corpus kept in a --smoke run, per smoke photo (a slice, like the image data)
SMOKE_TUPLES_PER_PHOTO = 1


@dataclass
class TextTupleSet:
    """The encoded text-only captions: caption i belongs to tuple ``tuple_index[i]`` (photo
    ``photo_ids[tuple_index[i]]``), has language ``langs[i]`` and word ids ``ids(i)``."""

    name: str
    photo_ids: list[str]
    tuple_index: np.ndarray
    langs: list[str]
    flat: np.ndarray  # word ids of every caption, concatenated (not truncated)
    offsets: np.ndarray  # caption i is flat[offsets[i]:offsets[i + 1]]
    max_len: int

    def __len__(self) -> int:
        return len(self.langs)

    def ids(self, i: int) -> list[int]:
        """Word ids of caption i, as ``CaptionEncoder.ids`` gives them (truncated, never empty)."""
        return self.flat[self.offsets[i] : self.offsets[i + 1]][: self.max_len].tolist() or [UNK]

    def summary(self) -> dict:
        return {
            "corpus": self.name,
            "tuples": len(self.photo_ids),
            "captions": len(self.langs),
            "languages": dict(sorted(Counter(self.langs).items())),
        }


def check_text_corpus_config(cfg) -> None:
    """Clear errors for text_corpus settings that cannot work (before any data is read)."""
    from .objectives import objective_class

    if cfg.data.text_corpus == "none":
        return
    if cfg.data.text_tuples_per_epoch == 0:
        raise DataError(
            "text_tuples_per_epoch is 0: the text corpus would be loaded and never used; "
            "set text_corpus: none or a positive text_tuples_per_epoch"
        )
    if not objective_class(cfg).has_caption_caption_term(cfg):
        raise DataError(
            f"text_corpus {cfg.data.text_corpus!r} feeds only caption-caption terms (objective parallel, "
            "mlmme with beta < 1, mule with nc_weight > 0 or lp_epochs > 0); objective "
            f"{cfg.objective.name!r} with these weights has none: set text_corpus: none"
        )


def load_text_corpus(
    cfg, root: Path, corpus: Corpus, exclusion: EvaluationExclusion, smoke: bool = False
) -> Corpus | None:
    """The run's text corpus, or None for text_corpus none.

    ``corpus`` is the run's dataset and ``exclusion`` the run's evaluation exclusion (built from ALL its
    evaluation photos, before any smoke slicing): its photos and sentences are excluded; every photo of the
    dataset is skipped by id (its training photos train with their images).
    """
    check_text_corpus_config(cfg)
    if cfg.data.text_corpus == "none":
        return None
    from polyvse.data.flickr8kcn import official_split
    from polyvse.data.text_tuples import text_tuple_corpus

    official_eval = {pid for pid, split in official_split(root).items() if split in ("val", "test")}
    text = text_tuple_corpus(
        root,
        cfg.data.text_corpus,
        exclude_photo_ids=set(exclusion.photo_ids) | official_eval,
        skip_photo_ids=set(corpus.photos),
        langs=cfg.data.languages,
        exclusion=exclusion,
    )
    if smoke:
        text = text.filter(photo_ids=sorted(text.photos)[: SMOKE_TUPLES_PER_PHOTO * cfg.smoke.photos])
    if not text.captions:
        raise DataError(
            f"text_corpus {cfg.data.text_corpus!r}: no caption tuples left for languages "
            f"{cfg.data.languages} after excluding the evaluation photos; set text_corpus: none"
        )
    log.info("text corpus %s: %d tuples, %d captions", text.name, len(text.photos), len(text.captions))
    return text


@dataclass
class _Tokenized:
    index: dict[str, int]  # language-tagged token -> provisional id
    flat: np.ndarray  # provisional ids of every caption, concatenated
    offsets: np.ndarray

    def counts(self) -> np.ndarray:
        return np.bincount(self.flat, minlength=len(self.index))


def _tokenize_corpus(corpus: Corpus, lowercase: bool) -> _Tokenized:
    """Tokenise every caption once (the cost of a text corpus: ~30 s for "all" on one core), keeping
    provisional ids instead of token lists so that ~440k captions stay a few tens of MB."""
    index: dict[str, int] = {}
    flat = array("i")
    offsets = array("q", [0])
    setdefault = index.setdefault
    for c in corpus.captions:
        for t in tag_tokens(tokenize(c.text, c.lang, lowercase=lowercase), c.lang):
            flat.append(setdefault(t, len(index)))
        offsets.append(len(flat))
    return _Tokenized(index, np.frombuffer(flat, dtype=np.int32).copy(), np.frombuffer(offsets, dtype=np.int64).copy())


def build_caption_encoder(
    cfg, texts_by_lang: dict[str, list[str]], text: Corpus | None, lowercase: bool = True
) -> tuple[CaptionEncoder, TextTupleSet | None]:
    """The run's caption encoder and encoded text tuples.

    Without a text corpus this is exactly ``CaptionEncoder.build(texts_by_lang, min_count, max_len)``.
    With one, the vocabulary holds the words seen ``min_count`` times in the image-training captions (same
    ids as without a corpus) followed by the other words seen ``text_vocab_min_count`` times in the text
    corpus (by count, then token).
    """
    if text is None:
        return CaptionEncoder.build(
            texts_by_lang, min_count=cfg.data.min_count, max_len=cfg.data.max_len, lowercase=lowercase
        ), None
    train_counts: Counter[str] = Counter()
    for lang, texts in texts_by_lang.items():
        for t in texts:
            train_counts.update(tag_tokens(tokenize(t, lang, lowercase=lowercase), lang))
    tok = _tokenize_corpus(text, lowercase)
    corpus_counts = dict(zip(tok.index, tok.counts().tolist()))
    # the image-training words first, in CaptionEncoder.build's order (so their ids are those of a run
    # without text corpus), then the corpus-only words by corpus count
    train_words = sorted(
        (t for t, n in train_counts.items() if n >= cfg.data.min_count), key=lambda t: (-train_counts[t], t)
    )
    known = set(train_words)
    extra = (
        []
        if cfg.data.text_vocab_min_count <= 0
        else sorted(
            (t for t, n in corpus_counts.items() if n >= cfg.data.text_vocab_min_count and t not in known),
            key=lambda t: (-corpus_counts[t], t),
        )
    )
    vocab = Vocabulary(train_words + extra)
    encoder = CaptionEncoder(vocab, max_len=cfg.data.max_len, lowercase=lowercase)
    log.info(
        "vocabulary: %d words from the image-training captions + %d from the text corpus", len(train_words), len(extra)
    )
    lookup = np.array([vocab.token_to_id(t) for t in tok.index], dtype=np.int32)
    photo_ids = list(text.photos)
    row = {p: i for i, p in enumerate(photo_ids)}
    tuples = TextTupleSet(
        name=text.name,
        photo_ids=photo_ids,
        tuple_index=np.array([row[c.photo_id] for c in text.captions], dtype=np.int64),
        langs=[c.lang for c in text.captions],
        flat=lookup[tok.flat] if len(tok.flat) else tok.flat,
        offsets=tok.offsets,
        max_len=cfg.data.max_len,
    )
    return encoder, tuples
