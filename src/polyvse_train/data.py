"""A run's data, prepared before the loop: the dataset and its split, the evaluation exclusion, the image features
(through the feature cache; on the pixel path the photos themselves, ``pixels.py``), the training captions (with
the dataset's machine translations, when asked for), the caption encoder (a vocabulary, or a frozen sentence
tower's cached vectors), the text-only tuples and the teacher's pairs. ``train.py`` trains on what
:func:`prepare_data` returns; nothing here trains.

What is particular to a dataset is the dataset's (``polyvse.data.registry.DatasetSpec``): which machine
translations of its captions exist (``translations``: F8K-ML and f8k-full have Flickr8K-CN's Baidu and Google
Chinese ones, zhb and zhg), whether its photos are squashed, where its text-only corpus is.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from polyvse.data.caption_limit import first_captions_per_photo, limit_captions
from polyvse.data.exclusion import EvaluationExclusion, evaluation_exclusion
from polyvse.data.registry import dataset_translations
from polyvse.data.splits import resolve_split
from polyvse.data.types import Corpus
from polyvse.errors import DataError
from polyvse.features.tail import BackboneTail
from polyvse.modules.text_input import CaptionEncoder
from polyvse.util.paths import cache_root

from .config import TrainConfig
from .photo_views import PhotoViews
from .pixels import PhotoPixels, TrainCrop, pixel_key, readable_photos
from .pretrained_tower import pretrained_caption_encoder, uses_pretrained_tower
from .teacher import TeacherPairs, load_teacher_pairs
from .text_corpus import TextTupleSet, build_caption_encoder, load_text_corpus

log = logging.getLogger("polyvse.train")


@dataclass
class CaptionSet:
    photo_row: np.ndarray  # row of the caption's photo in the feature matrix
    langs: list[str]
    ids: list[list[int]]


@dataclass
class PreparedData:
    photo_ids: list[str]
    # (n_photos, image_dim), rows aligned with photo_ids; the photos themselves on the pixel path
    features: torch.Tensor | PhotoViews | PhotoPixels
    train_rows: np.ndarray
    eval_rows: np.ndarray
    train: CaptionSet
    eval: CaptionSet
    captions: CaptionEncoder
    feature_key: str
    n_failed_photos: int
    text_tuples: TextTupleSet | None = None  # text-only caption tuples (cfg.data.text_corpus), None = none
    teacher: TeacherPairs | None = None  # parallel lines for teacher learning (cfg.objective.teacher_students)
    # model.finetune_blocks: the backbone tail after the cut, with the ImageNet weights (its in_shape is the maps'
    # (C, h, w)); model.finetune_backbone: the whole backbone (in_shape (3, crop, crop)); None for pooled features
    # of a frozen backbone
    image_tail: BackboneTail | None = None

    @property
    def image_dim(self) -> int:
        """The size of the image features the model reads outside training: the rows of ``features``, or on the
        pixel path the trained backbone's pooled output (its checkpoint's extractor, polyvse.features.whole)."""
        if isinstance(self.features, PhotoPixels):
            return self.image_tail.out_dim
        return int(self.features.shape[1])


@dataclass
class ImageInput:
    """The image side of a run's data, for the photos that could be read."""

    photo_ids: list[str]  # in row order
    features: torch.Tensor | PhotoViews | PhotoPixels
    key: str  # what identifies them (the extractor's key, or the pixel path's)
    image_tail: BackboneTail | None
    n_failed: int


def prepare_data(
    cfg: TrainConfig, root: Path, smoke: bool = False, progress: bool = True, device: torch.device | None = None
) -> PreparedData:
    """Everything a run trains and evaluates on. ``device``: where photo features missing from the cache are
    extracted (the run's device: on a GPU, with photo-decoding workers sized by ``polyvse.device.loader_workers``
    for the ranks sharing the machine); the features themselves come back on the CPU, as the cache holds them."""
    from polyvse.data.registry import load_dataset

    if cfg.objective.teacher_students and not uses_pretrained_tower(cfg):
        raise DataError(
            "objective.teacher_students: teacher learning needs a frozen pretrained text tower "
            "(model.text_encoder: pretrained)"
        )
    corpus = load_dataset(cfg.data.dataset, root).filter(langs=cfg.data.languages)
    train_ids, eval_ids = resolve_split(corpus, cfg.data.split, cfg.data.eval_split)
    # the run's one exclusion set, from ALL its evaluation photos (before smoke slicing): every training path below
    # (image captions, translations, text tuples, teacher pairs) goes through it
    exclusion = evaluation_exclusion(
        root,
        eval_photo_ids=eval_ids,
        train_photo_ids=train_ids,
        eval_texts=[c.text for c in corpus.captions if c.photo_id in eval_ids],
    )
    log.info("evaluation exclusion: %d photos, %d sentences", len(exclusion.photo_ids), len(exclusion.text_keys))
    text_corpus = load_text_corpus(cfg, root, corpus, exclusion, smoke)
    train_ids, eval_ids, photo_ids = _run_photos(cfg, corpus, train_ids, eval_ids, smoke)
    images = image_input(
        cfg, [corpus.photos[p].path for p in photo_ids], photo_ids, root, progress, device, train_ids=train_ids
    )
    ok_ids = images.photo_ids
    row_of = {p: r for r, p in enumerate(ok_ids)}

    train_caps = training_captions(cfg, root, corpus, {p for p in train_ids if p in row_of}, exclusion)
    train_caps = limit_captions(train_caps, cfg.data.caption_limit, cfg.schedule.seed)  # learning curves; {} keeps all
    eval_caps = [c for c in corpus.captions if c.photo_id in eval_ids and c.photo_id in row_of]
    encoder, text_tuples, teacher = _caption_encoder(
        cfg, root, train_caps, text_corpus, exclusion, train_ids, smoke, progress
    )

    def encode(caps) -> CaptionSet:
        from polyvse.modules.text_input import caption_inputs  # a sentence encoder embeds in batches

        return CaptionSet(
            np.array([row_of[c.photo_id] for c in caps], dtype=np.int64),
            [c.lang for c in caps],
            caption_inputs(encoder, caps),
        )

    return PreparedData(
        photo_ids=ok_ids,
        features=images.features,
        train_rows=np.array(sorted(row_of[p] for p in train_ids if p in row_of), dtype=np.int64),
        eval_rows=np.array(sorted(row_of[p] for p in eval_ids if p in row_of), dtype=np.int64),
        train=encode(train_caps),
        eval=encode(eval_caps),
        captions=encoder,
        feature_key=images.key,
        image_tail=images.image_tail,
        n_failed_photos=images.n_failed,
        text_tuples=text_tuples,
        teacher=teacher,
    )


