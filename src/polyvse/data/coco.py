"""MS-COCO readers: English captions with the Karpathy split, Japanese (STAIR / YJ Captions) and
Chinese (COCO-CN) captions, all matched by COCO image id. The COCO files are not in the public mirror:
users download them from their publishers and pass the paths.

Formats:
  Karpathy `dataset_coco.json`: {"images": [{"filepath": "val2014", "filename":
      "COCO_val2014_000000391895.jpg", "cocoid": 391895, "split": "test"|"val"|"train"|"restval",
      "sentences": [{"raw": "...", "tokens": [...]}, ...]}, ...], "dataset": "coco"}
  STAIR Captions / YJ Captions (COCO caption format): {"images": [{"id": 391895, "file_name": ...}],
      "annotations": [{"image_id": 391895, "id": 1, "caption": "..."}]}
  COCO-CN (github li-xirong/coco-cn, `coco-cn-version1805v1.1/`): `imageid.human-written-caption.txt`
      (and `imageid.manually-translated-caption.txt`) with lines `<image id>#<k><TAB><sentence>`, image
      ids like `COCO_train2014_000000xxxxxx` (numeric ids are accepted too); split lists
      `coco-cn_{train,val,test}.txt`, one image id per line.

Photo.id is the COCO image id as a decimal string without leading zeros ("391895").
`load_coco` combines them: photos and split from the Karpathy file, plus any ja/zh captions whose
image is in it (each caption gets its photo's Karpathy split, never the split of its own file, so one
photo is never train in one language and test in another).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from pathlib import Path

from ..errors import DataError
from ._io import read_lines, require_file
from .types import Caption, Corpus, Photo

_COCO_ID = re.compile(r"^(?:COCO_[A-Za-z]+\d{4}_)?0*(\d+)(?:\.jpg)?$")
KARPATHY_SPLITS = {"train": "train", "val": "val", "test": "test", "restval": "train"}


def coco_id(value: object) -> str | None:
    """ "COCO_val2014_000000391895" / "COCO_val2014_000000391895.jpg" / 391895 / "391895" -> "391895"."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value) if value >= 0 else None
    if isinstance(value, str):
        m = _COCO_ID.match(value.strip())
        if m:
            return str(int(m.group(1)))
    return None


def _load_json(path: Path):
    try:
        with open(path, encoding="utf-8-sig") as fh:
            return json.load(fh)
    except UnicodeDecodeError:
        raise DataError("not UTF-8 text; save the file as UTF-8", path) from None
    except json.JSONDecodeError as exc:
        raise DataError(
            f"invalid JSON ({exc.msg}, column {exc.colno}); check the file is complete", path, exc.lineno
        ) from None


class CocoKarpathyReader:
    """English COCO captions with the Karpathy split (`dataset_coco.json`). Split "restval" counts as
    "train" unless `restval` says otherwise. Photo.path = images_dir/filepath/filename when that file
    exists (images_dir given), else None."""

    source = "coco"

    def __init__(
        self, json_path: str | os.PathLike, *, images_dir: str | os.PathLike | None = None, restval: str = "train"
    ):
        self.path = Path(json_path)
        self.images_dir = Path(images_dir) if images_dir is not None else None
        self.restval = restval

    def read(self) -> Corpus:
        path = require_file(self.path, "Karpathy COCO split file (dataset_coco.json)", None)
        data = _load_json(path)
        images = data.get("images") if isinstance(data, dict) else None
        if not isinstance(images, list):
            raise DataError("no 'images' list: not a Karpathy split file (dataset_coco.json)", path)
        corpus = Corpus("coco")
        self.photo_splits: dict[str, str] = {}
        for n, img in enumerate(images):
            where = f"images[{n}]"
            if not isinstance(img, dict):
                raise DataError(f"{where} is not an object", path)
            pid = coco_id(img.get("cocoid")) or coco_id(img.get("filename", ""))
            if pid is None:
                raise DataError(f"{where} has no usable 'cocoid' or COCO 'filename'", path)
            split = img.get("split")
            if split not in KARPATHY_SPLITS:
                raise DataError(
                    f"{where} (cocoid {pid}) has split {split!r}; expected train, val, test or restval", path
                )
            split = self.restval if split == "restval" else KARPATHY_SPLITS[split]
            photo_path = None
            if self.images_dir is not None and img.get("filename"):
                cand = self.images_dir / str(img.get("filepath", "")) / str(img["filename"])
                photo_path = cand.resolve() if cand.is_file() else None
            if pid in corpus.photos:
                raise DataError(f"{where}: cocoid {pid} appears twice", path)
            corpus.photos[pid] = Photo(pid, photo_path)
            self.photo_splits[pid] = split
            sentences = img.get("sentences") or []
            if not isinstance(sentences, list):
                raise DataError(f"{where}: 'sentences' is not a list", path)
            for s in sentences:
                text = ""
                if isinstance(s, dict):
                    text = s.get("raw") or " ".join(s.get("tokens") or [])
                text = " ".join(str(text).split())
                if text:
                    corpus.captions.append(Caption(pid, "en", text, self.source, split))
        return corpus


