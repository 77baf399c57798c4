"""Typed training configuration in sections (data, model, objective, align, schedule, smoke), loaded from
YAML/JSON. Each section is a dataclass that checks its own fields: pydantic, strictly, checks every value against
its field's type (``languages: [1, 2]``, ``quotas: {en: 1.5}`` and ``epochs: "3"`` are refused), then the section's
``check`` its values; errors name the file and the field path (``model.embed_dim``).

A config file may name a ``base:`` file (a path relative to itself) whose settings it overrides, section by
section; chains are allowed, cycles are an error. A file's ``name`` defaults to its file name (it is never
inherited). The smoke settings (how few steps ``--smoke`` runs) of every config of a folder live in one overlay,
``overlays/smoke.yaml`` in that folder or one above it (``configs/overlays/smoke.yaml``), put under the chain:
what it sets holds unless the config names its own ``smoke:`` settings.

The objective section holds the objective's name, the ranking settings all objectives share, and the objective's
own options (each objective declares them: ``polyvse_train.objectives``), written in a block named after it
(``objective: {name: mule, mule: {nc_weight: 1.0}}``).

Every field also has a flat name, unique across sections and objectives (``embed_dim``, ``align_every``,
``objective``, ``nc_weight``): the names of the flat configs before the sections. ``from_dict``, ``--set`` and
``TrainConfig(**fields)`` accept flat names, dotted paths (``model.embed_dim``) and section mappings alike, and
``to_dict()`` gives the flat form, which checkpoints, metrics.json and the zoo store (so configs saved before the
sections still load).
"""
from __future__ import annotations

import copy
import dataclasses
import difflib
import json
import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar

import yaml

from polyvse.data.registry import DEFAULT_DATASET, dataset_translations
from polyvse.data.splits import DEFAULT_EVAL_SPLIT, OFFICIAL, parse_split
from polyvse.data.text_tuples import TEXT_CORPORA
from polyvse.errors import DataError
from polyvse.models.pretrained.text_branch import TEXT_HEADS

from .objectives import OBJECTIVES, ObjectiveOptions
from .sections import Section, at_least, one_of

WORD_INITS = ("random", "muse")
OPTIMIZERS = ("adam", "sgd")
SIMILARITIES = ("cosine", "order")
# model.retrieval_scoring: the similarity's own scores, or CSLS (polyvse.similarity.hubness)
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
    # GPU's choice (f8k-full: ~1.8 GB of its memory), where decoding bounds the loop
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
                fail("augment_translations", f"{variant!r}: dataset {self.dataset} has the machine translations "
                     f"{', '.join(translations) or '(none)'}")
            elif translations[variant].lang not in self.languages:
                fail("augment_translations", f"{variant} translates into {translations[variant].lang}: add it to "
                     "languages")
        one_of(fail, self, "text_corpus", TEXT_CORPORA)
        for name in ("text_tuples_per_epoch", "text_vocab_min_count", "captions_per_photo", "min_count"):
            at_least(fail, self, name, 0)
        at_least(fail, self, "max_len", 1)
        at_least(fail, self, "photo_views", 1)
        if self.photo_views > 1 and self.ten_crop:
            fail("photo_views", "an augmented view is one crop of a photo, not the mean of ten; set ten_crop: false "
                 "or photo_views: 1")


