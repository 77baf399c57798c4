"""Typed training configuration in sections (data, model, objective, align, schedule, smoke), loaded from
YAML/JSON. Each section is a dataclass that checks its own fields: pydantic, strictly, checks every value against
its field's type (``languages: [1, 2]``, ``quotas: {en: 1.5}`` and ``epochs: "3"`` are refused), then the section's
``check`` its values; errors name the file and the field path (``model.embed_dim``).

A config file may name a ``base:`` file (a path relative to itself) whose settings it overrides, section by
section; chains are allowed, cycles are an error. A file's ``name`` defaults to its file name (it is never
inherited). The smoke settings (how few steps ``--smoke`` runs) of every config of a folder live in one overlay,
``overlays/smoke.yaml`` in that folder or one above it (``configs/overlays/smoke.yaml``), put under the chain:
what it sets holds unless the config names its own ``smoke:`` settings.

Every field also has a flat name, unique across sections (``embed_dim``, ``align_every``, ``objective``): the
names of the flat configs before the sections. ``from_dict``, ``--set`` and ``TrainConfig(**fields)`` accept
flat names, dotted paths (``model.embed_dim``) and section mappings alike, and ``to_dict()`` gives the flat form,
which checkpoints, metrics.json and the zoo store (so configs saved before the sections still load).
"""
from __future__ import annotations

import dataclasses
import difflib
import functools
import json
import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar, get_type_hints

import yaml

from polyvse.data.registry import DEFAULT_DATASET
from polyvse.data.splits import DEFAULT_EVAL_SPLIT, OFFICIAL, parse_split
from polyvse.data.text_tuples import TEXT_CORPORA
from polyvse.errors import DataError
from polyvse.models.pretrained.text_branch import TEXT_HEADS

SAMPLERS = ("distinct", "group_balanced")
RANKING_LOSSES = ("hinge", "infonce")
LANGUAGE_MAP_INITS = ("random", "lexicon")
WORD_INITS = ("random", "muse")
OPTIMIZERS = ("adam", "sgd")
SIMILARITIES = ("cosine", "order")
TEXT_ENCODERS = ("gru", "lstm", "mean", "pretrained")
TEXT_SHARINGS = ("shared", "per_language")
IMAGE_HEADS = ("linear", "mlp")


class Section:
    """A config section: a dataclass whose fields are typed and which checks its own values."""

    key: ClassVar[str] = ""
    #: field -> its flat name where that differs from the field's name
    flat_names: ClassVar[dict[str, str]] = {}
    #: pydantic's settings for checking a section's types (``check_types``): strict (no "3" for 3, no 1.5 or
    #: true for an int, no tuple for a list; an int for a float is fine), the dataclass's fields as they are
    __pydantic_config__: ClassVar[dict] = {"strict": True, "revalidate_instances": "always"}

    def check(self, fail) -> None:
        """Call ``fail(field, message)`` for a value that is not allowed."""

    @classmethod
    def flat_name(cls, name: str) -> str:
        return cls.flat_names.get(name, name)

    def check_types(self, source: str) -> None:
        """A DataError naming the field (its path and its flat name) whose value does not have the field's type.
        pydantic checks them; the values are kept as given (an int stays an int where the field is a float: a
        config's flat form, and so a run's digest, is what its file says)."""
        from pydantic import ValidationError

        try:
            _type_checker(type(self)).validate_python(self)
        except ValidationError as exc:
            error = exc.errors()[0]
            name = error["loc"][0]
            expected = get_type_hints(type(self))[name]
            expected = expected.__name__ if isinstance(expected, type) else str(expected)
            raise DataError(f"field {self.key}.{name} ({self.flat_name(name)!r}) must be {expected}, got "
                            f"{getattr(self, name)!r}{_inner_type_error(name, error)}", source) from None


@functools.cache
def _type_checker(section: type):
    from pydantic import TypeAdapter

    return TypeAdapter(section)


