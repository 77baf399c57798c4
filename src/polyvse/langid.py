"""Language detection for ``--lang auto``: decide among a model's languages, or refuse.

Built on lingua (``lingua-language-detector`` on PyPI: offline, its n-gram models ship in the wheel,
accurate on short text). A query gets a language only when all of these hold:

1. It is long enough to tell: at least ``min_words`` words and ``min_letters`` letters, or at least
   ``min_cjk`` Chinese/Japanese/Korean characters. "Hund", "dog" or "狗" are refused: one word says
   too little (and the same word exists in several languages).
2. Among the model's languages, the best one has a confidence of at least ``min_confidence``
   (default 0.75; lingua's confidences over the candidate languages add up to 1).
3. No language outside the model's is a better explanation: the text is also run through a wider
   detector (the model's languages plus every language polyvse has a tokenizer for, plus common
   European and Asian languages). If that one's winner is not a model language, the query is refused
   -- as "looks like Spanish" when that winner is clear (confidence >= 0.5), as ambiguous otherwise --
   instead of being forced into the nearest model language.

Refusals raise :class:`LanguageDetectionError` (a ``ValueError``) whose message says why and how to
proceed (pass the language explicitly). Nothing is ever guessed.
"""
from __future__ import annotations

import re
import threading
import unicodedata
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from .errors import PolyvseError
from .languages import SUPPORTED_LANGUAGES, check_language

__all__ = ["DEFAULT_MIN_CONFIDENCE", "LanguageDetectionError", "LanguageGuess", "detect_language", "warm_up"]

DEFAULT_MIN_CONFIDENCE = 0.75
MIN_WORDS = 2
MIN_LETTERS = 6
MIN_CJK = 2
#: a language outside the model's that wins the wide detection with this confidence is named as the
#: query's language ("looks like Spanish"); below it, the query is just ambiguous
FOREIGN_CONFIDENCE = 0.5

#: Languages a query may plausibly be written in although no polyvse model knows them: they are in the
#: wider detector so that e.g. Spanish is recognised as Spanish rather than forced into English.
DISTRACTORS = ("es", "it", "pt", "nl", "da", "sv", "pl", "tr", "ru", "ko")

_NAMES = {**SUPPORTED_LANGUAGES, "es": "Spanish", "it": "Italian", "pt": "Portuguese", "nl": "Dutch",
          "da": "Danish", "sv": "Swedish", "pl": "Polish", "tr": "Turkish", "ru": "Russian", "ko": "Korean"}
_WORD = re.compile(r"[^\W\d_]+")


class LanguageDetectionError(PolyvseError, ValueError):
    """The language of a text cannot be told reliably (or is not one of the model's languages)."""


@dataclass(frozen=True)
class LanguageGuess:
    lang: str  # ISO 639-1 code, one of the model's languages
    confidence: float  # among the model's languages
    candidates: list[tuple[str, float]] = field(default_factory=list)  # model languages, best first

    def to_dict(self) -> dict:
        return {"lang": self.lang, "confidence": round(self.confidence, 4),
                "candidates": [{"lang": c, "confidence": round(v, 4)} for c, v in self.candidates]}


def language_name(code: str) -> str:
    return _NAMES.get(code, code)


def _is_cjk(ch: str) -> bool:
    cp = ord(ch)
    return (0x3040 <= cp <= 0x30FF or 0x3400 <= cp <= 0x4DBF or 0x4E00 <= cp <= 0x9FFF or 0xF900 <= cp <= 0xFAFF
            or 0xAC00 <= cp <= 0xD7AF or 0x20000 <= cp <= 0x2FA1F)


def _lingua():
    try:
        import lingua
    except ImportError:  # pragma: no cover - a declared dependency
        raise LanguageDetectionError("language detection needs the lingua-language-detector package "
                                     "(pip install lingua-language-detector); or pass the language") from None
    return lingua


_DETECTORS: dict[tuple[str, ...], object] = {}
_LOCK = threading.Lock()


