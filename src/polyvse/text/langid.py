"""Language detection for ``--lang auto``: pick the language of a query among those a model serves, or refuse.

Built on lingua (``lingua-language-detector`` on PyPI: offline, its n-gram models ship in the wheel, accurate on
short text). The wide detector holds every language lingua knows (75), so a query is told against all of them,
not forced into the nearest of the model's languages. Two rules, by what the model's text side needs:

**A model that needs the language to read the query** (a word-level model: its vocabulary is per language):
:func:`detect_language` gives a language only when all of these hold, and refuses otherwise:

1. The query is long enough to tell: at least ``min_words`` words and ``min_letters`` letters, or at least
   ``min_cjk`` Chinese/Japanese/Korean characters ("Hund", "dog" or "狗" exist in several languages).
2. Among the model's languages, the best one has a confidence of at least ``min_confidence`` (0.75).
3. No language outside the model's is a better explanation: if the wide detector's winner is not a model
   language, the query is refused, as "looks like Spanish" when that winner is clear (confidence >= 0.5, or
   5 times the runner-up's), as ambiguous otherwise.

**A model whose towers read the query without being told its language** (frozen sentence encoders): the language
only picks the per-language part (and, for fused towers, which towers read it). :func:`choose_language` searches
anyway and refuses only where the choice changes the answer:

1. A query in a language the model cannot read (the wide detector's clear winner, as above, is not a served
   language) is refused with how to teach it (``polyvse adapt``). lingua knows 75 languages: a served language
   it does not know (an adapted Quechua) is never detected, and the refusal says to pass it explicitly.
2. Detection among the served languages (the wide confidences renormalised over them): when the best has a
   confidence of at least ``min_confidence``, or 5 times the runner-up's, it is the query's language; so is
   the language the strict rule above finds among the trained languages (it never refuses more than that rule).
3. Otherwise the plausible languages are the served ones with at least ``candidate_floor`` (0.05) of that
   confidence, best first, at most ``max_candidates`` (5), and the query is searched as the first of them the
   model trained on, else as the likeliest ("plausible"). No plausible language at all (no letters, or none
   served) picks among the model's trained languages alike.

   Whether to refuse where the plausible languages' answers differ was measured, not assumed: with
   ``min_agreement`` above 0 the query is searched as each candidate (a language whose query vector is the same
   as another's is not searched twice) and refused unless every candidate's top k photos share at least that
   share of them ("same answer" otherwise). On the product model's validation captions (400 a language: en, de,
   fr, cs, zh and MultiScript30k's es, ar; ``benchmarks/bench_auto_language.py --split val``, record
   ``benchmarks/results/archive/auto_language_val.json``) the plausible language's search matched the search told the
   true language in mR in every language, while refusing at 0.8 agreement turned away 9% of English and 20% of
   Spanish captions and cost their recall; so the default, ``DEFAULT_MIN_AGREEMENT``, is 0: refuse only a query
   the model cannot read.

Refusals raise :class:`LanguageDetectionError` (a ``ValueError``) whose message says why and how to proceed (pass
the language explicitly).
"""

from __future__ import annotations

import functools
import re
import threading
import unicodedata
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field

from ..errors import PolyvseError
from ..languages import check_language, language_name, match_language, teach_hint

__all__ = [
    "DEFAULT_MIN_AGREEMENT",
    "DEFAULT_MIN_CONFIDENCE",
    "LanguageDetectionError",
    "LanguageGuess",
    "choose_language",
    "detect_language",
    "detectable_languages",
    "language_name",
    "served_confidences",
    "warm_up",
]

DEFAULT_MIN_CONFIDENCE = 0.75
MIN_WORDS = 2
MIN_LETTERS = 6
MIN_CJK = 2
#: a language outside the model's that wins the wide detection with this confidence, or with CLEAR_RATIO times
#: the runner-up's (75 languages spread the confidence: a plain Spanish sentence gets 0.46, the next 0.05), is
#: named as the query's language ("looks like Spanish"); otherwise the query is just ambiguous. choose_language
#: takes a served language at CLEAR_RATIO times the runner-up's confidence as clear too
FOREIGN_CONFIDENCE = 0.5
CLEAR_RATIO = 5.0
#: choose_language: a served language is a plausible reading of the query with at least this share of the best
#: one's confidence; at most MAX_CANDIDATES of them are searched
CANDIDATE_FLOOR = 0.05
MAX_CANDIDATES = 5
#: choose_language: the share of the top k photos every plausible language's answer must have in common; 0 (chosen
#: on val, module docstring): no comparison, the plausible language is searched
DEFAULT_MIN_AGREEMENT = 0.0