@dataclass
class ModelSection(Section):
    """The retrieval model's parts and sizes (polyvse.models.ModelConfig)."""

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
    # partial fine-tuning of the e5 text tower (polyvse.models.pretrained.e5_tail; text_encoder pretrained with
    # pretrained_encoder e5-small or e5-small+...): its last N transformer layers and pooling train (at
    # schedule.text_finetune_lr_scale x lr) on the cached hidden states entering them; 0 = frozen sentence vectors,
    # 12 = every layer (on the cached embedding-layer output; the token embedding table stays frozen)
    text_finetune_layers: int = 0
    # how the finished model ranks photos and captions for each other: "similarity" (the similarity's own scores)
    # or "csls" (cosine less CSLS's hubness terms against banks of the TRAINING photos and captions, which the
    # checkpoint carries: polyvse.similarity.hubness); training is the same either way
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
            fail("text_finetune_layers", f"{self.text_finetune_layers}: e5-small has 12 layers; train 0 (frozen) to "
                 "12 (all of them)")
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
class ObjectiveSection(Section):
    """The training objective: its name, the ranking settings every objective shares, and the objective's own
    options (``Options`` of its class in polyvse_train.objectives), written in a block named after it::

        objective: {name: mule, margin: 0.05, top_k: 10, mule: {nc_weight: 1.0, quotas: {en: 2}}}

    An option has a flat name too (``nc_weight``), and is read through the section as the flat form has it
    (``cfg.objective.nc_weight``: the objective's value, or the option's default when the objective has no such
    option); it is set only in the objective's options (``cfg.objective.options``, ``cfg.set``)."""

    key: ClassVar[str] = "objective"
    flat_names: ClassVar[dict[str, str]] = {"name": "objective"}
    # vse (hinge over mixed-language caption batches, the demo) | pivot | parallel | mlmme (batches of
    # distinct photos with one caption per language) | mule (several captions per language: top-K
    # image-sentence hinge + neighbourhood constraints + adversarial language classifier) | translator
    name: str = "vse"
    margin: float = 0.2
    max_violation: bool = False
    top_k: int = 0  # 0 = every in-batch negative; K = the K most violated (max_violation = top_k 1)
    # the first N epochs of the main schedule (after MULE's LP / the Translator's source stage) sum every
    # negative before top_k / max_violation take over: hard-negative mining from random init can collapse
    hard_negative_warmup_epochs: int = 0
    # the objective's own options: an instance of OBJECTIVES[name].Options (its defaults unless given)
    options: Any = None

    def __post_init__(self) -> None:
        if self.options is None:
            self.options = options_class(self.name)()

    def __getattr__(self, name: str) -> Any:
        # reached for what is not an attribute: an option, read as the flat form records it
        if name in OPTION_DEFAULTS:
            options = self.__dict__.get("options")
            return getattr(options, name) if hasattr(options, name) else copy.deepcopy(OPTION_DEFAULTS[name])
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __setattr__(self, name: str, value: Any) -> None:
        if name in OPTION_DEFAULTS:  # it would land beside the options and change nothing
            raise AttributeError(f"{name} is an option of objective {', '.join(OPTION_OWNERS[name])}: set "
                                 f"cfg.objective.options.{name} or cfg.set({name!r}, value)")
        super().__setattr__(name, value)

    @classmethod
    def own_fields(cls) -> list[dataclasses.Field]:
        return [f for f in fields(cls) if f.name != "options"]

    @classmethod
    def from_values(cls, values: dict[str, Any], source: str) -> "ObjectiveSection":
        """The section of normalised ``values``: its fields, and ``options`` (a mapping of option: value, or an
        options object) made the named objective's options. The flat form lists the options of every objective:
        another objective's option is ignored at its default, refused naming it otherwise."""
        values = dict(values)
        given = values.pop("options", None)
        section = cls(**values)
        if isinstance(given, ObjectiveOptions):  # an options object given whole
            section.options = given
        if given is None or isinstance(given, ObjectiveOptions):
            return section
        own = {f.name for f in fields(type(section.options))}
        foreign = sorted(k for k, v in given.items() if k not in own and v != OPTION_DEFAULTS[k])
        if foreign and section.name not in OBJECTIVES:
            raise DataError(f"objective.name {section.name!r}: use one of {', '.join(OBJECTIVES)}", source)
        if foreign:
            owners = OPTION_OWNERS[foreign[0]]
            raise DataError(f"objective.{foreign[0]}: an option of objective {', '.join(owners)}, not of "
                            f"{section.name}; remove it, or set objective.name: {owners[0]}", source)
        section.options = type(section.options)(**{k: v for k, v in given.items() if k in own})
        return section

    def check_types(self, source: str, path: str = "") -> None:
        super().check_types(source, path)
        self.options.check_types(source, f"{self.key}.{self.name}")

    def check(self, fail) -> None:
        one_of(fail, self, "name", OBJECTIVES)
        for name in ("top_k", "hard_negative_warmup_epochs"):
            at_least(fail, self, name, 0)
        if self.max_violation and self.top_k not in (0, 1):
            fail("max_violation", "max_violation means top_k 1; set one of them")
        if type(self.options) is not options_class(self.name):
            fail(self.name, f"the options of objective {self.name} are {options_class(self.name).__name__}, "
                 f"not {type(self.options).__name__}")
        self.options.check(lambda name, message: fail(f"{self.name}.{name}", message))

    def check_config(self, cfg, fail) -> None:
        """The objective's checks against the rest of the config."""
        self.options.check_config(cfg, lambda name, message: fail(f"{self.name}.{name}", message))


