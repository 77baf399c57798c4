"""COCO readers (Karpathy split, STAIR/YJ Captions, COCO-CN) on small files in the published formats."""

from __future__ import annotations

import json

import pytest

from polyvse.data.coco import CocoCnReader, CocoKarpathyReader, StairCaptionsReader, coco_id, load_coco
from polyvse.data.registry import load_dataset
from polyvse.errors import DataError

KARPATHY = {
    "dataset": "coco",
    "images": [
        {
            "filepath": "val2014",
            "filename": "COCO_val2014_000000391895.jpg",
            "imgid": 0,
            "split": "test",
            "cocoid": 391895,
            "sentids": [0, 1],
            "sentences": [
                {
                    "tokens": ["a", "man", "rides"],
                    "raw": "A man with a red helmet rides a bike.",
                    "imgid": 0,
                    "sentid": 0,
                },
                {"tokens": ["a", "man", "on", "a", "bike"], "imgid": 0, "sentid": 1},
            ],
        },
        {
            "filepath": "train2014",
            "filename": "COCO_train2014_000000000009.jpg",
            "imgid": 1,
            "split": "restval",
            "cocoid": 9,
            "sentences": [{"raw": "  Plates of food\non a table. ", "tokens": []}],
        },
        {
            "filepath": "val2014",
            "filename": "COCO_val2014_000000000042.jpg",
            "imgid": 2,
            "split": "val",
            "cocoid": 42,
            "sentences": [{"raw": "A dog.", "tokens": ["a", "dog"]}],
        },
    ],
}
STAIR = {
    "images": [
        {"id": 391895, "file_name": "COCO_val2014_000000391895.jpg"},
        {"id": 9, "file_name": "COCO_train2014_000000000009.jpg"},
        {"id": 77, "file_name": "COCO_train2014_000000000077.jpg"},
    ],
    "annotations": [
        {"image_id": 391895, "id": 1, "caption": "赤いヘルメットの男性が自転車に乗っている。"},
        {"image_id": 9, "id": 2, "caption": "テーブルの上の料理。"},
        {"image_id": 77, "id": 3, "caption": "カリキュラム外の写真。"},
        {"image_id": 9, "id": 4, "caption": "   "},
    ],
}
COCO_CN = (
    "COCO_val2014_000000391895#0\t一个戴着红色头盔的男人在骑自行车。\n"
    "COCO_train2014_000000000009#0\t桌子上的食物。\n"
    "COCO_train2014_000000000009#1\t几盘菜。\n"
    "COCO_train2014_000000000555#0\t不在卡帕西划分里的图片。\n"
)


@pytest.fixture()
def coco_files(tmp_path):
    (tmp_path / "dataset_coco.json").write_text(json.dumps(KARPATHY))
    (tmp_path / "stair_captions_v1.2_train.json").write_text(json.dumps(STAIR, ensure_ascii=False), encoding="utf-8")
    (tmp_path / "imageid.human-written-caption.txt").write_text(COCO_CN, encoding="utf-8")
    (tmp_path / "coco-cn_train.txt").write_text("COCO_train2014_000000000009\nCOCO_train2014_000000000555\n")
    (tmp_path / "coco-cn_test.txt").write_text("COCO_val2014_000000391895\n")
    img = tmp_path / "images" / "val2014"
    img.mkdir(parents=True)
    (img / "COCO_val2014_000000391895.jpg").write_bytes(b"jpg")
    return tmp_path


def test_coco_id_forms():
    assert coco_id("COCO_val2014_000000391895") == "391895"
    assert coco_id("COCO_train2014_000000000009.jpg") == "9"
    assert coco_id(391895) == "391895" and coco_id("000042") == "42"
    assert coco_id("cat.jpg") is None and coco_id(None) is None and coco_id(True) is None and coco_id(-1) is None


def test_karpathy_reader(coco_files):
    r = CocoKarpathyReader(coco_files / "dataset_coco.json", images_dir=coco_files / "images")
    c = r.read()
    assert set(c.photos) == {"391895", "9", "42"}
    assert c.photos["391895"].path == (coco_files / "images/val2014/COCO_val2014_000000391895.jpg").resolve()
    assert c.photos["9"].path is None
    assert [x.text for x in c if x.photo_id == "391895"] == [
        "A man with a red helmet rides a bike.",
        "a man on a bike",
    ]  # tokens when no raw
    assert [x.text for x in c if x.photo_id == "9"] == ["Plates of food on a table."]
    assert {x.photo_id: x.split for x in c} == {"391895": "test", "9": "train", "42": "val"}  # restval -> train
    assert r.photo_splits["9"] == "train"
    c2 = CocoKarpathyReader(coco_files / "dataset_coco.json", restval="restval").read()
    assert {x.split for x in c2 if x.photo_id == "9"} == {"restval"}
    assert {x.source for x in c} == {"coco"} and c.languages == ["en"]