_WORD = re.compile(r"[^\W\d_]+")


class LanguageDetectionError(PolyvseError, ValueError):
    """The language of a text cannot be told reliably (or is not one of the model's languages)."""


@dataclass(frozen=True)
class LanguageGuess:
    lang: str  # canonical ISO 639 code, one of the model's languages
    confidence: float  # among the model's languages
    candidates: list[tuple[str, float]] = field(default_factory=list)  # model languages, best first
    #: "detection" (confident), "plausible" (unclear: searched as the first plausible trained language, else the
    #: likeliest), or "same answer" (unclear, and every plausible language's top photos agreed: min_agreement > 0)
    decided_by: str = "detection"
    agreement: float | None = None  # with "same answer": the share of the top k photos all candidates share

    def to_dict(self) -> dict:
        d = {
            "lang": self.lang,
            "confidence": round(self.confidence, 4),
            "candidates": [{"lang": c, "confidence": round(v, 4)} for c, v in self.candidates],
            "decided_by": self.decided_by,
        }
        if self.agreement is not None:
            d["agreement"] = round(self.agreement, 4)
        return d


def _is_cjk(ch: str) -> bool:
    cp = ord(ch)
    return (
        0x3040 <= cp <= 0x30FF
        or 0x3400 <= cp <= 0x4DBF
        or 0x4E00 <= cp <= 0x9FFF
        or 0xF900 <= cp <= 0xFAFF
        or 0xAC00 <= cp <= 0xD7AF
        or 0x20000 <= cp <= 0x2FA1F
    )


def _lingua():
    try:
        import lingua
    except ImportError:  # pragma: no cover - a declared dependency
        raise LanguageDetectionError(
            "language detection needs the lingua-language-detector package "
            "(pip install lingua-language-detector); or pass the language"
        ) from None
    return lingua


@functools.cache
def _lingua_languages() -> dict[str, object]:
    """Canonical ISO 639 code -> lingua Language, for every language lingua knows."""
    return {check_language(lang.iso_code_639_1.name.lower()): lang for lang in _lingua().Language.all()}


def detectable_languages() -> frozenset[str]:
    """Every language ``auto`` can tell (lingua's), as canonical ISO 639 codes."""
    return frozenset(_lingua_languages())


_DETECTORS: dict[tuple[str, ...], object] = {}
_LOCK = threading.Lock()


def _detector(codes: Iterable[str], preload: bool = False):
    key = tuple(sorted(set(codes)))
    with _LOCK:
        det = _DETECTORS.get(key)
        if det is None:
            known = _lingua_languages()
            builder = _lingua().LanguageDetectorBuilder.from_languages(*(known[c] for c in key))
            if preload:
                builder = builder.with_preloaded_language_models()
            det = _DETECTORS[key] = builder.build()
    return det


def _wide_detector(preload: bool = False):
    return _detector(_lingua_languages(), preload)


def _model_codes(languages: Sequence[str]) -> list[str]:
    codes = sorted({check_language(c) for c in languages})
    if not codes:
        raise LanguageDetectionError("no languages to choose from")
    return codes


def warm_up(languages: Sequence[str]) -> None:
    """Load the n-gram models now (seconds), so the first detection is not slow."""
    codes = [c for c in _model_codes(languages) if c in _lingua_languages()]
    if 1 < len(codes) < len(_lingua_languages()):
        _detector(codes, preload=True)
    _wide_detector(preload=True)


def _confidences(detector, text: str) -> list[tuple[str, float]]:
    """(canonical code, confidence), best first."""
    return [
        (check_language(cv.language.iso_code_639_1.name.lower()), float(cv.value))
        for cv in detector.compute_language_confidence_values(text)
    ]