def _inner_type_error(name: str, error: dict) -> str:
    """`` (languages[0]: input should be a valid string, got 1)`` for an error inside a list or mapping."""
    inner = error["loc"][1:]
    if not inner:
        return ""
    if inner[-1] == "[key]":
        where = f"a key of {name}"
    else:
        where = name + "".join(f"[{part!r}]" for part in inner)
    message = error["msg"][:1].lower() + error["msg"][1:]
    return f" ({where}: {message}, got {error['input']!r})"


def _one_of(fail, section, name: str, allowed) -> None:
    value = getattr(section, name)
    if value not in allowed:
        fail(name, f"{value!r}: use one of {', '.join(allowed)}")


def _at_least(fail, section, name: str, low) -> None:
    value = getattr(section, name)
    if value < low:
        fail(name, f"must be {low} or more, got {value}")


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
    augment_translations: list[str] = field(default_factory=list)  # extra training captions: zhb, zhg (MT)
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
        _one_of(fail, self, "eval_split", ("val", "test"))
        if not self.languages:
            fail("languages", "name at least one language")
        _one_of(fail, self, "text_corpus", TEXT_CORPORA)
        for name in ("text_tuples_per_epoch", "text_vocab_min_count", "captions_per_photo", "min_count"):
            _at_least(fail, self, name, 0)
        _at_least(fail, self, "max_len", 1)


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

    def check(self, fail) -> None:
        for name in ("embed_dim", "word_dim", "hidden_dim", "image_hidden_dim"):
            _at_least(fail, self, name, 1)
        _at_least(fail, self, "finetune_blocks", 0)
        _at_least(fail, self, "universal_dim", 0)
        _one_of(fail, self, "similarity", SIMILARITIES)
        _one_of(fail, self, "text_encoder", TEXT_ENCODERS)
        _one_of(fail, self, "text_sharing", TEXT_SHARINGS)
        _one_of(fail, self, "text_head", TEXT_HEADS)
        _one_of(fail, self, "image_head", IMAGE_HEADS)
        for name in ("dropout", "tower_dropout"):
            if not 0 <= getattr(self, name) < 1:
                fail(name, f"{getattr(self, name)}: a probability in [0, 1)")


