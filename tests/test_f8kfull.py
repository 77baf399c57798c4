"""F8K-full: the whole Flickr8K photo set at hand (224x224), its official split, the text-only corpus built
around it, and evaluation hygiene at this scale (871 of the 1,000 test photos are in Multi30K's train split).

The hygiene test compares polyvse's corpora with an independent parse of the public files (`raw` in
conftest.py), so a reader bug cannot hide a leak.
"""

from __future__ import annotations

from collections import Counter, defaultdict

import pytest

from polyvse.data.f8kfull import flickr8k_eval_photo_ids, load_f8kfull
from polyvse.data.registry import list_datasets, load_dataset
from polyvse.errors import DataError


# -- synthetic ---------------------------------------------------------------------------------------------
def _with_224_photos(root, stems=("100_aa", "300_bb", "500_cc", "700_dd", "200_ee")):
    d = root / "flickr8k-224" / "images"
    d.mkdir(parents=True)
    for stem in stems:
        (d / f"{stem}.jpg").write_bytes(b"\xff\xd8\xff\xe0fakejpeg")
    return root


def test_tiny_f8kfull_split_sources_and_unlisted(tiny_root):
    root = _with_224_photos(tiny_root)
    c = load_f8kfull(root)
    # 700 is in no split list: dropped by default, so the splits are exactly the official ones
    assert set(c.photos) == {"100", "200", "300", "500"}
    assert all(
        p.path.parent.name == "images" and p.path.parent.parent.name == "flickr8k-224" for p in c.photos.values()
    )
    split = {x.photo_id: x.split for x in c}
    assert split == {"100": "train", "200": "train", "300": "val", "500": "test"}
    by = defaultdict(list)
    for x in c:
        by[(x.photo_id, x.source)].append(x.text)
    # 200 has no file in flickr8k/images (the 850-photo folder) but its Flickr8K captions come from
    # all_captions.txt, and its Multi30K ones too
    assert len(by[("200", "flickr8k")]) == 5 and ("200", "multi30k-task1") in by
    assert len(by[("100", "flickr8kcn-zhc")]) == 4  # de-duplicated as in F8K-ML
    kept = load_f8kfull(root, unlisted_split="train")
    assert {x.split for x in kept if x.photo_id == "700"} == {"train"}
    with pytest.raises(DataError, match="unlisted_split"):
        load_f8kfull(root, unlisted_split="test")


def test_tiny_f8kfull_text_excludes_every_flickr8k_eval_photo(tiny_root):
    root = _with_224_photos(tiny_root)
    assert flickr8k_eval_photo_ids(root) == {"300", "500", "400"}  # 400: no photo file, still excluded
    t = load_dataset("f8k-full-text", root)
    assert not {"300", "400", "500"} & set(t.photos)
    assert {"100", "200", "600"} <= set(t.photos)


def test_missing_photo_folder_names_the_fetch(tiny_root):
    with pytest.raises(DataError, match="polyvse data fetch flickr8k-224"):
        load_f8kfull(tiny_root)


# -- real data ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def full(shared_data):
    return load_f8kfull(shared_data)


def test_listed_in_registry():
    names = [n for n, _ in list_datasets()]
    assert "f8k-full" in names and "f8k-full-text" in names


def test_readme_facts(full, raw):
    assert len(raw["images224"]) == 7941
    split_of = {}
    for x in full:
        assert split_of.setdefault(x.photo_id, x.split) == x.split
    assert Counter(split_of.values()) == {"train": 5867, "val": 983, "test": 1000}
    assert set(full.photos) == {p for p in raw["images224"] if p in raw["splits"]}
    for pid, photo in full.photos.items():
        assert photo.path.name == raw["images224"][pid] and photo.path.parent.parent.name == "flickr8k-224"
    in_m30k = {p for p in raw["images224"] if p in raw["m30k_split"]}
    assert len(in_m30k) == 7328
    test = {p for p, s in split_of.items() if s == "test"}
    assert len({p for p in test if raw["m30k_split"].get(p) == "train"}) == 871
    langs = defaultdict(set)
    for x in full:
        langs[x.photo_id].add(x.lang)
    assert all({"en", "zh"} <= ls for ls in langs.values())
    assert {p for p, ls in langs.items() if {"de", "fr", "cs"} <= ls} == in_m30k & set(full.photos)


