"""The sections of a training config but the objective's (polyvse_train.config.objective): what each field is, its
default, and the checks of its own values. Every section is a dataclass on polyvse_train.sections.Section."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from polyvse.data.registry import DEFAULT_DATASET, dataset_translations
from polyvse.data.splits import DEFAULT_EVAL_SPLIT, OFFICIAL, parse_split
from polyvse.data.text_tuples import TEXT_CORPORA
from polyvse.errors import DataError
from polyvse.modules.pretrained.text_branch import TEXT_HEADS

from ..sections import Section, at_least, one_of

WORD_INITS = ("random", "muse")
OPTIMIZERS = ("adam", "sgd")
SIMILARITIES = ("cosine", "order")
# model.retrieval_scoring: the similarity's own scores, or CSLS (polyvse.csls.banks)
RETRIEVAL_SCORINGS = ("similarity", "csls")
TEXT_ENCODERS = ("gru", "lstm", "mean", "pretrained")
TEXT_SHARINGS = ("shared", "per_language")
IMAGE_HEADS = ("linear", "mlp")


@dataclass
class DataSection(Section):
    """What the model is trained and evaluated on."""

    key: ClassVar[str] = "data"
    dataset: str = DEFAULT_DATASET
    # "official": Flickr8K's split restricted to the dataset's photos; "fold<i>of<k>": k-fold cross-validation.
    split: str = OFFICIAL
    eval_split: str = DEFAULT_EVAL_SPLIT
    languages: list[str] = field(default_factory=lambda: ["en", "de", "fr", "cs", "zh"])
    # image features: a backbone of polyvse.features, or "a+b" (both networks' features side by side)
    backbone: str = "efficientnet-lite0"
    ten_crop: bool = False
    # the pixel path (model.finetune_backbone), and photo_views' augmented views: each training photo is a random
    # crop of this fraction of its area or more (aspect 3/4 to 4/3, after the backbone's resize), resized to the
    # backbone's input, flipped half the time
    crop_scale_min: float = 0.5
    # the pixel path: decode and resize every training photo once and keep it (uint8) on the run's device, cutting
    # each step's crops there (polyvse_train.pixels.ResidentPhotos) instead of decoding every step in workers; a
    # GPU's choice (it holds every training photo's pixels in device memory), where decoding bounds the loop
    resident_photos: bool = False
    # cached features: > 1 also caches photo_views - 1 such augmented views of every training photo (fixed per
    # photo and view, polyvse_train.photo_views), and each step reads one of the photo_views for each of its photos
    # (the photo itself among them); 1 = every step reads the photo as evaluation does
    photo_views: int = 1
    # extra training captions: the dataset's machine translations (f8k-ml, f8k-full: zhb, zhg; DatasetSpec)
    augment_translations: list[str] = field(default_factory=list)
    # text-side data at scale (polyvse.data.text_tuples): caption tuples of photos WITHOUT an image in the run
    # feed only the caption-caption terms (parallel, mlmme R_ML, mule NC / LP), interleaved with the image
    # batches; evaluation photos are excluded by id and by text. none | multi30k | all (+ Flickr8K/8K-CN)
    text_corpus: str = "none"
    text_tuples_per_epoch: int = 640  # cap on text-only tuples per epoch (~1 text batch per image batch)
    text_vocab_min_count: int = 5  # corpus-only words enter the vocabulary at this count (0: never)
    # training data size: keep only N training captions of a language (a seeded, nested subset; evaluation
    # captions untouched), for learning curves; {} = all
    caption_limit: dict[str, int] = field(default_factory=dict)
    # keep only the first N training captions of every (photo, language), in corpus order (0 = all): the
    # captions `polyvse features embed-text` embeds first, so a run can use a partly filled sentence cache
    captions_per_photo: int = 0
    # vocabulary
    min_count: int = 1
    max_len: int = 64

    def check(self, fail) -> None:
        try:
            parse_split(self.split)
        except DataError as exc:
            fail("split", exc.reason.removeprefix("split "))
        one_of(fail, self, "eval_split", ("val", "test"))
        if not 0 < self.crop_scale_min <= 1:
            fail("crop_scale_min", f"{self.crop_scale_min}: a fraction of the photo's area, in (0, 1]")
        if not self.languages:
            fail("languages", "name at least one language")
        translations = dataset_translations(self.dataset)
        for variant in self.augment_translations:
            if variant not in translations:
                fail(
                    "augment_translations",
                    f"{variant!r}: dataset {self.dataset} has the machine translations "
                    f"{', '.join(translations) or '(none)'}",
                )
            elif translations[variant].lang not in self.languages:
                fail(
                    "augment_translations",
                    f"{variant} translates into {translations[variant].lang}: add it to languages",
                )
        one_of(fail, self, "text_corpus", TEXT_CORPORA)
        for name in ("text_tuples_per_epoch", "text_vocab_min_count", "captions_per_photo", "min_count"):
            at_least(fail, self, name, 0)
        at_least(fail, self, "max_len", 1)
        at_least(fail, self, "photo_views", 1)
        if self.photo_views > 1 and self.ten_crop:
            fail(
                "photo_views",
                "an augmented view is one crop of a photo, not the mean of ten; set ten_crop: false or photo_views: 1",
            )


@dataclass
class ModelSection(Section):
    """The retrieval model's parts and sizes (polyvse.modules.ModelConfig)."""

    key: ClassVar[str] = "model"
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
    # Translator: languages whose word vectors pass a d x d map into the source language's word space
    language_map: list[str] = field(default_factory=list)
    # partial fine-tuning of the image backbone (polyvse.features.tail): the last N MBConv blocks of an
    # EfficientNet-Lite and its head conv train (at schedule.finetune_lr_scale x lr) on the cached map entering
    # them; 0 = a frozen backbone's pooled features
    finetune_blocks: int = 0
    # fine-tuning of the whole image backbone (an EfficientNet-Lite: stem, every block, head conv; at
    # schedule.finetune_lr_scale x lr) on photos decoded and augmented for every step (the pixel path,
    # polyvse_train.pixels; data.crop_scale_min): a GPU's work. The checkpoint carries the trained backbone
    finetune_backbone: bool = False
    # partial fine-tuning of the e5 text tower (polyvse.modules.pretrained.e5.tail; text_encoder pretrained with
    # pretrained_encoder e5-small or e5-small+...): its last N transformer layers and pooling train (at
    # schedule.text_finetune_lr_scale x lr) on the cached hidden states entering them; 0 = frozen sentence vectors,
    # 12 = every layer (on the cached embedding-layer output; the token embedding table stays frozen)
    text_finetune_layers: int = 0
    # how the finished model ranks photos and captions for each other: "similarity" (the similarity's own scores)
    # or "csls" (cosine less CSLS's hubness terms against banks of the TRAINING photos and captions, which the
    # checkpoint carries: polyvse.csls.banks); training is the same either way
    retrieval_scoring: str = "similarity"
    csls_k: int = 10  # retrieval_scoring csls: neighbours in each hubness term

    def check(self, fail) -> None:
        one_of(fail, self, "retrieval_scoring", RETRIEVAL_SCORINGS)
        at_least(fail, self, "csls_k", 1)
        if self.retrieval_scoring == "csls" and self.similarity != "cosine":
            fail("retrieval_scoring", f"csls corrects cosine scores; similarity is {self.similarity!r}")
        for name in ("embed_dim", "word_dim", "hidden_dim", "image_hidden_dim"):
            at_least(fail, self, name, 1)
        at_least(fail, self, "finetune_blocks", 0)
        if not 0 <= self.text_finetune_layers <= 12:
            fail(
                "text_finetune_layers",
                f"{self.text_finetune_layers}: e5-small has 12 layers; train 0 (frozen) to 12 (all of them)",
            )
        at_least(fail, self, "universal_dim", 0)
        one_of(fail, self, "similarity", SIMILARITIES)
        one_of(fail, self, "text_encoder", TEXT_ENCODERS)
        one_of(fail, self, "text_sharing", TEXT_SHARINGS)
        one_of(fail, self, "text_head", TEXT_HEADS)
        one_of(fail, self, "image_head", IMAGE_HEADS)
        for name in ("dropout", "tower_dropout"):
            if not 0 <= getattr(self, name) < 1:
                fail(name, f"{getattr(self, name)}: a probability in [0, 1)")