@dataclass
class ObjectiveSection(Section):
    """The training objective and its loss settings (one class per objective: polyvse_train.objectives)."""

    key: ClassVar[str] = "objective"
    flat_names: ClassVar[dict[str, str]] = {"name": "objective"}
    # vse (hinge over mixed-language caption batches, the demo) | pivot | parallel | mlmme (batches of
    # distinct photos with one caption per language) | mule (several captions per language: top-K
    # image-sentence hinge + neighbourhood constraints + adversarial language classifier)
    name: str = "vse"
    margin: float = 0.2
    max_violation: bool = False
    top_k: int = 0  # 0 = every in-batch negative; K = the K most violated (max_violation = top_k 1)
    # objective vse: hinge (margin, max_violation, top_k above) | infonce (symmetric softmax cross-entropy over
    # the batch at `temperature`, as CLIP)
    ranking_loss: str = "hinge"
    temperature: float = 0.05
    # teacher learning (polyvse_train.teacher, Multilingual-CLIP): each step also pulls the embeddings of a batch
    # of Multi30K task1 lines in these languages onto the model's own (detached) embedding of the same photo's
    # teacher_language line, InfoNCE at `temperature`; the lines come from the dataset's text-only corpus
    teacher_students: list[str] = field(default_factory=list)  # [] = off
    teacher_language: str = "en"
    teacher_weight: float = 1.0
    teacher_batch_size: int = 256
    teacher_photos: str = "all"  # all: every Multi30K photo outside evaluation | train: the run's training photos
    # the first N epochs of the main schedule (after MULE's LP / the Translator's source stage) sum every
    # negative before top_k / max_violation take over: hard-negative mining from random init can collapse
    hard_negative_warmup_epochs: int = 0
    quotas: dict[str, int] = field(default_factory=dict)  # captions per photo per language; {} = 1 each
    # tuple objectives: distinct (each photo once per epoch, shuffled) | group_balanced (MULE: photos grouped
    # by the languages they have, every batch draws equally from each group; small groups repeat)
    sampler: str = "distinct"
    beta: float = 1.0  # mlmme: beta * R_MM + (1 - beta) * R_ML
    # MULE terms (objective mule): weights lambda_1 (neighbourhood constraints), lambda_2 (language
    # classifier, through a gradient-reversal layer), lambda_3 = 1 (image-sentence matching)
    nc_weight: float = 0.0
    nc_margin: float = 0.05
    lc_weight: float = 0.0
    lp_epochs: int = 0  # MULE "LP": epochs of neighbourhood constraints on caption pairs before the rest
    word_l2: float = 0.0  # L2 penalty on the word embeddings of the batch (MULE: 5e-7)
    # Translator (poster "Grounding multilingual concepts with vision"): a source stage trains the model on
    # source_language captions only, then the target stage trains on the other languages' captions, whose
    # word vectors pass model.language_map into the source language's word space
    source_language: str = ""  # "" = no source stage
    source_epochs: int = 0  # epochs of the source stage, before the `epochs` of the target stage
    language_map_init: str = "random"  # random (orthogonal) | lexicon (MUSE: Procrustes/SVD, then RCSLS)
    language_map_rcsls_epochs: int = 10  # RCSLS refinement steps after the Procrustes solution
    language_map_k: int = 10  # RCSLS neighbourhood size (Joulin et al.: 10)
    freeze_language_map: bool = False  # the map gets no gradient during retrieval training

    def check(self, fail) -> None:
        _one_of(fail, self, "sampler", SAMPLERS)
        _one_of(fail, self, "language_map_init", LANGUAGE_MAP_INITS)
        for name in ("top_k", "hard_negative_warmup_epochs", "lp_epochs", "source_epochs", "nc_weight",
                     "lc_weight", "word_l2", "language_map_rcsls_epochs"):
            _at_least(fail, self, name, 0)
        _at_least(fail, self, "language_map_k", 1)
        if self.max_violation and self.top_k not in (0, 1):
            fail("max_violation", "max_violation means top_k 1; set one of them")
        self._check_ranking_loss(fail)
        self._check_teacher(fail)
        if self.lp_epochs > 0 and self.name != "mule":
            fail("lp_epochs", f"MULE's LP stage: use it with objective mule, not {self.name!r}")
        if (self.language_map_init == "lexicon" or self.source_epochs > 0) and not self.source_language:
            fail("source_language", "language_map_init lexicon and source_epochs need source_language (the "
                 "language the map goes into and the source stage trains on)")
        if self.source_language and self.name != "vse":
            fail("source_language", f"the Translator's stages run with objective vse, not {self.name!r}")
        if not 0 <= self.beta <= 1:
            fail("beta", f"{self.beta}: the weight of R_MM, in [0, 1]")


    def _check_teacher(self, fail) -> None:
        if not self.teacher_students:
            return
        if self.name != "vse":
            fail("teacher_students", f"teacher learning runs with objective vse, not {self.name!r}")
        if self.teacher_language in self.teacher_students:
            fail("teacher_students", f"{self.teacher_language} is the teacher_language; a language cannot teach "
                 "itself")
        _at_least(fail, self, "teacher_batch_size", 2)
        _one_of(fail, self, "teacher_photos", ("all", "train"))
        if not self.teacher_weight > 0:
            fail("teacher_weight", f"must be positive, got {self.teacher_weight}")

    def _check_ranking_loss(self, fail) -> None:
        if self.ranking_loss not in RANKING_LOSSES:
            fail("ranking_loss", f"{self.ranking_loss!r}: use hinge or infonce")
        if self.ranking_loss != "hinge" and self.name != "vse":
            fail("ranking_loss", f"{self.ranking_loss!r} is objective vse's option; objective {self.name!r} uses "
                 "its paper's hinge")
        if self.ranking_loss == "infonce" and (self.max_violation or self.top_k):
            fail("ranking_loss", "infonce weighs every negative by its softmax: unset max_violation and top_k")
        if not self.temperature > 0:
            fail("temperature", f"must be positive, got {self.temperature}")


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
        _one_of(fail, self, "word_init", WORD_INITS)
        _at_least(fail, self, "every", 1)
        _at_least(fail, self, "k", 1)

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
    finetune_lr_scale: float = 0.1  # model.finetune_blocks: the backbone tail learns at this fraction of lr

    def check(self, fail) -> None:
        _one_of(fail, self, "optimizer", OPTIMIZERS)
        if self.finetune_lr_scale <= 0:
            fail("finetune_lr_scale", f"must be > 0, got {self.finetune_lr_scale}")
        for name in ("epochs", "lr_decay_epoch", "min_batches_per_epoch", "grad_clip"):
            _at_least(fail, self, name, 0)
        for name in ("batch_size", "threads"):
            _at_least(fail, self, name, 1)
        if self.lr <= 0:
            fail("lr", f"must be > 0, got {self.lr}")


