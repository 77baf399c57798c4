"""Cross-lingual caption retrieval: pair construction on the real files and metrics with stub models."""

from __future__ import annotations

import numpy as np
import pytest

from polyvse.errors import DataError, UnknownLanguageError
from polyvse.evaluation.crosslingual import (
    CORPORA,
    crosslingual_pairs_f8kml,
    crosslingual_pairs_multi30k,
    crosslingual_table,
    evaluate_crosslingual,
    parse_pair,
)
from polyvse.evaluation.retrieval import CROSS_LINGUAL_KEYS

pytestmark = pytest.mark.slow  # reads the real Multi30K / Flickr8K / Flickr8K-CN files


class PhotoOracle:
    """Embeds a caption as the one-hot of its photo (looked up from the pairs under test): every caption
    retrieves exactly the captions of its photo. ``swap`` = (photo x, photo y): captions in language
    ``swap_lang`` of x are embedded as y's and vice versa, which breaks exactly those two queries."""

    def __init__(self, pair_sets, languages=("en", "de", "fr", "cs", "zh"), swap=None, swap_lang="de"):
        self.languages = list(languages)
        self.lookup: dict[tuple[str, str], str] = {}
        for p in pair_sets:
            for pid, a, b in zip(p.photo_ids, p.src_texts, p.tgt_texts):
                self.lookup[(p.src, a)] = pid
                self.lookup[(p.tgt, b)] = pid
        self.photos = sorted(set(self.lookup.values()))
        self.index = {p: i for i, p in enumerate(self.photos)}
        self.swap, self.swap_lang = swap, swap_lang
        self.calls: list[tuple[str, int]] = []

    def encode_text(self, texts, lang):
        assert lang in self.languages, lang
        self.calls.append((lang, len(texts)))
        out = np.zeros((len(texts), len(self.photos)), dtype=np.float32)
        for i, t in enumerate(texts):
            pid = self.lookup[(lang, t)]
            if self.swap and lang == self.swap_lang and pid in self.swap:
                pid = self.swap[1] if pid == self.swap[0] else self.swap[0]
            out[i, self.index[pid]] = 1.0
        return out


@pytest.fixture(scope="module")
def real_pairs(shared_data):
    m30k = {p: crosslingual_pairs_multi30k(shared_data, *p.split("-")) for p in ("en-de", "en-fr", "en-cs")}
    f8k = {p: crosslingual_pairs_f8kml(shared_data, *p.split("-")) for p in ("en-de", "en-fr", "en-cs", "en-zh")}
    return m30k, f8k


def test_multi30k_test_2016_pairs_are_the_1000_aligned_task1_lines(real_pairs, shared_data):
    m30k, _ = real_pairs
    for name, p in m30k.items():
        assert len(p) == 1000 and p.kind == "translation" and p.corpus == "multi30k-test_2016"
        assert (p.src, p.tgt) == tuple(name.split("-"))
        assert len(set(p.photo_ids)) == 1000 and len(set(p.src_texts)) == 1000 and len(set(p.tgt_texts)) == 1000
    de = m30k["en-de"]
    assert de.photo_ids[:2] == ("1007129816", "1009434119")  # file order of test_2016_flickr.txt
    assert de.src_texts[0] == "A man in an orange hat starring at something."
    assert de.tgt_texts[0] == "Ein Mann mit einem orangefarbenen Hut, der etwas anstarrt."
    assert m30k["en-cs"].src_texts == de.src_texts  # one English side for all three
    # any two of en/de/fr/cs are aligned through the English original
    defr = crosslingual_pairs_multi30k(shared_data, "de", "fr")
    assert len(defr) == 1000 and defr.src_texts == de.tgt_texts and defr.tgt_texts == m30k["en-fr"].tgt_texts
    assert len(crosslingual_pairs_multi30k(shared_data, "en", "de", split="val")) == 1014


def test_f8kml_test_pairs(real_pairs, shared_data):
    _, f8k = real_pairs
    for name in ("en-de", "en-fr", "en-cs"):
        p = f8k[name]  # the 117 of the 125 F8K-ML test photos that have Multi30K task1 lines
        assert len(p) == 117 and p.kind == "translation" and p.corpus == "f8k-ml-test"
        assert list(p.photo_ids) == sorted(p.photo_ids)
    assert f8k["en-de"].src_texts == f8k["en-fr"].src_texts
    assert f8k["en-de"].src_texts[0] == "A boy in his blue swim shorts at the beach."
    assert f8k["en-de"].tgt_texts[0] == "Ein junge in blauen Badehosen am Strand."
    zh = f8k["en-zh"]  # Flickr8K caption #0 and its Flickr8K-CN human translation, all 125 test photos
    assert len(zh) == 125 and zh.kind == "translation"
    i = zh.photo_ids.index("1056338697")
    assert zh.src_texts[i] == "A blond woman in a blue shirt appears to wait for a ride ."
    assert zh.tgt_texts[i] == "一个穿蓝色衬衫的金发女人似乎要搭车。"
    assert set(f8k["en-de"].photo_ids) < set(zh.photo_ids)
    # photo-level alternative: the first native Chinese caption of the photo; and the reversed pair
    zhc = crosslingual_pairs_f8kml(shared_data, "zh", "en", zh_source="zhc")
    assert len(zhc) == 125 and zhc.kind == "photo" and (zhc.src, zhc.tgt) == ("zh", "en")
    assert zhc.tgt_texts == zh.src_texts and zhc.src_texts[i] == "正在等车的女人。"