def options_class(objective: str) -> type[ObjectiveOptions]:
    """The options dataclass of an objective (one without a registered objective has none)."""
    cls = OBJECTIVES.get(objective)
    return cls.Options if cls is not None else ObjectiveOptions


def _options_of_objectives() -> tuple[dict[str, list[str]], dict[str, Any]]:
    owners: dict[str, list[str]] = {}
    defaults: dict[str, Any] = {}
    for name, cls in OBJECTIVES.items():
        for f in fields(cls.Options):
            default = f.default_factory() if f.default is dataclasses.MISSING else f.default
            owners.setdefault(f.name, []).append(name)
            assert defaults.setdefault(f.name, default) == default, f"option {f.name}: two defaults"
    return owners, defaults


#: option -> the objectives that have it; option -> its default (the same in every objective that has it)
OPTION_OWNERS, OPTION_DEFAULTS = _options_of_objectives()


@dataclass
class AlignSection(Section):
    """AME (Mohammadshahi et al. 2019): word embeddings aligned across languages through the MUSE lexicons
    (polyvse.alignment.LexiconAligner); docs/methods/ame.md."""

    key: ClassVar[str] = "align"
    flat_names: ClassVar[dict[str, str]] = {"loss": "align", "freeze_words": "freeze_word_embeddings",
                                            "every": "align_every", "lr": "align_lr", "k": "align_k",
                                            "pivot": "align_pivot"}
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
            fail("ema_decay", f"must be in [0, 1) (0 = no averaging; 0.998 averages over ~500 steps), got "
                              f"{self.ema_decay}")


#: SmokeSection.caps' defaults (configs/overlays/smoke.yaml names them too)
SMOKE_CAPS = {"lp_epochs": 1, "source_epochs": 1, "align_every": 2}


@dataclass
class SmokeSection(Section):
    """``--smoke``: a few steps on a slice of the data, for tests (the configs' values: configs/overlays/smoke.yaml)."""

    key: ClassVar[str] = "smoke"
    flat_names: ClassVar[dict[str, str]] = {"photos": "smoke_photos", "epochs": "smoke_epochs",
                                            "max_batches": "smoke_max_batches", "caps": "smoke_caps"}
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
        for name, cap in self.caps.items():
            if name not in FLAT_FIELDS:
                fail("caps", f"{name!r} is not a field's flat name")
            elif cap < 0:
                fail("caps", f"{name}: {cap}, a cap is 0 or more")

    def applied_to(self, cfg: "TrainConfig") -> "TrainConfig":
        """``cfg`` as a ``--smoke`` run trains it (a copy): every capped field it has at most its cap."""
        out = copy.deepcopy(cfg)
        for name, cap in self.caps.items():
            section, field_name = FLAT_FIELDS[name]
            holder = getattr(out, section)
            holder = holder.options if section == ObjectiveSection.key and name in OPTION_DEFAULTS else holder
            if hasattr(holder, field_name) and getattr(holder, field_name) > cap:
                out.set(name, cap)
        return out


