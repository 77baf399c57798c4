"""Typed training configuration, loaded from YAML/JSON; unknown or mistyped fields are errors that name them."""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, get_type_hints

import yaml

from polyvse.errors import DataError


@dataclass
class TrainConfig:
    name: str = "demo"
    dataset: str = "f8k-ml"
    # "official": Flickr8K's split restricted to the dataset's photos; "fold<i>of<k>": k-fold cross-validation.
    split: str = "official"
    eval_split: str = "test"
    languages: list[str] = field(default_factory=lambda: ["en", "de", "fr", "cs", "zh"])
    backbone: str = "efficientnet-lite0"
    ten_crop: bool = False
    # model
    embed_dim: int = 512
    word_dim: int = 300
    hidden_dim: int = 512
    similarity: str = "cosine"  # cosine | order (Vendrov's -||max(0, |b| - |a|)||^2)
    dropout: float = 0.0
    text_encoder: str = "gru"  # gru | lstm | mean (mean-pooled word embeddings) | pretrained (frozen, below)
    text_sharing: str = "shared"  # shared | per_language (one recurrent encoder + projection per language)
    universal_dim: int = 0  # > 0: MULE's per-language word projection into a universal embedding
    # text_encoder pretrained: a frozen multilingual sentence encoder (e5-small, 384-d | use-multilingual,
    # 512-d, no cs) whose cached sentence vectors feed a learned head (polyvse_train.pretrained_tower)
    pretrained_encoder: str = ""
    text_head: str = "linear"  # text_encoder pretrained: linear | mlp (Linear-ReLU-Dropout-Linear, hidden_dim)
    # fused towers (pretrained_encoder: e5-small+use-multilingual): during training each tower's slice of a
    # caption's input is zeroed with this probability (never all of them), so the head also works on one tower
    # alone -- which is all a language one tower lacks (USE: no cs) ever gets
    tower_dropout: float = 0.0
    image_head: str = "linear"  # linear | mlp (MULE/EmbN: Linear-BN-ReLU-Linear)
    image_hidden_dim: int = 2048
    # objective: vse (hinge over mixed-language caption batches, the demo) | pivot | parallel | mlmme
    # (batches of distinct photos with one caption per language) | mule (several captions per language:
    # top-K image-sentence hinge + neighbourhood constraints + adversarial language classifier)
    objective: str = "vse"
    quotas: dict[str, int] = field(default_factory=dict)  # captions per photo per language; {} = 1 each
    # tuple objectives: distinct (each photo once per epoch, shuffled) | group_balanced (MULE: photos grouped
    # by the languages they have, every batch draws equally from each group; small groups repeat)
    sampler: str = "distinct"
    top_k: int = 0  # 0 = every in-batch negative; K = the K most violated (max_violation = top_k 1)
    # the first N epochs of the main schedule (after MULE's LP / the Translator's source stage) sum every
    # negative before top_k / max_violation take over: hard-negative mining from random init can collapse
    hard_negative_warmup_epochs: int = 0
    beta: float = 1.0  # mlmme: beta * R_MM + (1 - beta) * R_ML
    # MULE terms (objective mule): weights lambda_1 (neighbourhood constraints), lambda_2 (language
    # classifier, through a gradient-reversal layer), lambda_3 = 1 (image-sentence matching)
    nc_weight: float = 0.0
    nc_margin: float = 0.05
    lc_weight: float = 0.0
    lp_epochs: int = 0  # MULE "LP": epochs of neighbourhood constraints on caption pairs before the rest
    word_l2: float = 0.0  # L2 penalty on the word embeddings of the batch (MULE: 5e-7)
    augment_translations: list[str] = field(default_factory=list)  # extra training captions: zhb, zhg (MT)
    # text-side data at scale (polyvse.data.text_tuples): caption tuples of photos WITHOUT an image in the run
    # feed only the caption-caption terms (parallel, mlmme R_ML, mule NC / LP), interleaved with the image
    # batches; evaluation photos are excluded by id and by text. none | multi30k | all (+ Flickr8K/8K-CN)
    text_corpus: str = "none"
    text_tuples_per_epoch: int = 640  # cap on text-only tuples per epoch (~1 text batch per image batch)
    text_vocab_min_count: int = 5  # corpus-only words enter the vocabulary at this count (0: never)
    # word embeddings and AME's alignment
    word_init: str = "random"  # random | muse (words of the MUSE lexicon start at their English vector)
    freeze_word_embeddings: bool = False  # AME-FME
    align: bool = False  # AME: RCSLS loss on the word embeddings against the MUSE lexicons
    align_every: int = 500  # T: one alignment step every T iterations
    align_lr: float = 2.0
    align_k: int = 5
    align_pivot: str = "en"  # every other language is aligned to this one
    # Translator (poster "Grounding multilingual concepts with vision"): a source stage trains the model on
    # source_language captions only, then the target stage trains on the other languages' captions, whose
    # word vectors pass a d x d map into the source language's word space (polyvse.models.language_mapping)
    source_language: str = ""  # "" = no source stage
    source_epochs: int = 0  # epochs of the source stage, before the `epochs` of the target stage
    language_map: list[str] = field(default_factory=list)  # languages whose word vectors pass the map
    language_map_init: str = "random"  # random (orthogonal) | lexicon (MUSE: Procrustes/SVD, then RCSLS)
    language_map_rcsls_epochs: int = 10  # RCSLS refinement steps after the Procrustes solution
    language_map_k: int = 10  # RCSLS neighbourhood size (Joulin et al.: 10)
    freeze_language_map: bool = False  # the map gets no gradient during retrieval training
    # training data size: keep only N training captions of a language (a seeded, nested subset; evaluation
    # captions untouched), for learning curves; {} = all
    caption_limit: dict[str, int] = field(default_factory=dict)
    # keep only the first N training captions of every (photo, language), in corpus order (0 = all): the
    # captions `polyvse features embed-text` embeds first, so a run can use a partly filled sentence cache
    captions_per_photo: int = 0
    min_batches_per_epoch: int = 0  # > 0: an epoch repeats passes over the captions up to this many batches
    # vocabulary
    min_count: int = 1
    max_len: int = 64
    # optimisation
    optimizer: str = "adam"  # adam | sgd (sgd is scale-sensitive: used to test that gradients are exact)
    epochs: int = 15
    batch_size: int = 128
    lr: float = 2e-4
    lr_decay_epoch: int = 10  # lr /= 10 from this epoch on (VSE++ schedule)
    margin: float = 0.2
    max_violation: bool = False
    # objective vse: hinge (margin, max_violation, top_k above) | infonce (symmetric softmax cross-entropy over
    # the batch at `temperature`, as CLIP)
    ranking_loss: str = "hinge"
    temperature: float = 0.05
    grad_clip: float = 2.0
    seed: int = 0
    threads: int = 2
    # smoke mode: a few steps on a slice of the data, for tests
    smoke_photos: int = 64
    smoke_epochs: int = 1
    smoke_max_batches: int = 0  # > 0: a smoke epoch stops after this many batches (0 = the whole slice)

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "<dict>") -> "TrainConfig":
        known = {f.name: f for f in fields(cls)}
        hints = get_type_hints(cls)
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise DataError(f"unknown field(s) {', '.join(unknown)}; known fields: {', '.join(known)}", source)
        for key, value in data.items():
            expected = hints[key]
            origin = getattr(expected, "__origin__", expected)
            ok = isinstance(value, origin) or (origin is float and isinstance(value, int)) 
            if isinstance(value, bool) and origin in (int, float):
                ok = False
            if not ok:
                raise DataError(f"field {key!r} must be {getattr(expected, '__name__', expected)}, got {value!r}",
                                source)
        return cls(**data)

    @classmethod
    def load(cls, path: str | Path) -> "TrainConfig":
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise DataError(f"cannot read config ({exc.strerror})", path) from exc
        try:
            data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
        except (yaml.YAMLError, json.JSONDecodeError) as exc:
            raise DataError(f"not valid YAML/JSON: {exc}", path) from exc
        if not isinstance(data, dict):
            raise DataError("a config must be a mapping of field: value", path)
        return cls.from_dict(data, source=str(path))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
