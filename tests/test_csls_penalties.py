"""Each indexed photo's CSLS penalty r_C stored with the index (polyvse.csls.penalties): the table a build and an
append write, search results equal to those computed per query (trained, adapted and zero-shot languages, before
and after an append), a query that computes no r_C and reads no caption bank when the table is there, and old
indexes (no table, or a table of other banks) still searched, with a hint to rebuild."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest

import polyvse
from polyvse.csls.penalties import penalty_writer
from polyvse.csls.search import SearchHubness
from polyvse.index import PhotoEntry, PhotoIndex, Searcher
from polyvse.index.build import _append, stored_vectors, write_new_index
from polyvse.index.store import index_lock, model_section
from polyvse.model.checkpoint import HubnessBankFile
from polyvse.model.loading import query_model
from test_tower_query import QUERIES, tower_checkpoint

K = 8


def test_the_pooled_column_merges_each_languages_nearest_and_equals_a_scan_of_the_pooled_bank():
    rng = np.random.default_rng(0)
    hubness = SearchHubness(
        5,
        rng.normal(size=(50, 32)),
        {lang: rng.normal(size=(40 + 7 * i, 32)) for i, lang in enumerate(["de", "en", "cs"])},
    )
    photos = rng.normal(size=(300, 32))
    photos = (photos / np.linalg.norm(photos, axis=1, keepdims=True)).astype(np.float32)
    table = hubness.penalty_table(photos)
    assert hubness.penalty_keys == ["cs", "de", "en", "*"] and table.shape == (300, 4) and table.dtype == np.float32
    for column, key in enumerate(hubness.penalty_keys):
        lang = None if key == "*" else key  # None: the pooled bank, scanned whole by photo_penalty
        np.testing.assert_allclose(table[:, column], hubness.photo_penalty(photos, lang), atol=1e-6)


@pytest.fixture(scope="module")
def csls_checkpoint(tmp_path_factory):
    """The product model's kind (frozen towers, linear heads, CSLS k 3; es adapted, fr zero-shot: the pooled bank)."""
    return tower_checkpoint(
        tmp_path_factory.mktemp("penalties") / "checkpoint", text_head="linear", text_tail_layers=1, csls=True
    )


def _photos(model, rng, n: int, start: int, root):
    feats = rng.normal(size=(n, model.config.image_dim)).astype(np.float32)
    entries = [
        PhotoEntry(start + i, f"photo-{start + i:02d}.jpg", str(root / f"photo-{start + i:02d}.jpg")) for i in range(n)
    ]
    return entries, stored_vectors(model, model.encode_image_features(feats))


def _index(checkpoint, root, seed: int, table: bool = True, langs=None):
    """(model, root, photo vectors): an exact index of 30 made-up photos, with the r_C table when ``table`` (the
    columns of ``langs`` only, when given)."""
    model = polyvse.load(checkpoint)
    entries, vectors = _photos(model, np.random.default_rng(seed), 30, 0, root.parent)
    write_new_index(
        root,
        model_section(model, checkpoint),
        model.similarity_name,
        entries,
        vectors,
        "auto",
        20_000,
        0.95,
        csls=penalty_writer(model, langs=langs) if table else None,
    )
    return model, root, vectors


def _results(searcher: Searcher) -> dict:
    return {lang: [(h.id, h.score) for h in searcher.text(text, lang, k=K).hits] for lang, text in QUERIES}


def _same(got: dict, want: dict) -> None:
    for lang in want:
        assert [i for i, _ in got[lang]] == [i for i, _ in want[lang]], lang
        np.testing.assert_allclose([s for _, s in got[lang]], [s for _, s in want[lang]], atol=1e-5)


def _without_table(root) -> PhotoIndex:
    index = PhotoIndex.open(root)
    index.penalties = None  # as an index built before the table existed
    return index


def test_stored_penalties_rank_as_computed_ones_before_and_after_an_append(csls_checkpoint, tmp_path):
    model, root, _ = _index(csls_checkpoint, tmp_path / "index", 3)
    index = PhotoIndex.open(root)
    section = index.manifest["csls"]
    hubness = SearchHubness.of_model(model)
    assert section["keys"] == ["cs", "de", "en", "*"] and section["k"] == 3 and section["banks"] == hubness.digest()
    assert index.penalties.shape == (30, 4) and isinstance(index.penalties, np.memmap)
    np.testing.assert_allclose(index.penalties, hubness.penalty_table(index.vectors), atol=1e-6)
    for make in (lambda: polyvse.load(csls_checkpoint), lambda: query_model(csls_checkpoint)):
        _same(_results(Searcher(make(), PhotoIndex.open(root))), _results(Searcher(make(), _without_table(root))))

    new_entries, new_vectors = _photos(model, np.random.default_rng(30), 12, 30, tmp_path)
    with index_lock(root):
        _append(root, index, model, new_entries, new_vectors, None)  # what `polyvse index add` commits
    grown = PhotoIndex.open(root)
    assert grown.penalties.shape == (42, 4) and sorted(p.name for p in root.glob("penalties.*")) == [
        f"penalties.{grown.manifest['generation']}.npy"
    ]
    np.testing.assert_array_equal(grown.penalties[:30], index.penalties)  # copied, not computed again
    np.testing.assert_allclose(grown.penalties[30:], hubness.penalty_table(new_vectors), atol=1e-6)
    _same(
        _results(Searcher(query_model(csls_checkpoint), grown)),
        _results(Searcher(query_model(csls_checkpoint), _without_table(root))),
    )


