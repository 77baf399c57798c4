"""Teacher learning on parallel text (polyvse_train.teacher): the pairs hold no evaluation photo, the loss draws
the same pairs for the same step and teaches only the student side, bad settings name the field."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from polyvse.data.exclusion import EvaluationExclusion, evaluation_exclusion
from polyvse.data.f8kfull import flickr8k_eval_photo_ids
from polyvse.errors import DataError
from polyvse_train.config import TrainConfig
from polyvse_train.data import prepare_data
from polyvse_train.teacher import TEACHER_SOURCE, TeacherLoss, TeacherPairs, load_teacher_pairs
from polyvse_train.train import train


class FakeEncoder:
    """Sentence vectors made from the text, so pairs can be checked without a real tower."""

    dim = 4

    def ids_many(self, texts, lang):
        return [np.full(self.dim, float(len(t)), dtype=np.float32) for t in texts]


def teacher_config(**over) -> TrainConfig:
    return TrainConfig.from_dict(
        {
            "dataset": "f8k-full",
            "text_encoder": "pretrained",
            "pretrained_encoder": "e5-small",
            "teacher_students": ["cs", "de"],
            **over,
        }
    )


@pytest.fixture(scope="module")
def text_corpus(shared_data):
    from polyvse.data.registry import load_dataset

    return load_dataset("f8k-full-text", shared_data)  # ~460k captions: read once for the module


def test_pairs_are_translations_of_photos_outside_evaluation(shared_data, text_corpus, monkeypatch):
    monkeypatch.setattr("polyvse.data.registry.load_dataset", lambda name, root: text_corpus)
    eval_ids = flickr8k_eval_photo_ids(shared_data)
    ex = evaluation_exclusion(shared_data)
    pairs = load_teacher_pairs(teacher_config(), shared_data, FakeEncoder(), ex, set(), smoke=False)
    assert len(pairs) > 40_000 and set(pairs.langs) == {"cs", "de"}  # ~29k photos x 2 languages, most with en
    task1 = [c for c in text_corpus.captions if c.source == TEACHER_SOURCE]
    assert not {c.photo_id for c in task1} & eval_ids
    # train only: the lines of the given photos
    some = sorted({c.photo_id for c in task1})[:10]
    few = load_teacher_pairs(
        teacher_config(teacher_photos="train"), shared_data, FakeEncoder(), ex, set(some), smoke=False
    )
    assert 0 < len(few) <= 20
    assert load_teacher_pairs(teacher_config(teacher_students=[]), shared_data, FakeEncoder(), ex, set()) is None


def test_a_language_multi30k_lacks_takes_multiscript30k_lines_of_the_same_photo(shared_data, text_corpus, monkeypatch):
    from polyvse.data.multiscript30k import MultiScript30kReader

    monkeypatch.setattr("polyvse.data.registry.load_dataset", lambda name, root: text_corpus)
    ex = evaluation_exclusion(shared_data)
    pairs = load_teacher_pairs(teacher_config(teacher_students=["zh"]), shared_data, FakeEncoder(), ex, set())
    assert len(pairs) > 20_000 and set(pairs.langs) == {"zh"}
    # the student of each pair is the MultiScript30k translation of its teacher line (same photo, same task1 line)
    zh_of = {ln.photo_id: ln.text for ln in MultiScript30kReader(shared_data).all_lines(["zh"])}
    en_of = {c.photo_id: c.text for c in text_corpus.captions if c.source == TEACHER_SOURCE and c.lang == "en"}
    enc = FakeEncoder()
    pid = sorted(set(zh_of) & set(en_of) - ex.photo_ids)[0]
    row = [i for i, v in enumerate(pairs.student) if v[0] == len(zh_of[pid])]
    assert any(pairs.teacher[i][0] == len(en_of[pid]) for i in row)
    # nothing an evaluation uses: the test photos' zh lines are gone
    test_zh = [ln for ln in MultiScript30kReader(shared_data).lines("zh", "test_2016_flickr")]
    with pytest.raises(DataError, match="holds no"):
        load_teacher_pairs(
            teacher_config(teacher_students=["zh"], teacher_photos="train"),
            shared_data,
            enc,
            ex,
            {ln.photo_id for ln in test_zh},
        )
    with pytest.raises(DataError, match="MultiScript30k has"):
        load_teacher_pairs(teacher_config(teacher_students=["xx"]), shared_data, enc, ex, set())


def test_loss_draws_the_same_pairs_per_step_and_teaches_the_student_only():
    class Model(torch.nn.Module):
        needs_language = False

        def __init__(self):
            super().__init__()
            self.head = torch.nn.Linear(4, 3)

        def encode_text_ids(self, ids, lengths, langs=None):
            return self.head(ids[:, 0])

    class Captions:
        def pad(self, rows):
            return torch.from_numpy(np.stack(rows))[:, None, :], torch.ones(len(rows), dtype=torch.long)

    rng = np.random.default_rng(0)
    vecs = [rng.standard_normal(4).astype(np.float32) for _ in range(20)]
    pairs = TeacherPairs(vecs[:10], vecs[10:], ["cs"] * 10)
    torch.manual_seed(0)
    model = Model()
    loss = TeacherLoss(pairs, batch_size=4, temperature=0.1, seed=0, teacher_language="en")
    a = loss(model, Captions(), epoch=1, image_batch=[3, 7, 9])
    assert a.item() == pytest.approx(loss(model, Captions(), epoch=1, image_batch=[3, 7, 9]).item())
    assert a.item() != pytest.approx(loss(model, Captions(), epoch=2, image_batch=[3, 7, 9]).item())
    a.backward()
    assert model.head.weight.grad is not None and model.head.weight.grad.abs().sum() > 0


@pytest.mark.parametrize(
    "over, message",
    [
        (dict(objective="pivot"), "objective vse"),
        (dict(teacher_students=["en"]), "cannot teach itself"),
        (dict(teacher_photos="some"), "teacher_photos"),
        (dict(teacher_weight=0.0), "teacher_weight"),
    ],
)
def test_bad_teacher_settings_name_the_field(over, message):
    with pytest.raises(DataError, match=message):
        teacher_config(**over).validate()


def test_word_level_run_refuses_teacher(shared_data):
    cfg = TrainConfig.from_dict({"teacher_students": ["cs"], "languages": ["en", "cs"]})
    with pytest.raises(DataError, match="pretrained text tower"):
        prepare_data(cfg, shared_data, smoke=True, progress=False)


def test_smoke_run_with_a_teacher_trains(shared_data, tmp_path):
    cfg = TrainConfig.load("configs/e5-frozen.yaml")
    over = TrainConfig.from_dict({**cfg.to_dict(), "teacher_students": ["cs"], "teacher_batch_size": 16})
    with_teacher = train(over, tmp_path / "t", shared_data, smoke=True, progress=False)
    without = train(cfg, tmp_path / "n", shared_data, smoke=True, progress=False)
    assert set(with_teacher["languages"]) == set(without["languages"])
    assert with_teacher["languages"] != without["languages"]  # the extra term changed the model


def test_a_dataset_without_a_text_corpus_is_named(shared_data):
    cfg = teacher_config(dataset="flickr8k")
    with pytest.raises(DataError, match="has no text-only corpus 'flickr8k-text'"):
        load_teacher_pairs(cfg, shared_data, FakeEncoder(), EvaluationExclusion(frozenset(), frozenset()), set())
