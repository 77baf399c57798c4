"""Languages as data: any ISO 639 code, normalised, named and given its script by ``langcodes`` + ``language-data``
(the IANA subtag registry and Unicode CLDR, both maintained upstream), and which languages a loaded model serves.

Codes
    ``check_language("spa") == check_language("es-MX") == check_language("ES") == "es"``: ISO 639-1 where the
    language has a two-letter code, else ISO 639-3 (``quy``); script, region and variant subtags (``zh-Hans``,
    ``ar_arab``) and deprecated or individual codes of a macrolanguage (``iw`` -> ``he``, ``cmn`` -> ``zh``) are
    folded into the one language code. ``language_name`` gives the English name, ``language_script`` the ISO 15924
    script the language is usually written in (CLDR's likely subtags).

What a model serves (``serving_status(model, lang)``)
    ``"trained"``    the model trained on it (``model.languages``, the checkpoint's list, less the adapted ones)
    ``"adapted"``    taught afterwards by ``polyvse adapt`` (the checkpoint's ``adapted_languages``, a dict or list)
    ``"zero-shot"``  a frozen text tower reads it (its documented language list; the union for fused towers)
                     although the model never trained on it (unless loaded with ``zero_shot="off"``)
    ``None``         the model cannot read it: refused, with :func:`teach_hint` saying how to teach it
A word-level model reads only the languages it trained on: its vocabulary is theirs. :func:`route_language` is the
one router every model embeds a caption through (the torch ``PolyvseModel`` and the numpy query models alike): the
status and code it serves a language as, or the refusal.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any

from .errors import CheckpointError, UnknownLanguageError

__all__ = [
    "CJK_LANGUAGES",
    "check_language",
    "language_name",
    "language_script",
    "model_language",
    "readable_languages",
    "served_language",
    "served_languages",
    "serving_status",
    "teach_hint",
    "adapted_languages",
    "match_language",
    "reads_without_language",
    "route_language",
    "SERVING_STATUSES",
    "TRAINED",
    "ADAPTED",
    "ZERO_SHOT",
]

#: languages written without spaces between words that have their own word tokenisers (jieba, MeCab), and
#: their own BLEU tokenisation
CJK_LANGUAGES = frozenset({"zh", "ja"})

#: valid registry codes that name no language: undetermined, multiple, no linguistic content, uncoded
_NOT_A_LANGUAGE = frozenset({"und", "mul", "zxx", "mis"})

TRAINED, ADAPTED, ZERO_SHOT = SERVING_STATUSES = ("trained", "adapted", "zero-shot")


#: the two-letter ISO 639-1 codes that are already canonical (langcodes leaves them as they are; tests/test_languages.py
#: checks this list against langcodes): such a code is accepted without importing langcodes, whose data tables are
#: a large share of a fresh `polyvse search` process's start-up
CANONICAL_TWO_LETTER = frozenset(
    """
    aa ab ae af ak am an ar as av ay az ba be bg bi bm bn bo br bs ca ce ch co cr cs cu cv cy da de dv dz ee
    el en eo es et eu fa ff fi fj fo fr fy ga gd gl gn gu gv ha he hi ho hr ht hu hy hz ia id ie ig ii ik io
    is it iu ja jv ka kg ki kj kk kl km kn ko kr ks ku kv kw ky la lb lg li ln lo lt lu lv mg mh mi mk ml mn
    mr ms mt my na nb nd ne ng nl nn no nr nv ny oc oj om or os pa pi pl ps pt qu rm rn ro ru rw sa sc sd se
    sg si sk sl sm sn so sq sr ss st su sv sw ta te tg th ti tk tn to tr ts tt ty ug uk ur uz ve vi vo wa wo
    xh yi yo za zh zu