def _detector(codes: Iterable[str], preload: bool = False):
    key = tuple(sorted(set(codes)))
    with _LOCK:
        det = _DETECTORS.get(key)
        if det is None:
            lingua = _lingua()
            langs = [lingua.Language.from_iso_code_639_1(getattr(lingua.IsoCode639_1, c.upper())) for c in key]
            builder = lingua.LanguageDetectorBuilder.from_languages(*langs)
            if preload:
                builder = builder.with_preloaded_language_models()
            det = _DETECTORS[key] = builder.build()
    return det


def _model_codes(languages: Sequence[str]) -> list[str]:
    codes = sorted({check_language(c) for c in languages})
    if not codes:
        raise LanguageDetectionError("no languages to choose from")
    return codes


def _wide_codes(codes: Sequence[str]) -> list[str]:
    return sorted(set(codes) | set(SUPPORTED_LANGUAGES) | set(DISTRACTORS))


def warm_up(languages: Sequence[str]) -> None:
    """Load the n-gram models now (a few seconds), so the first detection is not slow."""
    codes = _model_codes(languages)
    if len(codes) > 1:
        _detector(codes, preload=True)
    _detector(_wide_codes(codes), preload=True)


def _confidences(detector, text: str) -> list[tuple[str, float]]:
    return [(cv.language.iso_code_639_1.name.lower(), float(cv.value))
            for cv in detector.compute_language_confidence_values(text)]


def detect_language(text: str, languages: Sequence[str], *, min_confidence: float = DEFAULT_MIN_CONFIDENCE,
                    min_words: int = MIN_WORDS, min_letters: int = MIN_LETTERS, min_cjk: int = MIN_CJK,
                    ) -> LanguageGuess:
    """The language of ``text`` among ``languages`` (ISO 639-1 codes), or LanguageDetectionError."""
    codes = _model_codes(languages)
    listed = ", ".join(codes)
    how = f"pass the language explicitly (one of: {listed})"
    text = unicodedata.normalize("NFC", text or "").strip()
    cjk = sum(1 for ch in text if _is_cjk(ch))
    words = _WORD.findall(text)
    letters = sum(len(w) for w in words)
    if letters == 0:
        raise LanguageDetectionError(f"cannot detect the language of {text[:40]!r}: it has no words; {how}")
    if cjk < min_cjk and (len(words) < min_words or letters < min_letters):
        raise LanguageDetectionError(
            f"cannot detect the language of {text[:40]!r}: too short to tell ({len(words)} word"
            f"{'s' if len(words) != 1 else ''}; need at least {min_words} words and {min_letters} letters, "
            f"or {min_cjk} Chinese/Japanese characters); {how}")

    wide = _confidences(_detector(_wide_codes(codes)), text)
    if len(codes) == 1:
        narrow = [(codes[0], 1.0)]
    else:
        narrow = _confidences(_detector(codes), text)
    best, conf = narrow[0]
    if wide and wide[0][1] > 0 and wide[0][0] not in codes:
        other, other_conf = wide[0]
        if other_conf >= FOREIGN_CONFIDENCE:
            raise LanguageDetectionError(
                f"the query looks like {language_name(other)} ({other}, confidence {other_conf:.2f}), which this "
                f"model was not trained on; it knows {listed}. Write the query in one of those, or {how}")
        raise LanguageDetectionError(
            f"cannot tell the language of {text[:40]!r}: it reads about as well as {language_name(other)} "
            f"({other_conf:.2f}) as any of the model's languages (best: {best} {conf:.2f} among them); {how}")
    if conf < min_confidence:
        runner = f", then {narrow[1][0]} {narrow[1][1]:.2f}" if len(narrow) > 1 else ""
        raise LanguageDetectionError(
            f"cannot tell the language of {text[:40]!r} with confidence: best guess {best} {conf:.2f}{runner} "
            f"(need {min_confidence:.2f}); {how}")
    return LanguageGuess(best, conf, narrow[:3])
