"""GenericCaptionsReader: a user's photo folder + CSV/JSONL captions, problems with file:line."""

from __future__ import annotations

import json
import os

import pytest

from polyvse.data.export import export_jsonl
from polyvse.data.generic import GenericCaptionsReader, load_generic
from polyvse.data.registry import load_dataset
from polyvse.errors import DataError, UnknownLanguageError


@pytest.fixture()
def folder(tmp_path):
    img = tmp_path / "photos"
    (img / "beach").mkdir(parents=True)
    for name in ("a.jpg", "b.png", "beach/c.jpg"):
        (img / name).write_bytes(b"img")
    return tmp_path


def _reader(folder, text, name="caps.csv", **kw):
    p = folder / name
    p.write_text(text, encoding="utf-8")
    return GenericCaptionsReader(folder / "photos", p, **kw)


def test_csv_happy_path(folder):
    r = _reader(
        folder, 'image,lang,caption\na.jpg,en,"A dog, running."\nbeach/c.jpg,de,Ein Strand\nb.png,zh,海滩上的狗\n'
    )
    c = r.read()
    assert r.problems == []
    assert [(x.photo_id, x.lang, x.text, x.split, x.source) for x in c] == [
        ("a.jpg", "en", "A dog, running.", "train", "generic"),
        ("beach/c.jpg", "de", "Ein Strand", "train", "generic"),
        ("b.png", "zh", "海滩上的狗", "train", "generic"),
    ]
    assert c.photos["beach/c.jpg"].path == (folder / "photos/beach/c.jpg").resolve()


def test_lang_column_optional_with_default_lang(folder):
    c = _reader(folder, "image,caption\na.jpg,A dog\n", default_lang="EN").read()
    assert [x.lang for x in c] == ["en"]
    r = _reader(folder, "image,caption\na.jpg,A dog\nb.png,A cat\n")
    with pytest.raises(DataError, match="no usable caption"):
        r.read()
    assert [p.line for p in r.problems] == [2, 3] and "default_lang" in str(r.problems[0])
    # a row's own lang wins over the default; an empty lang cell falls back to it
    c = _reader(folder, "image,lang,caption\na.jpg,de,Ein Hund\nb.png,,A cat\n", default_lang="en").read()
    assert [x.lang for x in c] == ["de", "en"]
    with pytest.raises(UnknownLanguageError):
        _reader(folder, "image,caption\na.jpg,x\n", default_lang="xx")


def test_every_problem_is_reported_with_line_and_skipped(folder):
    text = (
        "image,lang,caption\n"  # 1
        "a.jpg,en,A dog runs.\n"  # 2 ok
        "a.jpg,en,A dog runs.\n"  # 3 duplicate of 2
        "missing.jpg,en,No file\n"  # 4 missing photo
        "a.jpg,xx,Bad language\n"  # 5 unknown language
        "a.jpg,en\n"  # 6 too few fields
        "b.png,en,   \n"  # 7 empty caption
        "../caps.csv,en,Traversal\n"  # 8 ..
        "/etc/passwd,en,Absolute\n"  # 9 absolute
        "C:\\x.jpg,en,Drive\n"  # 10 absolute (Windows)
        '"b.png,en,unterminated\n'  # 11.. unterminated quote swallows the rest
        "beach/c.jpg,en,Never read\n"
    )
    r = _reader(folder, text)
    c = r.read()
    assert [x.text for x in c] == ["A dog runs."]
    lines = [p.line for p in r.problems]
    assert lines == [3, 4, 5, 6, 7, 8, 9, 10, 11]
    msgs = [str(p) for p in r.problems]
    path = str(folder / "caps.csv")
    assert all(m.startswith(f"{path}:{p.line}: ") for m, p in zip(msgs, r.problems))
    assert "duplicate of line 2" in msgs[0]
    assert "photo file not found" in msgs[1] and "missing.jpg" in msgs[1]
    assert "'xx'" in msgs[2] and "ISO 639" in msgs[2]
    assert "expected 3 fields" in msgs[3]
    assert "empty caption" in msgs[4]
    assert "'..'" in msgs[5] and "absolute" in msgs[6] and "absolute" in msgs[7]
    assert "malformed CSV" in msgs[8]
    assert all(";" in p.reason for p in r.problems)  # what is wrong; what to do


def test_bad_quote_mid_file_resumes_on_next_line(folder):
    r = _reader(folder, 'image,lang,caption\na.jpg,en,"A "big" dog"\nb.png,en,A cat\n')
    c = r.read()
    assert [x.text for x in c] == ["A cat"]
    assert [p.line for p in r.problems] == [2]


def test_strict_raises_first_problem(folder):
    r = _reader(folder, "image,lang,caption\na.jpg,en,ok\nmissing.jpg,en,x\nb.png,xx,y\n", strict=True)
    with pytest.raises(DataError) as exc:
        r.read()
    assert exc.value.line == 3 and "missing.jpg" in str(exc.value)


def test_symlink_out_of_folder_rejected(folder):
    outside = folder / "secret.jpg"
    outside.write_bytes(b"x")
    os.symlink(outside, folder / "photos" / "link.jpg")
    r = _reader(folder, "image,lang,caption\nlink.jpg,en,x\na.jpg,en,ok\n")
    r.read()
    assert len(r.problems) == 1 and "outside the images folder" in str(r.problems[0])


def test_image_names_are_normalised(folder):
    r = _reader(folder, "image,lang,caption\n./beach/c.jpg,en,one\nbeach\\c.jpg,en,two\nbeach//c.jpg,en,three\n")
    c = r.read()
    assert {x.photo_id for x in c} == {"beach/c.jpg"} and len(c.photos) == 1 and len(c) == 3