@dataclass
class SmokeSection(Section):
    """``--smoke``: a few steps on a slice of the data, for tests (the configs' values: configs/overlays/smoke.yaml)."""

    key: ClassVar[str] = "smoke"
    flat_names: ClassVar[dict[str, str]] = {"photos": "smoke_photos", "epochs": "smoke_epochs",
                                            "max_batches": "smoke_max_batches"}
    photos: int = 64
    epochs: int = 1
    max_batches: int = 0  # > 0: a smoke epoch stops after this many batches (0 = the whole slice)

    def check(self, fail) -> None:
        _at_least(fail, self, "photos", 1)
        _at_least(fail, self, "epochs", 1)
        _at_least(fail, self, "max_batches", 0)


SECTIONS: tuple[type[Section], ...] = (DataSection, ModelSection, ObjectiveSection, AlignSection,
                                       ScheduleSection, SmokeSection)
SECTION_BY_KEY = {s.key: s for s in SECTIONS}
#: flat name -> (section key, field name)
FLAT_FIELDS: dict[str, tuple[str, str]] = {s.flat_name(f.name): (s.key, f.name) for s in SECTIONS for f in fields(s)}
#: a section key given a plain value stands for one of its fields (``objective: mule``, ``align: true``)
SECTION_SHORTHANDS = {key: FLAT_FIELDS[key] for key in SECTION_BY_KEY if key in FLAT_FIELDS}
SMOKE_OVERLAY = Path("overlays") / "smoke.yaml"


@dataclass(init=False)
class TrainConfig:
    """A training run's configuration (module docstring). ``TrainConfig(**fields)`` takes what ``from_dict``
    takes without checking it; ``from_dict`` and ``load`` check types and values."""

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
        nested = normalise(values, "<TrainConfig>")
        self.name = nested.pop("name", "demo")
        for section in SECTIONS:
            given = nested.get(section.key, {})
            setattr(self, section.key, given if isinstance(given, section) else section(**given))

    # -- construction --------------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "<dict>") -> "TrainConfig":
        """A checked config from flat names, dotted paths or section mappings; errors name ``source``."""
        nested = normalise(data, source)
        cfg = cls(**nested)
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
        return type(self).from_dict(merge(self.to_nested(), normalise(assignments, source)), source=source)

    # -- fields by flat name or dotted path ------------------------------------------------------------
    def get(self, name: str) -> Any:
        """A field's value by its flat name (``embed_dim``) or path (``model.embed_dim``)."""
        section, field_name = field_path(name)
        return getattr(getattr(self, section), field_name)

    def set(self, name: str, value: Any) -> None:
        """Set a field by flat name or path, unchecked (``validate`` checks)."""
        section, field_name = field_path(name)
        setattr(getattr(self, section), field_name, value)

    # -- forms ---------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The flat form (what checkpoints, metrics.json and the zoo record)."""
        out: dict[str, Any] = {"name": self.name}
        for section in SECTIONS:
            values = dataclasses.asdict(getattr(self, section.key))
            out.update({section.flat_name(k): v for k, v in values.items()})
        return out

    def to_nested(self) -> dict[str, Any]:
        """The sectioned form, as a config file writes it."""
        return {"name": self.name, **{s.key: dataclasses.asdict(getattr(self, s.key)) for s in SECTIONS}}

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
        obj, model = self.objective, self.model
        unknown = sorted(set(obj.quotas) - set(langs))
        if unknown:
            raise DataError(f"objective.quotas: languages {unknown} are not in data.languages {langs}", source)
        if obj.source_language and obj.source_language not in langs:
            raise DataError(f"objective.source_language {obj.source_language!r} is not among data.languages "
                            f"{langs}; add it", source)
        if obj.source_language and obj.source_language in model.language_map:
            raise DataError(f"model.language_map {model.language_map} maps INTO objective.source_language "
                            f"{obj.source_language!r}; leave it out", source)
        if model.finetune_blocks and not re.fullmatch(r"efficientnet-lite[0-9]", self.data.backbone):
            raise DataError(f"model.finetune_blocks: only an EfficientNet-Lite backbone can be cut and fine-tuned, "
                            f"not data.backbone {self.data.backbone!r}; use efficientnet-lite0/1/2", source)
        if model.finetune_blocks and self.data.ten_crop:
            raise DataError("model.finetune_blocks: the tail trains on one crop's map; set data.ten_crop: false",
                            source)
        if self.align.uses_lexicon and self.align.pivot not in langs:
            raise DataError(f"align.pivot {self.align.pivot!r} is not among data.languages {langs}", source)


