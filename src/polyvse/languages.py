"""Supported languages (ISO 639-1 codes) and their validation."""

from __future__ import annotations

from .errors import CheckpointError, UnknownLanguageError

# code -> English name; every code here has a tokenizer in polyvse.text.tokenize.
SUPPORTED_LANGUAGES: dict[str, str] = {
    "en": "English",
    "de": "German",
    "fr": "French",
    "cs": "Czech",
    "zh": "Chinese",
    "ja": "Japanese",
}


#: languages written without spaces between words: their own word tokenisers (jieba, MeCab), and BLEU on
#: characters or their own tokenisation
CJK_LANGUAGES = frozenset({"zh", "ja"})


def check_language(code: str, where: str = "") -> str:
    """Return `code` normalised to lower case, or raise naming the supported codes."""
    norm = (code or "").strip().lower()
    if norm not in SUPPORTED_LANGUAGES:
        supported = ", ".join(sorted(SUPPORTED_LANGUAGES))
        prefix = f"{where}: " if where else ""
        raise UnknownLanguageError(
            f"{prefix}unknown language code {code!r}; supported: {supported} (ISO 639-1)"
        )
    return norm


def model_language(code: str, languages: list[str]) -> str:
    """`code` normalised, or a CheckpointError when the model (trained on `languages`) does not know it."""
    lang = check_language(code)
    if lang not in languages:
        raise CheckpointError(
            f"this model was trained on {', '.join(languages)}, not on {lang!r}: "
            f"query it in one of those languages or train a model that includes {lang!r}"
        )
    return lang
