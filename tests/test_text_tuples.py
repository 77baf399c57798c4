"""Text-side data at scale (TrainConfig.text_corpus): the caption-tuple corpus and its hygiene, the capped
per-epoch sampler, the vocabulary, the text-only loss terms, and a resumed run with a text corpus.

The real-data hygiene test re-reads the raw public caption files with its own minimal parser, so a reader
bug cannot hide an evaluation caption that reaches the text corpus.
"""

from __future__ import annotations

import csv
import gzip
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch

from polyvse.data._io import caption_key
from polyvse.data.exclusion import evaluation_exclusion
from polyvse.data.registry import load_dataset
from polyvse.data.splits import resolve_split
from polyvse.data.text_tuples import multi30k_test_photo_ids, text_tuple_corpus
from polyvse.data.types import Caption, Corpus, Photo
from polyvse.errors import DataError
from polyvse.modules import JointEmbeddingModel, ModelConfig
from polyvse.modules.text_input import CaptionEncoder
from polyvse_train.config import TrainConfig
from polyvse_train.data import CaptionSet, PreparedData
from polyvse_train.objectives import build_objective
from polyvse_train.sampling.text_tuples import (
    InterleavedTextTupleSampler,
    TextTupleBatchSampler,
    spread,
)
from polyvse_train.text_corpus import (
    build_caption_encoder,
    check_text_corpus_config,
    load_text_corpus,
)
from polyvse_train.train import train


# -- the corpus builder on the tiny data root --------------------------------------------------------------
def add_flickr8k_rows(root: Path, rows: list[str]) -> None:
    path = root / "flickr8k" / "all_captions.txt"
    path.write_text(path.read_text(encoding="utf-8") + "\n".join(rows) + "\n", encoding="utf-8")


def test_multi30k_tuples_exclude_by_id_and_keep_their_own_sources(tiny_root):
    # tiny: Multi30K train 100, 200; val 300; test 400 (always excluded: the cross-lingual test set)
    assert multi30k_test_photo_ids(tiny_root) == {"400"}
    t = text_tuple_corpus(tiny_root, "multi30k", exclude_photo_ids={"300"})
    assert set(t.photos) == {"100", "200"}
    assert {c.source for c in t} == {"multi30k-task1", "multi30k-task2"}
    assert all(p.path is None for p in t.photos.values()) and {c.split for c in t} == {"train"}
    # 100's task1 English line is also a Flickr8K caption: Multi30K keeps it (dedupe after the source filter)
    assert ("100", "en", "multi30k-task1") in {(c.photo_id, c.lang, c.source) for c in t}
    by = Counter((c.photo_id, c.lang) for c in t)
    assert by[("200", "en")] == 5 and by[("200", "de")] == 6 and by[("200", "fr")] == 1 and by[("200", "cs")] == 1
    # skipped photos (the run's training photos) go by id only
    assert set(text_tuple_corpus(tiny_root, "multi30k", exclude_photo_ids=set(), skip_photo_ids={"100"}).photos) == {
        "200",
        "300",
    }
    with pytest.raises(DataError, match="use one of multi30k, all"):
        text_tuple_corpus(tiny_root, "coco", exclude_photo_ids=set())
    with pytest.raises(TypeError):
        text_tuple_corpus(tiny_root, "multi30k", exclude_photo_ids=None)  # type: ignore[arg-type]


def test_all_tuples_add_flickr8k_and_native_chinese_and_drop_evaluation_sentences(tiny_root):
    # 600 "re-uses" a caption of the excluded photo 300 and one of the evaluation texts: both must go
    add_flickr8k_rows(tiny_root, ["600_gg.jpg,EN T1 VAL 300", "600_gg.jpg,a generic evaluation sentence ."])
    t = text_tuple_corpus(
        tiny_root, "all", exclude_photo_ids={"300", "500"}, exclude_texts=["A generic evaluation sentence"]
    )
    assert set(t.photos) == {"100", "200", "600", "700"}  # 400: Multi30K test; 300, 500: excluded
    assert {c.source for c in t} == {"flickr8k", "multi30k-task1", "multi30k-task2", "flickr8kcn-zhc"}
    keys = {caption_key(c.text) for c in t}
    assert "ent1val300" not in keys and "agenericevaluationsentence" not in keys
    assert not any(c.source in ("flickr8kcn-zhb", "flickr8kcn-zhg") for c in t)  # MT is augment_translations
    # a tuple needs two of the languages: 600 has en + zh only
    assert set(text_tuple_corpus(tiny_root, "all", exclude_photo_ids=set(), langs=["en", "fr"]).photos) == {
        "100",
        "200",
        "300",
    }