""".split()
)


@functools.lru_cache(maxsize=4096)
def _canonical(code: str) -> str | None:
    if code in CANONICAL_TWO_LETTER:
        return code
    import langcodes

    try:
        tag = langcodes.standardize_tag(code, macro=True)
    except (langcodes.LanguageTagError, ValueError):
        return None
    lang = langcodes.Language.get(tag).language
    if not lang or lang in _NOT_A_LANGUAGE or not langcodes.Language.get(lang).is_valid():
        return None
    return lang


def check_language(code: Any, where: str = "") -> str:
    """The canonical ISO 639 code of ``code`` (see the module docstring), or UnknownLanguageError saying why."""
    prefix = f"{where}: " if where else ""
    text = code.strip() if isinstance(code, str) else ""
    canonical = _canonical(text) if text else None
    if canonical is None:
        hint = ""
        if text.isalpha() and len(text) > 3:  # perhaps a language's name ("Spanish")
            import langcodes

            try:
                named = langcodes.find(text).language
                hint = f"; for {language_name(named)} use {named!r}"
            except LookupError:
                pass
        raise UnknownLanguageError(
            f"{prefix}unknown language code {code!r}: expected an ISO 639 code such as en, "
            f"es or quy (a BCP 47 tag such as zh-Hans also works){hint}"
        )
    return canonical


def language_name(code: str) -> str:
    """English name of a language code, e.g. ``es`` -> ``Spanish`` (the code itself when it is not one)."""
    canonical = _canonical(code.strip()) if isinstance(code, str) and code.strip() else None
    if not canonical:
        return str(code)
    import langcodes

    return langcodes.Language.get(canonical).display_name()


def language_script(code: str) -> str:
    """ISO 15924 script a language tag is written in: its own script subtag, else the language's likely one
    (``ja`` -> ``Jpan``, ``zh-Hant`` -> ``Hant``, ``ar`` -> ``Arab``; ``Zyyy`` when CLDR does not say)."""
    import langcodes

    check_language(code)
    try:
        tag = langcodes.standardize_tag(code.strip(), macro=True)
    except (langcodes.LanguageTagError, ValueError):
        tag = check_language(code)
    return langcodes.Language.get(tag).maximize().script or "Zyyy"


def match_language(code: str, languages: Iterable[str]) -> str | None:
    """``code`` (canonical) if listed, else a listed code CLDR counts as the same language (``no`` for ``nb``: tag
    distance 1 at most), else None."""
    listed = frozenset(languages)
    return code if code in listed else _close_match(code, listed)


@functools.lru_cache(maxsize=4096)
def _close_match(code: str, listed: frozenset[str]) -> str | None:
    import langcodes

    return next((c for c in sorted(listed) if langcodes.tag_distance(code, c) <= 1), None)


def model_language(code: str, languages: list[str]) -> str:
    """`code` normalised, or a CheckpointError when the model (trained on `languages`) does not know it."""
    lang = check_language(code)
    if lang not in languages:
        raise CheckpointError(
            f"this model was trained on {', '.join(languages)}, not on {lang!r}: "
            f"query it in one of those languages or train a model that includes {lang!r}"
        )
    return lang


# -- what a loaded model serves (PolyvseModel, TextQueryModel: .languages, .captions, .checkpoint) ---------------
def reads_without_language(model: Any) -> bool:
    """Whether the model's text towers read a query without being told its language (frozen sentence encoders:
    the language only picks per-language parts), unlike a word-level model, whose vocabulary is per language."""
    return bool(getattr(model.captions, "towers", None))


def readable_languages(model: Any) -> frozenset[str]:
    """Languages the model's text towers read: every language a frozen tower documents (the union of fused
    towers'), or, for a word-level model, the languages it trained on."""
    towers = getattr(model.captions, "towers", None)
    if towers:
        return frozenset().union(*(t.languages for t in towers))
    return frozenset(model.languages)


def adapted_languages(model: Any) -> list[str]:
    """Languages taught after training (``polyvse adapt``): the checkpoint's ``adapted_languages`` (default none)."""
    checkpoint = model.checkpoint
    codes = getattr(checkpoint, "adapted_languages", None)
    if codes is None:  # a checkpoint read without torch keeps config.json
        codes = (getattr(checkpoint, "config", None) or {}).get("adapted_languages") or []
    return [check_language(c, "adapted_languages") for c in codes]