def test_no_evaluation_caption_reaches_training(shared_data, full, raw):
    """THE hygiene test at 8k photos: no caption of a Flickr8K val/test photo is in the f8k-full training
    split or in the text-only corpus f8k-full-text, by photo id and by caption text."""
    eval_ids = {p for p, s in raw["splits"].items() if s in ("val", "test")}
    assert len(eval_ids) == 2000
    text = load_dataset("f8k-full-text", shared_data)
    corpora = {"f8k-full train split": [x for x in full if x.split == "train"], "f8k-full-text": text.captions}
    for name, caps in corpora.items():
        leaked = {x.photo_id for x in caps} & eval_ids
        assert not leaked, f"{name}: captions of evaluation photos {sorted(leaked)[:5]}"
        wrong = [x for x in caps if (x.photo_id, x.lang, x.text) not in raw["attested"]]
        assert not wrong, f"{name}: {len(wrong)} captions not found under their photo id, e.g. {wrong[0]}"
    key = raw["key"]
    eval_keys = {key[t] for p, _, t, _ in raw["caps"] if p in eval_ids}
    overlap = [x for x in text.captions if key[x.text] in eval_keys]
    assert not overlap, overlap[:3]  # the text corpus drops identical sentences too
    other_keys = {key[t] for p, _, t, _ in raw["caps"] if p not in eval_ids}
    shared = {key[x.text] for x in corpora["f8k-full train split"]} & eval_keys
    assert shared <= other_keys  # only generic sentences that a training photo also has
    # every evaluation photo keeps all its captions for evaluation
    assert {x.photo_id for x in full if x.split in ("val", "test")} == eval_ids & set(full.photos)


def test_text_corpus_of_an_f8k_full_run_holds_no_evaluation_caption(shared_data, full, raw):
    """A zoo config with `text_corpus` trained on f8k-full (load_text_corpus, as prepare_data calls it): no
    photo of Flickr8K's val/test lists and no sentence any source gives one of them is in its text tuples,
    and no f8k-full photo enters as text (its training photos train with their images)."""
    from polyvse.data._io import caption_key
    from polyvse.data.exclusion import evaluation_exclusion
    from polyvse.data.splits import resolve_split
    from polyvse_train.config import TrainConfig
    from polyvse_train.text_corpus import load_text_corpus

    eval_ids = {p for p, s in raw["splits"].items() if s in ("val", "test")}
    key = raw["key"]
    eval_keys = {key[t] for p, _, t, _ in raw["caps"] if p in eval_ids}
    for kind in ("multi30k", "all"):
        cfg = TrainConfig(
            dataset="f8k-full", objective="parallel", text_corpus=kind, split="official", eval_split="test"
        )
        corpus = full.filter(langs=cfg.data.languages)
        run_train_ids, run_eval_ids = resolve_split(corpus, cfg.data.split, cfg.data.eval_split)
        assert len(run_eval_ids) == 1000
        text = load_text_corpus(
            cfg,
            shared_data,
            corpus,
            evaluation_exclusion(shared_data, eval_photo_ids=run_eval_ids, train_photo_ids=run_train_ids),
        )
        ids = set(text.photos) | {c.photo_id for c in text.captions}
        assert len(ids) > 20_000, kind
        assert not ids & eval_ids, kind  # val photos too, though the run evaluates on test
        assert not ids & set(full.photos), kind
        leaked = [c.text for c in text.captions if caption_key(c.text) in eval_keys]
        assert not leaked, (kind, leaked[:3])
