"""Every language a checkpoint serves, scored: image-sentence mR on Flickr8K's official val and test photos for the
languages it trained on (f8k-full's captions) and for the MultiScript30k languages (es, ar, zh machine-translated,
qu, gn: one machine-translated caption a photo, so a gallery is the photos that have one), each through the path a
user's query takes (``model.encode_text(texts, lang)``: trained part, adapted part or zero-shot) and ranked as
search ranks (CSLS against the checkpoint's banks where it carries them: :func:`.base.search_scores`).

Choices are made on val; test is reported once, for what was adopted (`polyvse evaluate --task languages
--split test`, scripts/language_table.py, scripts/adapt_curves.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .base import Evaluator

MULTISCRIPT = ("es", "ar", "zh", "qu", "gn")
MT_SUFFIX = "-mt"  # the machine-translated zh lines beside the native zh captions
SPLITS = ("val", "test")


class LanguagesEvaluator(Evaluator):
    """``{row name: {"lang", "status", "captions", split: {"mr", "n_images", "n_captions"}}}``: the trained
    languages, then ``langs`` (a MultiScript30k language the model also trained on gets the row ``<lang>-mt``)."""

    name = "languages"

    def __init__(
        self,
        root: Path,
        langs: Sequence[str] = MULTISCRIPT,
        splits: Sequence[str] = SPLITS,
        max_photos: int | None = None,
        progress: bool = True,
    ):
        self.root, self.langs, self.splits = Path(root), list(langs), tuple(splits)
        self.max_photos, self.progress = max_photos, progress

    def galleries(self, model: Any, langs: Sequence[str], reference: str, splits: Sequence[str] | None = None) -> dict:
        """``{split: {"images": embeddings, "captions": {lang: (texts, image rows)}}}``: Flickr8K's official
        ``split`` photos with ``reference``'s f8k-full captions and each of ``langs``' MultiScript30k lines (the
        first ``max_photos`` photos of each split only, where given)."""
        from ..data.f8kfull import load_f8kfull
        from ..data.flickr8kcn import official_split
        from ..data.multiscript30k import MultiScript30kReader
        from ..util.paths import cache_root
        from .photos import embed_photos

        corpus = load_f8kfull(self.root, langs=[reference])
        reader = MultiScript30kReader(self.root)
        lines = {lang: reader.all_lines([lang]) for lang in langs}
        split_of, out = official_split(self.root), {}
        for split in splits or self.splits:
            photos = sorted(p for p, s in split_of.items() if s == split and p in corpus.photos)[: self.max_photos]
            feats = embed_photos(
                model,
                [corpus.photos[p].path for p in photos],
                cache_root(self.root) / "features",
                progress=self.progress,
            )
            row = {p: i for i, p in enumerate(photos[i] for i in feats.index)}
            caps = {
                reference: [
                    (c.text, row[c.photo_id])
                    for c in corpus.captions
                    if c.split == split and c.lang == reference and c.photo_id in row
                ]
            }
            for lang in langs:
                caps[lang] = [(x.text, row[x.photo_id]) for x in lines[lang] if x.photo_id in row]
            out[split] = {
                "images": feats.embeddings,
                "captions": {k: ([t for t, _ in v], np.array([r for _, r in v])) for k, v in caps.items()},
            }
        return out

    def mean_recall(self, model: Any, gallery: dict, lang: str, caption_emb: np.ndarray | None = None) -> dict:
        """``{"mr", "n_images", "n_captions"}`` of ``lang``'s captions in ``gallery`` (embedded as a query in
        ``lang`` is, unless ``caption_emb`` gives them), ranked by the evaluator's scorer."""
        from .retrieval import evaluate_by_language

        texts, rows = gallery["captions"][lang]
        if caption_emb is None:
            caption_emb = model.encode_text(texts, lang)
        m = evaluate_by_language(
            gallery["images"], caption_emb, rows, [lang] * len(rows), score_fn=self.scores(model, lang)
        )[lang]
        return {"mr": m["mr"], "n_images": m["n_images"], "n_captions": m["n_captions"]}

    def evaluate(self, model: Any) -> dict:
        from ..languages import serving_status

        # the languages it trained on (a checkpoint `polyvse adapt` taught lists its adapted ones too: they have
        # no f8k-full captions, and are scored on their MultiScript30k lines below when ``langs`` names them)
        trained = [x for x in model.languages if serving_status(model, x) == "trained"]
        rows: dict[str, dict] = {}
        for ref in trained:  # one gallery build per trained language (its f8k-full captions)
            gals = self.galleries(model, [], ref)
            rows[ref] = {
                "lang": ref,
                "status": serving_status(model, ref),
                "captions": "f8k-full (human)",
                **{s: self.mean_recall(model, g, ref) for s, g in gals.items()},
            }
        readable = [x for x in self.langs if serving_status(model, x)]
        gals = self.galleries(model, readable, trained[0])
        for lang in self.langs:
            status = serving_status(model, lang)
            row = {
                "lang": lang,
                "status": status,
                "captions": "MultiScript30k (machine-translated)",
                **({"taught": taught_by(model, lang)} if status == "adapted" else {}),
            }
            if status:
                row.update({s: self.mean_recall(model, g, lang) for s, g in gals.items()})
            rows[lang + MT_SUFFIX if lang in rows else lang] = row
        return rows

    def table(self, result: dict) -> str:
        from ..languages import language_name
        from .report import markdown_rows

        splits = [s for s in self.splits if any(s in r for r in result.values())]
        head = ["code", "language", "served as", "captions", *[f"{s} mR" for s in splits], "photos"]
        body = [
            [
                name,
                language_name(r["lang"]),
                served_as(r),
                r["captions"],
                *[f"{r[s]['mr']:.1f}" if s in r else "-" for s in splits],
                "/".join(str(r[s]["n_images"]) for s in splits if s in r) or "-",
            ]
            for name, r in result.items()
        ]
        return markdown_rows(head, body)


def taught_by(model: Any, lang: str) -> str:
    """How `polyvse adapt` taught ``lang`` to ``model``: "teacher+subwords, 26,887 lines" (its checkpoint's record)."""
    records = getattr(model, "adapted_languages", None)
    if records is None:  # a numpy model: its checkpoint config says
        records = getattr(getattr(model, "checkpoint", None), "adapted_languages", None)
    record = (records or {}).get(lang) or {}
    if not isinstance(record, dict) or not record:
        return "polyvse adapt"
    method = record.get("method", "?") + ("+subwords" if record.get("subwords") else "")
    lines = f", {record['lines']:,} lines" if isinstance(record.get("lines"), int) else ""
    return method + lines


def served_as(row: dict) -> str:
    """A row's "served as" cell: its status ("not served" when the model cannot read it), and how an adapted
    language was taught."""
    if not row.get("status"):
        return "not served"
    return row["status"] + (f" ({row['taught']})" if row.get("taught") else "")