@dataclass
class AlignSection(Section):
    """AME (Mohammadshahi et al. 2019): word embeddings aligned across languages through the MUSE lexicons
    (polyvse.alignment.LexiconAligner); docs/methods/ame.md."""

    key: ClassVar[str] = "align"
    flat_names: ClassVar[dict[str, str]] = {
        "loss": "align",
        "freeze_words": "freeze_word_embeddings",
        "every": "align_every",
        "lr": "align_lr",
        "k": "align_k",
        "pivot": "align_pivot",
    }
    loss: bool = False  # the RCSLS alignment loss on the word embeddings, one step every `every` iterations
    word_init: str = "random"  # random | muse (words of the lexicon start at their pivot-language vector)
    freeze_words: bool = False  # the word embeddings get no gradient (AME-FME)
    every: int = 500  # T: one alignment step every T iterations
    lr: float = 2.0  # plain SGD on the translators and the word embeddings
    k: int = 5  # RCSLS neighbourhood size
    pivot: str = "en"  # every other language is aligned to this one

    def check(self, fail) -> None:
        one_of(fail, self, "word_init", WORD_INITS)
        at_least(fail, self, "every", 1)
        at_least(fail, self, "k", 1)

    @property
    def uses_lexicon(self) -> bool:
        """Whether a run needs the aligner (the loss, or the lexicon initialisation and alignment ratio)."""
        return self.loss or self.word_init == "muse"