SECTIONS: tuple[type[Section], ...] = (DataSection, ModelSection, ObjectiveSection, AlignSection,
                                       ScheduleSection, SmokeSection)
SECTION_BY_KEY = {s.key: s for s in SECTIONS}
#: flat name -> (section key, field name); an objective's option is ("objective", option)
FLAT_FIELDS: dict[str, tuple[str, str]] = {
    **{s.flat_name(f.name): (s.key, f.name) for s in SECTIONS for f in s.own_fields()},
    **{name: (ObjectiveSection.key, name) for name in OPTION_DEFAULTS}}
assert len(FLAT_FIELDS) == sum(len(s.own_fields()) for s in SECTIONS) + len(OPTION_DEFAULTS), "flat names clash"
#: a section key given a plain value stands for one of its fields (``objective: mule``, ``align: true``)
SECTION_SHORTHANDS = {key: FLAT_FIELDS[key] for key in SECTION_BY_KEY if key in FLAT_FIELDS}
SMOKE_OVERLAY = Path("overlays") / "smoke.yaml"


@dataclass(init=False)
class TrainConfig:
    """A training run's configuration (module docstring). ``TrainConfig(**fields)`` takes what ``from_dict``
    takes without checking it (but for an option its objective does not have: refused at once); ``from_dict`` and
    ``load`` check types and values."""

    name: str
    data: DataSection
    model: ModelSection
    objective: ObjectiveSection
    align: AlignSection
    schedule: ScheduleSection
    smoke: SmokeSection

    def __setattr__(self, name: str, value: Any) -> None:
        # a flat name set as an attribute (cfg.epochs = 3) would be silently ignored by the sections
        if name not in self.__dataclass_fields__:
            raise AttributeError(f"TrainConfig has no attribute {name!r}: fields live in sections; use "
                                 f"cfg.set({name!r}, value) or cfg.<section>.<field>")
        super().__setattr__(name, value)

    def __init__(self, **values: Any):
        self._fill(normalise(values, "<TrainConfig>"), "<TrainConfig>")

    def _fill(self, nested: dict[str, Any], source: str) -> None:
        self.name = nested.get("name", "demo")
        for section in SECTIONS:
            given = nested.get(section.key, {})
            setattr(self, section.key, given if isinstance(given, section) else section.from_values(given, source))

    # -- construction --------------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "<dict>") -> "TrainConfig":
        """A checked config from flat names, dotted paths or section mappings; errors name ``source``."""
        cfg = cls.__new__(cls)
        cfg._fill(normalise(data, source), source)
        cfg.validate(source)
        return cfg

    @classmethod
    def load(cls, path: str | Path) -> "TrainConfig":
        """The config of a file and its ``base:`` chain, on top of the smoke overlay if there is one."""
        path = Path(path)
        nested = load_chain(path)
        nested.setdefault("name", path.stem)
        overlay = find_smoke_overlay(path)
        if overlay is not None:
            nested = merge(normalise(read_mapping(overlay), str(overlay)), nested)
        return cls.from_dict(nested, source=str(path))

    def with_overrides(self, assignments: dict[str, Any], source: str) -> "TrainConfig":
        """A checked copy with flat names / dotted paths / sections set."""
        return type(self).from_dict(merge(normalise(self.to_nested(), source), normalise(assignments, source)),
                                    source=source)

    # -- fields by flat name or dotted path ------------------------------------------------------------
    def get(self, name: str) -> Any:
        """A field's value by its flat name (``embed_dim``) or path (``model.embed_dim``); an objective's option
        as the flat form has it (its default when the objective has no such option)."""
        section, field_name = field_path(name)
        return getattr(getattr(self, section), field_name)

    def set(self, name: str, value: Any) -> None:
        """Set a field by flat name or path, unchecked (``validate`` checks). Another objective takes the options
        it shares with the one before (the others must be at their defaults)."""
        section, field_name = field_path(name)
        if section == ObjectiveSection.key and (field_name in OPTION_DEFAULTS or field_name == "name"):
            values = dataclasses.asdict(self.objective)
            (values["options"] if field_name in OPTION_DEFAULTS else values)[field_name] = value
            self.objective = ObjectiveSection.from_values(values, "<set>")
        else:
            setattr(getattr(self, section), field_name, value)

    # -- forms ---------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The flat form (what checkpoints, metrics.json and the zoo record): every field by its flat name, the
        options of every objective among them (those of other objectives than this config's at their defaults)."""
        out: dict[str, Any] = {"name": self.name}
        for section in SECTIONS:
            values = dataclasses.asdict(getattr(self, section.key))
            out.update({section.flat_name(f.name): values[f.name] for f in section.own_fields()})
        out.update({name: getattr(self.objective, name) for name in OPTION_DEFAULTS})
        return out

    def to_nested(self) -> dict[str, Any]:
        """The sectioned form, as a config file writes it (the objective's options in its own block)."""
        out = {"name": self.name, **{s.key: dataclasses.asdict(getattr(self, s.key)) for s in SECTIONS}}
        options = out[ObjectiveSection.key].pop("options")
        if options:
            out[ObjectiveSection.key][self.objective.name] = options
        return out

    # -- checks --------------------------------------------------------------------------------------
    def validate(self, source: str = "<config>") -> None:
        """Every field's type, every section's own checks, then the ones that span sections; errors name the
        field path."""
        if not isinstance(self.name, str):
            raise DataError(f"field 'name' must be str, got {self.name!r}", source)
        for section in SECTIONS:
            getattr(self, section.key).check_types(source)
        for section in SECTIONS:
            def fail(name: str, message: str, key: str = section.key) -> None:
                raise DataError(f"{key}.{name}: {message}", source)

            getattr(self, section.key).check(fail)
        self._check_across_sections(source)

    def _check_across_sections(self, source: str) -> None:
        langs = self.data.languages
        model = self.model

        def fail(name: str, message: str) -> None:
            raise DataError(f"{ObjectiveSection.key}.{name}: {message}", source)

        self.objective.check_config(self, fail)
        if model.language_map and self.objective.name != "translator":
            raise DataError(f"model.language_map {model.language_map}: the Translator's map; set objective.name: "
                            f"translator (not {self.objective.name})", source)
        self._check_backbone_training(source)
        if model.text_finetune_layers and (model.text_encoder != "pretrained"
                                           or not model.pretrained_encoder.startswith("e5-small")):
            raise DataError(f"model.text_finetune_layers: the trainable text tail is e5-small's; set "
                            f"text_encoder: pretrained and pretrained_encoder: e5-small (or e5-small+use-multilingual), "
                            f"not {model.text_encoder!r} / {model.pretrained_encoder!r}", source)
        if self.align.uses_lexicon and self.align.pivot not in langs:
            raise DataError(f"align.pivot {self.align.pivot!r} is not among data.languages {langs}", source)


    def _check_backbone_training(self, source: str) -> None:
        """The image backbone's fine-tuning (model.finetune_blocks, model.finetune_backbone) against the data."""
        model, data = self.model, self.data
        which = "finetune_backbone" if model.finetune_backbone else "finetune_blocks" if model.finetune_blocks else ""
        if model.finetune_backbone and data.photo_views > 1:
            raise DataError(f"data.photo_views {data.photo_views}: the pixel path (model.finetune_backbone) crops "
                            "every photo afresh for every step already; set photo_views: 1", source)
        if data.resident_photos and not model.finetune_backbone:
            raise DataError("data.resident_photos keeps the pixel path's photos on the device; set "
                            "model.finetune_backbone: true, or remove resident_photos", source)
        if not model.finetune_backbone and data.photo_views == 1 and data.crop_scale_min != DataSection.crop_scale_min:
            raise DataError(f"data.crop_scale_min {data.crop_scale_min}: only the pixel path and augmented views crop "
                            "photos; set model.finetune_backbone: true or data.photo_views > 1, or remove "
                            "crop_scale_min", source)
        if not which:
            return
        if not re.fullmatch(r"efficientnet-lite[0-9]", data.backbone):
            raise DataError(f"model.{which}: only an EfficientNet-Lite backbone can be cut and fine-tuned, "
                            f"not data.backbone {data.backbone!r}; use efficientnet-lite0/1/2", source)
        if data.ten_crop:
            raise DataError(f"model.{which}: the backbone trains on one crop of a photo; set data.ten_crop: false",
                            source)
        if model.finetune_backbone and model.finetune_blocks:
            raise DataError(f"model.finetune_blocks {model.finetune_blocks}: model.finetune_backbone trains every "
                            "block already; set finetune_blocks: 0", source)


def changed_fields(flat: dict[str, Any]) -> dict[str, Any]:
    """The fields of a flat config that differ from TrainConfig's defaults. What identifies a run: a field added
    to TrainConfig later, with a default that keeps the old behaviour, changes neither a finished run's digest
    nor a saved training state's key, so neither turns stale. So too the Translator's name: it was objective vse
    with the Translator's fields (source_language, language_map, one of which it needs) before it had one, and
    its runs keep the identity they were recorded with."""
    defaults = TrainConfig().to_dict()
    if flat.get("objective") == "translator":
        flat = {**flat, "objective": "vse"}
    return {k: v for k, v in flat.items() if k not in defaults or defaults[k] != v}


# -- dict forms: flat names, dotted paths, sections -------------------------------------------------------
#: the normalised form's key of an objective's options (a config file names the block after the objective)
OPTIONS = "options"


def _unknown(name: str, source: str, where: str = "", known: list[str] | None = None) -> DataError:
    if known is None:
        known = sorted(FLAT_FIELDS) if not where else [f.name for f in SECTION_BY_KEY[where].own_fields()]
    close = difflib.get_close_matches(name.split(".")[-1], known, n=3)
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    return DataError(f"unknown field(s) {name}{hint}; known {'fields of ' + where if where else 'fields'}: "
                     f"{', '.join(known)}; sections: {', '.join(SECTION_BY_KEY)}", source)


def _moved(path: str, option: str, source: str) -> DataError:
    """The error for an objective's option written as a field of the section (the layout before the options)."""
    owners = OPTION_OWNERS[option]
    return DataError(f"{path}: {option} has moved into the objective's own block, as an option of objective "
                     f"{', '.join(owners)}: write objective: {{name: {owners[0]}, {owners[0]}: {{{option}: ...}}}} "
                     f"(or the flat name {option})", source)


def normalise(data: dict[str, Any], source: str) -> dict[str, Any]:
    """``{name, section: {field: value}}`` from any mix of flat names, dotted paths and section mappings; the
    objective's options, from its block or their flat names, under ``objective: {options: {...}}``."""
    if not isinstance(data, dict):
        raise DataError("a config must be a mapping of field: value", source)
    out: dict[str, Any] = {}
    for key, value in data.items():
        if key == "name":
            out["name"] = value
        elif key in SECTION_BY_KEY and isinstance(value, Section):
            out[key] = value
        elif key in SECTION_BY_KEY and isinstance(value, dict):
            for name, v in value.items():
                _put_path(out, (key, name), v, source, value)
        elif "." in key:
            _put_path(out, tuple(key.split(".")), value, source)
        elif key in FLAT_FIELDS:
            _put(out, *FLAT_FIELDS[key], value)
        else:
            raise _unknown(key, source)
    return out


def _put_path(out: dict, path: tuple[str, ...], value: Any, source: str, mapping: dict | None = None) -> None:
    """The value of ``section.field``, or the options of ``objective.<objective>`` (a block, or one option of it:
    ``objective.mule.nc_weight``); ``mapping``: the section mapping the path is in."""
    section = SECTION_BY_KEY.get(path[0])
    if section is None:
        raise _unknown(".".join(path), source)
    if section is ObjectiveSection and len(path) in (2, 3) and path[1] in (*OBJECTIVES, OPTIONS):
        _put_options(out, path[1], value if len(path) == 2 else {path[2]: value}, source, mapping or {})
    elif len(path) == 2 and path[1] in {f.name for f in section.own_fields()}:
        _put(out, section.key, path[1], value)
    elif section is ObjectiveSection and len(path) == 2 and path[1] in OPTION_DEFAULTS:
        raise _moved(".".join(path), path[1], source)
    else:
        raise _unknown(".".join(path), source, section.key)


def _put_options(out: dict, block: str, options: Any, source: str, mapping: dict) -> None:
    where = f"{ObjectiveSection.key}.{block}"
    if not isinstance(options, dict):
        raise DataError(f"{where}: the options of objective {block}, a mapping of option: value; got {options!r}",
                        source)
    known = list(OPTION_DEFAULTS)
    if block != OPTIONS:
        named = mapping.get("name")
        if named is not None and named != block:
            raise DataError(f"{where}: the options of objective {block}, in a config of objective {named}; write "
                            f"them under objective.{named}", source)
        known = [f.name for f in fields(OBJECTIVES[block].Options)]
    for option, value in options.items():
        if option not in known:
            raise _unknown(f"{where}.{option}", source, where, known)
        _put(out, ObjectiveSection.key, option, value)


def field_path(name: str) -> tuple[str, str]:
    """(section key, field name) of a flat name or a dotted path; DataError for neither. An objective's option is
    (``objective``, option)."""
    nested = normalise({name: None}, "<field>")
    section = next(k for k in nested if k != "name")
    values = nested[section]
    return section, next(iter(values[OPTIONS] if OPTIONS in values else values))


def _put(out: dict, section_key: str, name: str, value: Any) -> None:
    target = out.setdefault(section_key, {})
    if isinstance(target, Section):  # a section object given whole, then a field of it: copy, then set
        target = out[section_key] = dataclasses.asdict(target)
    if section_key == ObjectiveSection.key and name in OPTION_DEFAULTS:
        target = target.setdefault(OPTIONS, {})
    target[name] = value


def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """Normalised ``over`` on top of normalised ``base``, field by field within each section (and option by option
    within the objective's options)."""
    out = dict(base)
    for key, value in over.items():
        if key in SECTION_BY_KEY:
            below = out.get(key, {})
            below = dataclasses.asdict(below) if isinstance(below, Section) else below
            value = dataclasses.asdict(value) if isinstance(value, Section) else value
            out[key] = {**below, **value}
            if OPTIONS in below and OPTIONS in value:
                out[key][OPTIONS] = {**below[OPTIONS], **value[OPTIONS]}
        else:
            out[key] = value
    return out


# -- files ------------------------------------------------------------------------------------------------
def read_mapping(path: Path) -> dict[str, Any]:
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
    return data


def load_chain(path: Path, seen: tuple[Path, ...] = ()) -> dict[str, Any]:
    """The normalised settings of ``path`` on top of those of its ``base:`` file (recursively)."""
    resolved = path.resolve()
    if resolved in seen:
        chain = " -> ".join(str(p) for p in (*seen, resolved))
        raise DataError(f"the base: chain is a cycle: {chain}; remove one of the base: lines", path)
    data = dict(read_mapping(path))
    base = data.pop("base", None)
    nested = normalise(data, str(path))
    if base is None:
        return nested
    if not isinstance(base, str):
        raise DataError(f"base: must be a file path relative to this config, got {base!r}", path)
    parent = load_chain(path.parent / base, (*seen, resolved))
    parent.pop("name", None)  # a name is never inherited
    return merge(parent, nested)


def find_smoke_overlay(config_path: Path) -> Path | None:
    """``overlays/smoke.yaml`` in the config's folder or the nearest folder above it that has one."""
    for folder in (config_path.resolve().parent, *config_path.resolve().parents):
        if (folder / SMOKE_OVERLAY).is_file():
            return folder / SMOKE_OVERLAY
    return None
