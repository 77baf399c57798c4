"""Word tokenization per language: Moses rules (every language sacremoses has nonbreaking-prefix data for: en, de,
fr, cs, es, hi, ...), jieba (zh), MeCab/UniDic via fugashi (ja), and for any other ISO 639 language a Unicode rule.

The Unicode rule (``unicode_words``), for languages without a tokenizer of their own (qu, gn, ar, ...): a word is a
run of letters, combining marks and digits (so Guarani's g̃ and Arabic's harakat stay inside their word), joined
across an apostrophe, a hyphen or a zero-width (non-)joiner (Quechua p'unchay, Guarani ka'aguy, Persian
ZWNJ compounds); a number keeps its decimal point or comma; every other non-space character is a token of its
own. Scripts written without spaces between words (Han, kana, Thai, Lao, Khmer, Myanmar) have no word boundary
this rule could find, so each character (with its combining marks) is a token: crude, but it never glues a
sentence into one token, and no segmenter of their own is installed.

`tokenize(text, lang)` is the one entry point. Tokenizer objects are built once per language and
cached for the process. Nothing is printed or logged (jieba's dictionary-loading chatter is silenced).

Speed: sacremoses' `MosesTokenizer.tokenize` runs ~15 regex passes and a per-token regex per
sentence (about 4-5k English captions a second). `_FastMosesTokenizer` applies exactly the same
rules in the same order, but skips passes that cannot change the text (e.g. the comma rules when the
text has no comma) and replaces per-token `re.search` calls and list look-ups with string tests and
sets. With `escape=False` and no protected patterns its output is identical to sacremoses'
(tests/test_tokenize.py checks that on real captions of every Moses language), about 6x faster
(~30k English captions per CPU-second: 400k in ~12 s).
"""

from __future__ import annotations

import functools
import logging
import threading
import unicodedata

from ..languages import check_language

__all__ = ["tokenize", "moses_languages", "tokenizer_name", "unicode_words"]

#: languages with a word segmenter of their own (not Moses rules)
_SEGMENTERS = {"zh": "jieba", "ja": "mecab-unidic-lite (fugashi)"}

_lock = threading.Lock()


def _moses_class():
    from sacremoses import MosesTokenizer

    class _FastMosesTokenizer(MosesTokenizer):
        """MosesTokenizer with the same rules, minus the work that cannot change the text."""

        def __init__(self, lang: str):
            super().__init__(lang=lang)
            self._nbp = frozenset(self.NONBREAKING_PREFIXES)
            self._numeric_only = frozenset(self.NUMERIC_ONLY_PREFIXES)
            self._lower = frozenset(self.IsLower)
            self._alpha = frozenset(self.IsAlpha)
            self._digits = frozenset("0123456789")

        def handles_nonbreaking_prefixes(self, text: str) -> str:
            tokens = text.split()
            n = len(tokens)
            for i, token in enumerate(tokens):
                # Same test as re.search(r"^(\S+)\.$", token): tokens have no whitespace.
                if len(token) < 2 or token[-1] != ".":
                    continue
                prefix = token[:-1]
                if (
                    ("." in prefix and not self._alpha.isdisjoint(prefix))
                    or (prefix in self._nbp and prefix not in self._numeric_only)
                    or (i != n - 1 and tokens[i + 1] and tokens[i + 1][0] in self._lower)
                ):
                    continue
                if prefix in self._numeric_only and i + 1 < n and tokens[i + 1][0] in self._digits:
                    continue
                tokens[i] = prefix + " ."
            return " ".join(tokens)

        def fast_tokenize(self, text: str) -> list[str]:
            """sacremoses tokenize(text, escape=False, aggressive_dash_splits=False) as a token list."""
            regexp, sub = self.DEDUPLICATE_SPACE
            text = regexp.sub(sub, text)
            regexp, sub = self.ASCII_JUNK
            text = regexp.sub(sub, text)
            text = text.strip()
            regexp, sub = self.PAD_NOT_ISALNUM
            text = regexp.sub(sub, text)
            if ".." in text:
                text = self.replace_multidots(text)
            if "," in text:
                for regexp, sub in (self.COMMA_SEPARATE_1, self.COMMA_SEPARATE_2, self.COMMA_SEPARATE_3):
                    text = regexp.sub(sub, text)
            if "'" in text:
                if self.lang == "en":
                    rules = self.ENGLISH_SPECIFIC_APOSTROPHE
                elif self.lang in ("fr", "it"):
                    rules = self.FR_IT_SPECIFIC_APOSTROPHE
                else:
                    rules = (self.NON_SPECIFIC_APOSTROPHE,)
                for regexp, sub in rules:
                    text = regexp.sub(sub, text)
            if "." in text:
                text = self.handles_nonbreaking_prefixes(text)
                regexp, sub = self.DEDUPLICATE_SPACE
                text = regexp.sub(sub, text).strip()
                if ".'" in text:
                    regexp, sub = self.TRAILING_DOT_APOSTROPHE
                    text = regexp.sub(sub, text)
            if "MULTI" in text:
                text = self.restore_multidots(text)
            return text.split()

    return _FastMosesTokenizer