def test_split_column_and_conflicts(folder):
    text = (
        "image,lang,caption,split\n"
        "a.jpg,en,one,test\n"
        "a.jpg,de,eins,\n"  # empty -> default "train" -> conflicts with line 2
        "b.png,en,two,VAL\n"
        "beach/c.jpg,en,three,dev\n"
    )
    r = _reader(folder, text)
    c = r.read()
    assert [(x.photo_id, x.split) for x in c] == [("a.jpg", "test"), ("b.png", "val")]
    assert [p.line for p in r.problems] == [3, 5]
    assert "one split" in str(r.problems[0]) and "did you mean 'val'" in str(r.problems[1])
    c = _reader(folder, "image,lang,caption\na.jpg,en,x\n", default_split="test").read()
    assert [x.split for x in c] == ["test"]
    with pytest.raises(DataError):
        _reader(folder, "image,lang,caption\n", default_split="dev")


def test_quoted_multiline_caption_keeps_line_numbers(folder):
    r = _reader(folder, 'image,lang,caption\na.jpg,en,"two\nlines"\nmissing.jpg,en,x\n')
    c = r.read()
    assert [x.text for x in c] == ["two lines"]
    assert [p.line for p in r.problems] == [4]


def test_bom_crlf_tsv_and_extra_columns(folder):
    p = folder / "caps.tsv"
    p.write_bytes("\ufeffImage\tLang\tCaption\tNotes\r\na.jpg\ten\tA dog, with comma\tx\r\n".encode("utf-8"))
    c = GenericCaptionsReader(folder / "photos", p).read()
    assert [(x.photo_id, x.text) for x in c] == [("a.jpg", "A dog, with comma")]


def test_header_problems_are_fatal(folder):
    with pytest.raises(DataError) as exc:
        _reader(folder, "a.jpg,en,A dog\n").read()
    assert exc.value.line == 1 and "header" in str(exc.value)
    with pytest.raises(DataError, match="empty captions file"):
        _reader(folder, "\n\n").read()
    with pytest.raises(DataError, match="repeats"):
        _reader(folder, "image,caption,caption\n").read()


def test_not_utf8_names_line(folder):
    p = folder / "caps.csv"
    p.write_bytes(b"image,lang,caption\na.jpg,en,ok\nb.png,en,caf\xe9\n")
    with pytest.raises(DataError) as exc:
        GenericCaptionsReader(folder / "photos", p).read()
    assert exc.value.line == 3 and "UTF-8" in str(exc.value)


def test_missing_folder_or_file(folder):
    with pytest.raises(DataError, match="images folder not found"):
        GenericCaptionsReader(folder / "nope", folder / "x.csv").read()
    with pytest.raises(DataError, match="captions file not found"):
        GenericCaptionsReader(folder / "photos", folder / "x.csv").read()


def test_jsonl(folder):
    lines = [
        json.dumps({"image": "a.jpg", "lang": "en", "caption": "A dog"}),
        "",
        "{not json",
        json.dumps(["a.jpg", "en", "x"]),
        json.dumps({"image": "a.jpg", "lang": "en", "caption": 5}),
        json.dumps({"image": "b.png", "caption": "no lang"}),
        json.dumps({"image": "b.png", "lang": "fr", "caption": "Un chat", "split": "test", "extra": 1}),
        json.dumps({"image": "a.jpg", "lang": "en", "caption": "A  dog"}),  # duplicate after spacing
        json.dumps({"image": "beach/c.jpg", "lang": "ja", "caption": "浜辺\nの犬"}, ensure_ascii=False),
    ]
    r = _reader(folder, "\n".join(lines) + "\n", name="caps.jsonl")
    c = r.read()
    assert [(x.photo_id, x.lang, x.text, x.split) for x in c] == [
        ("a.jpg", "en", "A dog", "train"),
        ("b.png", "fr", "Un chat", "test"),
        ("beach/c.jpg", "ja", "浜辺 の犬", "train"),
    ]
    assert [p.line for p in r.problems] == [3, 4, 5, 6, 8]
    assert "bad JSON" in str(r.problems[0]) and "not an object" in str(r.problems[1])
    assert "must be a string" in str(r.problems[2]) and "no language" in str(r.problems[3])
    assert "duplicate of line 1" in str(r.problems[4])


def test_format_sniffed_without_extension(folder):
    c = _reader(folder, '{"image": "a.jpg", "lang": "en", "caption": "x"}\n', name="caps.txt").read()
    assert len(c) == 1
    c = _reader(folder, "image,lang,caption\na.jpg,en,x\n", name="caps.txt").read()
    assert len(c) == 1


def test_registry_and_export_round_trip(folder, tmp_path):
    _reader(
        folder,
        'image,lang,caption,split\na.jpg,en,"A dog, running",test\nbeach/c.jpg,zh,海滩,train\n'
        "nope.jpg,en,skipped,train\n",
    )
    c = load_dataset("generic", tmp_path, images=str(folder / "photos"), captions=str(folder / "caps.csv"))
    assert len(c) == 2 and len(c.problems) == 1
    out = tmp_path / "out.jsonl"
    assert export_jsonl(c, out) == 2
    back = load_generic(folder / "photos", out)
    assert [(x.photo_id, x.lang, x.text, x.split) for x in back] == [(x.photo_id, x.lang, x.text, x.split) for x in c]
    with pytest.raises(DataError, match="needs option 'captions'"):
        load_dataset("generic", tmp_path, images=str(folder / "photos"))
    with pytest.raises(DataError, match="no option 'colour'"):
        load_dataset("generic", tmp_path, images="x", captions="y", colour="red")
