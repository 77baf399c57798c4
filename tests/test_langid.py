"""`--lang auto`: detect among the model's languages, refuse short, ambiguous and foreign queries."""
from __future__ import annotations

import pytest

from polyvse.errors import UnknownLanguageError
from polyvse.langid import LanguageDetectionError, detect_language

DEMO = ["en", "de", "fr", "cs", "zh"]


@pytest.mark.parametrize("text, lang", [
    ("zwei Hunde spielen im Schnee", "de"),
    ("Ein Mann fährt Fahrrad auf der Straße", "de"),
    ("a dog runs through the grass", "en"),
    ("children playing on the beach", "en"),
    ("deux chiens jouent dans la neige", "fr"),
    ("dva psi si hrají na sněhu", "cs"),
    ("两只狗在雪地里玩", "zh"),
])
def test_detects_the_models_languages(text, lang):
    guess = detect_language(text, DEMO)
    assert guess.lang == lang and guess.confidence >= 0.75
    assert guess.candidates[0][0] == lang
    assert guess.to_dict()["lang"] == lang


@pytest.mark.parametrize("text", ["Hund", "dog", "狗", "a b", "Schnee!"])
def test_short_queries_are_refused_not_guessed(text):
    with pytest.raises(LanguageDetectionError, match="too short to tell"):
        detect_language(text, DEMO)


@pytest.mark.parametrize("text", ["", "   ", "12345 678", "!!! ???"])
def test_text_without_words_is_refused(text):
    with pytest.raises(LanguageDetectionError, match="no words"):
        detect_language(text, DEMO)


@pytest.mark.parametrize("text", ["a man rides a bike", "Hotel Taxi Restaurant", "a girl in a pink dress"])
def test_ambiguous_queries_are_refused_with_the_best_guess(text):
    refusal = r"cannot tell the language .*(best guess .*\(need 0\.75\)|reads about as well as)"
    with pytest.raises(LanguageDetectionError, match=refusal):
        detect_language(text, DEMO)


@pytest.mark.parametrize("text, name", [
    ("los perros juegan en la nieve", "Spanish"),
    ("cani che giocano nella neve", "Italian"),
    ("雪の中で遊ぶ二匹の犬", "Japanese"),
])
def test_languages_outside_the_model_are_named_not_forced(text, name):
    with pytest.raises(LanguageDetectionError, match=f"looks like {name}.*not trained on; it knows cs, de, en, fr, zh"):
        detect_language(text, DEMO)


def test_restricted_to_the_models_languages():
    # a French sentence for a model without French is refused; with French it is French
    with pytest.raises(LanguageDetectionError, match="looks like French"):
        detect_language("deux chiens jouent dans la neige", ["en", "de"])
    assert detect_language("deux chiens jouent dans la neige", ["en", "fr"]).lang == "fr"
    # a one-language model: its language, when the text is in it
    assert detect_language("a dog runs through the grass", ["en"]).lang == "en"
    with pytest.raises(LanguageDetectionError, match="looks like German"):
        detect_language("ein Hund läuft durch das Gras", ["en"])


def test_messages_say_how_to_proceed_and_bad_codes_fail():
    with pytest.raises(LanguageDetectionError, match=r"pass the language explicitly \(one of: de, en\)"):
        detect_language("Hund", ["en", "de"])
    with pytest.raises(UnknownLanguageError):
        detect_language("zwei Hunde spielen im Schnee", ["en", "xx"])
    assert issubclass(LanguageDetectionError, ValueError)