@functools.cache
def moses_languages() -> frozenset[str]:
    """Languages tokenized with Moses rules: those sacremoses ships nonbreaking prefixes for (its per-language
    data), as canonical ISO 639 codes, minus the ones with a segmenter of their own (zh) or written in Han (yue)."""
    from sacremoses.corpus import NonbreakingPrefixes

    codes = {check_language(c) for c in NonbreakingPrefixes().available_langs.values()}
    return frozenset(c for c in codes if c not in _SEGMENTERS and c != "yue")


_SPACELESS = r"\p{Han}\p{Hiragana}\p{Katakana}\p{Thai}\p{Lao}\p{Khmer}\p{Myanmar}"


@functools.cache
def _unicode_token():
    """The Unicode rule's pattern, compiled on first use: importing this module (every model's checkpoint code
    does) then costs no `regex` import, which a query of a model with pretrained towers never needs."""
    import regex

    return regex.compile(
        rf"[{_SPACELESS}]\p{{M}}*"  # one character of a script without spaces
        r"|\p{N}+(?:[.,]\p{N}+)+"  # 3.5, 5,300
        rf"|[[\p{{L}}\p{{M}}\p{{N}}]--[{_SPACELESS}]]+(?:['’ʼ\-\u200c\u200d][[\p{{L}}\p{{M}}\p{{N}}]--[{_SPACELESS}]]+)*"
        r"|[^\s\p{M}]\p{M}*",  # anything else: one token a character
        regex.V1,
    )


def unicode_words(text: str) -> list[str]:
    """The Unicode rule (module docstring) on NFC-normalised text."""
    return _unicode_token().findall(unicodedata.normalize("NFC", text))


@functools.cache
def _moses(lang: str):
    with _lock:
        return _moses_class()(lang)


@functools.cache
def _jieba():
    import jieba

    jieba.setLogLevel(logging.WARNING)
    logging.getLogger("jieba").setLevel(logging.WARNING)
    with _lock:
        tok = jieba.Tokenizer()
        tok.initialize()  # loads (or builds and caches) the dictionary once, quietly
    return tok


@functools.cache
def _mecab():
    import fugashi

    try:
        import unidic_lite

        return fugashi.Tagger("-d " + _quote(unidic_lite.DICDIR))
    except ImportError:  # fall back to whatever dictionary fugashi finds (unidic if installed)
        return fugashi.Tagger()


def _quote(path: str) -> str:
    return '"' + path + '"' if " " in path else path


def _zh(text: str) -> list[str]:
    return [t for t in (w.strip() for w in _jieba().lcut(text)) if t]


def _ja(text: str) -> list[str]:
    return [w.surface for w in _mecab()(text) if w.surface.strip()]


def tokenizer_name(lang: str) -> str:
    """Human-readable name of the tokenizer used for `lang` (for logs and checkpoint metadata)."""
    lang = check_language(lang)
    if lang in moses_languages():
        return f"moses-{lang} (sacremoses, escape=False)"
    return _SEGMENTERS.get(lang, "unicode-words (letters, marks and digits; characters in scripts without spaces)")


def tokenize(text: str, lang: str, *, lowercase: bool = True) -> list[str]:
    """Split `text` into word tokens with the tokenizer for `lang`.

    Moses rules for the languages sacremoses has data for (per language, no XML escaping); zh: jieba
    (accurate mode); ja: MeCab with UniDic-lite (fugashi), surface forms; any other language: the Unicode
    rule (module docstring). `lowercase=True` lower-cases the tokens (scripts without case are unaffected).
    Raises UnknownLanguageError for a code that is not an ISO 639 language. Empty or blank text gives [].
    """
    code = check_language(lang)
    if not isinstance(text, str):
        raise TypeError(f"tokenize() needs a str, got {type(text).__name__}")
    return list(_tokens(text, code, lowercase))


@functools.lru_cache(maxsize=1 << 17)
def _tokens(text: str, code: str, lowercase: bool) -> tuple[str, ...]:
    """Memoised: a training run tokenises each caption twice (vocabulary, then ids); ~131k entries."""
    if code == "zh":
        tokens = _zh(text)
    elif code == "ja":
        tokens = _ja(text)
    elif code in moses_languages():
        tokens = _moses(code).fast_tokenize(text)
    else:
        tokens = unicode_words(text)
    if lowercase:
        return tuple(t.lower() for t in tokens)
    return tuple(tokens)
