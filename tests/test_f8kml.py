"""F8K-ML (the default dataset), its text-only training corpora, k-fold splits, and evaluation hygiene.

The real-data tests read ../shared/data. The hygiene test re-reads the raw public files with its own
minimal parser (not polyvse's readers) so that a reader bug (e.g. misaligned Multi30K lines) cannot
hide a leak.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict

import pytest

from polyvse.data._io import caption_key
from polyvse.data.f8kml import evaluation_photo_ids, kfold_photo_splits, load_f8kml, load_f8kml_text, text_only_corpus
from polyvse.data.registry import list_datasets, load_dataset
from polyvse.errors import DataError


# -- synthetic ---------------------------------------------------------------------------------------------
def test_tiny_f8kml_sources_splits_and_dedupe(tiny_root):
    c = load_f8kml(tiny_root)
    assert set(c.photos) == {"100", "300", "500", "700"}
    split = {x.photo_id: x.split for x in c}
    assert split == {"100": "train", "300": "val", "500": "test", "700": "train"}  # 700: in no list -> train
    by = defaultdict(list)
    for x in c:
        by[(x.photo_id, x.source, x.lang)].append(x.text)
    # the Flickr8K caption "en t1 train 100 ." is the task1 English line up to tokenisation: kept once
    assert "en t1 train 100 ." in by[("100", "flickr8k", "en")]
    assert ("100", "multi30k-task1", "en") not in by
    assert len(by[("100", "multi30k-task1", "de")]) == 1
    # task2 English #1 repeats task1: dropped; 4 other en + 5 de remain
    assert len(by[("300", "multi30k-task2", "en")]) == 4 and len(by[("300", "multi30k-task2", "de")]) == 5
    assert len(by[("100", "flickr8kcn-zhc", "zh")]) == 4  # a repeated native caption kept once
    assert ("500", "multi30k-task1", "en") not in by  # 500 is not in Multi30K
    raw = load_f8kml(tiny_root, dedupe=False)
    assert len(raw) == len(c) + 1 + 1 + 1 + 1  # 100: task1 en, task2 en#1, zhc dup; 300: task2 en#1
    assert load_f8kml(tiny_root, unlisted_split="val").captions[-1].split == "val"
    assert load_f8kml(tiny_root, langs=["zh"]).languages == ["zh"]


def test_tiny_text_only_corpus(tiny_root):
    t = text_only_corpus(tiny_root, {"300", "500"})
    assert "300" not in t.photos and "500" not in t.photos
    assert not any(x.photo_id in {"300", "500"} for x in t)
    assert {x.split for x in t} == {"train"} and all(p.path is None for p in t.photos.values())
    assert set(t.photos) == {"100", "200", "400", "600", "700"}
    assert {x.source for x in t} == {
        "flickr8k",
        "multi30k-task1",
        "multi30k-task2",
        "flickr8kcn-zhc",
        "flickr8kcn-zhb",
        "flickr8kcn-zhg",
    }
    assert text_only_corpus(tiny_root, set(), langs=["fr"]).languages == ["fr"]
    few = text_only_corpus(tiny_root, set(), exclude_texts=["EN T1 TRAIN 200"])
    assert not any(caption_key(x.text) == "ent1train200" for x in few)
    with pytest.raises(TypeError):
        text_only_corpus(tiny_root, None)  # type: ignore[arg-type]
    with pytest.raises(DataError):
        text_only_corpus(tiny_root, set(), zh_variants=["enc"])


def test_tiny_f8kml_text_excludes_eval_photos(tiny_root):
    assert evaluation_photo_ids(tiny_root) == {"300", "500"}
    t = load_f8kml_text(tiny_root)
    assert not {"300", "500"} & set(t.photos)
    everything = load_f8kml_text(tiny_root, exclude="all")
    assert not {"100", "300", "500", "700"} & set(everything.photos)
    with pytest.raises(DataError):
        load_f8kml_text(tiny_root, exclude="some")


def test_kfold_photo_splits():
    ids = [str(i) for i in range(103)]
    folds = kfold_photo_splits(ids, k=5, seed=0)
    assert len(folds) == 5
    tests = [set(te) for _, te in folds]
    assert set().union(*tests) == set(ids) and sum(len(t) for t in tests) == len(ids)
    assert {len(t) for t in tests} <= {20, 21}
    for train, test in folds:
        assert not set(train) & set(test) and set(train) | set(test) == set(ids)
        assert train == sorted(train) and test == sorted(test)
    assert kfold_photo_splits(reversed(ids), k=5, seed=0) == folds  # order of the input does not matter
    assert kfold_photo_splits(ids, k=5, seed=1) != folds
    with pytest.raises(ValueError):
        kfold_photo_splits(ids, k=1)
    with pytest.raises(ValueError):
        kfold_photo_splits(ids[:3], k=5)


def test_missing_data_root_is_a_clean_error(tmp_path):
    with pytest.raises(DataError, match="polyvse data fetch flickr8k"):
        load_f8kml(tmp_path)


# -- real data ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def f8kml(shared_data):
    return load_f8kml(shared_data)


def test_readme_facts(f8kml, raw):
    ids = set(f8kml.photos)
    assert len(ids) == 850 and ids == set(raw["images"])
    in_m30k = {p for p in ids if p in raw["m30k_split"]}
    assert len(in_m30k) == 787
    test = {p for p in ids if raw["splits"].get(p) == "test"}
    assert len(test) == 125
    assert len(test & in_m30k) == 117
    assert len({p for p in test if raw["m30k_split"].get(p) == "train"}) == 107
    # and polyvse agrees with the independent count
    assert {x.photo_id for x in f8kml if x.split == "test"} == test
    assert {x.photo_id for x in f8kml if x.source.startswith("multi30k")} == in_m30k


def test_photos_languages_and_splits(f8kml, raw):
    assert f8kml.name == "f8k-ml"
    assert f8kml.languages == ["cs", "de", "en", "fr", "zh"]
    for pid, photo in f8kml.photos.items():
        assert pid.isdigit() and photo.path.is_absolute() and photo.path.is_file()
        assert photo.path.name.startswith(pid + "_")
    split_of = {}
    for x in f8kml:
        assert split_of.setdefault(x.photo_id, x.split) == x.split  # one split per photo
    counts = Counter(split_of.values())
    assert counts == {"train": 629, "val": 96, "test": 125}
    unlisted = {p for p in f8kml.photos if p not in raw["splits"]}
    assert len(unlisted) == 9 and all(split_of[p] == "train" for p in unlisted)
    langs_per_photo = defaultdict(set)
    for x in f8kml:
        langs_per_photo[x.photo_id].add(x.lang)
    full = {p for p, ls in langs_per_photo.items() if ls == {"en", "de", "fr", "cs", "zh"}}
    assert len(full) == 787
    assert all({"en", "zh"} <= ls for ls in langs_per_photo.values())
    # every Flickr8K caption of the photos is there, the native Chinese ones too (minus exact repeats)
    src = Counter(x.source for x in f8kml)
    assert src["flickr8k"] == 4250
    assert src["flickr8kcn-zhc"] > 4000 and src["multi30k-task1"] >= 787 * 3


def test_loads_fast_and_quietly(shared_data, capfd):
    t0 = time.perf_counter()
    load_f8kml(shared_data)
    assert time.perf_counter() - t0 < 5.0
    out, err = capfd.readouterr()
    assert out == "" and err == ""


def test_registry_default_and_names(shared_data, f8kml):
    names = [n for n, _ in list_datasets()]
    assert names[0] == "f8k-ml"
    assert {"f8k-ml", "f8k-ml-text", "multi30k", "flickr8k", "flickr8kcn", "coco", "generic"} <= set(names)
    c = load_dataset("f8k-ml", shared_data)
    assert len(c) == len(f8kml)
    m = load_dataset("multi30k", shared_data, tasks=["task1"], langs=["cs"])
    assert len(m) == 31014
    fk = load_dataset("flickr8k", shared_data)
    # the raw Flickr8K dataset keeps the official split as it is: 9 photos are in none of its lists
    assert len(fk) == 4250 and Counter(x.split for x in fk) == {"train": 3100, "val": 480, "test": 625, "": 45}
    cn = load_dataset("flickr8kcn", shared_data, variants=["zhm"])
    assert len(cn) == 5000 and {x.split for x in cn} == {"test"}


@pytest.fixture(scope="module")
def text_corpora(shared_data, f8kml):
    eval_ids = evaluation_photo_ids(shared_data, f8kml)
    return {
        "f8k-ml-text": load_dataset("f8k-ml-text", shared_data),
        "by-id-only": text_only_corpus(shared_data, eval_ids),
    }


def test_text_only_sizes(text_corpora):
    t = text_corpora["f8k-ml-text"]
    assert t.name == "f8k-ml-text"
    assert len(t) > 490_000 and len(t.photos) > 30_000  # Multi30K's test photos are left out too
    assert t.languages == ["cs", "de", "en", "fr", "zh"]
    assert {x.split for x in t} == {"train"} and all(p.path is None for p in t.photos.values())
    assert len(text_corpora["by-id-only"]) > len(t)


def test_no_evaluation_caption_reaches_training(f8kml, raw, text_corpora):
    """THE hygiene test: no caption of an F8K-ML val/test photo is in any training corpus."""
    eval_ids = {p for p in f8kml.photos if raw["splits"].get(p) in ("val", "test")}
    assert len(eval_ids) == 125 + 96
    train_split = [x for x in f8kml if x.split == "train"]
    corpora = {"f8k-ml train split": train_split, **{k: v.captions for k, v in text_corpora.items()}}

    # 1. by photo id
    for name, caps in corpora.items():
        leaked = {x.photo_id for x in caps} & eval_ids
        assert not leaked, f"{name}: captions of evaluation photos {sorted(leaked)[:5]}"
    for name in text_corpora:
        assert not set(text_corpora[name].photos) & eval_ids

    # every training caption is, in the raw files, a caption of that same photo (catches misalignment)
    attested = raw["attested"]
    for name, caps in corpora.items():
        wrong = [x for x in caps if (x.photo_id, x.lang, x.text) not in attested]
        assert not wrong, f"{name}: {len(wrong)} captions not found under their photo id, e.g. {wrong[0]}"

    # 2. by caption text (case/spacing-insensitive): the captions of evaluation photos, all raw sources
    key = raw["key"]
    eval_keys = {key[t] for p, _, t, _ in raw["caps"] if p in eval_ids}
    # f8k-ml-text also drops identical sentences: zero overlap
    overlap = [x for x in text_corpora["f8k-ml-text"].captions if key[x.text] in eval_keys]
    assert not overlap, overlap[:3]
    # elsewhere a shared sentence is only allowed when the raw data gives it to a non-evaluation photo too
    # (generic captions such as "A dog runs through the grass ."), i.e. it is not a leaked eval caption
    other_keys = {key[t] for p, _, t, _ in raw["caps"] if p not in eval_ids}
    for name, caps in corpora.items():
        shared = {key[x.text] for x in caps} & eval_keys
        assert shared <= other_keys, f"{name}: {sorted(shared - other_keys)[:3]}"
        assert len(shared) < 0.05 * len(eval_keys), f"{name}: {len(shared)} shared sentences"


def test_eval_splits_only_hold_eval_photos(f8kml, raw):
    for x in f8kml:
        assert x.split == {"val": "val", "test": "test"}.get(raw["splits"].get(x.photo_id), "train")


def test_kfold_over_real_photos(f8kml, shared_data):
    folds = kfold_photo_splits(f8kml.photos, k=5, seed=0)
    assert sorted(len(te) for _, te in folds) == [170] * 5
    first_test = set(folds[0][1])
    t = text_only_corpus(shared_data, first_test, langs=["de"])
    assert not first_test & set(t.photos)
