"""One in-memory representation for every corpus: photos and captions."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Photo:
    id: str  # stable id; for Flickr photos the numeric Flickr id as a string (e.g. "1000268201")
    path: Path | None  # None for text-only corpora (photo files not at hand)


@dataclass(frozen=True)
class Caption:
    photo_id: str
    lang: str  # ISO 639-1
    text: str
    source: str  # e.g. "flickr8k", "multi30k-task1", "multi30k-task2", "flickr8kcn-zhc"
    split: str  # "train", "val", "test", or "fold0".. ; "" when not assigned


@dataclass
class Corpus:
    """Photos plus captions. Captions refer to photos by id; a text-only corpus has photos with path None."""

    name: str
    photos: dict[str, Photo] = field(default_factory=dict)
    captions: list[Caption] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.captions)

    def __iter__(self) -> Iterator[Caption]:
        return iter(self.captions)

    @property
    def languages(self) -> list[str]:
        return sorted({c.lang for c in self.captions})

    def photo_ids(self) -> list[str]:
        return sorted(self.photos)

    def by_photo(self) -> dict[str, list[Caption]]:
        out: dict[str, list[Caption]] = defaultdict(list)
        for c in self.captions:
            out[c.photo_id].append(c)
        return dict(out)

    def filter(
        self,
        *,
        photo_ids: Iterable[str] | None = None,
        langs: Iterable[str] | None = None,
        exclude_photo_ids: Iterable[str] | None = None,
        name: str | None = None,
    ) -> Corpus:
        keep = set(photo_ids) if photo_ids is not None else None
        drop = set(exclude_photo_ids) if exclude_photo_ids is not None else set()
        lang_set = set(langs) if langs is not None else None
        caps = [
            c
            for c in self.captions
            if (keep is None or c.photo_id in keep)
            and c.photo_id not in drop
            and (lang_set is None or c.lang in lang_set)
        ]
        used = {c.photo_id for c in caps}
        photos = {
            pid: p
            for pid, p in self.photos.items()
            if (keep is None or pid in keep) and pid not in drop and (lang_set is None or pid in used)
        }
        return Corpus(name or self.name, photos, caps)