def _run_photos(cfg: TrainConfig, corpus: Corpus, train_ids: set[str], eval_ids: set[str], smoke: bool):
    """(training photos, evaluation photos, both sorted): a smoke run's slice of them; each must have its file."""
    if smoke:  # a slice of the data: first photos by id, so smoke runs are reproducible and fast
        train_ids = set(sorted(train_ids)[: cfg.smoke.photos])
        eval_ids = set(sorted(eval_ids)[: max(cfg.smoke.photos // 2, 8)])
    photo_ids = sorted(train_ids | eval_ids)
    missing = [p for p in photo_ids if corpus.photos[p].path is None]
    if missing:
        raise DataError(
            f"{cfg.data.dataset}: {len(missing)} photos have no image file (e.g. {missing[0]}); "
            "image-text training needs the photos"
        )
    return train_ids, eval_ids, photo_ids


def _caption_encoder(
    cfg: TrainConfig,
    root: Path,
    train_caps: list,
    text_corpus,
    exclusion,
    train_ids: set[str],
    smoke: bool,
    progress: bool,
):
    """(caption encoder, text tuples, teacher pairs): a frozen pretrained tower with its teacher pairs, or a
    word-level encoder built over the training captions (and the text corpus, with its tuples)."""
    texts_by_lang: dict[str, list[str]] = {}
    for c in train_caps:
        texts_by_lang.setdefault(c.lang, []).append(c.text)
    text_tuples = teacher = None
    if uses_pretrained_tower(cfg):  # frozen sentence vectors from the embedding cache; no vocabulary
        if text_corpus is not None:
            raise DataError(
                "text_corpus needs a word-level text encoder, not a frozen pretrained tower; set text_corpus: none"
            )
        encoder = pretrained_caption_encoder(cfg, root, progress=progress)
        teacher = load_teacher_pairs(cfg, root, encoder, exclusion, train_ids, smoke)
    else:  # without a text corpus: CaptionEncoder.build over the training captions, as always
        encoder, text_tuples = build_caption_encoder(cfg, texts_by_lang, text_corpus)
    return encoder, text_tuples, teacher


def image_input(
    cfg: TrainConfig,
    paths: list,
    photo_ids: list[str],
    root: Path,
    progress: bool,
    device: torch.device | None,
    *,
    train_ids: set[str],
) -> ImageInput:
    """The features of the photos (``paths``, one per id) through the feature cache, with ``data.photo_views``
    the augmented views of the training photos (``train_ids``) too, or on the pixel path the photos themselves;
    unreadable photos are left out (a warning each)."""
    from polyvse.device import loader_workers
    from polyvse.features.backbones import get_extractor
    from polyvse.features.cache import extract_features

    # on the CPU the network already takes every core (polyvse.device.loader_workers)
    on_gpu = device is not None and device.type != "cpu"
    workers = loader_workers(device) if on_gpu else 0
    if cfg.model.finetune_backbone:
        return _pixel_input(cfg, paths, photo_ids, workers, cache_root(root) / "features")
    extractor = get_extractor(feature_backbone(cfg), ten_crop=cfg.data.ten_crop)
    if on_gpu:
        extractor.to(device)  # fp32 without TF32 (FeatureExtractor.forward_batch): the same cache as a CPU's
    result = extract_features(paths, extractor, cache_root(root) / "features", progress=progress, num_workers=workers)
    for path, reason in result.failures:
        log.warning("skipping photo %s: %s", path, reason)
    features = torch.as_tensor(np.asarray(result.features, np.float32))
    if cfg.data.photo_views > 1:
        features = photo_views(
            cfg,
            extractor,
            features,
            [paths[i] for i in result.index],
            [photo_ids[i] in train_ids for i in result.index],
            root,
            progress,
            workers,
        )
    return ImageInput(
        [photo_ids[i] for i in result.index],
        features,
        extractor.key,
        extractor.tail_module() if cfg.model.finetune_blocks else None,
        len(result.failures),
    )


def photo_views(
    cfg: TrainConfig,
    extractor,
    base: torch.Tensor,
    paths: list,
    is_train: list[bool],
    root: Path,
    progress: bool,
    workers: int,
) -> PhotoViews:
    """``base`` (every readable photo, rows as ``paths``) with ``data.photo_views - 1`` augmented views of the
    training photos among them, each view through the feature cache under its own key."""
    from polyvse.features.augment import view_extractor
    from polyvse.features.cache import extract_features

    rows = np.flatnonzero(np.asarray(is_train, dtype=bool))
    views = torch.empty((cfg.data.photo_views - 1, len(rows), base.shape[1]), dtype=torch.float16)
    for v in range(1, cfg.data.photo_views):
        # strict: these photos were read once already, so a failure now is a changed file, not a bad photo
        views[v - 1] = torch.as_tensor(
            extract_features(
                [paths[r] for r in rows],
                view_extractor(extractor, v, cfg.data.crop_scale_min),
                cache_root(root) / "features",
                progress=progress,
                num_workers=workers,
                strict=True,
            ).features
        )
    return PhotoViews(base, views, rows, cfg.schedule.seed)


def _pixel_input(cfg: TrainConfig, paths: list, photo_ids: list[str], workers: int, cache_dir: Path) -> ImageInput:
    """The pixel path's photos (polyvse_train.pixels) and the whole backbone, with its ImageNet weights;
    ``cache_dir``: the feature cache its evaluation embeds the photos through."""
    from polyvse.features.backbones import get_extractor
    from polyvse.features.tail import whole_of

    base = get_extractor(cfg.data.backbone)
    crop = TrainCrop(base.preprocess, cfg.data.crop_scale_min)
    ok, failures = readable_photos(paths, workers)
    resident = cfg.data.resident_photos
    pixels = PhotoPixels(
        [paths[i] for i in ok],
        crop,
        cfg.schedule.seed,
        workers,
        pixel_key(base, feature_backbone(cfg), crop, resident),
        cache_dir,
        resident=resident,
    )
    size = base.preprocess.crop
    return ImageInput(
        [photo_ids[i] for i in ok], pixels, pixels.key, whole_of(base.model, (3, size, size)), len(failures)
    )


def training_captions(
    cfg: TrainConfig, root: Path, corpus: Corpus, train_photos: set[str], exclusion: EvaluationExclusion
) -> list:
    """The corpus captions of the training photos, the first ``captions_per_photo`` of each photo and language
    (0 keeps all), then the translation augmentation's captions, limited per variant the same way; none that
    ``exclusion`` (the run's evaluation exclusion) excludes.

    The limit applies to each before they are joined: the translations are extra zh captions by design, and a
    limit over the joined list kept the native zh caption and dropped every translation (mule-full-mt then
    trained exactly mule-full at ``captions_per_photo: 1``).
    """
    own = exclusion.filter_captions(c for c in corpus.captions if c.photo_id in train_photos)
    translations = exclusion.filter_captions(translation_captions(cfg, root, train_photos))
    return first_captions_per_photo(own, cfg.data.captions_per_photo) + translations


def translation_captions(cfg: TrainConfig, root: Path, train_photos: set[str]) -> list:
    """Translation augmentation (MULE): the dataset's machine-translated captions of TRAINING photos only
    (``data.augment_translations``, variants of ``DatasetSpec.translations``: F8K-ML's and f8k-full's are
    Flickr8K-CN's Baidu (zhb) and Google (zhg) Chinese translations of the Flickr8K English captions); with
    ``captions_per_photo: k``, the first k of each photo per variant (translations of its first English captions).
    (Multi30K task1's de/fr/cs lines are human translations of the task1 English line and are already F8K-ML
    captions.) The config has checked that the dataset has the variants (``DataSection.check``).
    """
    if not cfg.data.augment_translations:
        return []
    translations = dataset_translations(cfg.data.dataset)
    out = []
    for v in cfg.data.augment_translations:
        caps = [c for c in translations[v].load(root) if c.photo_id in train_photos]
        out += first_captions_per_photo(caps, cfg.data.captions_per_photo)
    log.info("translation augmentation: %d training captions (%s)", len(out), ", ".join(cfg.data.augment_translations))
    return out


def feature_backbone(cfg: TrainConfig) -> str:
    """The image features' backbone name: data.backbone, cut before its last blocks when they fine-tune, or
    named as a whole backbone that trains (model.finetune_backbone)."""
    from polyvse.features.tail import tail_name, whole_name

    if cfg.model.finetune_backbone:
        return whole_name(cfg.data.backbone)
    return tail_name(cfg.data.backbone, cfg.model.finetune_blocks) if cfg.model.finetune_blocks else cfg.data.backbone
