"""Multi30K, Flickr8K, Flickr8K-CN readers and shared helpers on hand-made files in the public formats."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import pytest

from polyvse.data._io import caption_key, flickr_id, read_lines
from polyvse.data.flickr8k import Flickr8kReader
from polyvse.data.flickr8kcn import Flickr8kCnReader, official_split, parse_caption_file
from polyvse.data.multi30k import Multi30kReader, relative_files
from polyvse.data.types import Corpus
from polyvse.errors import DataError, UnknownLanguageError
from polyvse.util.atomic import atomic_open


# -- helpers ---------------------------------------------------------------------------------------------
def test_flickr_id_forms():
    assert flickr_id("1000268201_693b08cb0e.jpg") == "1000268201"
    assert flickr_id("1000268201.jpg") == "1000268201"
    assert flickr_id("1000268201_693b08cb0e") == "1000268201"
    assert flickr_id("2258277193_586949ec62.jpg.1") == "2258277193"
    assert flickr_id("some/dir/123_abc.jpg") == "123"
    assert flickr_id("holiday_photo.jpg") == "holiday_photo"


def test_caption_key_ignores_case_spacing_and_final_stop():
    assert caption_key("A child in a pink dress .") == caption_key("a child in a pink  dress.")
    assert caption_key("Ein Mann , der läuft") == caption_key("ein Mann, der läuft.")
    assert caption_key("一只狗在跑。") == caption_key("一只狗在跑")
    assert caption_key("Ａ dog") == caption_key("a dog")  # NFKC
    assert caption_key("a dog") != caption_key("a cat")


def test_read_lines_splits_on_newline_only(tmp_path):
    p = tmp_path / "x.txt"
    p.write_bytes("\ufeffone\u2028still one\r\ntwo\n\nfour".encode("utf-8"))
    assert read_lines(p) == ("one\u2028still one", "two", "", "four")
    g = tmp_path / "x.gz"
    with gzip.open(g, "wb") as fh:
        fh.write(b"a\nb\n")
    assert read_lines(g) == ("a", "b")


def test_read_lines_sees_edits(tmp_path):
    p = tmp_path / "x.txt"
    p.write_text("a\n")
    assert read_lines(p) == ("a",)
    p.write_text("a\nb and more\n")
    os.utime(p, ns=(1, 2_000_000_000))
    assert read_lines(p) == ("a", "b and more")


def test_read_lines_errors(tmp_path):
    with pytest.raises(DataError, match="not found"):
        read_lines(tmp_path / "nope.txt")
    p = tmp_path / "bad.txt"
    p.write_bytes(b"ok\nok\n\xff\xfe\n")
    with pytest.raises(DataError) as exc:
        read_lines(p)
    assert exc.value.line == 3 and "UTF-8" in str(exc.value)
    g = tmp_path / "bad.gz"
    g.write_bytes(b"not gzip")
    with pytest.raises(DataError, match="cannot read"):
        read_lines(g)


def test_atomic_open_leaves_nothing_on_error(tmp_path):
    dest = tmp_path / "out.txt"
    dest.write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_open(dest) as fh:
            fh.write("half")
            raise RuntimeError("boom")
    assert dest.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]
    with atomic_open(dest) as fh:
        fh.write("new")
    assert dest.read_text() == "new"


# -- Multi30K --------------------------------------------------------------------------------------------
def test_multi30k_reads_both_tasks(tiny_root):
    c = Multi30kReader(tiny_root).read()
    assert isinstance(c, Corpus)
    assert set(c.photos) == {"100", "200", "300", "400"}
    assert all(p.path is None for p in c.photos.values())
    # task1: 4 images x 4 langs; task2: 4 images x 10
    assert len(c) == 16 + 40
    by = {(x.photo_id, x.lang, x.source) for x in c}
    assert ("100", "cs", "multi30k-task1") in by and ("400", "de", "multi30k-task2") in by
    assert {x.split for x in c if x.photo_id == "400"} == {"test"}
    assert {x.split for x in c if x.photo_id == "300"} == {"val"}
    line = [x for x in c if x.source == "multi30k-task1" and x.lang == "fr" and x.photo_id == "200"]
    assert [x.text for x in line] == ["fr t1 train 200."]


def test_multi30k_filters(tiny_root):
    c = Multi30kReader(tiny_root, tasks=["task1"], splits=["test"], langs=["de"]).read()
    assert [(x.photo_id, x.lang, x.split) for x in c] == [("400", "de", "test")]
    with pytest.raises(UnknownLanguageError):
        Multi30kReader(tiny_root, langs=["xx"])
    with pytest.raises(DataError, match="task"):
        Multi30kReader(tiny_root, tasks=["task3"])


def test_multi30k_misaligned_file_is_an_error(tiny_root):
    p = tiny_root / "multi30k/data/task1/raw/train.de.gz"
    with gzip.open(p, "wt") as fh:
        fh.write("only one line\n")
    with pytest.raises(DataError) as exc:
        Multi30kReader(tiny_root, tasks=["task1"]).read()
    assert "1 caption lines but 2 images" in str(exc.value) and exc.value.path == str(p.resolve())


def test_multi30k_empty_caption_names_line(tiny_root):
    p = tiny_root / "multi30k/data/task2/raw/train.3.en.gz"
    with gzip.open(p, "wt") as fh:
        fh.write("fine\n   \n")
    with pytest.raises(DataError) as exc:
        Multi30kReader(tiny_root, tasks=["task2"]).read()
    assert exc.value.line == 2 and "empty caption" in str(exc.value)


def test_multi30k_missing_file_says_how_to_fetch(tiny_root):
    (tiny_root / "multi30k/data/task1/raw/val.cs.gz").unlink()
    with pytest.raises(DataError, match="polyvse data fetch multi30k"):
        Multi30kReader(tiny_root).read()


def test_multi30k_relative_files_cover_default_layout():
    files = relative_files()
    assert len(files) == 3 + 12 + 3 + 30
    assert "multi30k/data/task2/raw/test_2016.5.de.gz" in files
    assert "multi30k/data/task1/image_splits/test_2016_flickr.txt" in files


# -- Flickr8K --------------------------------------------------------------------------------------------
def test_flickr8k_photos_and_csv_quoting(tiny_root):
    c = Flickr8kReader(tiny_root, splits={"100": "train"}).read()
    assert set(c.photos) == {"100", "300", "500", "700"}
    assert c.photos["100"].path == (tiny_root / "flickr8k/images/100_aa.jpg").resolve()
    assert len(c) == 20
    texts = [x.text for x in c if x.photo_id == "100"]
    assert 'A dog, a ball and "quotes" .' in texts
    assert {x.split for x in c if x.photo_id == "100"} == {"train"}
    assert {x.split for x in c if x.photo_id == "300"} == {""}
    assert {x.source for x in c} == {"flickr8k"} and c.languages == ["en"]


def test_flickr8k_all_captions_has_pathless_photos(tiny_root):
    c = Flickr8kReader(tiny_root, captions="all").read()
    assert len(c.photos) == 7
    assert c.photos["600"].path is None and c.photos["100"].path is not None


def test_flickr8k_errors_name_file_and_line(tiny_root):
    p = tiny_root / "flickr8k/captions.txt"
    lines = p.read_text().splitlines()
    p.write_text("\n".join(lines[:3] + ["100_aa.jpg,too,many"] + lines[3:]) + "\n")
    with pytest.raises(DataError) as exc:
        Flickr8kReader(tiny_root).read()
    assert exc.value.line == 4 and "expected 2 fields" in str(exc.value)
    p.write_text("img,text\n")
    with pytest.raises(DataError, match="header"):
        Flickr8kReader(tiny_root).read()
    p.write_text("image,caption\n999_zz.jpg,a photo that is not there\n")
    with pytest.raises(DataError) as exc:
        Flickr8kReader(tiny_root).read()
    assert exc.value.line == 2 and "999_zz.jpg" in str(exc.value)


def test_flickr8k_missing_folder(tmp_path):
    with pytest.raises(DataError, match="polyvse data fetch flickr8k"):
        Flickr8kReader(tmp_path).read()


# -- Flickr8K-CN -----------------------------------------------------------------------------------------
def test_flickr8kcn_variants_sources_and_split(tiny_root):
    split = official_split(tiny_root)
    assert split == {"100": "train", "200": "train", "600": "train", "300": "val", "500": "test", "400": "test"}
    c = Flickr8kCnReader(tiny_root, variants=["zhc", "zhb", "zhm", "enc"], splits=split).read()
    assert {x.source for x in c} == {"flickr8kcn-zhc", "flickr8kcn-zhb", "flickr8kcn-zhm", "flickr8kcn-enc"}
    assert {x.lang for x in c if x.source == "flickr8kcn-enc"} == {"en"}
    assert [x.text for x in c if x.source == "flickr8kcn-zhm"] == ["人工翻译五百。"]
    assert {x.split for x in c if x.photo_id == "500"} == {"test"}
    assert {x.split for x in c if x.photo_id == "700"} == {""}  # in no split list
    assert c.photos["100"].path is not None and c.photos["600"].path is None


def test_flickr8kcn_quirk_key(tmp_path):
    p = tmp_path / "flickr8kzhb.caption.txt"
    p.write_text("2258277193_586949ec62.jpg.1#zhb#0 人们在等待地铁\n", encoding="utf-8")
    (rec,) = parse_caption_file(p, "zhb")
    assert rec.photo_id == "2258277193" and rec.text == "人们在等待地铁" and rec.line == 1


def test_flickr8kcn_malformed_line(tiny_root):
    p = tiny_root / "flickr8kcn/data/flickr8kzhc.caption.txt"
    lines = p.read_text(encoding="utf-8").splitlines()
    lines.insert(2, "100_aa.jpg 没有编号")
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(DataError) as exc:
        Flickr8kCnReader(tiny_root).read()
    assert exc.value.line == 3 and "#zhc#" in str(exc.value)


def test_official_split_conflict(tiny_root):
    (tiny_root / "flickr8kcn/data/flickr8kval.txt").write_text("300_bb\n100_aa\n")
    with pytest.raises(DataError) as exc:
        official_split(tiny_root)
    assert exc.value.line == 2 and "both" in str(exc.value)


def test_flickr8kcn_unknown_variant(tiny_root):
    with pytest.raises(DataError, match="zhx"):
        Flickr8kCnReader(tiny_root, variants=["zhx"])


# -- real files ------------------------------------------------------------------------------------------
def test_real_multi30k_shapes(shared_data):
    r = Multi30kReader(shared_data)
    assert len(r.images("task1", "train")) == 29000
    assert len(r.images("task1", "val")) == 1014
    assert len(r.images("task1", "test_2016_flickr")) == 1000
    assert r.images("task1", "train") == r.images("task2", "train")
    n = sum(len(pairs) for *_, pairs in r.files())
    assert n == 31014 * 4 + 31014 * 10


def test_real_flickr8kcn_sizes(shared_data):
    split = official_split(shared_data)
    assert sum(1 for s in split.values() if s == "train") == 6000
    assert sum(1 for s in split.values() if s == "val") == 1000
    assert sum(1 for s in split.values() if s == "test") == 1000
    r = Flickr8kCnReader(shared_data)
    assert sum(1 for _ in r.records("zhc")) == 40455
    assert len({rec.photo_id for rec in r.records("zhc")}) == 8091


def test_real_flickr8k_csv_parses(shared_data):
    rows = Flickr8kReader(shared_data).rows()
    assert len(rows) == 4250 and len({r.photo_id for r in rows}) == 850
    assert len(Flickr8kReader(shared_data, captions="all").rows()) == 40455


def test_paths_are_absolute(tiny_root, monkeypatch):
    monkeypatch.chdir(tiny_root)
    c = Flickr8kReader(Path(".")).read()
    assert all(p.path.is_absolute() for p in c.photos.values())
