"""The comparison page's polyvse figures (docs/comparison.md): the product model's English recall@5 both ways and its
languages beside the published CLIP-class figures, read from the product's training record and its languages
record, so the page's polyvse side is always the product model's."""

from __future__ import annotations

from polyvse.evaluation.report import markdown_rows

from .f8k_full import PRODUCT
from .languages import RECORD as LANGUAGES
from .records import Page

#: languages record rows the comparison leaves out: Chinese's machine-translated captions (the human ones are shown)
LEFT_OUT = ("zh-mt",)


def _served(row: dict) -> str:
    if row.get("status") == "trained":
        return "trained"
    if "machine-translated" in str(row.get("captions", "")):
        return f"{row.get('status')} (machine-translated captions)"
    return str(row.get("status"))


def english_block(page: Page) -> str:
    """The product model's row: Flickr8K's 1k test photos, English recall@5 text→image and image→text."""
    m = page.read(f"{PRODUCT}/metrics.json")
    en = m["languages"]["en"]
    head = ["model", "training", "text→image R@5", "image→text R@5", "source"]
    row = [
        "polyvse product model (`make model`)",
        f"{m['n_train_photos']:,} Flickr8K photos, {m.get('precision', 'fp32')}, CPU",
        f"{en['t2i_r5']:.1f}",
        f"{en['i2t_r5']:.1f}",
        f"measured: {page.record_link(f'{PRODUCT}/metrics.json', 'product model record')}",
    ]
    return markdown_rows(head, [row]).rstrip("\n")


def languages_block(page: Page) -> str:
    """Every language the product serves: recall@5 both ways where it trained (the training record), test mR for
    all (the languages record)."""
    from polyvse.languages import language_name

    m, record = page.read(f"{PRODUCT}/metrics.json"), page.read(LANGUAGES)
    head = ["language", "how it is served", "photos", "text→image R@5", "image→text R@5", "test mR"]
    rows = []
    for name, r in record["rows"].items():
        if name in LEFT_OUT or "test" not in r:
            continue
        trained = m["languages"].get(name) if r.get("status") == "trained" else None
        rows.append(
            [
                language_name(r["lang"]),
                _served(r),
                f"{r['test']['n_images']:,}",
                f"{trained['t2i_r5']:.1f}" if trained else "—",
                f"{trained['i2t_r5']:.1f}" if trained else "—",
                f"{r['test']['mr']:.1f}",
            ]
        )
    return (
        f"Recall@5 from the {page.record_link(f'{PRODUCT}/metrics.json', 'product model record')}; test mR, the mean "
        f"of R@1/5/10 both ways, from the {page.record_link(LANGUAGES, 'languages record')}.\n\n"
        + markdown_rows(head, rows).rstrip("\n")
    )
