"""The comparison page's polyvse figures come from the product's records: recall@5 for the languages it trained on,
test mR for every language it serves, machine-translated Chinese left out."""

from __future__ import annotations

import json
from pathlib import Path

from polyvse_train.report.comparison import english_block, languages_block
from polyvse_train.report.f8k_full import PRODUCT
from polyvse_train.report.languages import RECORD
from polyvse_train.report.records import Page


def _write(root: Path, rel: str, data: dict) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data), encoding="utf-8")


def test_the_blocks_read_the_product_records(tmp_path):
    recalls = {"en": (61.2, 70.4), "de": (55.5, 64.0)}
    _write(
        tmp_path,
        f"{PRODUCT}/metrics.json",
        {
            "n_train_photos": 5867,
            "precision": "fp32",
            "languages": {g: {"t2i_r5": t, "i2t_r5": i} for g, (t, i) in recalls.items()},
        },
    )
    test = {"mr": 0.0, "n_images": 929}
    rows = {
        "en": {"lang": "en", "status": "trained", "captions": "f8k-full (human)", "test": {**test, "mr": 58.04}},
        "de": {"lang": "de", "status": "trained", "captions": "f8k-full (human)", "test": {**test, "mr": 52.96}},
        "zh-mt": {"lang": "zh", "status": "trained", "captions": "MultiScript30k (machine-translated)", "test": test},
        "qu": {"lang": "qu", "status": "adapted", "captions": "MultiScript30k (machine-translated)", "test": test},
    }
    _write(tmp_path, RECORD, {"rows": rows})
    page = Page(tmp_path, tmp_path / "docs" / "comparison.md")

    english = english_block(page)
    assert "| polyvse product model (`make model`) | 5,867 Flickr8K photos, fp32, CPU | 61.2 | 70.4 |" in english
    assert "](../results/model-f8k-full-polyvse-best-s0/metrics.json)" in english

    table = languages_block(page)
    assert "| English | trained | 929 | 61.2 | 70.4 | 58.0 |" in table
    assert "| German | trained | 929 | 55.5 | 64.0 | 53.0 |" in table
    assert "| Quechua | adapted (machine-translated captions) | 929 | — | — | 0.0 |" in table
    assert table.count("| Chinese") == 0  # only its machine-translated row was in the record: left out
