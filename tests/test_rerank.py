"""N-best re-ranking with the photo (polyvse.alignment.rerank) and `polyvse rerank`.

No translation system is at hand: every n-best list here is built by the test."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from polyvse.alignment.rerank import (
    Hypothesis,
    combine_scores,
    oracle_choice,
    read_images_list,
    read_nbest,
    read_references,
    rerank,
    translation_scores,
    zscore,
)
from polyvse.errors import DataError, UnknownLanguageError

REFS = [
    "ein Hund läuft über die Wiese .",
    "zwei Kinder spielen im Sand .",
    "eine Frau fährt Fahrrad .",
    "ein Mann sitzt auf einer Bank .",
]
# (sentence id, hypothesis, total score). The translation score prefers a worse hypothesis in lists 0 and 3;
# list 1's 1-best is already the reference; list 2 has one hypothesis; list 3 is not sorted by score and its
# two best scores tie (the first of them is the baseline).
NBEST = [
    (0, "ein Hund rennt über das Gras .", -1.0),
    (0, "ein Hund läuft über die Wiese .", -1.4),
    (0, "Hund Wiese .", -3.0),
    (1, "zwei Kinder spielen im Sand .", -0.5),
    (1, "zwei Kinder spielen am Strand .", -0.9),
    (2, "eine Frau fährt Fahrrad .", -2.0),
    (3, "ein Mann steht .", -1.2),
    (3, "ein Mann auf der Bank .", -1.0),
    (3, "ein Mann sitzt auf einer Bank .", -1.0),
]


def nbest_text(rows=NBEST) -> str:
    return "".join(f"{i} ||| {h} ||| LM0= {s * 3:.3f} TM0= -1.5 -0.25 WordPenalty0= -5 ||| {s}\n" for i, h, s in rows)


class BagOfWordsModel:
    """Binary bag of lower-cased whitespace tokens over a fixed 1024-d space (word -> index on first sight,
    shared by all instances, so no collisions). A "photo" is its sentence's reference text: the model
    sees in the photo exactly what the reference says, so the reference-like hypothesis is the most
    similar one."""

    _vocab: dict[str, int] = {}
    languages = ["de"]

    def _bow(self, texts):
        out = np.zeros((len(texts), 1024), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in set(t.lower().split()):
                out[i, self._vocab.setdefault(w, len(self._vocab))] = 1.0
        return out

    def encode_text(self, texts, lang):
        assert lang == "de"
        return self._bow(texts)

    def encode_image(self, photos):
        return self._bow(photos)


class ContrarianModel(BagOfWordsModel):
    """Has its own similarity (negative cosine), which rerank must use instead of plain cosine."""

    def similarity(self, images, texts):
        a = images / np.linalg.norm(images, axis=1, keepdims=True)
        b = texts / np.linalg.norm(texts, axis=1, keepdims=True)
        return torch.as_tensor(-(a @ b.T))


@pytest.fixture()
def nbest_file(tmp_path):
    p = tmp_path / "test.nbest"
    p.write_text(nbest_text(), encoding="utf-8")
    return p


# -------------------------------------------------------------------------------------------- reader


def test_read_nbest(nbest_file):
    lists = read_nbest(nbest_file, n_sentences=4)
    assert [len(h) for h in lists] == [3, 2, 1, 3]
    h = lists[0][0]
    assert h == Hypothesis(
        0,
        "ein Hund rennt über das Gras .",
        (("LM0", (-3.0,)), ("TM0", (-1.5, -0.25)), ("WordPenalty0", (-5.0,))),
        -1.0,
        1,
    )
    assert lists[3][2].line == 9 and lists[3][2].sent_id == 3


def test_read_nbest_accepts_extra_fields_and_unlabelled_features(tmp_path):
    p = tmp_path / "a.nbest"
    p.write_text("0 ||| a b ||| -1 d: 2 -3 ||| -0.5 ||| 0-0 1-1\n0 ||| a ||| ||| -0.7\n", encoding="utf-8")
    lists = read_nbest(p)
    assert lists[0][0].features == (("", (-1.0,)), ("d", (2.0, -3.0)))
    assert lists[0][1].features == () and lists[0][1].score == -0.7


@pytest.mark.parametrize(
    "text, line, match",
    [
        ("0 ||| a ||| F= 1 ||| -1\n0 ||| b ||| -2\n", 2, "found 3 field"),
        ("0 ||| a ||| F= 1 ||| -1\nx ||| b ||| F= 1 ||| -2\n", 2, "sentence id 'x' is not a non-negative integer"),
        ("0 ||| a ||| F= 1 ||| -1\n-1 ||| b ||| F= 1 ||| -2\n", 2, "not a non-negative integer"),
        ("0 ||| a ||| F= 1 ||| -1\n1 ||| b ||| F= 1 ||| -2\n0 ||| c ||| F= 1 ||| -2\n", 3, "sentence id 0 after id 1"),
        ("0 ||| a ||| F= 1 ||| -1\n2 ||| b ||| F= 1 ||| -2\n", 2, "sentence\\(s\\) 1 have no hypothesis"),
        ("0 ||| a ||| F= 1 ||| -1\n4 ||| b ||| F= 1 ||| -2\n", 2, "sentence\\(s\\) 1..3 have no hypothesis"),
        ("1 ||| a ||| F= 1 ||| -1\n", 1, "ids must start at 0"),
        ("0 ||| a ||| F= 1 ||| high\n", 1, "total score 'high' is not a number"),
        ("0 ||| a ||| F= 1 ||| nan\n", 1, "total score is nan"),
        ("0 ||| a ||| F= 1 x ||| -1\n", 1, "feature score 'x' is not a number"),
        ("0 ||| a ||| F= 1 ||| -1\n\n0 ||| b ||| F= 1 ||| -2\n", 2, "empty line"),
    ],
)
def test_malformed_nbest_lines_name_file_and_line(tmp_path, text, line, match):
    p = tmp_path / "bad.nbest"
    p.write_text(text, encoding="utf-8")
    with pytest.raises(DataError, match=match) as exc:
        read_nbest(p)
    assert str(exc.value).startswith(f"{p}:{line}: ")


def test_counts_must_match(tmp_path, nbest_file):
    empty = tmp_path / "empty.nbest"
    empty.write_text("", encoding="utf-8")
    with pytest.raises(DataError, match="no hypotheses"):
        read_nbest(empty)
    with pytest.raises(DataError, match="has 4 sentences but 5 were expected"):
        read_nbest(nbest_file, n_sentences=5)
    refs = tmp_path / "refs.de"
    refs.write_text("\n".join(REFS[:3]) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match="3 reference lines but the n-best file has 4 sentences"):
        read_references(refs, 4)
    (tmp_path / "p.jpg").write_bytes(b"x")
    lst = tmp_path / "images.txt"
    lst.write_text("p.jpg\np.jpg\n", encoding="utf-8")
    with pytest.raises(DataError, match="2 photos listed but the n-best file has 4 sentences"):
        read_images_list(lst, 4)
    assert read_images_list(lst, 2) == [tmp_path / "p.jpg"] * 2  # relative to the list's folder
    lst.write_text("p.jpg\nmissing.jpg\n", encoding="utf-8")
    with pytest.raises(DataError, match="missing.jpg' not found") as exc:
        read_images_list(lst)
    assert str(exc.value).startswith(f"{lst}:2: ")
    lists = read_nbest(nbest_file)
    with pytest.raises(ValueError, match="3 photos for 4 n-best lists"):
        rerank(lists, REFS[:3], BagOfWordsModel(), 0.5, "de")
    with pytest.raises(ValueError, match="2 photos for 4 n-best lists"):
        rerank(lists, np.zeros((2, 5)), BagOfWordsModel(), 0.5, "de")
    with pytest.raises(ValueError, match="reference set 0 has 3 lines for 4 hypotheses"):
        translation_scores(REFS, REFS[:3])


def test_unknown_language_and_bad_weight(nbest_file):
    lists = read_nbest(nbest_file)
    with pytest.raises(UnknownLanguageError, match="unknown language code 'xx'"):
        rerank(lists, REFS, BagOfWordsModel(), 0.5, "xx")
    with pytest.raises(ValueError, match="no 'fr' text encoder"):
        rerank(lists, REFS, BagOfWordsModel(), 0.5, "fr")
    for w in (-0.1, 1.5, "heavy"):
        with pytest.raises(ValueError, match="weight must be"):
            rerank(lists, REFS, BagOfWordsModel(), w, "de")


# ------------------------------------------------------------------------------------------- scoring


def test_zscore_and_combination_by_hand():
    np.testing.assert_allclose(zscore([0.0, 1.0, 2.0]), [-math.sqrt(1.5), 0.0, math.sqrt(1.5)])
    np.testing.assert_array_equal(zscore([3.0, 3.0]), [0.0, 0.0])  # constant -> 0
    np.testing.assert_array_equal(zscore([7.0]), [0.0])
    # z(sim) for sim (1, 0, 0): mean 1/3, std sqrt(2)/3 -> (sqrt 2, -1/sqrt 2, -1/sqrt 2)
    c = combine_scores([0.0, 1.0, 2.0], [1.0, 0.0, 0.0], 0.5)
    r2, r15 = math.sqrt(2), math.sqrt(1.5)
    np.testing.assert_allclose(c, [0.5 * (r2 - r15), 0.5 * (-1 / r2), 0.5 * (r15 - 1 / r2)])


def test_translation_scores_by_hand():
    s = translation_scores(REFS, REFS, lang="de")
    assert s["bleu"] == pytest.approx(100.0) and s["ter"] == 0.0
    assert "tok:13a" in s["bleu_signature"] and "nrefs:1" in s["bleu_signature"]
    # one substitution in six words: TER = 1/6
    assert translation_scores(["the cat sat on the mat"], ["the cat sat on a mat"])["ter"] == pytest.approx(100 / 6)
    # two reference sets: the hypothesis matches the second one exactly
    two = translation_scores(["a b c d e"], [["x y z"], ["a b c d e"]])
    assert two["bleu"] == pytest.approx(100.0) and "nrefs:2" in two["bleu_signature"]
    assert "tok:zh" in translation_scores(["一个人"], ["一个人"], lang="zh")["bleu_signature"]


def test_reranking_with_the_photo_improves_bleu(nbest_file):
    lists = read_nbest(nbest_file)
    model = BagOfWordsModel()
    res = rerank(lists, REFS, model, 0.5, "de")
    # baseline: max total score, first on ties -> list 3 takes index 1, not the unsorted first line
    assert res.baseline == [0, 0, 0, 1]
    # list 0 by hand: z(mt) of (-1, -1.4, -3) = (0.93, 0.46, -1.39); cosines with the reference
    # (4/7, 1, 3/sqrt 21) -> z = (-0.92, 1.39, -0.47); combined at w = 0.5: (0.00, 0.93, -0.93) -> index 1
    assert res.chosen == [1, 0, 0, 2]
    np.testing.assert_allclose(res.similarities[0], [4 / 7, 1.0, 3 / math.sqrt(21)], rtol=1e-6)
    np.testing.assert_allclose(res.combined[0], [0.0036, 0.9258, -0.9294], atol=1e-3)
    assert res.texts == REFS and res.n_changed == 2
    before = translation_scores(res.baseline_texts, REFS, lang="de")
    after = translation_scores(res.texts, REFS, lang="de")
    assert after["bleu"] == pytest.approx(100.0) and before["bleu"] < 80.0
    assert after["ter"] == 0.0 < before["ter"]
    # the oracle (best sentence BLEU per list) is the reference-like hypothesis here too
    assert oracle_choice(lists, REFS, lang="de") == [1, 0, 0, 2]
    # precomputed image embeddings give the same result as photos encoded by the model
    same = rerank(lists, model.encode_image(REFS), model, 0.5, "de")
    assert same.chosen == res.chosen
    # the model's own similarity is used when it has one
    assert rerank(lists, REFS, ContrarianModel(), 1.0, "de").chosen == [0, 1, 0, 0]


def test_weight_zero_reproduces_the_baseline_exactly(nbest_file):
    lists = read_nbest(nbest_file)
    res = rerank(lists, REFS, BagOfWordsModel(), 0.0, "de")
    assert res.chosen == res.baseline and res.texts == res.baseline_texts and res.n_changed == 0
    assert res.baseline_texts == [lists[0][0].text, lists[1][0].text, lists[2][0].text, lists[3][1].text]
    # and on random lists with many tied scores and arbitrary similarities
    rng = np.random.default_rng(0)
    lists = [
        [
            Hypothesis(i, f"h{i}_{j}", (), float(rng.integers(-3, 1)) * 0.1 + 1e-9 * (j % 2), 0)
            for j in range(int(rng.integers(1, 8)))
        ]
        for i in range(200)
    ]
    img = rng.standard_normal((200, 16)).astype(np.float32)

    class RandomText:
        languages = ["de"]

        def encode_text(self, texts, lang):
            return np.random.default_rng(len(texts)).standard_normal((len(texts), 16))

    res = rerank(lists, img, RandomText(), 0.0, "de")
    expected = [max(range(len(h)), key=lambda j: (h[j].score, -j)) for h in lists]
    assert res.chosen == res.baseline == expected
    assert rerank(lists, img, RandomText(), 0.3, "de").n_changed > 0


# ---------------------------------------------------------------------------------------------- CLI


def _tiny_setup(tmp_path):
    """A real checkpoint on a 3-d "mean colour" backbone, 4 photos, an n-best file and references."""
    from PIL import Image

    from polyvse.features.backbones import register_backbone
    from polyvse.features.extractor import FeatureExtractor, Preprocess
    from polyvse.model.checkpoint import Checkpoint, save_checkpoint
    from polyvse.modules import JointEmbeddingModel, ModelConfig
    from polyvse.modules.text_input import CaptionEncoder

    class MeanColour(FeatureExtractor):
        name = "test-mean-colour"
        dim = 3
        weights_tag = "none"

        def __init__(self, ten_crop=False):
            self.ten_crop = False
            self.preprocess = Preprocess(8, 8, (0.0, 0.0, 0.0), (1.0, 1.0, 1.0))
            self.model = torch.nn.Identity()

        def _pooled(self, x):
            return x.mean(dim=(2, 3))

        def _head(self, features):
            return torch.zeros(features.shape[0], 1000)

    register_backbone("test-mean-colour", MeanColour)
    torch.manual_seed(0)
    enc = CaptionEncoder.build({"de": [h for _, h, _ in NBEST]})
    model = JointEmbeddingModel(
        ModelConfig(vocab_size=len(enc.vocab), image_dim=3, embed_dim=4, word_dim=3, hidden_dim=5)
    )
    ckpt = tmp_path / "ckpt"
    save_checkpoint(
        Checkpoint(
            model=model.eval(),
            captions=enc,
            backbone="test-mean-colour",
            feature_key=MeanColour().key,
            ten_crop=False,
            languages=["de"],
        ),
        ckpt,
    )
    (tmp_path / "photos").mkdir()
    for i, colour in enumerate(["red", "green", "blue", "yellow"]):
        Image.new("RGB", (16, 12), colour).save(tmp_path / "photos" / f"p{i}.jpg")
    (tmp_path / "images.txt").write_text("".join(f"photos/p{i}.jpg\n" for i in range(4)), encoding="utf-8")
    (tmp_path / "test.nbest").write_text(nbest_text(), encoding="utf-8")
    (tmp_path / "refs.de").write_text("".join(r + "\n" for r in REFS), encoding="utf-8")
    return ckpt


def _cli(tmp_path, *extra):
    from polyvse_app.cli import main

    return main(
        [
            "rerank",
            "--checkpoint",
            str(tmp_path / "ckpt"),
            "--nbest",
            str(tmp_path / "test.nbest"),
            "--images-list",
            str(tmp_path / "images.txt"),
            "--references",
            str(tmp_path / "refs.de"),
            "--quiet",
            *extra,
        ]
    )


def test_cli_end_to_end(tmp_path, capsys):
    _tiny_setup(tmp_path)
    out = tmp_path / "out.de"
    assert (
        _cli(
            tmp_path, "--lang", "de", "--weight", "0", "--out", str(out), "--json", str(tmp_path / "s.json"), "--oracle"
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "| baseline (1-best) |" in printed and "| re-ranked (w=0) |" in printed
    assert "| oracle (sentence BLEU) | 100.00 | 0.00 |" in printed and "changed 0 of 4" in printed
    baseline = [
        "ein Hund rennt über das Gras .",
        "zwei Kinder spielen im Sand .",
        "eine Frau fährt Fahrrad .",
        "ein Mann auf der Bank .",
    ]
    assert out.read_text(encoding="utf-8").splitlines() == baseline
    report = json.loads((tmp_path / "s.json").read_text(encoding="utf-8"))
    assert report["baseline"] == report["reranked"] and report["n_sentences"] == 4
    assert report["baseline"]["bleu"] == pytest.approx(translation_scores(baseline, REFS, lang="de")["bleu"])
    assert _cli(tmp_path, "--lang", "de", "--weight", "0.7", "--out", str(out)) == 0
    assert len(out.read_text(encoding="utf-8").splitlines()) == 4


def test_cli_errors(tmp_path, capsys):
    _tiny_setup(tmp_path)
    assert _cli(tmp_path, "--lang", "xx") == 2
    assert "unknown language code 'xx'" in capsys.readouterr().err
    assert _cli(tmp_path, "--lang", "fr") == 2
    assert "has no 'fr' text encoder" in capsys.readouterr().err
    assert _cli(tmp_path, "--lang", "de", "--weight", "2") == 2
    assert "--weight must be in [0, 1]" in capsys.readouterr().err
    (tmp_path / "images.txt").write_text("photos/p0.jpg\nphotos/p1.jpg\nphotos/p2.jpg\n", encoding="utf-8")
    assert _cli(tmp_path, "--lang", "de") == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'images.txt'}: 3 photos listed but the n-best file has 4 sentences" in err
    (tmp_path / "test.nbest").write_text(nbest_text() + "3 ||| kaputt\n", encoding="utf-8")
    assert _cli(tmp_path, "--lang", "de") == 2
    assert f"{tmp_path / 'test.nbest'}:10: expected `id ||| hypothesis" in capsys.readouterr().err