def serving_status(model: Any, lang: str) -> str | None:
    """``TRAINED``, ``ADAPTED``, ``ZERO_SHOT`` or None (cannot read it): see the module docstring."""
    code = check_language(lang)
    if code in adapted_languages(model):  # polyvse adapt lists them in `languages` too
        return ADAPTED
    if code in model.languages:
        return TRAINED
    if _zero_shot_on(model) and match_language(code, readable_languages(model)) is not None:
        return ZERO_SHOT
    return None


def route_language(model: Any, lang: str) -> tuple[str, str]:
    """How ``model`` embeds a caption in ``lang``: (its serving status, the canonical code its parts and towers
    read), or the CheckpointError that refuses the language, naming what the model reads and how to teach it (the
    command line's message). A trained language goes through its own part, an adapted one through the part
    ``polyvse adapt`` taught (read by the towers that read it, listed or not), a zero-shot one through the fallback
    part (``polyvse.model.zero_shot``)."""
    code = check_language(lang)
    status = serving_status(model, code)
    if status is None:
        trained_language(model, code)  # refuses it: neither trained nor served another way
    return status, code


def _zero_shot_on(model: Any) -> bool:
    """Whether the model serves zero-shot languages: a loaded model's ``zero_shot`` fallback part is not "off"
    (``polyvse.load(..., zero_shot=)``, polyvse.model.zero_shot)."""
    return getattr(model, "zero_shot", None) != "off"


def served_languages(model: Any) -> dict[str, str]:
    """Every language the model serves -> its status: trained ones first (the model's order), then adapted, then
    zero-shot ones by code."""
    adapted = adapted_languages(model)
    out = {code: "trained" for code in model.languages if code not in adapted}
    out.update((code, "adapted") for code in adapted)
    for code in sorted(readable_languages(model)) if _zero_shot_on(model) else ():
        out.setdefault(code, "zero-shot")
    return out


def teach_hint(code: str) -> str:
    """How to teach a model a language it cannot read (``polyvse adapt``, docs/guides/adapt.md)."""
    return f"teach it with `polyvse adapt --checkpoint C --lang {code} --parallel FILE --out C2` (docs/guides/adapt.md)"


def trained_language(model: Any, lang: str) -> str:
    """``lang`` as the trained language of ``model`` that serves it (a close CLDR match included); a language the
    model cannot serve is refused as :func:`served_language` refuses it, saying how to teach it, so the Python API
    and the command line give one message."""
    code = check_language(lang)
    if match_language(code, model.languages) is None:
        served_language(model, code)  # raises: neither trained nor served another way on this path
    return model_language(code, model.languages)


def served_language(model: Any, lang: str) -> str:
    """``lang`` normalised when the model serves it, else a CheckpointError naming what it reads and how to teach it."""
    code = check_language(lang)
    if serving_status(model, code) is not None:
        return code
    if reads_without_language(model):
        names = "+".join(t.name for t in model.captions.towers)
        if code in readable_languages(model):  # read by the towers, but the zero-shot fallback is off
            raise CheckpointError(
                f"this model does not serve {language_name(code)} ({code!r}): it was trained on "
                f"{', '.join(model.languages)} and loaded with zero_shot='off', though its text towers ({names}) read "
                f"{language_name(code)}; load it with zero_shot='mean' (the default) to serve it zero-shot, or "
                + teach_hint(code)
            )
        reads = f"its text towers ({names}) read {len(readable_languages(model))} languages, not {language_name(code)}"
        # `polyvse adapt` teaches a new per-language part: a model with none cannot take one
        parts = getattr(getattr(model, "config", None), "universal_dim", None)
        hint = (
            teach_hint(code)
            if parts is None or parts > 0
            else (
                f"`polyvse adapt` teaches a language to a model with per-language parts (model.universal_dim > 0, as "
                f"`make model`'s checkpoint has) and this one has none: use such a model, or train one with {code!r}"
            )
        )
    else:
        reads = f"it is a word-level model, not trained on {code!r} (it knows {', '.join(model.languages)})"
        hint = (
            f"a word-level model learns its languages in training: train one that includes {code!r} "
            "(`polyvse adapt` teaches frozen-tower models)"
        )
    raise CheckpointError(f"this model cannot read {language_name(code)} ({code!r}): {reads}; {hint}")
