"""polyvse.text.tokenize: per-language rules, equivalence with sacremoses, silence, speed."""

from __future__ import annotations

import gzip
import subprocess
import sys
import time

import pytest
from sacremoses import MosesTokenizer

from polyvse.errors import PolyvseError, UnknownLanguageError
from polyvse.text import tokenize
from polyvse.text.tokenize import moses_languages, tokenizer_name, unicode_words

TRICKY = [
    "A man's dog isn't \"here\" -- 3.5 km/h, e-mail me@x.com.",
    "Mr. Smith and Dr. Jones ... went to the U.S.A. yesterday.",
    "Two dogs' toys lie on 5,300 m² of grass; (really!) [sic] {ok} <b>",
    "It cost $5.00 -- or 5,- € -- at No. 5.",
    "L'homme et l'enfant jouent aujourd'hui à l'école.",
    "Ein Mann fährt z.B. 3.5 km, oder? Das ist's.",
    "Muž v modrém triku jede na kole ... a pes běží.",
    "'Quoted' words and ''double'' quotes ``here''.",
    "   leading and   trailing   spaces   ",
    "Tabs\tand\nnewlines\u2028inside.",
    "Dots.... and more... dots.",
    "A caption with a URL http://example.com/a_b?c=d&e=f.",
    "Ends with a dot-apostrophe.'",
    "DOTMULTI and THISISPROTECTED literals.",
]


def test_english_rules():
    assert tokenize("A man's dog isn't here.", "en") == ["a", "man", "'s", "dog", "isn", "'t", "here", "."]
    assert tokenize("A dog, 5,300 sheep.", "en", lowercase=False) == ["A", "dog", ",", "5,300", "sheep", "."]


def test_german_french_czech_rules():
    assert tokenize("Ein Mann fährt z.B. 3.5 km, oder?", "de") == [
        "ein",
        "mann",
        "fährt",
        "z.b.",
        "3.5",
        "km",
        ",",
        "oder",
        "?",
    ]
    assert tokenize("L'homme et l'enfant jouent.", "fr") == ["l'", "homme", "et", "l'", "enfant", "jouent", "."]
    assert tokenize("Muž jede na kole.", "cs") == ["muž", "jede", "na", "kole", "."]


def test_lowercase_option():
    assert tokenize("Über ALLES", "de", lowercase=False) == ["Über", "ALLES"]
    assert tokenize("Über ALLES", "de") == ["über", "alles"]


@pytest.mark.parametrize("lang", ["cs", "de", "en", "fr"])  # the Moses languages Multi30K has captions in
def test_same_tokens_as_sacremoses(shared_data, lang):
    """The fast path must give exactly sacremoses' tokens (escape=False) on real captions + edge cases."""
    path = shared_data / "multi30k" / "data" / "task1" / "raw" / f"val.{lang}.gz"
    lines = gzip.open(path, "rt", encoding="utf-8").read().split("\n")[:1014] + TRICKY
    ref = MosesTokenizer(lang=lang)
    for line in lines:
        assert tokenize(line, lang, lowercase=False) == ref.tokenize(line, escape=False), line


def test_chinese_jieba():
    assert tokenize("一只狗在草地上奔跑。", "zh") == ["一只", "狗", "在", "草地", "上", "奔跑", "。"]
    # whitespace is not a token; Latin letters are lower-cased
    assert tokenize("一只狗 Hello", "zh") == ["一只", "狗", "hello"]


def test_japanese_mecab():
    assert tokenize("犬が公園で走っている。", "ja") == ["犬", "が", "公園", "で", "走っ", "て", "いる", "。"]
    assert tokenize("ＡＢＣ の 犬", "ja", lowercase=True)[-1] == "犬"


@pytest.mark.parametrize("lang", ["en", "de", "fr", "cs", "zh", "ja"])
def test_blank_text_gives_no_tokens(lang):
    assert tokenize("", lang) == []
    assert tokenize("   \t ", lang) == []


def test_language_code_is_normalised():
    assert tokenize("A dog", "EN") == ["a", "dog"]


def test_unknown_language_code_is_refused():
    with pytest.raises(UnknownLanguageError) as exc:
        tokenize("ein Hund", "xx")
    msg = str(exc.value)
    assert "'xx'" in msg and "ISO 639" in msg
    assert isinstance(exc.value, PolyvseError) and isinstance(exc.value, ValueError)


