"""Supported languages (ISO 639-1 codes) and their validation."""

from __future__ import annotations

from .errors import UnknownLanguageError

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
