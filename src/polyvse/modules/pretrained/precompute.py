"""Fill the sentence-embedding cache for a whole dataset ahead of training, in an order that makes a partial
cache useful: a frozen tower embeds ~20 captions/s on 2 CPU cores, so f8k-full's ~135k captions take hours.

Order (``priority_stages``): the evaluation split first (every caption: a model cannot be judged without
them), then rank 0 of the training split (the first caption of every training photo in every language, in
corpus order), then the validation split, then training ranks 1, 2, ... So whenever the job is stopped, the
cache holds whole evaluation splits and the first k captions of every training photo, which a run can train
on with ``captions_per_photo: k``. Each stage writes shards as it goes (see ``SentenceEmbeddingCache``): a
killed job loses at most one shard and resumes where it stopped.

A model that fine-tunes e5's last k layers (``model.text_finetune_layers``) reads the hidden states entering them,
not e5's sentence vectors: ``tail_layers=k`` fills that cache (:mod:`.e5.states_cache`) in the same order instead.
"""

from __future__ import annotations

import logging
import os
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from ...data.types import Caption
from .base import PretrainedModelError, PretrainedSentenceEncoder
from .cache import SentenceEmbeddingCache, encode_cached

__all__ = ["EmbeddingStage", "caption_ranks", "priority_stages", "precompute_embeddings"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EmbeddingStage:
    name: str  # e.g. "test", "train rank 0"
    lang: str
    texts: tuple[str, ...]


def caption_ranks(captions: Sequence[Caption]) -> list[int]:
    """For each caption, how many captions of the same photo and language come before it (corpus order)."""
    seen: dict[tuple[str, str], int] = defaultdict(int)
    out = []
    for c in captions:
        key = (c.photo_id, c.lang)
        out.append(seen[key])
        seen[key] += 1
    return out


def priority_stages(
    captions: Sequence[Caption], languages: Sequence[str], *, eval_split: str = "test", val_split: str = "val"
) -> Iterator[EmbeddingStage]:
    """Stages in the order of the module docstring, one per (stage, language); empty ones are skipped."""
    ranks = caption_ranks(captions)
    top = max(ranks, default=-1)

    def pick(name: str, keep: Callable[[Caption, int], bool]) -> Iterator[EmbeddingStage]:
        for lang in languages:
            texts = tuple(c.text for c, r in zip(captions, ranks) if c.lang == lang and keep(c, r))
            if texts:
                yield EmbeddingStage(name, lang, texts)

    yield from pick(eval_split, lambda c, r: c.split == eval_split)
    yield from pick("train rank 0", lambda c, r: c.split == "train" and r == 0)
    if val_split != eval_split:
        yield from pick(val_split, lambda c, r: c.split == val_split)
    for k in range(1, top + 1):
        yield from pick(f"train rank {k}", lambda c, r, k=k: c.split == "train" and r == k)


def precompute_embeddings(
    encoder: PretrainedSentenceEncoder,
    captions: Sequence[Caption],
    cache_dir: str | os.PathLike,
    *,
    languages: Sequence[str] | None = None,
    eval_split: str = "test",
    shard_size: int = 1024,
    report: Callable[[str], None] = print,
    tail_layers: int = 0,
) -> dict[str, int]:
    """Embed every caption the cache lacks, stage by stage; returns {"texts": n, "computed": m}. Languages the
    encoder does not cover (USE has no Czech) are skipped with a line saying so. ``tail_layers`` k > 0 (e5-small
    only): fill the cache of the hidden states entering e5's last k layers instead of its sentence vectors."""
    langs = sorted({c.lang for c in captions}) if languages is None else list(languages)
    skipped = [lang for lang in langs if lang not in encoder.languages]
    if skipped:
        report(f"{encoder.name}: no {', '.join(skipped)} in this encoder; those captions are skipped")
    langs = [lang for lang in langs if lang in encoder.languages]
    name, cache, fill = _filler(encoder, cache_dir, tail_layers, shard_size)
    total = computed = 0
    for stage in priority_stages(captions, langs, eval_split=eval_split):
        t0, misses = time.perf_counter(), cache.misses
        fill(stage.texts, stage.lang)
        new = cache.misses - misses
        total += len(stage.texts)
        computed += new
        rate = f", {new / (time.perf_counter() - t0):.1f}/s" if new else ""
        report(
            f"{name} {stage.name} [{stage.lang}]: {len(stage.texts)} captions, {new} computed "
            f"({time.perf_counter() - t0:.0f} s{rate})"
        )
    return {"texts": total, "computed": computed}


def _filler(encoder: PretrainedSentenceEncoder, cache_dir: str | os.PathLike, tail_layers: int, shard_size: int):
    """(what the report calls it, the cache, fill(texts, lang)): e5's sentence vectors, or its front's states."""
    if not tail_layers:
        cache = SentenceEmbeddingCache.for_encoder(cache_dir, encoder)
        return (
            encoder.name,
            cache,
            lambda texts, lang: encode_cached(encoder, texts, lang, cache, progress=False, shard_size=shard_size),
        )
    if encoder.name != "e5-small":
        raise PretrainedModelError(f"{encoder.name}: a trainable text tail (and its state cache) is e5-small's")
    from .e5.front_onnx import make_front
    from .e5.states_cache import HiddenStateCache, states_cached

    front = make_front(int(tail_layers), encoder.prefix, cache_dir=cache_dir)
    cache = HiddenStateCache.for_front(cache_dir, front)
    return (
        f"{encoder.name} front (cut {front.tail_layers})",
        cache,
        lambda texts, lang: states_cached(front, texts, cache, shard_size=shard_size),
    )
