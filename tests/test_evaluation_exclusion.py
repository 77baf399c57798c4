"""One exclusion set per run (polyvse.data.exclusion): an evaluation sentence planted in every training source
comes out of none of the training paths -- image captions, translation augmentation, text-only tuples, teacher
pairs, the text-only datasets -- judged on what each path returns, not on its input."""

from __future__ import annotations

import pytest

from conftest import _gz, _txt
from polyvse.data.exclusion import evaluation_exclusion
from polyvse.data.f8kml import load_f8kml
from polyvse.data.registry import load_dataset
from polyvse.data.text_tuples import text_tuple_corpus
from polyvse_train.config import TrainConfig
from polyvse_train.data import training_captions
from polyvse_train.teacher import load_teacher_pairs

PLANTED = "A planted evaluation sentence about a red kite ."
TRAIN = {"100", "700"}  # tiny root photos at hand that are in no evaluation split


@pytest.fixture()
def planted_root(tiny_root):
    """The tiny data root plus Multi30K test photo 800 (in no Flickr8K split, so only the cross-lingual task
    evaluates it) whose task1 lines are PLANTED in every language; PLANTED also appears as a training photo's
    Flickr8K caption, as a Baidu translation of a training photo, and as a Multi30K line of a text-only photo."""
    m = tiny_root / "multi30k" / "data" / "task1"
    _txt(m / "image_splits" / "test_2016_flickr.txt", "400.jpg\n800.jpg\n")
    for lang in ("en", "de", "fr", "cs"):
        _gz(m / "raw" / f"test_2016_flickr.{lang}.gz", [f"{lang} t1 test_2016_flickr 400.", f"{PLANTED} {lang}"])
        # photo 200 (Multi30K train, no image at hand): its de line is the planted sentence (in German's file)
        _gz(
            m / "raw" / f"train.{lang}.gz",
            [f"{lang} t1 train 100.", f"{PLANTED} {lang}" if lang == "de" else f"{lang} t1 train 200."],
        )
    f8k = tiny_root / "flickr8k"
    for name in ("captions.txt", "all_captions.txt"):
        text = (f8k / name).read_text()
        (f8k / name).write_text(text.replace("Flickr caption 4 of 100 .", f"{PLANTED} en"))
    cn = tiny_root / "flickr8kcn" / "data" / "flickr8kzhb.caption.txt"
    cn.write_text(cn.read_text().replace("百度100号0。", f"{PLANTED} en"))
    return tiny_root


def _planted(texts) -> list[str]:
    return [t for t in texts if "planted" in t.lower()]


def test_the_exclusion_holds_every_evaluation_photo_and_sentence(planted_root):
    ex = evaluation_exclusion(planted_root, eval_photo_ids={"300"}, train_photo_ids=TRAIN)
    assert {"300", "400", "500", "800"} <= ex.photo_ids  # run's own, Flickr8K val/test, Multi30K test
    assert not ex.photo_ids & TRAIN
    assert ex.excludes("100", f"{PLANTED.lower()} DE")  # by sentence, whatever the photo, case or spacing
    assert not ex.excludes("100", "en t1 train 100.")
    # a training photo that a Multi30K test list holds stays training data: its evaluation pairs are dropped
    assert "400" not in evaluation_exclusion(planted_root, train_photo_ids={"400"}).photo_ids


def test_image_captions_and_translations_never_return_a_planted_sentence(planted_root):
    cfg = TrainConfig.from_dict({"data": {"languages": ["en", "de", "zh"], "augment_translations": ["zhb"]}})
    ex = evaluation_exclusion(planted_root, eval_photo_ids={"300"}, train_photo_ids=TRAIN)
    caps = training_captions(cfg, planted_root, load_f8kml(planted_root), TRAIN, ex)
    assert caps and not _planted(c.text for c in caps)
    # without the exclusion the same call returns it from both sources: the test can fail
    from polyvse.data.exclusion import EvaluationExclusion

    leaky = training_captions(
        cfg, planted_root, load_f8kml(planted_root), TRAIN, EvaluationExclusion(frozenset(), frozenset())
    )
    assert {c.source for c in leaky if "planted" in c.text.lower()} == {"flickr8k", "flickr8kcn-zhb"}


def test_text_tuples_never_return_a_planted_sentence_or_test_photo(planted_root):
    ex = evaluation_exclusion(planted_root, eval_photo_ids={"300"}, train_photo_ids=TRAIN)
    for kind in ("multi30k", "all"):
        t = text_tuple_corpus(planted_root, kind, exclude_photo_ids=set(ex.photo_ids), exclusion=ex, min_languages=1)
        assert t.captions and not _planted(c.text for c in t.captions)
        assert not set(t.photos) & {"400", "800"}


class _TextsAsInputs:
    """A caption encoder whose model inputs are the texts themselves, so the returned pairs can be read."""

    def ids_many(self, texts, lang):
        return list(texts)


def test_teacher_pairs_never_hold_a_multi30k_test_line(planted_root, monkeypatch):
    cfg = TrainConfig.from_dict(
        {
            "dataset": "f8k-full",
            "text_encoder": "pretrained",
            "pretrained_encoder": "e5-small",
            "teacher_students": ["cs", "de"],
        }
    )
    monkeypatch.setattr("polyvse.data.registry.list_datasets", lambda: [("f8k-full-text", "")])
    # the text corpus without the dataset's own cleaning: the run's exclusion alone must keep the pairs clean
    from polyvse.data.f8kml import text_only_corpus

    raw_text = text_only_corpus(planted_root, set(), name="raw")
    monkeypatch.setattr("polyvse.data.registry.load_dataset", lambda name, root: raw_text)
    ex = evaluation_exclusion(planted_root, train_photo_ids=TRAIN)
    pairs = load_teacher_pairs(cfg, planted_root, _TextsAsInputs(), ex, TRAIN)
    returned = list(pairs.student) + list(pairs.teacher)
    assert returned and not _planted(returned)
    assert not [t for t in returned if "test_2016" in t]
    leaky = load_teacher_pairs(
        cfg,
        planted_root,
        _TextsAsInputs(),
        evaluation_exclusion(planted_root, train_photo_ids={"800", "400", "200"}),
        TRAIN,
    )  # 800/400 as training photos: their lines come back (the test can fail)
    assert _planted(list(leaky.student))


def test_text_only_datasets_hold_no_line_of_an_evaluation_photo(planted_root):
    for name in ("f8k-ml-text",):
        corpus = load_dataset(name, planted_root)
        assert not set(corpus.photos) & {"300", "400", "500", "800"}
        assert not _planted(c.text for c in corpus.captions)


@pytest.mark.slow
def test_f8k_full_text_holds_no_multi30k_test_photo(shared_data):
    from polyvse.data.text_tuples import multi30k_test_photo_ids

    corpus = load_dataset("f8k-full-text", shared_data)
    assert not set(corpus.photos) & multi30k_test_photo_ids(shared_data)
    assert len(corpus.captions) > 400_000