def changed_fields(flat: dict[str, Any]) -> dict[str, Any]:
    """The fields of a flat config that differ from TrainConfig's defaults. What identifies a run: a field added
    to TrainConfig later, with a default that keeps the old behaviour, changes neither a finished run's digest
    nor a saved training state's key, so neither turns stale."""
    defaults = TrainConfig().to_dict()
    return {k: v for k, v in flat.items() if k not in defaults or defaults[k] != v}


# -- dict forms: flat names, dotted paths, sections -------------------------------------------------------
def _unknown(name: str, source: str, where: str = "") -> DataError:
    known = sorted(FLAT_FIELDS) if not where else [f.name for f in fields(SECTION_BY_KEY[where])]
    close = difflib.get_close_matches(name.split(".")[-1], known, n=3)
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    return DataError(f"unknown field(s) {name}{hint}; known {'fields of ' + where if where else 'fields'}: "
                     f"{', '.join(known)}; sections: {', '.join(SECTION_BY_KEY)}", source)


def normalise(data: dict[str, Any], source: str) -> dict[str, Any]:
    """``{name, section: {field: value}}`` from any mix of flat names, dotted paths and section mappings."""
    if not isinstance(data, dict):
        raise DataError("a config must be a mapping of field: value", source)
    out: dict[str, Any] = {}
    for key, value in data.items():
        if key == "name":
            out["name"] = value
            continue
        if key in SECTION_BY_KEY and (isinstance(value, (dict, Section))):
            section = SECTION_BY_KEY[key]
            if isinstance(value, Section):
                out[key] = value
                continue
            known = {f.name for f in fields(section)}
            for name, v in value.items():
                if name not in known:
                    raise _unknown(f"{key}.{name}", source, key)
                _put(out, key, name, v)
            continue
        if "." in key:
            section_key, _, name = key.partition(".")
            if section_key not in SECTION_BY_KEY or name not in {f.name for f in fields(SECTION_BY_KEY[section_key])}:
                raise _unknown(key, source, section_key if section_key in SECTION_BY_KEY else "")
            _put(out, section_key, name, value)
        elif key in FLAT_FIELDS:
            _put(out, *FLAT_FIELDS[key], value)
        else:
            raise _unknown(key, source)
    return out


def field_path(name: str) -> tuple[str, str]:
    """(section key, field name) of a flat name or a dotted path; DataError for neither."""
    nested = normalise({name: None}, "<field>")
    section = next(k for k in nested if k != "name")
    return section, next(iter(nested[section]))


def _put(out: dict, section_key: str, name: str, value: Any) -> None:
    target = out.setdefault(section_key, {})
    if isinstance(target, Section):  # a section object given whole, then a field of it: copy, then set
        target = out[section_key] = dataclasses.asdict(target)
    target[name] = value


def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """Normalised ``over`` on top of normalised ``base``, field by field within each section."""
    out = dict(base)
    for key, value in over.items():
        if key in SECTION_BY_KEY:
            below = out.get(key, {})
            below = dataclasses.asdict(below) if isinstance(below, Section) else below
            value = dataclasses.asdict(value) if isinstance(value, Section) else value
            out[key] = {**below, **value}
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