# -- sampler -----------------------------------------------------------------------------------------------
def tuple_data(n_tuples: int = 50):
    """caption -> tuple, caption -> language: tuple t has 2 en, 1 de and (even t) 1 fr caption."""
    tup, lang = [], []
    for t in range(n_tuples):
        for lg in ["en", "en", "de"] + (["fr"] if t % 2 == 0 else []):
            tup.append(t)
            lang.append(lg)
    return np.array(tup), lang


def test_sampler_caps_each_epoch_and_is_a_function_of_seed_and_epoch():
    tup, lang = tuple_data(50)
    s = TextTupleBatchSampler(tup, lang, {"en": 1, "de": 1, "fr": 1}, batch_size=8, per_epoch=20, seed=3)
    batches = s.epoch_batches(0)
    assert [len(b) for b in batches] == [8, 8, 4] and s.tuples_per_epoch == 20
    for e in range(6):
        rows = np.concatenate(s.epoch_batches(e))
        assert rows.shape == (20, 3)
        t = tup[rows[:, 0]]
        assert len(set(t.tolist())) == 20  # distinct tuples within an epoch
        assert (tup[rows[:, 1]] == t).all() and [lang[i] for i in rows[:, 1]] == ["de"] * 20
        fr = rows[:, 2]
        assert ((fr >= 0) == (t % 2 == 0)).all()  # a missing language is an empty slot
    # resume: a fresh sampler gives the same batches for any epoch; other epochs / seeds differ
    again = TextTupleBatchSampler(tup, lang, {"en": 1, "de": 1, "fr": 1}, batch_size=8, per_epoch=20, seed=3)
    for e in (0, 1, 5):
        assert all((a == b).all() for a, b in zip(s.epoch_batches(e), again.epoch_batches(e)))
    assert not np.array_equal(np.concatenate(s.epoch_batches(0)), np.concatenate(s.epoch_batches(1)))
    other = TextTupleBatchSampler(tup, lang, {"en": 1, "de": 1, "fr": 1}, batch_size=8, per_epoch=20, seed=4)
    assert not np.array_equal(np.concatenate(s.epoch_batches(0)), np.concatenate(other.epoch_batches(0)))
    # coverage: the 2 epochs of a cycle (50 // 20) visit 40 distinct tuples
    seen = np.concatenate([tup[np.concatenate(s.epoch_batches(e))[:, 0]] for e in (0, 1)])
    assert len(set(seen.tolist())) == 40
    # a cap above the corpus size is the whole corpus, each epoch
    whole = TextTupleBatchSampler(tup, lang, {"en": 2}, batch_size=16, per_epoch=10_000, seed=0)
    rows = np.concatenate(whole.epoch_batches(7))
    assert len(rows) == 50 and (rows >= 0).all() and (tup[rows[:, 0]] == tup[rows[:, 1]]).all()
    assert (rows[:, 0] != rows[:, 1]).all()  # two different en captions of the tuple


def test_spread_and_interleave():
    assert spread(3, 6) == [[0], [], [1], [], [2], []]
    assert spread(5, 2) == [[0, 1, 2], [3, 4]]
    assert spread(0, 3) == [[], [], []] and spread(2, 0) == []

    class Images:
        def epoch_batches(self, epoch):
            return [(np.array([epoch, i]), np.zeros((2, 1), dtype=np.int64)) for i in range(4)]

        def __len__(self):
            return 4

    tup, lang = tuple_data(20)
    text = TextTupleBatchSampler(tup, lang, {"en": 1}, batch_size=5, per_epoch=10, seed=0)
    batches = InterleavedTextTupleSampler(Images(), text).epoch_batches(2)
    assert len(batches) == 4 and [len(b[2]) for b in batches] == [1, 0, 1, 0]
    assert (batches[2][2][0] == text.epoch_batches(2)[1]).all()


