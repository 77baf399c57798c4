"""Every generated part of README and docs, rendered from the committed records (``results/``,
``benchmarks/results/``): `polyvse report` writes them, `polyvse report --check` lists what is stale.

A block (:func:`polyvse.evaluation.report.replace_block`) is the text between ``<!-- NAME:start -->`` and ``<!-- NAME:end -->`` in README.md or a page under docs/;
its NAME picks the renderer in :data:`BLOCKS`, which reads only records, so a figure in a block is the record's.
A page rendered whole (the zoo's docs/results.md) is in :data:`PAGES`. A block whose name has no renderer is an
error, so no block can claim to be generated while nothing regenerates it.

    records   reading a record (an error names the file) and linking it from a page
    f8k_full  the headline, the product model, the 3-seed f8k-full tables
    languages the languages table
    comparison the comparison page's polyvse figures
    build_time how long the product build took
    quickstart how long the quick start took
    query_start how long one search takes from a fresh process
    bench     the Performance figures of `make bench`
    zoo_page  docs/results.md from the zoo records
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from polyvse.evaluation.report import block_body, block_names, replace_block
from polyvse.util.atomic import atomic_path

from .bench import bench_block
from .build_time import build_time_block
from .comparison import english_block as comparison_english_block, languages_block as comparison_languages_block
from .f8k_full import f8k_full_block, headline_block, product_model_block
from .languages import languages_block
from .query_start import query_start_block
from .quickstart import quickstart_block
from .records import Page, RecordError
from .zoo_page import PAGE as ZOO_PAGE, render_zoo_page

__all__ = ["BLOCKS", "PAGES", "RecordError", "expected_files", "generated_files", "stale", "write_all"]

#: block name -> renderer(page) -> the block's text
BLOCKS: dict[str, Callable[[Page], str]] = {
    "headline": headline_block,
    "product-model": product_model_block,
    "f8k-full": f8k_full_block,
    "languages": languages_block,
    "bench": bench_block,
    "build-time": build_time_block,
    "quickstart": quickstart_block,
    "query-start": query_start_block,
    "comparison-english": comparison_english_block,
    "comparison-languages": comparison_languages_block,
}
#: pages rendered whole (their own marked blocks are theirs): path -> renderer(repo, folder for its figures or None)
PAGES: dict[str, Callable[[Path, Path | None], str]] = {ZOO_PAGE: render_zoo_page}


def generated_files(repo: Path) -> list[Path]:
    """README.md and every docs page that holds a generated block or is a generated page."""
    files = [repo / "README.md", *sorted((repo / "docs").rglob("*.md"))]
    return [
        f
        for f in files
        if f.exists() and (f.relative_to(repo).as_posix() in PAGES or block_names(f.read_text(encoding="utf-8")))
    ]


def render_file(repo: Path, path: Path, figures: bool = False) -> str:
    """What ``path`` holds once every generated part of it is rendered from the records (``figures``: a whole
    page's figures are written beside it too)."""
    rel = path.relative_to(repo).as_posix()
    if rel in PAGES:
        return PAGES[rel](repo, path.parent if figures else None)
    text = path.read_text(encoding="utf-8")
    for name in block_names(text):
        if name not in BLOCKS:
            raise RecordError(
                f"{rel}: block <!-- {name}:start --> has no renderer in polyvse_train.report.BLOCKS "
                f"(known: {', '.join(sorted(BLOCKS))}); add one or remove the markers"
            )
        text = replace_block(text, name, BLOCKS[name](Page(repo, path)))
    return text


def expected_files(repo: Path, figures: bool = False) -> dict[Path, str]:
    return {path: render_file(repo, path, figures) for path in generated_files(repo)}


def stale(repo: Path) -> list[str]:
    """ "FILE: block NAME" (or "FILE: the whole page") for each generated part that differs from what its records
    render; [] when everything is current."""
    out = []
    for path, want in expected_files(repo).items():
        have = path.read_text(encoding="utf-8")
        if have == want:
            continue
        rel = path.relative_to(repo).as_posix()
        names = [n for n in block_names(want) if block_body(have, n) != block_body(want, n)] if rel not in PAGES else []
        out += [f"{rel}: block {n}" for n in names] or [f"{rel}: the whole page"]
    return out


def write_all(repo: Path) -> list[Path]:
    """Render every generated part and write the files that changed (atomically); the changed paths."""
    written = []
    for path, want in expected_files(repo, figures=True).items():
        if path.read_text(encoding="utf-8") != want:
            with atomic_path(path) as tmp:
                Path(tmp).write_text(want, encoding="utf-8")
            written.append(path)
    return written