def _clean(text: str) -> tuple[str, list[str], int]:
    text = unicodedata.normalize("NFC", text or "").strip()
    return text, _WORD.findall(text), sum(1 for ch in text if _is_cjk(ch))


def _clear(ranked: list[tuple[str, float]], min_confidence: float = FOREIGN_CONFIDENCE) -> bool:
    """Whether the winner of a ranking (best first) is clear: min_confidence, or CLEAR_RATIO times the runner-up's."""
    return bool(ranked) and (
        ranked[0][1] >= min_confidence or (len(ranked) > 1 and ranked[0][1] >= CLEAR_RATIO * ranked[1][1])
    )


def _how(codes: Sequence[str]) -> str:
    shown = ", ".join(codes[:12]) + (f", ... ({len(codes)} in all)" if len(codes) > 12 else "")
    return f"pass the language explicitly (one of: {shown})"


def detect_language(
    text: str,
    languages: Sequence[str],
    *,
    min_confidence: float = DEFAULT_MIN_CONFIDENCE,
    min_words: int = MIN_WORDS,
    min_letters: int = MIN_LETTERS,
    min_cjk: int = MIN_CJK,
) -> LanguageGuess:
    """The language of ``text`` among ``languages`` (ISO 639 codes), or LanguageDetectionError (module docstring:
    the rule for a model that needs the language)."""
    codes = _model_codes(languages)
    listed = ", ".join(codes)
    how = _how(codes)
    text, words, cjk = _clean(text)
    letters = sum(len(w) for w in words)
    if letters == 0:
        raise LanguageDetectionError(f"cannot detect the language of {text[:40]!r}: it has no words; {how}")
    if cjk < min_cjk and (len(words) < min_words or letters < min_letters):
        raise LanguageDetectionError(
            f"cannot detect the language of {text[:40]!r}: too short to tell ({len(words)} word"
            f"{'s' if len(words) != 1 else ''}; need at least {min_words} words and {min_letters} letters, "
            f"or {min_cjk} Chinese/Japanese characters); {how}"
        )

    detectable = [c for c in codes if c in _lingua_languages()]
    if not detectable:
        raise LanguageDetectionError(f"none of the model's languages ({listed}) can be detected; {how}")
    wide = _confidences(_wide_detector(), text)
    if len(detectable) == 1:
        narrow = [(detectable[0], 1.0)]
    else:
        narrow = _confidences(_detector(detectable), text)
    best, conf = narrow[0]
    if wide and wide[0][1] > 0 and wide[0][0] not in codes:
        other, other_conf = wide[0]
        if _clear(wide):
            raise LanguageDetectionError(
                f"the query looks like {language_name(other)} ({other}, confidence {other_conf:.2f}), which this "
                f"model was not trained on; it knows {listed}. Write the query in one of those, or {how}"
            )
        raise LanguageDetectionError(
            f"cannot tell the language of {text[:40]!r}: it reads about as well as {language_name(other)} "
            f"({other_conf:.2f}) as any of the model's languages (best: {best} {conf:.2f} among them); {how}"
        )
    if conf < min_confidence:
        runner = f", then {narrow[1][0]} {narrow[1][1]:.2f}" if len(narrow) > 1 else ""
        raise LanguageDetectionError(
            f"cannot tell the language of {text[:40]!r} with confidence: best guess {best} {conf:.2f}{runner} "
            f"(need {min_confidence:.2f}); {how}"
        )
    return LanguageGuess(best, conf, narrow[:3])


def served_confidences(text: str, languages: Sequence[str]) -> tuple[list[tuple[str, float]], tuple[str, float] | None]:
    """(the wide detector's confidences renormalised over the served ``languages``, best first; the wide
    detector's own confidences, best first: empty for text without letters)."""
    text, words, cjk = _clean(text)
    if not words and not cjk:
        return [], []
    wide = [(c, v) for c, v in _confidences(_wide_detector(), text) if v > 0]
    served: dict[str, float] = {}
    for code, value in wide:
        listed = match_language(code, languages)
        if listed is not None:
            served[listed] = served.get(listed, 0.0) + value
    total = sum(served.values())
    ranked = sorted(((c, v / total) for c, v in served.items()), key=lambda cv: -cv[1]) if total else []
    return ranked, wide