# -- configuration and vocabulary --------------------------------------------------------------------------
def test_config_errors_name_the_field():
    check_text_corpus_config(TrainConfig())
    check_text_corpus_config(TrainConfig(objective="parallel", text_corpus="multi30k"))
    check_text_corpus_config(TrainConfig(objective="mule", text_corpus="all", lp_epochs=1))
    with pytest.raises(DataError, match="data.text_corpus: 'coco': use one of none, multi30k, all"):
        TrainConfig.from_dict(dict(text_corpus="coco"))
    for bad, match in (
        (dict(objective="pivot", text_corpus="multi30k"), "objective 'pivot'"),
        (dict(objective="mlmme", beta=1.0, text_corpus="multi30k"), "text_corpus"),
        (dict(objective="vse", text_corpus="all"), "text_corpus"),
        (dict(objective="parallel", text_corpus="all", text_tuples_per_epoch=0), "text_tuples_per_epoch"),
    ):
        with pytest.raises(DataError, match=match):
            check_text_corpus_config(TrainConfig(**bad))


def text_corpus_of(rows: list[tuple[str, str, str]]) -> Corpus:
    caps = [Caption(p, lang, text, "multi30k-task1", "train") for p, lang, text in rows]
    return Corpus("text-tuples-test", {p: Photo(p, None) for p in dict.fromkeys(p for p, _, _ in rows)}, caps)


def test_vocabulary_takes_frequent_corpus_words_only():
    train_texts = {"en": ["a dog runs", "a cat"], "de": ["ein hund"]}
    cfg = TrainConfig(objective="parallel", text_corpus="multi30k", text_vocab_min_count=2, max_len=3)
    plain, none = build_caption_encoder(cfg, train_texts, None)
    assert none is None and plain.vocab == CaptionEncoder.build(train_texts, max_len=3).vocab
    text = text_corpus_of(
        [
            ("1", "en", "a zebra grazes"),
            ("1", "de", "ein zebra"),
            ("2", "en", "a zebra sleeps on a mat"),
            ("2", "de", "ein zebra schläft"),
            ("3", "en", ""),
        ]
    )
    enc, tuples = build_caption_encoder(cfg, train_texts, text)
    words = set(enc.vocab.tokens)
    assert {"en:dog", "en:cat", "de:hund", "en:zebra", "de:zebra"} <= words  # train words + frequent corpus words
    assert not {"en:grazes", "en:sleeps", "de:schläft", "en:mat"} & words  # seen once: UNK
    assert tuples.photo_ids == ["1", "2", "3"] and tuples.tuple_index.tolist() == [0, 0, 1, 1, 2]
    for i, c in enumerate(text.captions):
        assert tuples.ids(i) == enc.ids(c.text, c.lang)  # same ids as the caption encoder (truncated, never empty)
    cfg.data.text_vocab_min_count = 0
    assert build_caption_encoder(cfg, train_texts, text)[0].vocab == plain.vocab


# -- losses: text-only tuples train the text branch only ----------------------------------------------------
def fake_data(languages: list[str], n_photos: int = 6, n_tuples: int = 8) -> PreparedData:
    rng = np.random.default_rng(0)
    words = ["dog", "cat", "ball", "grass", "red", "two", "man", "snow"]

    def sentence():
        return " ".join(rng.choice(words, size=int(rng.integers(2, 6))))

    train_rows, train_langs, train_texts = [], [], []
    for p in range(n_photos):
        for lang in languages:
            for _ in range(2):
                train_rows.append(p)
                train_langs.append(lang)
                train_texts.append(sentence())
    rows = [(f"t{t}", lang, sentence()) for t in range(n_tuples) for lang in languages for _ in range(2)]
    texts_by_lang: dict[str, list[str]] = {}
    for lang, text in zip(train_langs, train_texts):
        texts_by_lang.setdefault(lang, []).append(text)
    cfg = TrainConfig(objective="parallel", text_corpus="multi30k", text_vocab_min_count=1)
    enc, tuples = build_caption_encoder(cfg, texts_by_lang, text_corpus_of(rows))
    train_set = CaptionSet(
        np.array(train_rows), train_langs, [enc.ids(t, lg) for t, lg in zip(train_texts, train_langs)]
    )
    return PreparedData(
        photo_ids=[str(p) for p in range(n_photos)],
        features=torch.randn(n_photos, 12),
        train_rows=np.arange(n_photos),
        eval_rows=np.arange(0),
        train=train_set,
        eval=CaptionSet(np.zeros(0, dtype=np.int64), [], []),
        captions=enc,
        feature_key="fake",
        n_failed_photos=0,
        text_tuples=tuples,
    )


