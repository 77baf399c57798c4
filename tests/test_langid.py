"""`--lang auto`: a word-level model's detection refuses short, ambiguous and foreign queries; a model whose towers
read the query without its language searches anyway and refuses only where the language changes the answer."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from polyvse.errors import CheckpointError, UnknownLanguageError
from polyvse.index.search import Hit, Searcher
from polyvse.modules.pretrained import get_pretrained_encoder
from polyvse.text.langid import LanguageDetectionError, choose_language, detect_language, detectable_languages

DEMO = ["en", "de", "fr", "cs", "zh"]


@pytest.mark.parametrize(
    "text, lang",
    [
        ("zwei Hunde spielen im Schnee", "de"),
        ("Ein Mann fährt Fahrrad auf der Straße", "de"),
        ("a dog runs through the grass", "en"),
        ("children playing on the beach", "en"),
        ("deux chiens jouent dans la neige", "fr"),
        ("dva psi si hrají na sněhu", "cs"),
        ("两只狗在雪地里玩", "zh"),
    ],
)
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


@pytest.mark.parametrize(
    "text, name",
    [
        ("los perros juegan en la nieve", "Spanish"),
        ("cani che giocano nella neve", "Italian"),
        ("雪の中で遊ぶ二匹の犬", "Japanese"),
    ],
)
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


# -- choose_language: a model whose towers read the query without being told its language ------------------------
TRAINED = ["en", "de", "fr", "cs", "zh", "ja"]
#: what the product model (e5-small + USE-multilingual) serves: its trained languages and its towers' ~100
SERVED = TRAINED + sorted(
    set(get_pretrained_encoder("e5-small").languages | get_pretrained_encoder("use-multilingual").languages)
    - set(TRAINED)
)
EXAMPLES = ["two dogs", "a red car", "un homme", "un chien court sur la plage"]  # refused by the old rule


def same_answer(lang):  # a model without per-language parts: the language changes nothing
    return list(range(10))


def answer_per_language(lang):  # each language's part gives other photos
    return [hash((lang, i)) for i in range(10)]


@pytest.mark.parametrize("text", EXAMPLES)
def test_plain_queries_are_searched_as_a_plausible_trained_language(text):
    def must_not_search(lang):
        raise AssertionError("compared the candidates although the default agreement is 0")

    with pytest.raises(LanguageDetectionError):  # what a model that needs the language still does
        detect_language(text, TRAINED)
    guess = choose_language(text, SERVED, must_not_search, trained=TRAINED)
    assert guess.decided_by == "plausible" and guess.agreement is None
    # a plausible trained language is named, even where an untrained one looks likelier ("a red car": Welsh)
    assert (
        guess.lang == {"two dogs": "en", "a red car": "en", "un homme": "fr", "un chien court sur la plage": "fr"}[text]
    )
    assert len(guess.candidates) >= 2 and guess.to_dict()["decided_by"] == "plausible"


def test_the_default_agreement_is_zero_as_chosen_on_val():
    import json
    from pathlib import Path

    from polyvse.text.langid import DEFAULT_MIN_AGREEMENT

    record = json.loads(
        (
            Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "archive" / "auto_language_val.json"
        ).read_text(encoding="utf-8")
    )
    assert record["split"] == "val" and record["choice"]["min_agreement"] == DEFAULT_MIN_AGREEMENT == 0.0


@pytest.mark.parametrize("text", EXAMPLES)
def test_with_an_agreement_asked_the_same_answer_is_searched(text):
    guess = choose_language(text, SERVED, same_answer, trained=TRAINED, min_agreement=0.8)
    assert guess.decided_by == "same answer" and guess.agreement == 1.0
    assert guess.lang in {"en", "fr"} and guess.to_dict()["agreement"] == 1.0


@pytest.mark.parametrize("text", EXAMPLES)
def test_with_an_agreement_asked_unclear_queries_are_refused_where_the_language_changes_the_answer(text):
    with pytest.raises(
        LanguageDetectionError,
        match=r"cannot tell the language .*plausible: .*and it changes the "
        r"results: .*the top 10 photos share 0 \(need 80%\)",
    ):
        choose_language(text, SERVED, answer_per_language, trained=TRAINED, min_agreement=0.8)


def test_agreement_threshold_is_the_share_of_the_top_k_every_candidate_has():
    def nine_of_ten(lang):  # the best-guess part ranks one photo of its own
        return [0, 1, 2, 3, 4, 5, 6, 7, 8, 100 if lang == "fr" else 200]

    guess = choose_language("un homme", SERVED, nine_of_ten, trained=TRAINED, min_agreement=0.8)
    assert guess.lang == "fr" and guess.agreement == pytest.approx(0.9)
    with pytest.raises(LanguageDetectionError, match=r"share 9 \(need 100%\)"):
        choose_language("un homme", SERVED, nine_of_ten, trained=TRAINED, min_agreement=1.0)
    # compare=True measures the agreement without refusing (what the benchmark does)
    assert choose_language("un homme", SERVED, nine_of_ten, trained=TRAINED, compare=True).agreement == pytest.approx(
        0.9
    )


def test_a_confident_detection_needs_no_comparison():
    def must_not_search(lang):
        raise AssertionError("searched although the detection was clear")

    for text, lang in [
        ("zwei Hunde spielen im Schnee", "de"),
        ("los perros juegan en la nieve", "es"),
        ("كلبان يلعبان في الثلج", "ar"),
        ("ein Hund läuft durch das Gras", "de"),
    ]:
        guess = choose_language(text, SERVED, must_not_search, trained=TRAINED)
        assert guess.lang == lang and guess.decided_by == "detection"  # 0.75, or 5 times the runner-up's
        assert guess.confidence >= 0.75 or guess.confidence >= 5 * guess.candidates[1][1]


def test_a_language_the_model_cannot_read_is_refused_with_how_to_teach_it():
    with pytest.raises(
        LanguageDetectionError,
        match=r"looks like Shona \(sn, .*cannot read; .*polyvse adapt "
        r"--checkpoint C --lang sn --parallel FILE --out C2",
    ):
        choose_language("Imbwa mbiri dziri kutamba mujecha", SERVED, same_answer, trained=TRAINED)
    # a served language lingua cannot tell (an adapted Quechua) is named, to be passed explicitly
    with pytest.raises(LanguageDetectionError, match=r"auto cannot tell \d+ of them, .*Quechua \(qu\)"):
        choose_language("Huk allqu pampapi phawachkan", TRAINED + ["qu"] + SERVED[6:], same_answer, trained=TRAINED)


def test_text_without_words_compares_the_trained_languages():
    seen = []
    guess = choose_language(
        "12345", SERVED, lambda lang: seen.append(lang) or same_answer(lang), trained=TRAINED, min_agreement=0.8
    )
    assert guess.decided_by == "same answer" and seen == TRAINED[:5]
    assert choose_language("12345", SERVED, same_answer, trained=TRAINED).lang == TRAINED[0]


def test_the_wide_detector_knows_every_language_lingua_knows():
    import lingua

    assert len(detectable_languages()) == len(list(lingua.Language.all())) >= 75
    assert {"es", "ar", "sw", "yo", "fil", "nb", "mi"} <= detectable_languages()


class _Product:  # what Searcher reads of a model with frozen towers and per-language parts
    def __init__(self):
        self.languages = TRAINED
        self.captions = SimpleNamespace(
            towers=[get_pretrained_encoder("e5-small"), get_pretrained_encoder("use-multilingual")], vocab=None
        )
        self.checkpoint = SimpleNamespace(adapted_languages={})


class _StubSearcher(Searcher):
    """Searcher on the _Product model; a language's query vector comes from ``part_of`` (languages sharing a part
    share a vector) and each distinct vector has its own photos."""

    def __init__(self, part_of):
        self.model, self.part_of, self.searches = _Product(), part_of, []

    def embed_text(self, text, lang):
        return np.full((1, 4), float(self.part_of(lang)), dtype=np.float32)

    def search_vectors(self, queries, k, exclude=None, lang=None):
        self.searches.append(float(queries[0, 0]))
        return [[Hit(r + 1, int(queries[0, 0]) * 100 + r, "p.jpg", "p.jpg", 1.0) for r in range(k)]]


def test_searcher_searches_the_plausible_language_and_returns_its_hits():
    per_language = _StubSearcher(lambda lang: TRAINED.index(lang) + 1 if lang in TRAINED else 0)
    code, guess, hits = per_language.resolve_language("un homme", "auto", k=5)
    assert code == "fr" and guess.decided_by == "plausible" and hits is None and per_language.searches == []
    hits = per_language.text("un homme", "auto", k=5).hits  # then searched once, as French
    assert per_language.searches == [3.0] and [h.id for h in hits] == [300, 301, 302, 303, 304]
    assert per_language.resolve_language("zwei Hunde spielen im Schnee", "auto")[0] == "de"


def test_searcher_accepts_every_served_language_and_refuses_others_with_how_to_teach():
    searcher = _StubSearcher(lambda lang: 1)
    assert searcher.resolve_language("un perro", "spa")[:2] == ("es", None)
    assert searcher.served_languages["es"] == "zero-shot" and searcher.served_languages["de"] == "trained"
    with pytest.raises(CheckpointError, match=r"cannot read Guarani \('gn'\).*polyvse adapt --checkpoint C --lang gn"):
        searcher.resolve_language("mokõi jagua", "gn")
    with pytest.raises(UnknownLanguageError, match="unknown language code 'xx'"):
        searcher.resolve_language("a dog", "xx")