def choose_language(
    text: str,
    languages: Sequence[str],
    answer: Callable[[str], Sequence[Hashable]],
    *,
    trained: Sequence[str] = (),
    min_confidence: float = DEFAULT_MIN_CONFIDENCE,
    min_agreement: float = DEFAULT_MIN_AGREEMENT,
    candidate_floor: float = CANDIDATE_FLOOR,
    max_candidates: int = MAX_CANDIDATES,
    compare: bool | None = None,
) -> LanguageGuess:
    """The language to search ``text`` as, for a model whose towers read it without being told its language
    (module docstring), or LanguageDetectionError. ``languages``: every language the model serves;
    ``answer(lang)``: the ranked photo ids the query gets searched as ``lang`` (called only when detection is
    unclear and the candidates are compared; a caller caches it to return the chosen language's results);
    ``trained``: the languages preferred among the plausible ones, and compared when no served language is
    plausible at all (default: ``languages``); ``compare``: search as every candidate and measure their agreement
    (default: when ``min_agreement`` is above 0; a benchmark passes True with 0 to measure every threshold)."""
    codes = _model_codes(languages)
    ranked, wide = served_confidences(text, codes)
    how = _how(codes)
    if _clear(wide) and match_language(wide[0][0], codes) is None:
        other, other_conf = wide[0]
        in_order = dict.fromkeys(check_language(c) for c in languages)  # served_languages: trained, adapted, ...
        hidden = [c for c in in_order if match_language(c, _lingua_languages()) is None]
        named = ", ".join(f"{language_name(c)} ({c})" for c in hidden[:4]) + (", ..." if len(hidden) > 4 else "")
        unseen = f" (auto cannot tell {len(hidden)} of them, {named}: pass those explicitly)" if hidden else ""
        raise LanguageDetectionError(
            f"the query looks like {language_name(other)} ({other}, confidence {other_conf:.2f}), which this model "
            f"cannot read; write it in a language the model serves, {how}{unseen}, or {teach_hint(other)}"
        )
    if _clear(ranked, min_confidence):
        return LanguageGuess(ranked[0][0], ranked[0][1], ranked[:3])
    if trained:  # what the strict rule accepts stays accepted: a confident trained language, nothing else likelier
        try:
            return detect_language(text, trained, min_confidence=min_confidence)
        except LanguageDetectionError:
            pass
    if ranked:
        floor = candidate_floor * ranked[0][1]
        candidates = [(c, v) for c, v in ranked if v >= floor][:max_candidates]
    else:  # nothing to detect: every trained language is as plausible as the next
        pool = [check_language(c) for c in trained] or codes
        candidates = [(c, 1.0 / len(pool)) for c in pool][:max_candidates]
    # a plausible language the model trained on reads the query with its own part, rather than a likelier-looking
    # one it never saw through the fallback part ("a red car" is English before it is Welsh)
    known = {check_language(c) for c in trained}
    best, conf = next(((c, v) for c, v in candidates if c in known), candidates[0])
    if not (min_agreement > 0 if compare is None else compare):
        return LanguageGuess(best, conf, candidates[:3], decided_by="plausible")
    answers = [list(answer(c)) for c, _ in candidates]
    k = max(len(a) for a in answers)
    shared = set(answers[0]).intersection(*answers[1:])
    agreement = len(shared) / k if k else 1.0
    if agreement + 1e-9 >= min_agreement:  # the answer is the same whichever it is
        return LanguageGuess(best, conf, candidates[:3], decided_by="same answer", agreement=agreement)
    listed = ", ".join(f"{language_name(c)} ({c}) {v:.2f}" for c, v in candidates)
    raise LanguageDetectionError(
        f"cannot tell the language of {text[:40]!r} (plausible: {listed}), and it changes the results: searched "
        f"as each of them, the top {k} photos share {len(shared)} (need {min_agreement:.0%}); {how}"
    )