@pytest.mark.parametrize(
    "over",
    [
        dict(objective="parallel", text_sharing="per_language"),
        dict(objective="mlmme", beta=0.5),
        dict(objective="mule", quotas={"en": 2, "de": 1}, universal_dim=8, nc_weight=1.0, top_k=10, lp_epochs=1),
    ],
    ids=["parallel", "mlmme", "mule"],
)
def test_text_only_tuples_give_gradient_to_the_text_branch_only(over):
    languages = ["en", "de"]
    cfg = TrainConfig(languages=languages, text_corpus="multi30k", batch_size=4, seed=0, **over)
    data = fake_data(languages)
    torch.manual_seed(0)
    per_language = cfg.model.text_sharing != "shared" or cfg.model.universal_dim > 0
    model = JointEmbeddingModel(
        ModelConfig(
            vocab_size=len(data.captions.vocab),
            image_dim=12,
            embed_dim=16,
            word_dim=8,
            hidden_dim=16,
            text_sharing=cfg.model.text_sharing,
            universal_dim=cfg.model.universal_dim,
            languages=languages if per_language else [],
        )
    )
    objective = build_objective(cfg, model, data)
    batches = objective.sampler().epoch_batches(0)
    assert all(len(b) == 3 for b in batches) and sum(len(b[2]) for b in batches) == 2  # 8 tuples / batch 4
    text_batches = [t for b in batches for t in b[2]]
    for epoch in (0, 1) if cfg.objective.name == "mule" else (0,):  # mule: LP epoch, then NC
        model.zero_grad(set_to_none=True)
        loss = objective.text_batch_loss(text_batches, epoch)
        assert loss is not None and loss.item() > 0
        loss.backward()
        assert all(p.grad is None for p in model.image_head.parameters())  # no image in a text-only tuple
        grads = [p.grad for p in model.text_encoder.parameters() if p.grad is not None]
        assert grads and any(g.abs().sum() > 0 for g in grads)
    # a training step = the image batch's loss + the text terms of its text batches
    with_text = next(b for b in batches if b[2])
    total, parts = objective(model, with_text, _NoDist(), 1)
    alone, _ = objective.image_batch_loss(model, with_text[:2], _NoDist(), 1)
    text = objective.text_batch_loss(with_text[2], 1)
    assert torch.allclose(total, alone + text) and parts["text_tuples"] == pytest.approx(text.item())


class _NoDist:
    enabled = False


@pytest.mark.parametrize("kind", ["mule", "parallel"])
def test_hard_negative_warmup_sums_every_negative_then_mines(kind):
    """hard_negative_warmup_epochs: the first epochs after LP use every negative (the top_k = 0 loss), later
    ones the configured top-K; text-only tuple terms follow the same schedule."""
    languages = ["en", "de"]
    # (nc_weight 0: neighbourhood constraints keep their own K, checked in test_losses)
    over = (
        dict(objective="mule", quotas={"en": 2, "de": 1}, universal_dim=8, lp_epochs=1)
        if kind == "mule"
        else dict(objective="parallel")
    )
    data = fake_data(languages)

    def objective_with(**kw):
        cfg = TrainConfig(languages=languages, text_corpus="multi30k", batch_size=4, seed=0, **over, **kw)
        torch.manual_seed(0)
        model = JointEmbeddingModel(
            ModelConfig(
                vocab_size=len(data.captions.vocab),
                image_dim=12,
                embed_dim=16,
                word_dim=8,
                hidden_dim=16,
                universal_dim=cfg.model.universal_dim,
                languages=languages if cfg.model.universal_dim else [],
            )
        )
        return build_objective(cfg, model, data)

    warm, summed, mined = (
        objective_with(top_k=1, hard_negative_warmup_epochs=2),
        objective_with(top_k=0),
        objective_with(top_k=1),
    )
    batch = next(b for b in warm.sampler().epoch_batches(0) if b[2] or kind == "mule")
    first = warm.pre_epochs  # mule: epoch 0 is LP
    assert [warm.warming_up(e) for e in range(first + 3)] == [False] * first + [True, True, False]
    loss = {
        name: [obj(obj.model[0], batch, _NoDist(), e)[0].item() for e in (first, first + 2)]
        for name, obj in (("warm", warm), ("summed", summed), ("mined", mined))
    }
    assert loss["warm"] == pytest.approx([loss["summed"][0], loss["mined"][1]])
    assert loss["summed"][0] > loss["mined"][0]  # the two modes differ on this batch
    assert all(m._k == 1 for m in warm.modules() if hasattr(m, "_k"))  # restored after the warm-up call
    with pytest.raises(DataError, match="objective.hard_negative_warmup_epochs: must be 0 or more"):
        TrainConfig.from_dict(dict(hard_negative_warmup_epochs=-1))


