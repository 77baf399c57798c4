"""CSLS retrieval scoring (polyvse.csls.banks): the score, its banks in a checkpoint, and a training run
that builds them from its training split only."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from torch.nn import functional as F

import polyvse
from polyvse.csls.banks import HubnessBanks
from polyvse.errors import CheckpointError, DataError
from polyvse.evaluation import evaluate_by_language
from polyvse.model.checkpoint import load_checkpoint, save_checkpoint
from polyvse_train.config import TrainConfig
from polyvse_train.train import train
from test_train_e2e import SMALL


def _unit(rows):
    return F.normalize(torch.tensor(rows, dtype=torch.float32), dim=1)


def test_scores_are_twice_the_cosine_less_both_neighbourhood_means():
    photos = _unit([[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 0]])
    captions = {"en": _unit([[1, 0.1, 0], [0, 1, 0.2], [0.3, 0, 1]])}
    banks = HubnessBanks(photos, captions, k=2)
    img, txt = _unit([[1, 0.5, 0], [0, 0, 1]]), _unit([[0, 1, 0], [1, 0, 1], [1, 1, 1]])
    cos = img @ txt.T
    # by hand: r_C(i) = mean of the 2 largest cosines of photo i to the en bank, r_I(c) likewise to the photo bank
    r_c = (img @ captions["en"].T).topk(2, dim=1).values.mean(1)
    r_i = (txt @ photos.T).topk(2, dim=1).values.mean(1)
    expected = 2 * cos - r_c[:, None] - r_i[None, :]
    got = banks.scores(img * 3.0, txt, "en")  # any scale: rows are normalised
    assert torch.allclose(got, expected, atol=2e-3)  # the banks are float16
    # a language without a bank of its own: the pooled bank (here the same captions)
    assert torch.allclose(banks.scores(img, txt, "qu"), expected, atol=2e-3)


def _at(*degrees):
    return torch.tensor([[np.cos(np.radians(d)), np.sin(np.radians(d))] for d in degrees], dtype=torch.float32)


def test_a_hub_photo_loses_the_query_it_does_not_match():
    """The hub photo (0 deg) sits in the middle of the training captions (-20..20 deg); photo B (60 deg) does not.
    A caption at 28 deg is closer to the hub by cosine (cos 28 > cos 32); CSLS discounts the hub by its crowded
    neighbourhood (r_C = mean cos to its 3 nearest captions: 0.990 against B's 0.758) and B wins."""
    images = _at(0, 60)
    banks = HubnessBanks(_at(0, 60, 180), {"en": _at(-20, -10, 0, 10, 20, 90)}, k=3)
    query = _at(28)
    assert int((images @ query.T)[:, 0].argmax()) == 0  # cosine: the hub
    assert int(banks.scores(images, query, "en")[:, 0].argmax()) == 1  # CSLS: B
    assert torch.allclose(banks.photo_penalty(images, "en"), torch.tensor([0.990, 0.758]), atol=2e-3)


def test_banks_refuse_what_cannot_be_scored():
    photos = _unit(np.eye(4).tolist())
    with pytest.raises(ValueError, match="k="):
        HubnessBanks(photos, {"en": photos}, k=5)
    with pytest.raises(ValueError, match="caption bank is empty"):
        HubnessBanks(photos, {}, k=2)
    with pytest.raises(ValueError, match="width"):
        HubnessBanks(photos, {"en": _unit(np.eye(3).tolist())}, k=2)
    with pytest.raises(ValueError, match="positive integer"):
        HubnessBanks(photos, {"en": photos}, k=0)
    with pytest.raises(ValueError, match="do not fit"):
        HubnessBanks(photos, {"en": photos}, k=2).scores(np.ones((2, 3)), np.ones((1, 4)), "en")


@pytest.fixture(scope="module")
def csls_run(shared_data, tmp_path_factory):
    """A smoke run that scores retrieval with CSLS (k 3)."""
    out = tmp_path_factory.mktemp("csls")
    cfg = TrainConfig(**SMALL, retrieval_scoring="csls", csls_k=3)
    return out, cfg, train(cfg, out, shared_data, smoke=True, progress=False)


def test_a_csls_run_builds_its_banks_from_training_photos_and_captions_only(csls_run, shared_data):
    from polyvse_train.csls_banks import bank_captions, split_features
    from polyvse_train.data import prepare_data

    out, cfg, metrics = csls_run
    assert metrics["retrieval"]["scoring"] == "csls" and metrics["retrieval"]["k"] == 3
    model = polyvse.load(out / "checkpoint", device="cpu")
    banks = model.hubness
    assert model.retrieval_scoring == "csls" and banks.k == 3
    data = prepare_data(cfg, shared_data, smoke=True, progress=False)
    # every training photo, nothing else: the bank is the training photos' embeddings, row for row
    assert banks.photos.shape[0] == len(data.train_rows) == metrics["n_train_photos"]
    train_emb = F.normalize(
        torch.as_tensor(model.encode_image_features(split_features(model, data, data.train_rows))), dim=1
    )
    assert torch.allclose(banks.photos.float(), train_emb, atol=2e-3)
    eval_emb = F.normalize(
        torch.as_tensor(model.encode_image_features(split_features(model, data, data.eval_rows))), dim=1
    )
    assert (eval_emb @ banks.photos.float().T).max() < 0.999  # no evaluation photo among them
    # captions: the first of each training photo per language; their photos are training photos
    chosen = bank_captions(data)
    assert {lang: int(b.shape[0]) for lang, b in banks.captions.items()} == {k: len(v) for k, v in chosen.items()}
    for lang, ix in chosen.items():
        rows = [int(data.train.photo_row[i]) for i in ix]
        assert len(set(rows)) == len(rows) and set(rows) <= set(int(r) for r in data.train_rows)
        assert all(data.train.langs[i] == lang for i in ix)


def test_a_csls_checkpoint_evaluates_with_its_banks(csls_run, shared_data, tmp_path):
    """The run's metrics are CSLS's (not cosine's) and a reload reproduces them; the same weights scored by
    cosine rank differently."""
    from polyvse.model.torch_model import PolyvseModel
    from polyvse_train.data import prepare_data
    from polyvse_train.train import evaluate_split

    out, cfg, metrics = csls_run
    data = prepare_data(cfg, shared_data, smoke=True, progress=False)
    model = polyvse.load(out / "checkpoint", device="cpu")
    again = evaluate_split(model, data, data.eval, data.eval_rows, cfg.data.languages)
    assert again == metrics["languages"]
    plain = load_checkpoint(out / "checkpoint")
    plain.hubness = None
    cosine = evaluate_split(PolyvseModel(plain), data, data.eval, data.eval_rows, cfg.data.languages)
    assert cosine != metrics["languages"]
    # by hand for one language: CSLS scores through evaluate_by_language
    img = model.encode_image_features(data.features[data.eval_rows])
    keep = [
        i for i, r in enumerate(data.eval.photo_row) if r in set(data.eval_rows.tolist()) and data.eval.langs[i] == "en"
    ]
    local = {int(r): i for i, r in enumerate(data.eval_rows)}
    txt = model.encode_ids([data.eval.ids[i] for i in keep], "en")
    by_hand = evaluate_by_language(
        img,
        txt,
        np.array([local[int(data.eval.photo_row[i])] for i in keep]),
        ["en"] * len(keep),
        score_fn=lambda a, b: model.hubness.scores(a, b, "en"),
    )
    assert by_hand["en"] == metrics["languages"]["en"]


def test_a_finished_run_resumed_with_csls_is_evaluated_again(shared_data, tmp_path):
    """retrieval_scoring changes how the finished model ranks, not what it learned: a finished cosine run resumed
    with csls keeps its weights and is scored again (how an earlier run gains its banks)."""
    first = train(TrainConfig(**SMALL), tmp_path, shared_data, smoke=True, progress=False)
    weights = {k: v.clone() for k, v in load_checkpoint(tmp_path / "checkpoint").model.state_dict().items()}
    again = train(
        TrainConfig(**SMALL, retrieval_scoring="csls", csls_k=3),
        tmp_path,
        shared_data,
        smoke=True,
        progress=False,
        resume=True,
    )
    assert again["retrieval"]["scoring"] == "csls" and first["retrieval"] == {"scoring": "similarity"}
    assert again["languages"] != first["languages"]
    ck = load_checkpoint(tmp_path / "checkpoint")
    assert ck.hubness is not None
    assert all(torch.equal(v, weights[k]) for k, v in ck.model.state_dict().items())


def test_checkpoint_banks_round_trip_and_broken_ones_are_named(csls_run, tmp_path):
    out, _, _ = csls_run
    ck = load_checkpoint(out / "checkpoint")
    config = json.loads((out / "checkpoint" / "config.json").read_text())
    assert config["retrieval"] == {"scoring": "csls", **ck.hubness.describe()}
    save_checkpoint(ck, tmp_path / "copy")  # e.g. `polyvse adapt` writing a new checkpoint keeps the banks
    copy = load_checkpoint(tmp_path / "copy")
    assert torch.equal(copy.hubness.photos, ck.hubness.photos) and copy.hubness.k == ck.hubness.k
    # a config that asks for CSLS without banks in the weights, and a section that cannot be read
    ck.hubness, broken = None, tmp_path / "broken"
    save_checkpoint(ck, broken)
    cfg = json.loads((broken / "config.json").read_text())
    (broken / "config.json").write_text(json.dumps({**cfg, "retrieval": config["retrieval"]}))
    with pytest.raises(CheckpointError, match="banks do not load"):
        load_checkpoint(broken)
    (broken / "config.json").write_text(json.dumps({**cfg, "retrieval": {"scoring": "csls", "k": "ten"}}))
    with pytest.raises(CheckpointError, match="retrieval section"):
        load_checkpoint(broken)


def test_csls_config_is_checked(csls_run, shared_data):
    with pytest.raises(DataError, match="retrieval_scoring"):
        TrainConfig(**SMALL, retrieval_scoring="mutual").validate()
    with pytest.raises(DataError, match="csls corrects cosine"):
        TrainConfig(**SMALL, retrieval_scoring="csls", similarity="order").validate()
    with pytest.raises(DataError, match="csls_k"):
        TrainConfig(**SMALL, retrieval_scoring="csls", csls_k=0).validate()
    # a run refuses a k its banks cannot give; a smoke run (a slice of the photos) takes the largest they give
    from polyvse_train.csls_banks import bank_captions, training_banks
    from polyvse_train.data import prepare_data

    out, cfg, _ = csls_run
    data = prepare_data(cfg, shared_data, smoke=True, progress=False)
    model = polyvse.load(out / "checkpoint", device="cpu")
    with pytest.raises(DataError, match="lower model.csls_k"):
        training_banks(model, data, 100000)
    largest = min([len(data.train_rows)] + [len(ix) for ix in bank_captions(data).values()])
    assert training_banks(model, data, 100000, clip_k=True).k == largest
    assert training_banks(model, data, 2, clip_k=True).k == 2


def test_text_search_ranks_by_csls_with_either_query_model(csls_run, shared_data, tmp_path):
    """A CSLS checkpoint's index search: text queries ranked by CSLS (scores as evaluation computes them), the
    same with the torch model and the numpy query model; photo queries stay cosine."""
    from polyvse.index import PhotoIndex, Searcher
    from polyvse.index.build import build_index
    from polyvse.model.loading import query_model
    from polyvse.util.paths import cache_root
    from test_index import _smoke_photo_paths

    out, cfg, _ = csls_run
    model = polyvse.load(out / "checkpoint", device="cpu")
    photos = _smoke_photo_paths(cfg, shared_data)[:40]
    build_index(
        model,
        photos,
        tmp_path / "index",
        cache_dir=cache_root() / "features",
        checkpoint_path=out / "checkpoint",
        progress=False,
    )
    index = PhotoIndex.open(tmp_path / "index")
    vectors = np.stack([index.vector(i) for i in range(index.count)])
    query = "a dog runs through the grass"
    for searcher in (Searcher(model, index), Searcher(query_model(out / "checkpoint"), index)):
        assert searcher.hubness is not None and searcher.hubness.k == 3
        hits = searcher.text(query, "en", k=5).hits
        csls = model.retrieval_scores(vectors, searcher.embed_text(query, "en"), "en")[:, 0]
        best = np.argsort(-csls, kind="stable")[:5]
        assert [h.id for h in hits] == [int(i) for i in best]
        assert np.allclose([h.score for h in hits], csls[best], atol=1e-3)
    # a photo query: cosine, itself first
    assert Searcher(model, index).similar(3, k=2)[0].score <= 1.0 + 1e-6
    # photo -> captions: CSLS against each caption's language's bank, as evaluation's image->text ranking
    from polyvse.index import CaptionCollection

    texts = [
        ("en", "a dog runs through the grass", None),
        ("en", "a man is standing on the street", None),
        ("de", "Zwei Hunde spielen im Schnee", None),
        ("de", "Ein Kind spielt im Wasser", None),
        ("en", "two children play in the water", None),
    ]
    collection = CaptionCollection(Searcher(model, index), texts)
    ranked = collection.rank(vectors[0], k=5)
    by_hand = {
        (lang, t): float(model.retrieval_scores(vectors[:1], model.encode_text([t], lang), lang)[0, 0])
        for lang, t, _ in texts
    }
    assert [(h.lang, h.caption) for h in ranked] == sorted(by_hand, key=lambda c: -by_hand[c])
    assert np.allclose([h.score for h in ranked], [by_hand[(h.lang, h.caption)] for h in ranked], atol=1e-3)


def test_index_build_and_add_store_each_photos_penalty_and_search_ranks_as_without(
    csls_run, shared_data, tmp_path, capsys
):
    """`polyvse index build` / `index add` of a CSLS checkpoint store each photo's r_C for every bank key
    (polyvse.csls.penalties); the searches that read them rank and score as those that compute them."""
    from polyvse.csls.search import SearchHubness
    from polyvse.index import PhotoIndex, Searcher, add_to_index
    from polyvse.model.loading import query_model
    from polyvse.util.paths import cache_root
    from polyvse_app.cli import main
    from test_index import _smoke_photo_paths

    out, cfg, _ = csls_run
    photos = [str(p) for p in _smoke_photo_paths(cfg, shared_data)[:36]]
    root = tmp_path / "index"
    base = ["--checkpoint", str(out / "checkpoint"), "--cache-dir", str(cache_root() / "features"), "--quiet"]
    (tmp_path / "photos.txt").write_text("\n".join(photos[:24]) + "\n")
    assert main(["index", "build", "--out", str(root), "--list", str(tmp_path / "photos.txt"), *base]) == 0
    assert " s CSLS penalties)" in capsys.readouterr().out  # the build's line says what they added
    model = polyvse.load(out / "checkpoint", device="cpu")
    hubness = SearchHubness.of_model(model)
    queries = [("en", "a dog runs through the grass"), ("de", "ein Hund rennt durch das Gras")]
    for n in (24, 36):
        index = PhotoIndex.open(root)
        assert index.penalties.shape == (n, 4) and index.manifest["csls"]["keys"] == ["de", "en", "zh", "*"]
        np.testing.assert_allclose(index.penalties, hubness.penalty_table(index.vectors), atol=1e-5)
        bare = PhotoIndex.open(root)
        bare.penalties = None  # as an index built before the table existed
        for make in (lambda: model, lambda: query_model(out / "checkpoint")):
            for lang, text in queries:
                got, want = Searcher(make(), index).text(text, lang, k=8), Searcher(make(), bare).text(text, lang, k=8)
                assert [h.id for h in got.hits] == [h.id for h in want.hits], lang
                assert np.allclose([h.score for h in got.hits], [h.score for h in want.hits], atol=1e-5)
        if n == 24:
            add_to_index(model, root, photos, cache_dir=cache_root() / "features", progress=False)


def test_evaluate_command_scores_as_asked(csls_run, shared_data, tmp_path, capsys):
    """`polyvse evaluate` on a CSLS checkpoint: CSLS by default, the similarity alone with --scoring similarity,
    another k with --csls-k; each record says which."""
    from polyvse_app.cli import main

    out, _, _ = csls_run
    base = [
        "evaluate",
        "--checkpoint",
        str(out / "checkpoint"),
        "--dataset",
        "f8k-ml",
        "--quiet",
        "--data-root",
        str(shared_data),
    ]
    runs = {}
    for name, extra in [("csls", []), ("cosine", ["--scoring", "similarity"]), ("k5", ["--csls-k", "5"])]:
        assert main(base + extra + ["--json", str(tmp_path / f"{name}.json")]) == 0
        runs[name] = json.loads((tmp_path / f"{name}.json").read_text())
    assert runs["csls"]["retrieval"]["scoring"] == "csls" and runs["csls"]["retrieval"]["k"] == 3
    assert runs["cosine"]["retrieval"] == {"scoring": "similarity"}
    assert runs["k5"]["retrieval"]["k"] == 5
    assert runs["csls"]["languages"] != runs["cosine"]["languages"] != runs["k5"]["languages"]
    capsys.readouterr()
    assert main(base + ["--scoring", "similarity", "--csls-k", "5"]) == 2
    assert "--csls-k applies to CSLS scoring" in capsys.readouterr().err
    assert main(base + ["--csls-k", "100000"]) == 2
    assert "--csls-k 100000" in capsys.readouterr().err
