"""Named datasets: `list_datasets()` and `load_dataset(name, root, **opts) -> Corpus`.

Photo datasets (photos + captions, with splits) and text-only training corpora (photos have path
None, every caption is "train"). Options are keyword arguments; the CLI passes them as
`--opt KEY=VALUE` strings, converted by `parse_options` (lists are comma-separated, booleans
true/false).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import DataError
from .types import Caption, Corpus

DEFAULT_DATASET = "f8k-ml"


@dataclass(frozen=True)
class Translations:
    """Machine translations of a dataset's captions into ``lang``, which training may add to its captions (MULE's
    translation augmentation): ``load(root)`` gives them for every photo, split "train"."""

    lang: str
    load: Callable[[Path], list[Caption]]


@dataclass(frozen=True)
class DatasetSpec:
    name: str
    description: str
    loader: Callable[..., Corpus]  # loader(root, **opts)
    options: Mapping[str, str] = field(default_factory=dict)  # option -> kind: str|bool|list|path|paths
    required: tuple[str, ...] = ()
    text_only: bool = False
    # its photos were resized to a square without keeping the aspect ratio: models trained on them see other
    # photos squashed the same way (polyvse.features.extractor.Preprocess squash)
    squashed_photos: bool = False
    # variant -> machine translations of its captions (a config's data.augment_translations names variants)
    translations: Mapping[str, Translations] = field(default_factory=dict)


_REGISTRY: dict[str, DatasetSpec] = {}


def register_dataset(spec: DatasetSpec) -> None:
    _REGISTRY[spec.name] = spec


def list_datasets() -> list[tuple[str, str]]:
    """(name, one-line description) of every dataset, the default first."""
    names = sorted(_REGISTRY, key=lambda n: (n != DEFAULT_DATASET, n))
    return [(n, _REGISTRY[n].description) for n in names]


def dataset_spec(name: str) -> DatasetSpec:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise DataError(
            f"unknown dataset {name!r}; known: {', '.join(sorted(_REGISTRY))} (see `polyvse data list`)"
        ) from None


def trained_on_squashed_photos(name: str | None) -> bool:
    """Whether dataset ``name`` holds squashed photos (False for unknown names: a user's own data)."""
    spec = _REGISTRY.get(name or "")
    return bool(spec and spec.squashed_photos)


def dataset_translations(name: str | None) -> Mapping[str, Translations]:
    """The machine translations dataset ``name`` has, by variant (none for unknown names: a user's own data)."""
    spec = _REGISTRY.get(name or "")
    return spec.translations if spec else {}


def load_dataset(name: str, root: str | os.PathLike, **opts: Any) -> Corpus:
    """Load dataset `name` from the data root `root` (options per dataset, see `polyvse data list`)."""
    spec = dataset_spec(name)
    unknown = sorted(set(opts) - set(spec.options))
    if unknown:
        known = ", ".join(spec.options) or "none"
        raise DataError(f"dataset {name!r} has no option {unknown[0]!r}; its options: {known}")
    missing = [o for o in spec.required if opts.get(o) in (None, "")]
    if missing:
        raise DataError(f"dataset {name!r} needs option {missing[0]!r} (CLI: --opt {missing[0]}=...)")
    return spec.loader(Path(root), **opts)


def parse_options(name: str, items: Iterable[str]) -> dict[str, Any]:
    """`["key=value", ...]` (CLI strings) -> typed keyword options for dataset `name`."""
    spec = dataset_spec(name)
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key:
            raise DataError(f"option {item!r} is not KEY=VALUE")
        kind = spec.options.get(key)
        if kind is None:
            known = ", ".join(spec.options) or "none"
            raise DataError(f"dataset {name!r} has no option {key!r}; its options: {known}")
        value = value.strip()
        if kind == "bool":
            low = value.lower()
            if low not in ("true", "false", "1", "0", "yes", "no"):
                raise DataError(f"option {key} takes true or false, not {value!r}")
            out[key] = low in ("true", "1", "yes")
        elif kind in ("list", "paths"):
            out[key] = [v.strip() for v in value.split(",") if v.strip()]
        else:
            out[key] = value
    return out


# -- built-in datasets ----------------------------------------------------------------------------------
def _f8kml(root: Path, **opts) -> Corpus:
    from .f8kml import load_f8kml

    return load_f8kml(root, **opts)


def _f8kml_text(root: Path, **opts) -> Corpus:
    from .f8kml import load_f8kml_text

    return load_f8kml_text(root, **opts)


def _f8kfull(root: Path, **opts) -> Corpus:
    from .f8kfull import load_f8kfull

    return load_f8kfull(root, **opts)


def _f8kfull_text(root: Path, **opts) -> Corpus:
    from .f8kfull import load_f8kfull_text

    return load_f8kfull_text(root, **opts)


def _multi30k(root: Path, **opts) -> Corpus:
    from .multi30k import Multi30kReader

    return Multi30kReader(root, **opts).read()


def _flickr8k(root: Path, captions: str = "photos") -> Corpus:
    from .flickr8k import Flickr8kReader
    from .flickr8kcn import flickr8kcn_dir, official_split

    splits = official_split(root) if (flickr8kcn_dir(root) / "flickr8ktrain.txt").is_file() else None
    return Flickr8kReader(root, captions=captions, splits=splits).read()


def _flickr8kcn(root: Path, variants: Iterable[str] = ("zhc",)) -> Corpus:
    from .flickr8kcn import Flickr8kCnReader, official_split

    return Flickr8kCnReader(root, variants=variants, splits=official_split(root)).read()


def _flickr8kcn_translation(variant: str) -> Translations:
    """One of Flickr8K-CN's machine translations of the Flickr8K English captions, as Flickr8K photos' captions."""

    def load(root: Path) -> list[Caption]:
        from .flickr8kcn import VARIANTS, Flickr8kCnReader

        records = Flickr8kCnReader(root, variants=(variant,)).records(variant)
        return [Caption(r.photo_id, r.lang, r.text, VARIANTS[variant][2], "train") for r in records]

    return Translations("zh", load)


#: the Flickr8K photo datasets' machine translations: Flickr8K-CN's Baidu (zhb) and Google (zhg) Chinese
FLICKR8KCN_TRANSLATIONS = {variant: _flickr8kcn_translation(variant) for variant in ("zhb", "zhg")}


def _coco(
    root: Path,
    karpathy_json: str,
    images_dir: str | None = None,
    ja_files: Iterable[str] = (),
    zh_files: Iterable[str] = (),
    restval: str = "train",
) -> Corpus:
    from .coco import load_coco

    return load_coco(karpathy_json, images_dir=images_dir, ja_files=ja_files, zh_files=zh_files, restval=restval)


def _generic(root: Path, images: str, captions: str, **opts) -> Corpus:
    from .generic import load_generic

    return load_generic(images, captions, **opts)


for _spec in (
    DatasetSpec(
        "f8k-ml",
        "DEFAULT. The Flickr8K photos at hand (850) with en (Flickr8K + Multi30K), de, fr, cs "
        "(Multi30K) and zh (Flickr8K-CN native) captions; official Flickr8K train/val/test split",
        _f8kml,
        {"dedupe": "bool", "langs": "list", "unlisted_split": "str"},
        translations=FLICKR8KCN_TRANSLATIONS,
    ),
    DatasetSpec(
        "f8k-ml-text",
        "Text-only training corpus for F8K-ML: all Multi30K, Flickr8K and Flickr8K-CN "
        "(zhc/zhb/zhg) captions EXCEPT those of F8K-ML's val+test photos (exclude=all: of all 850)",
        _f8kml_text,
        {"langs": "list", "exclude": "str", "drop_eval_texts": "bool", "zh_variants": "list"},
        text_only=True,
    ),
    DatasetSpec(
        "f8k-full",
        "The whole Flickr8K photo set at hand (7,941 photos, 224x224 squashed; "
        "`polyvse data fetch flickr8k-224`) with en, de, fr, cs, zh captions as f8k-ml; official split "
        "5,867 train / 983 val / 1,000 test (unlisted_split=train keeps the 91 photos in no split)",
        _f8kfull,
        {"dedupe": "bool", "langs": "list", "unlisted_split": "str"},
        squashed_photos=True,
        translations=FLICKR8KCN_TRANSLATIONS,
    ),
    DatasetSpec(
        "f8k-full-text",
        "Text-only training corpus for f8k-full: all Multi30K, Flickr8K and Flickr8K-CN "
        "(zhc/zhb/zhg) captions EXCEPT those of Flickr8K's val+test photos and sentences identical to them",
        _f8kfull_text,
        {"langs": "list", "drop_eval_texts": "bool", "zh_variants": "list"},
        text_only=True,
    ),
    DatasetSpec(
        "multi30k",
        "Multi30K text (photos not distributed): task1 en/de/fr/cs + task2 5 en + 5 de "
        "per image; Multi30K's own train/val/test_2016 splits",
        _multi30k,
        {"tasks": "list", "splits": "list", "langs": "list", "images_dir": "path"},
    ),
    DatasetSpec(
        "flickr8k",
        "Flickr8K English captions of the photos at hand (captions=all: all 8091 photos, "
        "photo files mostly absent); official split",
        _flickr8k,
        {"captions": "str"},
    ),
    DatasetSpec(
        "flickr8kcn",
        "Flickr8K-CN Chinese captions of all Flickr8K photos (variants=zhc,zhb,zhg,zhm,enc); official split",
        _flickr8kcn,
        {"variants": "list"},
    ),
    DatasetSpec(
        "coco",
        "MS-COCO with the Karpathy split (karpathy_json=dataset_coco.json) plus optional "
        "Japanese STAIR/YJ (ja_files=) and Chinese COCO-CN (zh_files=) captions; files not at hand",
        _coco,
        {"karpathy_json": "path", "images_dir": "path", "ja_files": "paths", "zh_files": "paths", "restval": "str"},
        required=("karpathy_json",),
    ),
    DatasetSpec(
        "generic",
        "Your own photos: images=DIR captions=FILE (CSV image,lang,caption[,split] or JSONL); "
        "default_lang=, default_split=train, strict=false",
        _generic,
        {
            "images": "path",
            "captions": "path",
            "default_lang": "str",
            "default_split": "str",
            "strict": "bool",
            "fmt": "str",
        },
        required=("images", "captions"),
    ),
):
    register_dataset(_spec)