# -- real data: hygiene of the corpus each run uses, and exact resumption ------------------------------------
def raw_captions_by_photo(root: Path) -> dict[str, set[str]]:
    """Every caption any public file gives to a photo (own parser: Multi30K gz + image lists, Flickr8K
    all_captions.txt, Flickr8K-CN zhc/zhb/zhg/zhm)."""
    out: dict[str, set[str]] = {}
    base = root / "multi30k" / "data"
    for task, suffix in (("task1", ".txt"), ("task2", "_images.txt")):
        for image_list in sorted((base / task / "image_splits").glob(f"*{suffix}")):
            split = image_list.name[: -len(suffix)]
            ids = [x[:-4] for x in image_list.read_text().split("\n") if x]
            for f in sorted((base / task / "raw").glob(f"{split}.*.gz")):
                with gzip.open(f, "rt", encoding="utf-8") as fh:
                    lines = fh.read().split("\n")[:-1]
                assert len(lines) == len(ids), f
                for pid, text in zip(ids, lines):
                    out.setdefault(pid, set()).add(text.strip())
    with open(root / "flickr8k" / "all_captions.txt", encoding="utf-8", newline="") as fh:
        for image, text in list(csv.reader(fh))[1:]:
            out.setdefault(image.split("_")[0], set()).add(text.strip())
    cn = root / "flickr8kcn" / "data"
    for name in (
        "flickr8kzhc.caption.txt",
        "flickr8kzhb.caption.txt",
        "flickr8kzhg.caption.txt",
        "flickr8kzhmtest.captions.txt",
    ):
        for line in (cn / name).read_text(encoding="utf-8").split("\n"):
            if line.strip():
                key, text = line.split(" ", 1)
                out.setdefault(key.split("_")[0], set()).add(text.strip())
    return out


def test_no_evaluation_photo_or_caption_reaches_the_text_corpus_of_its_run(shared_data):
    """For the official split and every fold of the 5-fold protocol: the corpus that `prepare_data` builds
    (same function, same arguments) holds no caption of an evaluation photo, by photo id and by text."""
    raw = raw_captions_by_photo(shared_data)
    f8kml = load_dataset("f8k-ml", shared_data)
    m30k_test = multi30k_test_photo_ids(shared_data)
    for split in ("official", "fold0of5", "fold1of5", "fold2of5", "fold3of5", "fold4of5"):
        cfg = TrainConfig(objective="parallel", text_corpus="all", split=split)
        corpus = f8kml.filter(langs=cfg.data.languages)
        train_ids, eval_ids = resolve_split(corpus, cfg.data.split)
        text = load_text_corpus(
            cfg,
            shared_data,
            corpus,
            evaluation_exclusion(shared_data, eval_photo_ids=eval_ids, train_photo_ids=train_ids),
        )
        ids = set(text.photos) | {c.photo_id for c in text.captions}
        assert len(ids) > 20_000
        assert not ids & eval_ids, split
        assert not ids & set(f8kml.photos)  # training photos train with their images, not twice
        assert not ids & m30k_test
        bad = {caption_key(t) for p in eval_ids for t in raw.get(p, ())}
        bad |= {caption_key(t) for p in m30k_test for t in raw.get(p, ())}
        assert len(bad) > 1000
        leaked = [c.text for c in text.captions if caption_key(c.text) in bad]
        assert not leaked, (split, leaked[:5])


def test_resumed_run_with_a_text_corpus_reaches_identical_metrics(shared_data, tmp_path):
    cfg = TrainConfig(
        name="tiny-text",
        objective="parallel",
        languages=["en", "de", "zh"],
        text_corpus="multi30k",
        embed_dim=32,
        word_dim=16,
        hidden_dim=32,
        batch_size=8,
        smoke_photos=32,
        smoke_epochs=2,
        lr=5e-4,
    )
    ref = train(cfg, tmp_path / "ref", shared_data, smoke=True, progress=False)
    assert ref["text_corpus"]["tuples"] == 32 and ref["text_corpus"]["languages"].keys() == {"en", "de"}
    stopped = train(cfg, tmp_path / "run", shared_data, smoke=True, progress=False, max_steps=5)
    assert stopped == {"stopped_at_step": 5}
    resumed = train(cfg, tmp_path / "run", shared_data, smoke=True, progress=False, resume=True)
    assert resumed["languages"] == ref["languages"] and resumed["vocab_size"] == ref["vocab_size"]
