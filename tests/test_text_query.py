"""Text queries without torch: polyvse.model.numpy_serving.text_query.TextQueryModel against the torch model it stands in
for, and `polyvse search` for a word-level checkpoint running without importing torch."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import polyvse
from polyvse.errors import CheckpointError
from polyvse.index import PhotoEntry, PhotoIndex, Searcher, model_fingerprint, model_for_index
from polyvse.index.build import stored_vectors, write_new_index
from polyvse.index.store import model_section
from polyvse.model.checkpoint import Checkpoint, save_checkpoint
from polyvse.model.embedding_model import EmbeddingModel
from polyvse.model.numpy_serving.text_query import TextQueryModel
from polyvse.modules import JointEmbeddingModel, ModelConfig
from polyvse.modules.text_input import CaptionEncoder

REPO = Path(__file__).resolve().parents[1]
CAPTIONS = {
    "en": ["a dog runs through the snow", "two dogs play in the snow", "a man rides a red bike", "a child swims"],
    "de": ["ein Hund rennt durch den Schnee", "zwei Hunde spielen im Schnee", "ein Mann fährt ein rotes Fahrrad"],
    "zh": ["一只狗在雪地里奔跑", "两只狗在雪里玩", "一个男人骑着红色的自行车"],
}
QUERIES = [
    ("en", "two dogs play in the snow"),
    ("en", "a man rides a bike and a dog runs"),
    ("de", "zwei Hunde"),
    ("de", "ein Mann im Schnee spielt"),
    ("zh", "两只狗在雪里玩"),
    ("en", "unknownword"),
    ("de", ""),
]
IMAGE_DIM = 12

# every kind of word-level text branch the numpy path runs
TEXT_BRANCHES = {
    "gru": {},
    "lstm-bidirectional-2-layers": dict(text_encoder="lstm", bidirectional=True, num_layers=2),
    "gru-bidirectional-2-layers": dict(bidirectional=True, num_layers=2),
    "mean": dict(text_encoder="mean"),
    "per-language-gru": dict(text_sharing="per_language"),
    "mule-universal-lstm": dict(text_encoder="lstm", universal_dim=7),
    "translator-map": dict(language_map=["de"]),
    "order-similarity": dict(similarity="order", image_head="mlp", image_hidden_dim=16),
}


def trained_checkpoint(path: Path, seed: int = 0, **config) -> Path:
    """A tiny model trained for a few steps (text towards random image features) and saved as a checkpoint."""
    torch.manual_seed(seed)
    enc = CaptionEncoder.build(CAPTIONS)
    cfg = ModelConfig(
        vocab_size=len(enc.vocab),
        image_dim=IMAGE_DIM,
        embed_dim=8,
        word_dim=6,
        hidden_dim=9,
        languages=list(CAPTIONS),
        **config,
    )
    model = JointEmbeddingModel(cfg)
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    rows = [(lang, t) for lang, texts in CAPTIONS.items() for t in texts]
    feats = torch.randn(len(rows), IMAGE_DIM)
    for _ in range(5):
        ids, lengths = enc.pad([enc.ids(t, lang) for lang, t in rows])
        image, text = model(feats, ids, lengths, [lang for lang, _ in rows])
        loss = -model.similarity.paired(image, text).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    save_checkpoint(
        Checkpoint(
            model=model.eval(),
            captions=enc,
            backbone="efficientnet-lite0",
            feature_key="k1",
            ten_crop=False,
            languages=list(CAPTIONS),
        ),
        path,
    )
    return path


@pytest.mark.parametrize("branch", sorted(TEXT_BRANCHES))
def test_numpy_text_path_gives_the_torch_models_vectors_and_rankings(tmp_path, branch):
    path = trained_checkpoint(tmp_path / "c", **TEXT_BRANCHES[branch])
    reference, fast = polyvse.load(path), TextQueryModel.load(path)
    assert isinstance(reference, EmbeddingModel) and isinstance(fast, EmbeddingModel)  # one interface
    for shared in ("languages", "embed_dim", "similarity_name", "config"):
        assert getattr(fast, shared) == getattr(reference, shared), shared
    assert model_fingerprint(fast) == model_fingerprint(reference)
    photos = reference.encode_image_features(np.random.default_rng(1).normal(size=(40, IMAGE_DIM)))
    for lang, text in QUERIES:
        want, got = reference.encode_text([text], lang), fast.encode_text(text, lang)
        assert got.dtype == np.float32 and got.shape == want.shape == (1, 8)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        want_scores, got_scores = reference.similarity(photos, want)[:, 0], fast.similarity(photos, got)[:, 0]
        np.testing.assert_allclose(got_scores, want_scores, rtol=1e-5, atol=1e-6)
        assert list(np.argsort(-got_scores, kind="stable")) == list(np.argsort(-want_scores, kind="stable"))
    batch = [t for lang, t in QUERIES if lang == "en"]
    np.testing.assert_allclose(fast.encode_text(batch, "en"), reference.encode_text(batch, "en"), rtol=1e-5, atol=1e-6)


def test_numpy_text_path_refuses_a_language_the_model_lacks(tmp_path):
    fast = TextQueryModel.load(trained_checkpoint(tmp_path / "c"))
    with pytest.raises(
        CheckpointError,
        match=r"cannot read French \('fr'\): it is a word-level model, not trained "
        r"on 'fr' \(it knows en, de, zh\)",
    ):
        fast.encode_text("un chien", "fr")


def test_pretrained_sentence_encoder_checkpoints_keep_the_torch_path(tmp_path):
    path = trained_checkpoint(tmp_path / "c")
    config = json.loads((path / "config.json").read_text())
    config["captions"] = {"kind": "pretrained-sentence-encoder", "encoder": "e5-small"}
    (path / "config.json").write_text(json.dumps(config))
    assert TextQueryModel.load(path) is None


def _scratch_index(tmp_path: Path, checkpoint: Path) -> Path:
    """An exact index of 30 made-up photos embedded by the checkpoint's image head (no backbone needed)."""
    model = polyvse.load(checkpoint)
    feats = np.random.default_rng(2).normal(size=(30, model.config.image_dim)).astype(np.float32)
    vectors = stored_vectors(model, model.encode_image_features(feats))
    photos = [PhotoEntry(i, f"photo-{i:02d}.jpg", str(tmp_path / f"photo-{i:02d}.jpg")) for i in range(30)]
    root = tmp_path / "index"
    write_new_index(
        root, model_section(model, checkpoint), model.similarity_name, photos, vectors, "auto", 20_000, 0.95
    )
    return root