def test_pair_errors(shared_data):
    with pytest.raises(DataError, match="no aligned de-zh captions"):
        crosslingual_pairs_f8kml(shared_data, "de", "zh")
    with pytest.raises(DataError, match="no 'zh'"):
        crosslingual_pairs_multi30k(shared_data, "en", "zh")
    with pytest.raises(UnknownLanguageError, match="unknown language code 'xx'"):
        crosslingual_pairs_multi30k(shared_data, "en", "xx")
    with pytest.raises(UnknownLanguageError):
        evaluate_crosslingual(PhotoOracle([]), shared_data, pairs=("en-klingon",))
    with pytest.raises(ValueError, match="same language twice"):
        parse_pair("en-en")
    with pytest.raises(ValueError, match="must look like 'en-de'"):
        parse_pair("en_de")
    with pytest.raises(ValueError, match="zh_source"):
        crosslingual_pairs_f8kml(shared_data, "en", "zh", zh_source="zhx")
    with pytest.raises(ValueError, match="unknown cross-lingual corpus"):
        evaluate_crosslingual(PhotoOracle([]), shared_data, corpora=("coco",))


def test_evaluate_crosslingual_with_a_photo_oracle(real_pairs, shared_data):
    m30k, f8k = real_pairs
    model = PhotoOracle(list(m30k.values()) + list(f8k.values()))
    res = evaluate_crosslingual(model, shared_data)
    assert list(res) == list(CORPORA) == ["f8k-ml-test", "multi30k-test_2016"]
    assert list(res["f8k-ml-test"]) == ["en-de", "en-fr", "en-cs", "en-zh"]
    assert list(res["multi30k-test_2016"]) == ["en-de", "en-fr", "en-cs"]  # no Chinese in Multi30K
    sizes = {
        "f8k-ml-test": {"en-de": 117, "en-fr": 117, "en-cs": 117, "en-zh": 125},
        "multi30k-test_2016": {"en-de": 1000, "en-fr": 1000, "en-cs": 1000},
    }
    for corpus, per in res.items():
        for pair, m in per.items():
            assert m["n_pairs"] == sizes[corpus][pair] and m["kind"] == "translation"
            assert set(CROSS_LINGUAL_KEYS) <= set(m)
            for d in ("a2b", "b2a"):
                assert m[f"{d}_r1"] == m[f"{d}_r5"] == m[f"{d}_r10"] == 100.0 and m[f"{d}_medr"] == 1.0
    # the Multi30K English side (1000 lines) and the F8K-ML task1 English side are encoded once each
    assert sum(1 for lang, n in model.calls if lang == "en") == 3
    table = crosslingual_table(res)
    assert "| multi30k-test_2016 en-cs | 100.0 |" in table and table.count("\n") == 2 + 7


def test_broken_pairs_give_hand_computed_recalls(real_pairs, shared_data):
    """Swap the German captions of two photos: those two German captions now embed exactly like the other
    photo's English caption. en query x: German y scores 1, gold German x scores 0 like every other
    German caption, and pessimistic ties put gold behind all of them: rank n. Same for y and both
    directions. So R@1 = R@5 = R@10 = (n - 2) / n, 998 of 1000 on Multi30K and 115 of 117 on F8K-ML."""
    m30k, f8k = real_pairs
    ids = m30k["en-de"].photo_ids
    model = PhotoOracle(list(m30k.values()) + list(f8k.values()), swap=(ids[3], ids[500]))
    res = evaluate_crosslingual(model, shared_data, pairs=("en-de", "en-fr"), corpora=("multi30k-test_2016",))
    m = res["multi30k-test_2016"]["en-de"]
    for d in ("a2b", "b2a"):
        assert m[f"{d}_r1"] == m[f"{d}_r5"] == m[f"{d}_r10"] == pytest.approx(99.8)
        assert m[f"{d}_meanr"] == pytest.approx((998 * 1 + 2 * 1000) / 1000)
    assert res["multi30k-test_2016"]["en-fr"]["a2b_r1"] == 100.0  # French untouched
    f_ids = f8k["en-de"].photo_ids
    model = PhotoOracle(list(m30k.values()) + list(f8k.values()), swap=(f_ids[0], f_ids[1]))
    m = evaluate_crosslingual(model, shared_data, pairs=("de-en",), corpora=("f8k-ml-test",))["f8k-ml-test"]["de-en"]
    assert m["a2b_r1"] == m["b2a_r10"] == pytest.approx(100 * 115 / 117)


def test_models_without_a_language_skip_the_pair_or_fail_when_strict(real_pairs, shared_data):
    m30k, f8k = real_pairs
    model = PhotoOracle(list(m30k.values()) + list(f8k.values()), languages=("en", "de"))
    res = evaluate_crosslingual(model, shared_data, corpora=("f8k-ml-test",))
    assert list(res["f8k-ml-test"]) == ["en-de"]
    with pytest.raises(ValueError, match="no fr text encoder"):
        evaluate_crosslingual(model, shared_data, corpora=("f8k-ml-test",), strict=True)