@dataclass
class ScheduleSection(Section):
    """Optimisation: how long, how fast, in what batches, on how many threads."""

    key: ClassVar[str] = "schedule"
    optimizer: str = "adam"  # adam | sgd (sgd is scale-sensitive: used to test that gradients are exact)
    epochs: int = 15
    batch_size: int = 128
    lr: float = 2e-4
    lr_decay_epoch: int = 10  # lr /= 10 from this epoch on (VSE++ schedule)
    grad_clip: float = 2.0
    min_batches_per_epoch: int = 0  # > 0: an epoch repeats passes over the captions up to this many batches
    seed: int = 0
    threads: int = 2
    finetune_lr_scale: float = 0.1  # model.finetune_blocks / finetune_backbone: the backbone learns at this x lr
    text_finetune_lr_scale: float = 0.1  # model.text_finetune_layers: the e5 tail learns at this fraction of lr
    # > 0: the checkpoint holds a moving average of the weights, updated every step with this decay
    # (polyvse_train.weight_average); 0: the last step's weights
    ema_decay: float = 0.0

    def check(self, fail) -> None:
        one_of(fail, self, "optimizer", OPTIMIZERS)
        for name in ("finetune_lr_scale", "text_finetune_lr_scale"):
            if getattr(self, name) <= 0:
                fail(name, f"must be > 0, got {getattr(self, name)}")
        for name in ("epochs", "lr_decay_epoch", "min_batches_per_epoch", "grad_clip"):
            at_least(fail, self, name, 0)
        for name in ("batch_size", "threads"):
            at_least(fail, self, name, 1)
        if self.lr <= 0:
            fail("lr", f"must be > 0, got {self.lr}")
        if not 0.0 <= self.ema_decay < 1.0:
            fail(
                "ema_decay",
                f"must be in [0, 1) (0 = no averaging; 0.998 averages over ~500 steps), got {self.ema_decay}",
            )


#: SmokeSection.caps' defaults (configs/overlays/smoke.yaml names them too)
SMOKE_CAPS = {"lp_epochs": 1, "source_epochs": 1, "align_every": 2}


@dataclass
class SmokeSection(Section):
    """``--smoke``: a few steps on a slice of the data, for tests (the configs' values: configs/overlays/smoke.yaml)."""

    key: ClassVar[str] = "smoke"
    flat_names: ClassVar[dict[str, str]] = {
        "photos": "smoke_photos",
        "epochs": "smoke_epochs",
        "max_batches": "smoke_max_batches",
        "caps": "smoke_caps",
    }
    photos: int = 64
    epochs: int = 1
    max_batches: int = 0  # > 0: a smoke epoch stops after this many batches (0 = the whole slice)
    # the most a smoke run gives a field of the config, by flat name (a field this config lacks, e.g. another
    # objective's option, is left alone): the objectives' own stages (MULE's LP epochs, the Translator's
    # source-only epochs) and AME's alignment period
    caps: dict[str, int] = field(default_factory=lambda: dict(SMOKE_CAPS))

    def check(self, fail) -> None:
        at_least(fail, self, "photos", 1)
        at_least(fail, self, "epochs", 1)
        at_least(fail, self, "max_batches", 0)
        for name, cap in self.caps.items():  # that each names a field: TrainConfig.validate
            if cap < 0:
                fail("caps", f"{name}: {cap}, a cap is 0 or more")