def test_karpathy_errors(tmp_path):
    p = tmp_path / "k.json"
    p.write_text('{"images": [\n  {"cocoid": 1,\n   "split": "test"\n  ')
    with pytest.raises(DataError) as exc:
        CocoKarpathyReader(p).read()
    assert exc.value.line == 4 and "invalid JSON" in str(exc.value)
    p.write_text(json.dumps({"images": [{"cocoid": 1, "split": "dev", "sentences": []}]}))
    with pytest.raises(DataError, match="images\\[0\\].*'dev'"):
        CocoKarpathyReader(p).read()
    p.write_text(json.dumps({"annotations": []}))
    with pytest.raises(DataError, match="not a Karpathy"):
        CocoKarpathyReader(p).read()
    with pytest.raises(DataError, match="not found"):
        CocoKarpathyReader(tmp_path / "missing.json").read()


def test_stair_reader(coco_files):
    c = StairCaptionsReader(coco_files / "stair_captions_v1.2_train.json", split="train").read()
    assert len(c) == 3  # blank caption skipped
    assert {x.lang for x in c} == {"ja"} and {x.source for x in c} == {"stair-captions"}
    assert {x.photo_id for x in c} == {"391895", "9", "77"}
    assert {x.split for x in c} == {"train"}


def test_stair_reader_checks_ids(tmp_path):
    p = tmp_path / "s.json"
    p.write_text(json.dumps({"images": [{"id": 1}], "annotations": [{"image_id": 2, "caption": "x"}]}))
    with pytest.raises(DataError, match="image_id 2 is not in 'images'"):
        StairCaptionsReader(p).read()
    p.write_text(json.dumps({"annotations": [{"image_id": "abc", "caption": "x"}]}))
    with pytest.raises(DataError, match="annotations\\[0\\]"):
        StairCaptionsReader(p).read()


def test_coco_cn_reader(coco_files):
    r = CocoCnReader(
        coco_files / "imageid.human-written-caption.txt",
        split_files={"train": coco_files / "coco-cn_train.txt", "test": coco_files / "coco-cn_test.txt"},
    )
    c = r.read()
    assert len(c) == 4 and {x.lang for x in c} == {"zh"}
    assert {x.photo_id: x.split for x in c} == {"391895": "test", "9": "train", "555": "train"}
    assert [x.text for x in c if x.photo_id == "9"] == ["桌子上的食物。", "几盘菜。"]


def test_coco_cn_numeric_ids_and_space_separator(tmp_path):
    p = tmp_path / "c.txt"
    p.write_text("391895#0 一个男人。\n\n000000000009#1\t食物。\n", encoding="utf-8")
    c = CocoCnReader(p).read()
    assert [(x.photo_id, x.text, x.split) for x in c] == [("391895", "一个男人。", ""), ("9", "食物。", "")]


def test_coco_cn_malformed_line(tmp_path):
    p = tmp_path / "c.txt"
    p.write_text("COCO_val2014_000000391895#0\t好。\nnot-an-id#0\t坏。\n", encoding="utf-8")
    with pytest.raises(DataError) as exc:
        CocoCnReader(p).read()
    assert exc.value.line == 2
    p.write_text("COCO_val2014_000000391895#0\t\n", encoding="utf-8")
    with pytest.raises(DataError) as exc:
        CocoCnReader(p).read()
    assert exc.value.line == 1


def test_load_coco_matches_by_id_and_uses_karpathy_split(coco_files):
    c = load_coco(
        coco_files / "dataset_coco.json",
        images_dir=coco_files / "images",
        ja_files=[coco_files / "stair_captions_v1.2_train.json"],
        zh_files=[coco_files / "imageid.human-written-caption.txt"],
    )
    assert set(c.photos) == {"391895", "9", "42"}
    assert c.languages == ["en", "ja", "zh"]
    # images outside the Karpathy file (77, 555) are dropped
    assert {x.photo_id for x in c} == {"391895", "9", "42"}
    # the STAIR file says "train2014" and COCO-CN says its own split; the Karpathy split wins
    for x in c:
        assert x.split == {"391895": "test", "9": "train", "42": "val"}[x.photo_id]
    assert len([x for x in c if x.photo_id == "391895"]) == 4


def test_coco_through_registry(coco_files, tmp_path):
    c = load_dataset(
        "coco",
        tmp_path,
        karpathy_json=str(coco_files / "dataset_coco.json"),
        zh_files=[str(coco_files / "imageid.human-written-caption.txt")],
    )
    assert c.languages == ["en", "zh"]
    with pytest.raises(DataError, match="karpathy_json"):
        load_dataset("coco", tmp_path)
