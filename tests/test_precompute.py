"""Filling the sentence cache for a whole dataset: priority order (evaluation split, first caption of every
training photo, validation split, then the other training captions rank by rank), resumability, skipping
languages the encoder lacks."""

from __future__ import annotations

from polyvse.data.types import Caption
from polyvse.modules.pretrained.precompute import caption_ranks, precompute_embeddings, priority_stages
from test_pretrained import FakeEncoder


def _caps():
    out = []
    for pid, split in (("1", "train"), ("2", "train"), ("3", "val"), ("4", "test")):
        for lang in ("en", "de", "cs"):
            for k in range(2 if lang != "cs" else 1):
                out.append(Caption(pid, lang, f"{lang} {pid} {k}", "src", split))
    return out


def test_ranks_and_priority_order():
    caps = _caps()
    assert caption_ranks(caps)[:5] == [0, 1, 0, 1, 0]
    stages = [(s.name, s.lang, s.texts) for s in priority_stages(caps, ["en", "de", "cs"])]
    names = [n for n, _, _ in stages]
    assert names == ["test"] * 3 + ["train rank 0"] * 3 + ["val"] * 3 + ["train rank 1"] * 2  # cs has no rank 1
    assert stages[3] == ("train rank 0", "en", ("en 1 0", "en 2 0"))
    assert stages[-1] == ("train rank 1", "de", ("de 1 1", "de 2 1"))
    every = sorted(t for _, _, ts in stages for t in ts)
    assert every == sorted(c.text for c in caps)  # each caption once


def test_precompute_resumes_and_skips_missing_languages(tmp_path):
    caps = _caps()
    lines: list[str] = []
    enc = FakeEncoder()
    done = precompute_embeddings(enc, caps, tmp_path, report=lines.append, shard_size=2)
    assert "no cs in this encoder" in lines[0]
    n = sum(c.lang != "cs" for c in caps)
    assert done == {"texts": n, "computed": n} and enc.texts == n
    again = FakeEncoder()
    assert precompute_embeddings(again, caps, tmp_path, report=lines.append) == {"texts": n, "computed": 0}
    assert again.texts == 0  # everything came from the cache


def test_first_captions_per_photo_is_what_rank_order_embeds_first():
    import pytest

    from polyvse.data.caption_limit import first_captions_per_photo
    from polyvse.errors import DataError

    caps = _caps()
    train = [c for c in caps if c.split == "train"]
    first = first_captions_per_photo(train, 1)
    rank0 = next(s for s in priority_stages(caps, ["en"]) if s.name == "train rank 0")
    assert tuple(c.text for c in first if c.lang == "en") == rank0.texts
    assert len(first) == 2 * 3 and first_captions_per_photo(train, 0) == train
    assert first_captions_per_photo(train, 5) == train
    with pytest.raises(DataError, match="captions_per_photo"):
        first_captions_per_photo(train, -1)


def test_embed_text_cli_fills_each_fused_tower(tiny_root, monkeypatch, capsys):
    """`polyvse features embed-text --encoder a+b` fills the cache of every tower of a fused text tower, and a
    second run computes nothing."""
    from polyvse.modules.pretrained import base
    from polyvse_app.cli import main
    from test_f8kfull import _with_224_photos

    _with_224_photos(tiny_root)

    class FakeA(FakeEncoder):
        name = "fake-a"

    class FakeB(FakeEncoder):
        name = "fake-b"

        def _encode_batch(self, texts):
            return -super()._encode_batch(texts)

    for cls in (FakeA, FakeB):
        monkeypatch.setitem(base._REGISTRY, cls.name, cls)
    monkeypatch.setattr(base, "_SHARED", {})
    args = [
        "features",
        "embed-text",
        "--dataset",
        "f8k-full",
        "--encoder",
        "fake-a+fake-b",
        "--langs",
        "en,de",
        "--data-root",
        str(tiny_root),
    ]
    assert main(args) == 0
    lines = [x for x in capsys.readouterr().out.splitlines() if "captions in the" in x]
    assert [x.split(" cache")[0].split()[-1] for x in lines] == ["fake-a", "fake-b"]
    assert all("computed now" in x and "(0 computed" not in x for x in lines)
    assert main(args) == 0
    again = [x for x in capsys.readouterr().out.splitlines() if "captions in the" in x]
    assert len(again) == 2 and all("(0 computed now)" in x for x in again)
    import pytest

    with pytest.raises(SystemExit, match="has no e5-small"):  # the states are e5's
        main(args + ["--text-tail-layers", "1"])


def test_text_tail_layers_fill_the_front_states_a_tail_model_reads(tmp_path):
    """With tail_layers k the job fills the cache of the hidden states entering e5's last k layers (what a model
    with model.text_finetune_layers k reads), in the same order, resumably, and no sentence vectors."""
    import pytest

    from polyvse.modules.pretrained import get_pretrained_encoder
    from polyvse.modules.pretrained.base import PretrainedModelError
    from polyvse.modules.pretrained.cache import SentenceEmbeddingCache
    from polyvse.modules.pretrained.captions import PretrainedCaptionEncoder
    from polyvse.modules.pretrained.e5.states_cache import HiddenStateCache, states_cached

    caps = [c for c in _caps() if c.lang == "en"]
    e5 = get_pretrained_encoder("e5-small")
    lines: list[str] = []
    assert precompute_embeddings(e5, caps, tmp_path, report=lines.append, tail_layers=1) == {
        "texts": len(caps),
        "computed": len(caps),
    }
    assert lines[0].startswith("e5-small front (cut 1) test [en]")
    assert len(SentenceEmbeddingCache.for_encoder(tmp_path, e5)) == 0  # no sentence vectors
    # what training's caption encoder then reads comes from the cache, computing nothing
    reader = PretrainedCaptionEncoder("e5-small", cache_dir=tmp_path, tail_layers=1)
    cache = HiddenStateCache.for_front(tmp_path, reader.front)
    states = states_cached(reader.front, [c.text for c in caps], cache)
    assert len(cache) == len(caps) and cache.misses == 0 and states[0].shape[1] == 384
    assert precompute_embeddings(e5, caps, tmp_path, report=lines.append, tail_layers=1)["computed"] == 0
    with pytest.raises(PretrainedModelError, match="e5-small's"):
        precompute_embeddings(FakeEncoder(), caps, tmp_path, tail_layers=1)
