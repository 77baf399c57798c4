"""polyvse.languages: any ISO 639 code as data (langcodes), tower-declared languages, what a model serves."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from polyvse.errors import CheckpointError, UnknownLanguageError
from polyvse.languages import (
    check_language,
    language_name,
    language_script,
    model_language,
    readable_languages,
    served_language,
    served_languages,
    serving_status,
)
from polyvse.modules.pretrained import get_pretrained_encoder
from polyvse.modules.pretrained.e5.encoder import XLMR_LANGUAGES
from polyvse.modules.pretrained.use import USE_LANGUAGES


@pytest.mark.parametrize(
    "code, canonical",
    [
        ("es", "es"),
        ("ES", "es"),
        (" spa ", "es"),
        ("es-MX", "es"),
        ("es_419", "es"),  # 639-1, 639-2/3, BCP 47
        ("zh-Hans", "zh"),
        ("zh_TW", "zh"),
        ("cmn", "zh"),
        ("ar_arab", "ar"),
        ("ara", "ar"),
        ("iw", "he"),
        ("ger", "de"),
        ("deu", "de"),  # deprecated and bibliographic codes
        ("qu", "qu"),
        ("que", "qu"),
        ("quy", "quy"),
        ("gn", "gn"),
        ("grn", "gn"),
        ("yue", "yue"),
    ],
)
def test_any_iso_639_code_normalises_to_one_code(code, canonical):
    assert check_language(code) == canonical


@pytest.mark.parametrize("code", ["xx", "123", "", "   ", "und", "zxx", "en--US", None, 7])
def test_unknown_or_malformed_codes_are_refused_clearly(code):
    with pytest.raises(UnknownLanguageError, match=r"--lang: unknown language code .*ISO 639"):
        check_language(code, "--lang")


def test_a_language_name_gets_its_code_suggested():
    with pytest.raises(UnknownLanguageError, match="for Spanish use 'es'"):
        check_language("Spanish")


def test_names_and_scripts_come_from_the_library():
    assert [language_name(c) for c in ("es", "qu", "gn", "ar", "zh", "quy", "cs")] == [
        "Spanish",
        "Quechua",
        "Guarani",
        "Arabic",
        "Chinese",
        "Ayacucho Quechua",
        "Czech",
    ]
    assert language_name("spa") == "Spanish" and language_name("xx") == "xx"
    assert [language_script(c) for c in ("en", "ar_arab", "zh", "zh-Hant", "ja", "th", "ru")] == [
        "Latn",
        "Arab",
        "Hans",
        "Hant",
        "Jpan",
        "Thai",
        "Cyrl",
    ]


def test_model_language_keeps_its_contract():
    assert model_language("EN", ["en", "de"]) == "en"
    with pytest.raises(CheckpointError, match="trained on en, de, not on 'fr'"):
        model_language("fra", ["en", "de"])


def test_towers_declare_their_documented_languages():
    e5, use = get_pretrained_encoder("e5-small"), get_pretrained_encoder("use-multilingual")
    assert len(XLMR_LANGUAGES) >= 90 and len(USE_LANGUAGES) == 15  # zh covers zh-CN and zh-TW: 16 in the model card
    assert {"es", "ar", "zh", "cs", "sw", "fil"} <= e5.languages and not {"qu", "gn"} & e5.languages
    assert {"es", "ar", "zh", "th", "ko"} <= use.languages and "cs" not in use.languages
    assert e5.check_language("spa") == "es" and e5.check_language("tl") == "fil"
    assert e5.check_language("nb") == "no"  # Bokmål is the Norwegian XLM-R documents
    with pytest.raises(
        UnknownLanguageError,
        match=r"'use-multilingual' was not trained on Czech \('cs'\).*"
        r"encoders that cover it: e5-small",
    ):
        use.check_language("ces")
    with pytest.raises(UnknownLanguageError, match="not trained on Quechua"):
        e5.check_language("qu")


def _model(languages, towers=None, adapted=None):
    captions = SimpleNamespace(towers=[get_pretrained_encoder(t) for t in towers] if towers else None)
    checkpoint = SimpleNamespace(adapted_languages=adapted or {})
    return SimpleNamespace(languages=list(languages), captions=captions, checkpoint=checkpoint)


def test_fused_towers_read_the_union_and_a_word_model_only_its_own():
    product = _model(["en", "de", "fr", "cs", "zh", "ja"], ["e5-small", "use-multilingual"])
    assert readable_languages(product) == (
        get_pretrained_encoder("e5-small").languages | get_pretrained_encoder("use-multilingual").languages
    )
    assert [serving_status(product, c) for c in ("de", "es", "spa", "ar", "qu", "gn")] == [
        "trained",
        "zero-shot",
        "zero-shot",
        "zero-shot",
        None,
        None,
    ]
    served = served_languages(product)
    assert (
        list(served)[:6] == ["en", "de", "fr", "cs", "zh", "ja"] and served["es"] == "zero-shot" and "qu" not in served
    )
    product.zero_shot = "off"  # polyvse.load(..., zero_shot="off"): no fallback part, no zero-shot language
    assert serving_status(product, "es") is None and "es" not in served_languages(product)
    word = _model(["en", "de"])
    assert readable_languages(word) == {"en", "de"} and serving_status(word, "es") is None
    assert served_languages(word) == {"en": "trained", "de": "trained"}


def test_adapted_languages_come_from_the_checkpoint():
    # polyvse adapt lists an adapted language in both `languages` and `adapted_languages`
    model = _model(["en", "de", "qu"], ["e5-small"], adapted={"qu": {"method": "linear"}})
    assert serving_status(model, "qu") == "adapted" and serving_status(model, "de") == "trained"
    assert served_languages(model)["qu"] == "adapted"
    # a checkpoint read without torch keeps the config.json dict
    numpy_side = SimpleNamespace(
        languages=["en"],
        captions=SimpleNamespace(vocab={}),
        checkpoint=SimpleNamespace(config={"adapted_languages": {"gn": {}}}),
    )
    assert serving_status(numpy_side, "gn") == "adapted"


def test_an_unreadable_language_is_refused_with_how_to_teach_it():
    product = _model(["en", "de"], ["e5-small", "use-multilingual"])
    assert served_language(product, "spa") == "es"
    with pytest.raises(
        CheckpointError,
        match=r"cannot read Quechua \('qu'\): its text towers \(e5-small\+"
        r"use-multilingual\) read \d+ languages.*polyvse adapt --checkpoint C "
        r"--lang qu --parallel FILE --out C2.*docs/guides/adapt.md",
    ):
        served_language(product, "qu")
    with pytest.raises(
        CheckpointError,
        match=r"word-level model, not trained on 'es' \(it knows en, de\); a word-level "
        r"model learns its languages in training: train one that includes 'es'",
    ):
        served_language(_model(["en", "de"]), "es")


def test_a_model_without_language_parts_is_not_told_to_run_adapt():
    """`polyvse adapt` adds a per-language part; a frozen-tower model with none (e5-frozen) cannot take one."""
    with_parts, without = (_model(["en"], ["e5-small"]) for _ in range(2))
    with_parts.config, without.config = SimpleNamespace(universal_dim=896), SimpleNamespace(universal_dim=0)
    with pytest.raises(CheckpointError, match=r"teach it with `polyvse adapt --checkpoint C --lang qu"):
        served_language(with_parts, "qu")
    with pytest.raises(CheckpointError, match=r"this one has none: use such a model, or train one with 'qu'"):
        served_language(without, "qu")


def test_the_two_letter_fast_path_is_langcodes_own_answer(monkeypatch):
    """CANONICAL_TWO_LETTER (accepted without importing langcodes) is exactly the two-letter codes langcodes leaves
    unchanged: a new langcodes or language-data release that changes one fails here."""
    import string

    from polyvse import languages

    table = languages.CANONICAL_TWO_LETTER
    monkeypatch.setattr(languages, "CANONICAL_TWO_LETTER", frozenset())  # langcodes answers every code
    codes = {a + b for a in string.ascii_lowercase for b in string.ascii_lowercase}
    assert table == {c for c in codes if languages._canonical.__wrapped__(c) == c}


def test_a_query_in_a_canonical_code_does_not_import_langcodes():
    import subprocess
    import sys

    code = (
        "import sys; from polyvse.languages import check_language; "
        "assert check_language('de') == 'de' and check_language('qu') == 'qu'; "
        "print('langcodes' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr
