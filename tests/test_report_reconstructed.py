"""A generated block marks every record whose provenance was reconstructed after the fact, wherever it cites one."""

from __future__ import annotations

import json
import re
from pathlib import Path

from polyvse.provenance import PRODUCT_BUILD_RECORD
from polyvse_train.report.product_build import EARLIER_BUILD_MARK, PRODUCT_RUN, earlier_build
from polyvse_train.report.records import RECONSTRUCTED_MARK, Page, reconstructed


def _record(path: Path, reconstructed: bool) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    block = {
        "commit": "0" * 40,
        **({"reconstructed": {"from": ["git log"], "by": "scripts/backfill_provenance.py"}} if reconstructed else {}),
    }
    path.write_text(json.dumps({"x": 1, "provenance": block}), encoding="utf-8")


def test_a_link_to_a_reconstructed_record_says_so(tmp_path):
    _record(tmp_path / "results" / "written.json", reconstructed=False)
    _record(tmp_path / "results" / "rebuilt.json", reconstructed=True)
    _record(tmp_path / "results" / "runs" / "a" / "official-s0" / "metrics.json", reconstructed=False)
    _record(tmp_path / "results" / "runs" / "a" / "official-s1" / "metrics.json", reconstructed=True)
    page = Page(tmp_path, tmp_path / "docs" / "page.md")
    assert page.record_link("results/written.json") == "[`results/written.json`](../results/written.json)"
    assert (
        page.record_link("results/rebuilt.json")
        == f"[`results/rebuilt.json`](../results/rebuilt.json) {RECONSTRUCTED_MARK}"
    )
    # a folder of runs: one reconstructed run marks the link
    assert page.record_link("results/runs/a", "runs").endswith(f"(../results/runs/a) {RECONSTRUCTED_MARK}")
    assert RECONSTRUCTED_MARK == "(reconstructed provenance)"


def test_a_link_to_a_record_of_an_earlier_product_build_says_so(tmp_path):
    def write(rel, fingerprint, checkpoint="/x/runs/model/checkpoint"):
        model = {"fingerprint": fingerprint, "photo_fingerprint": "sha256:p", "checkpoint": checkpoint}
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(json.dumps({"provenance": {"commit": "0" * 40, "model": model}}), encoding="utf-8")

    write(PRODUCT_BUILD_RECORD, "sha256:now")
    write("results/now.json", "sha256:now")
    write("results/then.json", "sha256:then")
    write("results/other-model.json", "sha256:then", checkpoint="/x/runs/zoo/checkpoint")
    page = Page(tmp_path, tmp_path / "README.md")
    assert page.record_link("results/now.json") == "[`results/now.json`](results/now.json)"
    assert page.record_link("results/then.json").endswith(f"(results/then.json) {EARLIER_BUILD_MARK}")
    assert page.record_link("results/other-model.json").endswith("(results/other-model.json)")  # not the product
    assert page.record_link(PRODUCT_BUILD_RECORD).endswith(")")
    # the trained checkpoint's fingerprint, as polyvse model build's build.json names it beside the build's
    write("results/trained.json", "sha256:trained")
    assert earlier_build(tmp_path, "results/trained.json")
    (tmp_path / PRODUCT_RUN).mkdir(parents=True)
    (tmp_path / PRODUCT_RUN / "build.json").write_text(
        json.dumps({"fingerprints": {"trained": "sha256:trained", "model": "sha256:now"}}), encoding="utf-8"
    )
    assert not earlier_build(tmp_path, "results/trained.json")


def test_the_committed_pages_mark_exactly_the_reconstructed_and_earlier_build_records_they_link():
    repo = Path(__file__).resolve().parent.parent
    pages = [repo / "README.md", *sorted((repo / "docs").rglob("*.md"))]
    link = re.compile(
        r"\[`[^`]+`\]\(((?:\.\./)*)((?:results|benchmarks/results)/[^)#]+)\)((?: \((?:reconstructed provenance|"
        r"an earlier build of the product model)\))*)"
    )
    seen = {RECONSTRUCTED_MARK: set(), EARLIER_BUILD_MARK: set()}
    for page in pages:
        for m in link.finditer(page.read_text(encoding="utf-8")):
            record = m.group(2).rstrip("/")
            if not (repo / record).exists():
                continue
            for mark, test in ((RECONSTRUCTED_MARK, reconstructed), (EARLIER_BUILD_MARK, earlier_build)):
                marked = mark in m.group(3)
                assert marked == test(repo, record), f"{page.relative_to(repo)}: {record}, {mark} shown: {marked}"
                seen[mark].add(marked)
    assert seen[RECONSTRUCTED_MARK] == {True, False}  # the pages cite both kinds, so the check above ran on each