def test_a_query_with_stored_penalties_computes_no_r_c_and_reads_no_caption_bank(
    csls_checkpoint, tmp_path, monkeypatch, caplog
):
    _, root, _ = _index(csls_checkpoint, tmp_path / "index", 4)
    want = _results(Searcher(query_model(csls_checkpoint), _without_table(root)))

    def refuse(*args, **kwargs):
        raise AssertionError("r_C computed against a caption bank although the index stores it")

    monkeypatch.setattr(SearchHubness, "photo_penalty", refuse)
    monkeypatch.setattr(HubnessBankFile, "caption", refuse)  # a fresh query model reads banks through this
    fresh = query_model(csls_checkpoint)
    caplog.clear()  # the hint of the search without the table above
    with caplog.at_level(logging.WARNING):
        _same(_results(Searcher(fresh, PhotoIndex.open(root))), want)
    assert set(fresh.hubness._unit) == {None} and not caplog.records  # the photo bank only (r_I), no hint


def test_an_index_without_the_table_or_with_other_banks_is_searched_as_before_with_a_hint(
    csls_checkpoint, tmp_path, caplog, capsys
):
    from polyvse_app.cli import main

    _, root, _ = _index(csls_checkpoint, tmp_path / "index", 5, table=False)  # as before the table existed
    assert "csls" not in PhotoIndex.open(root).manifest and not list(root.glob("penalties.*"))
    assert main(["index", "info", "--index", str(root)]) == 0
    assert "no photo penalties stored" in capsys.readouterr().out
    with caplog.at_level(logging.WARNING):
        old = _results(Searcher(query_model(csls_checkpoint), PhotoIndex.open(root)))
    assert "rebuild it (`polyvse index build --force`) to store them" in caplog.text

    _index(csls_checkpoint, root, 5)  # the same photos, rebuilt with the table
    assert main(["index", "info", "--index", str(root)]) == 0
    assert "penalty stored for the banks of cs, de, en and the pooled bank (k 3)" in capsys.readouterr().out
    manifest = json.loads((root / "manifest.json").read_text())
    (root / "manifest.json").write_text(json.dumps({**manifest, "csls": {**manifest["csls"], "banks": "sha256:0"}}))
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        other = _results(Searcher(query_model(csls_checkpoint), PhotoIndex.open(root)))
    assert "stores them for other banks" in caplog.text
    _same(other, old)


def test_an_index_storing_some_languages_columns_reads_them_and_computes_the_others(
    csls_checkpoint, tmp_path, monkeypatch, caplog, capsys
):
    """--csls-penalty-langs de,en: only those banks' columns are computed and stored (a fifth of the work for one
    language of five at 10M photos); de/en queries read them, the others (cs, zero-shot fr, adapted es: the pooled
    bank) compute theirs, with a hint, and every ranking equals the one computed per query; an append keeps the
    choice and copies the stored rows."""
    from polyvse_app.cli import main

    model, root, vectors = _index(csls_checkpoint, tmp_path / "index", 6, langs=["en", "de"])
    want = _results(Searcher(query_model(csls_checkpoint), _without_table(root)))
    index = PhotoIndex.open(root)
    hubness = SearchHubness.of_model(model)
    assert index.manifest["csls"]["keys"] == ["de", "en"] and index.penalties.shape == (30, 2)
    np.testing.assert_allclose(index.penalties, hubness.penalty_table(vectors)[:, [1, 2]], atol=1e-6)
    assert main(["index", "info", "--index", str(root)]) == 0
    assert "stored for the banks of de, en (k 3)" in capsys.readouterr().out

    computed = []
    original = SearchHubness.photo_penalty
    monkeypatch.setattr(
        SearchHubness, "photo_penalty", lambda self, v, lang: computed.append(lang) or original(self, v, lang)
    )
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        _same(_results(Searcher(query_model(csls_checkpoint), index)), want)
    assert set(computed) == {"cs", "fr", "es"}  # never de or en
    assert "each cs query computes its candidates' CSLS penalties" in caplog.text and "de query" not in caplog.text

    new_entries, new_vectors = _photos(model, np.random.default_rng(30), 5, 30, tmp_path)
    with index_lock(root):
        _append(root, index, model, new_entries, new_vectors, None)
    grown = PhotoIndex.open(root)
    assert grown.manifest["csls"]["keys"] == ["de", "en"] and grown.penalties.shape == (35, 2)
    np.testing.assert_array_equal(grown.penalties[:30], index.penalties)
    np.testing.assert_allclose(grown.penalties[30:], hubness.penalty_table(new_vectors)[:, [1, 2]], atol=1e-6)

    # a language without a bank of its own (es, adapted) is served by the pooled column, which scans every bank
    _, pooled_root, pooled_vectors = _index(csls_checkpoint, tmp_path / "pooled", 7, langs=["es"])
    pooled = PhotoIndex.open(pooled_root)
    assert pooled.manifest["csls"]["keys"] == ["*"]
    np.testing.assert_allclose(pooled.penalties[:, 0], hubness.photo_penalty(pooled_vectors, None), atol=1e-6)


def test_penalty_languages_are_checked_where_they_are_given():
    import argparse

    from polyvse.csls.penalties import PenaltyWriter
    from polyvse.errors import DataError
    from polyvse_app.commands.index import _lang_list

    assert _lang_list("EN, de,en") == ["en", "de"]
    for bad in ("", " , ", "english-ish"):
        with pytest.raises(argparse.ArgumentTypeError):
            _lang_list(bad)
    rng = np.random.default_rng(0)
    hubness = SearchHubness(3, rng.normal(size=(20, 8)), {"en": rng.normal(size=(10, 8))})
    assert hubness.penalty_columns(["en", "qu"]) == ["en", "*"] and hubness.penalty_columns(["en"]) == ["en"]
    with pytest.raises(DataError, match="no caption bank"):
        PenaltyWriter(hubness, keys=["de"])
    with pytest.raises(DataError, match="no caption bank"):
        PenaltyWriter(hubness, keys=[])