class StairCaptionsReader:
    """Japanese captions in the COCO caption JSON format (STAIR Captions, YJ Captions): annotations
    {"image_id", "caption"}; "images" (if present) are used to check ids. Caption.split = `split`
    (e.g. "train" for the train2014 file) or ""."""

    def __init__(
        self, json_path: str | os.PathLike, *, split: str = "", lang: str = "ja", source: str = "stair-captions"
    ):
        self.path = Path(json_path)
        self.split = split
        self.lang = lang
        self.source = source

    def read(self) -> Corpus:
        path = require_file(self.path, "STAIR/YJ Captions JSON", None)
        data = _load_json(path)
        anns = data.get("annotations") if isinstance(data, dict) else None
        if not isinstance(anns, list):
            raise DataError("no 'annotations' list: not a COCO-format caption file", path)
        known: set[str] | None = None
        if isinstance(data.get("images"), list) and data["images"]:
            known = {cid for cid in (coco_id(i.get("id")) for i in data["images"] if isinstance(i, dict)) if cid}
        corpus = Corpus(self.source)
        for n, ann in enumerate(anns):
            if not isinstance(ann, dict):
                raise DataError(f"annotations[{n}] is not an object", path)
            pid = coco_id(ann.get("image_id"))
            if pid is None:
                raise DataError(f"annotations[{n}] has no usable 'image_id' ({ann.get('image_id')!r})", path)
            if known is not None and pid not in known:
                raise DataError(f"annotations[{n}]: image_id {pid} is not in 'images'", path)
            text = " ".join(str(ann.get("caption") or "").split())
            if not text:
                continue
            if pid not in corpus.photos:
                corpus.photos[pid] = Photo(pid, None)
            corpus.captions.append(Caption(pid, self.lang, text, self.source, self.split))
        return corpus


class CocoCnReader:
    """Chinese COCO-CN sentences: `<image id>#<k><TAB><sentence>` lines. `split_files` maps a split
    name to a COCO-CN split list (`coco-cn_train.txt` ...); photos in none of them get split ""."""

    def __init__(
        self,
        caption_path: str | os.PathLike,
        *,
        split_files: dict[str, str | os.PathLike] | None = None,
        source: str = "coco-cn",
    ):
        self.path = Path(caption_path)
        self.split_files = {k: Path(v) for k, v in (split_files or {}).items()}
        self.source = source

    def splits(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for split, p in self.split_files.items():
            require_file(p, f"COCO-CN {split} split list", None)
            for i, line in enumerate(read_lines(p), 1):
                if not line.strip():
                    continue
                pid = coco_id(line.strip().split("#")[0])
                if pid is None:
                    raise DataError(f"not a COCO image id: {line.strip()[:40]!r}", p, i)
                if out.get(pid, split) != split:
                    raise DataError(f"image {pid} is in both the {out[pid]} and {split} lists", p, i)
                out[pid] = split
        return out

    def read(self) -> Corpus:
        path = require_file(self.path, "COCO-CN caption file", None)
        splits = self.splits()
        corpus = Corpus(self.source)
        for i, line in enumerate(read_lines(path), 1):
            if not line.strip():
                continue
            if "\t" in line:
                key, text = line.split("\t", 1)
            else:
                key, _, text = line.strip().partition(" ")
            pid = coco_id(key.strip().split("#")[0])
            text = " ".join(text.split())
            if pid is None or not text:
                raise DataError(f"expected `<COCO image id>#<k><TAB><sentence>`, got {line[:60]!r}", path, i)
            if pid not in corpus.photos:
                corpus.photos[pid] = Photo(pid, None)
            corpus.captions.append(Caption(pid, "zh", text, self.source, splits.get(pid, "")))
        return corpus


def load_coco(
    karpathy_json: str | os.PathLike,
    *,
    images_dir: str | os.PathLike | None = None,
    ja_files: Iterable[str | os.PathLike] = (),
    zh_files: Iterable[str | os.PathLike] = (),
    restval: str = "train",
) -> Corpus:
    """COCO photos + English captions with the Karpathy split, plus Japanese (STAIR/YJ JSON) and
    Chinese (COCO-CN text) captions of the same images, matched by COCO id. Captions of images
    outside the Karpathy file are dropped; every caption takes its photo's Karpathy split."""
    reader = CocoKarpathyReader(karpathy_json, images_dir=images_dir, restval=restval)
    base = reader.read()
    split_of = reader.photo_splits
    extra: list[Corpus] = [
        StairCaptionsReader(p).read() for p in ([ja_files] if isinstance(ja_files, (str, Path)) else ja_files)
    ]
    extra += [CocoCnReader(p).read() for p in ([zh_files] if isinstance(zh_files, (str, Path)) else zh_files)]
    for corpus in extra:
        for c in corpus.captions:
            if c.photo_id in base.photos:
                base.captions.append(Caption(c.photo_id, c.lang, c.text, c.source, split_of[c.photo_id]))
    return base