def test_moses_covers_the_languages_sacremoses_has_data_for():
    langs = moses_languages()
    assert {"en", "de", "fr", "cs", "es", "it", "pt", "hi", "ru"} <= langs and not langs & {"zh", "ja", "yue"}
    assert tokenize("Un perro corre por la playa, ¿verdad?", "es") == [
        "un",
        "perro",
        "corre",
        "por",
        "la",
        "playa",
        ",",
        "¿",
        "verdad",
        "?",
    ]
    assert tokenize("Un perro.", "spa") == tokenize("Un perro.", "es-MX") == ["un", "perro", "."]
    assert tokenizer_name("es") == "moses-es (sacremoses, escape=False)"


@pytest.mark.parametrize(
    "lang, text, tokens",
    [
        # Quechua: the apostrophe of an ejective is part of the word; a number keeps its decimal point
        (
            "qu",
            "Huk allqu p'unchaypi pawachkan, 3.5 km.",
            ["huk", "allqu", "p'unchaypi", "pawachkan", ",", "3.5", "km", "."],
        ),
        # Guarani: the puso (') and nasal g̃ (g + combining tilde) stay inside the word
        (
            "gn",
            "Mokõi jagua'i oñani ka'aguýpe g\u0303uahẽ.",
            ["mokõi", "jagua'i", "oñani", "ka'aguýpe", "g\u0303uahẽ", "."],
        ),
        ("quy", "Allqukuna pukllachkanku!", ["allqukuna", "pukllachkanku", "!"]),
        # Arabic: words with their harakat; the Arabic comma is a token
        ("ar", "كلبانِ يلعبان في الثلج، بسرعة.", ["كلبانِ", "يلعبان", "في", "الثلج", "،", "بسرعة", "."]),
        ("fa", "می\u200cروم به خانه", ["می\u200cروم", "به", "خانه"]),  # a ZWNJ compound is one word
        ("yue", "隻狗喺度跑", ["隻", "狗", "喺", "度", "跑"]),  # Han without jieba: one token a character
        ("th", "สุนัขวิ่ง", ["สุ", "นั", "ข", "วิ่", "ง"]),  # a character with its marks
    ],
)
def test_languages_without_a_tokenizer_use_the_unicode_rule(lang, text, tokens):
    assert tokenize(text, lang) == tokens
    assert tokenizer_name(lang).startswith("unicode-words")


def test_unicode_rule_normalises_and_keeps_case_when_asked():
    decomposed = "Mok\u006f\u0303i"  # o + combining tilde: the same word as the precomposed õ
    assert unicode_words(decomposed) == ["Mokõi"]
    assert tokenize("Allqu PAWAN", "qu", lowercase=False) == ["Allqu", "PAWAN"]
    assert tokenize("  \t ", "qu") == []


def test_non_string_rejected():
    with pytest.raises(TypeError):
        tokenize(None, "en")  # type: ignore[arg-type]


def test_tokenizer_names():
    assert tokenizer_name("de").startswith("moses-de")
    assert tokenizer_name("zh") == "jieba"
    assert "mecab" in tokenizer_name("ja")


def test_first_use_prints_nothing():
    """jieba's dictionary-loading log and any other chatter must stay silent, in a fresh process."""
    code = (
        "from polyvse.text import tokenize\n"
        "tokenize('一只狗在草地上奔跑。', 'zh'); tokenize('犬が走る。', 'ja'); tokenize('A dog.', 'en')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "" and proc.stderr == ""


def test_english_speed(shared_data):
    """400k English captions must take well under a minute: measure CPU time on 20k real captions."""
    path = shared_data / "multi30k" / "data" / "task2" / "raw" / "train.1.en.gz"
    lines = gzip.open(path, "rt", encoding="utf-8").read().split("\n")[:20000]
    tokenize(lines[0], "en")  # build the tokenizer outside the timing
    t0 = time.process_time()
    for line in lines:
        tokenize(line, "en")
    per_caption = (time.process_time() - t0) / len(lines)
    projected = per_caption * 400_000
    assert projected < 45, f"400k en captions would take {projected:.0f}s of CPU"