SEARCH_WITHOUT_TORCH = """
import json, sys
from polyvse_app.cli import main
code = main(sys.argv[1:])
print(json.dumps({"code": code, "torch": "torch" in sys.modules,
                  "faiss_threads": sys.modules["faiss"].omp_get_max_threads() if "faiss" in sys.modules else None,
                  "pil": "PIL" in sys.modules, "regex": "regex" in sys.modules}),
      file=sys.stderr)
"""
THREAD_SETTINGS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def test_cli_text_search_of_a_word_level_checkpoint_does_not_import_torch(tmp_path):
    """...nor FAISS (an exact index scans a query's few rows in numpy: PhotoIndex.search), nor Pillow."""
    checkpoint = trained_checkpoint(tmp_path / "c")
    index = _scratch_index(tmp_path, checkpoint)
    env = {k: v for k, v in os.environ.items() if k not in THREAD_SETTINGS}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            SEARCH_WITHOUT_TORCH,
            "search",
            "--index",
            str(index),
            "zwei Hunde spielen im Schnee",
            "--lang",
            "de",
            "-k",
            "30",
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    status = json.loads(proc.stderr.strip().splitlines()[-1])
    # Pillow is for photo queries only; a word-level model tokenises the query (`regex`)
    assert status == {"code": 0, "torch": False, "faiss_threads": None, "pil": False, "regex": True}, proc.stderr
    got = json.loads(proc.stdout)["results"]
    want = Searcher(polyvse.load(checkpoint), PhotoIndex.open(index)).text("zwei Hunde spielen im Schnee", "de", k=30)
    assert [h["id"] for h in got] == [h.id for h in want.hits]
    np.testing.assert_allclose([h["score"] for h in got], [h.score for h in want.hits], atol=2e-6)


def test_text_only_model_for_an_index_is_the_numpy_one_and_refuses_another_model(tmp_path):
    checkpoint = trained_checkpoint(tmp_path / "c")
    index = PhotoIndex.open(_scratch_index(tmp_path, checkpoint))
    model, _ = model_for_index(index, text_only=True)
    assert isinstance(model, TextQueryModel)
    other = trained_checkpoint(tmp_path / "other", seed=1)
    with pytest.raises(CheckpointError, match="different space"):
        model_for_index(index, str(other), text_only=True)
    shutil.rmtree(other)
