"""Searching an index with its model: text -> photos, photo -> photos, photo -> captions.

    import polyvse
    from polyvse.index import PhotoIndex, Searcher
    searcher = Searcher(polyvse.load("runs/demo/checkpoint"), PhotoIndex.open("runs/demo/index"))
    result = searcher.text("zwei Hunde spielen im Schnee", lang="de", k=5)
    for hit in result.hits: print(hit.rank, hit.score, hit.name)

A Searcher refuses a model other than the one that built the index (IndexMismatchError), refuses empty,
over-long and all-unknown-word queries with a DataError that says why, and detects the language for
``lang="auto"`` or refuses (LanguageDetectionError).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..csls.penalties import csls_search
from ..csls.search import SearchHubness
from ..errors import CheckpointError, DataError
from ..features.limits import DEFAULT_MAX_PIXELS
from ..languages import check_language, reads_without_language, served_language, served_languages
from ..util.arrays import normalize_rows
from .fingerprint import similarity_name
from .store import EXACT_MODEL, PhotoIndex

log = logging.getLogger(__name__)

MAX_QUERY_CHARS = 1000
MAX_K = 1000


@dataclass(frozen=True)
class Hit:
    rank: int
    id: int
    name: str
    path: str
    score: float

    def to_dict(self, with_path: bool = False) -> dict:
        d = {"rank": self.rank, "id": self.id, "name": self.name, "score": round(self.score, 6)}
        if with_path:
            d["path"] = self.path
        return d


@dataclass
class TextResult:
    query: str
    lang: str
    hits: list[Hit]
    detected: object = None  # LanguageGuess when lang was "auto"
    unknown_words: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class CaptionHit:
    rank: int
    lang: str
    caption: str
    score: float
    image: str | None = None  # the caption's own photo, when the collection names it

    def to_dict(self) -> dict:
        d = {"rank": self.rank, "lang": self.lang, "caption": self.caption, "score": round(self.score, 6)}
        if self.image is not None:
            d["image"] = self.image
        return d


def check_query(text, max_chars: int = MAX_QUERY_CHARS) -> str:
    if not isinstance(text, str):
        raise DataError(f"the query must be text, not {type(text).__name__}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise DataError(
            f"the query contains characters that are not valid text (an unpaired surrogate "
            f"{text[exc.start]!r} at position {exc.start}); send it as UTF-8"
        ) from None
    text = " ".join(text.split())
    if not text:
        raise DataError("the query is empty; type a few words describing the photo you want")
    if len(text) > max_chars:
        raise DataError(
            f"the query is {len(text)} characters long; the limit is {max_chars}. "
            "Describe the photo in a sentence or two"
        )
    return text


def check_k(k, max_k: int = MAX_K) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise DataError(f"k must be a whole number, not {k!r}")
    if not 1 <= int(k) <= max_k:
        raise DataError(f"k must be between 1 and {max_k}, not {k}")
    return int(k)


class Searcher:
    """A model and the index it built. Thread-safe.

    Inference only reads the model's weights, so threads may run it side by side; two semaphores bound how
    many text encodings and how many photo encodings (the CNN) run at once (``slots``, default: the number
    of CPU cores), so a burst of uploads neither exhausts memory nor makes text queries wait behind them.
    """

    def __init__(self, model, index: PhotoIndex, *, check: bool = True, slots: int | None = None):
        if check:
            index.check_model(model)
        self.model = model
        self.index = index.use_device(getattr(model, "device", None))  # exact search beside a GPU model
        self.similarity = similarity_name(model)
        # a checkpoint that scores retrieval with CSLS: text queries re-rank their cosine candidates by it
        self.hubness = SearchHubness.of_model(model) if self.similarity == "cosine" else None
        slots = max(1, int(slots or os.cpu_count() or 1))
        self.text_slots = threading.BoundedSemaphore(slots)
        self.image_slots = threading.BoundedSemaphore(slots)

    @property
    def languages(self) -> list[str]:
        return self.model.languages

    # -- embedding queries ------------------------------------------------------------------------------
    def prepare(self, embeddings: np.ndarray) -> np.ndarray:
        x = np.ascontiguousarray(np.atleast_2d(embeddings), dtype=np.float32)
        return x if self.similarity != "cosine" else normalize_rows(x)

    def _scorer(self, photo_vectors: np.ndarray, queries: np.ndarray) -> np.ndarray:
        with self.text_slots:
            return self.model.similarity(photo_vectors, queries)

    @property
    def served_languages(self) -> dict[str, str]:
        """Every language the model serves -> "trained", "adapted" or "zero-shot" (polyvse.languages)."""
        return served_languages(self.model)

    def resolve_language(self, text: str, lang: str, k: int = 10):
        """(language code, LanguageGuess or None, the hits already searched or None). 'auto' detects the language
        or refuses (polyvse.text.langid: a model that reads a query without its language is searched as a plausible
        language, and refused only when the query is in a language it cannot read); an explicit code must be one
        the model serves."""
        if (lang or "").strip().lower() != "auto":
            return served_language(self.model, lang), None, None
        from ..text.langid import choose_language, detect_language

        if not reads_without_language(self.model):
            guess = detect_language(text, self.languages)
            return guess.lang, guess, None
        searched: dict[bytes, list[Hit]] = {}  # by query vector: languages that share a part are searched once
        hits_of: dict[str, list[Hit]] = {}

        def answer(code: str) -> list[int]:
            vector = self.embed_text(text, code)
            key = vector.tobytes() + code.encode() * (self.hubness is not None)  # CSLS ranks by language
            if key not in searched:
                searched[key] = self.search_vectors(vector, k, lang=code)[0]
            hits_of[code] = searched[key]
            return [h.id for h in hits_of[code]]

        guess = choose_language(text, list(self.served_languages), answer, trained=self.languages)
        return guess.lang, guess, hits_of.get(guess.lang)

    def unknown_words(self, text: str, lang: str) -> tuple[list[str], int]:
        """(words of the query the model's vocabulary lacks, number of words)."""
        captions = self.model.captions
        if captions.vocab is None:  # a pretrained sentence encoder: no word vocabulary, no unknown words
            return [], 0
        from ..modules.text_input import tag_tokens
        from ..text.tokenize import tokenize

        words = [t for t in tokenize(text, lang, lowercase=captions.lowercase) if any(ch.isalnum() for ch in t)]
        unknown = [w for w, tagged in zip(words, tag_tokens(words, lang)) if tagged not in captions.vocab]
        return unknown, len(words)

    def embed_text(self, text: str, lang: str) -> np.ndarray:
        with self.text_slots:
            return self.prepare(self.model.encode_text([text], lang))

    def embed_image(self, photo, *, max_pixels: int | None = DEFAULT_MAX_PIXELS, name: str | None = None) -> np.ndarray:
        """photo: a path, bytes, a binary file object or a PIL image (validated by load_image)."""
        from ..features.images import load_image  # Pillow: only for a photo query

        image = load_image(photo, max_pixels, name=name)
        return self.embed_pil(image)

    def embed_pil(self, image) -> np.ndarray:
        """An RGB PIL image (already validated, e.g. by load_image) -> prepared query vector."""
        with self.image_slots:
            return self.prepare(self.model.encode_image(image))

    # -- searching --------------------------------------------------------------------------------------
    def search_vectors(
        self, queries: np.ndarray, k: int, exclude: int | None = None, lang: str | None = None
    ) -> list[list[Hit]]:
        """Top-k photos of each query row; ``lang``: the rows are captions in that language (a CSLS model ranks
        them by CSLS, polyvse.csls.search), None: photos."""
        extra = 1 if exclude is not None else 0
        scorer = self._scorer if self.index.kind == EXACT_MODEL else None
        if lang is not None and self.hubness is not None:
            scores, ids = csls_search(self.index, self.hubness, queries, k + extra, lang)
        else:
            scores, ids = self.index.search(queries, k + extra, scorer=scorer)
        out = []
        for srow, irow in zip(scores, ids):
            hits = []
            for s, i in zip(srow, irow):
                if exclude is not None and int(i) == exclude:
                    continue
                if len(hits) == k:
                    break
                p = self.index.photos[int(i)]
                hits.append(Hit(len(hits) + 1, p.id, p.name, p.path, float(s)))
            out.append(hits)
        return out

    def text(self, query: str, lang: str, k: int = 10, *, max_chars: int = MAX_QUERY_CHARS) -> TextResult:
        query = check_query(query, max_chars)
        k = check_k(k)
        code, guess, hits = self.resolve_language(query, lang, k)
        unknown, n_words = self.unknown_words(query, code)
        if n_words and len(unknown) == n_words:
            shown = ", ".join(unknown[:8]) + (" ..." if len(unknown) > 8 else "")
            raise DataError(
                f"none of the words of the query ({shown}) is in the model's {code} vocabulary, "
                f"so it cannot be searched{'; is the language right?' if guess is None else ''}"
            )
        if hits is None:
            hits = self.search_vectors(self.embed_text(query, code), k, lang=code)[0]
        return TextResult(query, code, hits, guess, unknown)

    def image(
        self, photo, k: int = 10, *, max_pixels: int | None = DEFAULT_MAX_PIXELS, name: str | None = None
    ) -> list[Hit]:
        k = check_k(k)
        return self.search_vectors(self.embed_image(photo, max_pixels=max_pixels, name=name), k)[0]

    def similar(self, photo_id: int, k: int = 10) -> list[Hit]:
        """Photos like an indexed one (itself left out)."""
        k = check_k(k)
        vec = self.index.vector(photo_id)
        return self.search_vectors(vec[None, :], k, exclude=int(photo_id))[0]


# -- caption collections (photo -> caption) ----------------------------------------------------------------
class CaptionCollection:
    """Captions embedded once by the model; ranks them for a photo embedding."""

    def __init__(
        self,
        searcher: Searcher,
        captions: Sequence[tuple[str, str, str | None]],
        *,
        batch_size: int = 256,
        source: str | None = None,
    ):
        """captions: (lang, text, image or None). Captions in languages the model lacks are dropped."""
        model = searcher.model
        self.searcher = searcher
        self.source = source
        known = set(model.languages)
        self.dropped = sum(1 for lang, _, _ in captions if lang not in known)
        kept = [(lang, " ".join(t.split()), img) for lang, t, img in captions if lang in known and t.strip()]
        self.langs = [c[0] for c in kept]
        self.texts = [c[1] for c in kept]
        self.images = [c[2] for c in kept]
        parts = []
        for lang in sorted(set(self.langs)):
            rows = [i for i, l in enumerate(self.langs) if l == lang]
            emb = model.encode_text([self.texts[i] for i in rows], lang)
            parts.append((rows, emb))
        self.vectors = np.zeros((len(kept), model.embed_dim), dtype=np.float32)
        for rows, emb in parts:
            self.vectors[rows] = emb
        if searcher.similarity == "cosine":
            self.vectors = normalize_rows(self.vectors)
        # CSLS: each caption's r_I, computed once (a photo's r_C is one value per caption language)
        self.caption_penalty = (
            searcher.hubness.caption_penalty(self.vectors) if searcher.hubness is not None and len(kept) else None
        )

    def __len__(self) -> int:
        return len(self.texts)

    @property
    def languages(self) -> list[str]:
        return sorted(set(self.langs))

    def rank(self, image_vector: np.ndarray, k: int = 10, lang: str | None = None) -> list[CaptionHit]:
        """Captions for one photo embedding (as stored in the index / from Searcher.embed_image)."""
        k = check_k(k)
        if lang:
            lang = check_language(lang)
            if lang not in self.languages:
                raise DataError(
                    f"the caption collection has no {lang} captions; it has {', '.join(self.languages) or 'none'}"
                )
        rows = np.arange(len(self.texts)) if not lang else np.flatnonzero(np.array(self.langs) == lang)
        if len(rows) == 0:
            return []
        q = np.atleast_2d(np.asarray(image_vector, dtype=np.float32))
        if self.caption_penalty is not None:
            scores = self.searcher.hubness.photo_to_captions(
                q[0], self.vectors[rows], self.caption_penalty[rows], [self.langs[r] for r in rows]
            )
        elif self.searcher.similarity == "cosine":
            scores = self.vectors[rows] @ q[0]
        else:
            with self.searcher.text_slots:
                scores = np.asarray(self.searcher.model.similarity(q, self.vectors[rows]))[0]
        top = np.argsort(-scores, kind="stable")[:k]
        return [
            CaptionHit(r + 1, self.langs[rows[j]], self.texts[rows[j]], float(scores[j]), self.images[rows[j]])
            for r, j in enumerate(top)
        ]


def read_caption_file(path: str | os.PathLike, default_lang: str | None = None) -> list[tuple[str, str, str | None]]:
    """(lang, caption, image or None) from a captions file.

    .jsonl/.ndjson: objects with "caption" (or "text") and "lang" (e.g. `polyvse data export` output);
    .csv/.tsv: a header row naming a caption (or text) column and optionally lang and image columns;
    anything else: plain text, one caption per line, all in ``default_lang``.
    Lines without a language use ``default_lang``; without one either, they are an error naming the line.
    """
    import csv
    import json
    from pathlib import Path

    from ..data.user_files import read_text

    path = Path(path)
    text = read_text(path, "captions file")
    default = check_language(default_lang, "--captions-lang") if default_lang else None
    out: list[tuple[str, str, str | None]] = []

    def lang_of(value, line_no) -> str:
        if value in (None, ""):
            if default is None:
                raise DataError(
                    "caption without a language; add a lang field or pass a default language (--captions-lang)",
                    path,
                    line_no,
                )
            return default
        try:
            return check_language(str(value))
        except ValueError as exc:
            raise DataError(str(exc), path, line_no) from None

    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        for line_no, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"not JSON ({exc.msg})", path, line_no) from None
            if not isinstance(obj, dict):
                raise DataError("each line must be a JSON object", path, line_no)
            caption = obj.get("caption", obj.get("text"))
            if not isinstance(caption, str) or not caption.strip():
                raise DataError('no caption (a non-empty "caption" field)', path, line_no)
            image = obj.get("image")
            out.append((lang_of(obj.get("lang"), line_no), caption, None if image is None else str(image)))
    elif suffix in (".csv", ".tsv"):
        rows = list(csv.reader(text.splitlines(), delimiter="\t" if suffix == ".tsv" else ","))
        if not rows:
            raise DataError("empty captions file", path)
        header = [h.strip().lower() for h in rows[0]]
        col = next((header.index(c) for c in ("caption", "text") if c in header), None)
        if col is None:
            raise DataError(f"the header ({', '.join(rows[0])}) has no caption column", path, 1)
        lang_col = header.index("lang") if "lang" in header else None
        img_col = header.index("image") if "image" in header else None
        for line_no, row in enumerate(rows[1:], 2):
            if not any(cell.strip() for cell in row):
                continue
            if len(row) != len(header):
                raise DataError(f"{len(row)} columns, the header has {len(header)}", path, line_no)
            if not row[col].strip():
                raise DataError("empty caption", path, line_no)
            out.append(
                (
                    lang_of(row[lang_col] if lang_col is not None else None, line_no),
                    row[col],
                    row[img_col] if img_col is not None else None,
                )
            )
    else:
        for line_no, line in enumerate(text.splitlines(), 1):
            if line.strip():
                out.append((lang_of(None, line_no), line.strip(), None))
    if not out:
        raise DataError("no captions in the file", path)
    return out


