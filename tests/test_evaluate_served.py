"""`polyvse evaluate --images DIR --captions FILE` scores every language the model serves: a
language it trained on through its part, a zero-shot one (Dutch, read by the USE tower the model never trained on
in Dutch) through the fallback part and an adapted one (Spanish, taught with a subword student) through its
student -- each as `polyvse search` embeds and ranks a query in that language -- and skips, saying so, a language
its towers cannot read (Quechua). The model is test_adapt's smoke-trained USE-tower model (parts for en and de)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import polyvse
from polyvse_app.cli import main
from test_adapt import base_checkpoint, es_pairs  # noqa: F401  (the fixtures)

DUTCH = [
    "een hond rent over het strand",
    "twee kinderen spelen in het park",
    "een man fietst door de stad",
    "een vrouw leest een boek",
    "een kat slaapt op de bank",
    "mensen lopen in de sneeuw",
]
GERMAN = [
    "ein Hund rennt am Strand",
    "zwei Kinder spielen im Park",
    "ein Mann fährt Rad in der Stadt",
    "eine Frau liest ein Buch",
    "eine Katze schläft auf dem Sofa",
    "Menschen gehen im Schnee",
]
SPANISH = [
    "un perro corre por la playa",
    "dos niños juegan en el parque",
    "un hombre en bicicleta",
    "una mujer lee un libro",
    "un gato duerme en el sofá",
    "gente camina en la nieve",
]


@pytest.fixture()
def own_data(shared_data, tmp_path) -> tuple[Path, Path, list[str]]:
    photos = sorted((shared_data / "flickr8k" / "images").glob("*.jpg"))[:6]
    rows = ["image,lang,caption"]
    for photo, nl, de, es in zip(photos, DUTCH, GERMAN, SPANISH):
        rows += [
            f"{photo.name},nl,{nl}",
            f"{photo.name},de,{de}",
            f"{photo.name},es,{es}",
            f"{photo.name},qu,allqo pampapi phawashan",
        ]
    captions = tmp_path / "captions.csv"
    captions.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return photos[0].parent, captions, [p.name for p in photos]


def by_hand(model, photos: list[Path], texts: list[str], lang: str) -> float:
    """The mR of one caption a photo, embedded and ranked as search embeds and ranks a query in ``lang``."""
    from polyvse.evaluation.base import search_scores
    from polyvse.evaluation.retrieval import evaluate_by_language

    images = model.encode_image(photos)
    return evaluate_by_language(
        images,
        model.encode_text(texts, lang),
        np.arange(len(texts)),
        [lang] * len(texts),
        score_fn=search_scores(model, lang),
    )[lang]["mr"]


def test_own_captions_are_scored_in_every_language_the_model_serves(
    base_checkpoint, es_pairs, own_data, tmp_path, shared_data, capsys
):
    from polyvse.adaptation import AdaptRequest, TeacherSettings, adapt_language

    adapted = tmp_path / "adapted"
    adapt_language(
        AdaptRequest(
            checkpoint=base_checkpoint,
            lang="es",
            parallel=es_pairs,
            out=adapted,
            teacher=TeacherSettings(epochs=3, subwords=True),
            progress=False,
        ),
        report=lambda s: None,
    )
    images, captions, names = own_data
    out = tmp_path / "eval.json"
    assert (
        main(
            [
                "evaluate",
                "--checkpoint",
                str(adapted),
                "--images",
                str(images),
                "--captions",
                str(captions),
                "--json",
                str(out),
                "--data-root",
                str(shared_data),
                "--quiet",
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert (
        "served adapted: es; zero-shot: nl" in printed and "not evaluated (the model cannot read them): qu" in printed
    )
    result = json.loads(out.read_text())
    assert set(result["languages"]) == {"de", "es", "nl"} and result["skipped_languages"] == ["qu"]
    assert result["served_as"] == {"de": "trained", "es": "adapted", "nl": "zero-shot"}
    model = polyvse.load(adapted)
    photos = [images / n for n in names]
    for lang, texts in (("nl", DUTCH), ("es", SPANISH), ("de", GERMAN)):
        assert result["languages"][lang]["n_images"] == 6
        assert result["languages"][lang]["mr"] == pytest.approx(by_hand(model, photos, texts, lang), abs=1e-6), lang


def test_a_file_in_no_language_the_model_reads_is_refused_saying_so(
    base_checkpoint, own_data, tmp_path, shared_data, capsys
):
    images, _, names = own_data
    captions = tmp_path / "qu.csv"
    captions.write_text("image,lang,caption\n" + "".join(f"{n},qu,allqo\n" for n in names), encoding="utf-8")
    assert (
        main(
            [
                "evaluate",
                "--checkpoint",
                str(base_checkpoint),
                "--images",
                str(images),
                "--captions",
                str(captions),
                "--data-root",
                str(shared_data),
                "--quiet",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "no captions in split None in a language the model serves (trained on en, de; it cannot read qu)" in err