def model_for_index(
    index: PhotoIndex, checkpoint: str | os.PathLike | None = None, device="auto", *, text_only: bool = False
):
    """(model, checkpoint path) for an index: ``checkpoint`` if given, else the one the index records.

    Either way the model must be the one that built the index (IndexMismatchError otherwise). ``device``
    as in ``polyvse.load``. ``text_only``: the caller embeds text queries only, so on device auto or cpu the
    checkpoint's text side loads in numpy (``polyvse.model.loading.query_model``: a word-level TextQueryModel or a
    frozen-tower TowerQueryModel; no torch, no CUDA start-up for one caption; the same vectors), falling back to
    polyvse.load for a checkpoint it does not cover.
    """
    from pathlib import Path

    path = checkpoint or index.checkpoint_path
    if not path:
        raise CheckpointError(f"{index.root}: the index does not record its checkpoint; pass --checkpoint")
    if not checkpoint and not Path(path).is_dir():
        raise CheckpointError(
            f"{index.root}: the index was built with checkpoint {path}, which is not there "
            "any more; pass --checkpoint with the same model"
        )
    from ..model.loading import load, photo_model, query_model

    # photos added or queried later must be fitted as the index's were (polyvse index build --photo-fit)
    squash = index.manifest["model"].get("squash_photos")
    model = query_model(path, squash_photos=squash) if text_only and str(device) in ("auto", "cpu") else None
    if model is None:  # photos too: torch where installed, else the checkpoint's ONNX image encoder
        model = (
            load(path, device=device, squash_photos=squash)
            if text_only
            else photo_model(path, device=device, squash_photos=squash)
        )
    index.check_model(model)
    return model, str(path)
