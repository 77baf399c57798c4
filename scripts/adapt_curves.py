"""Learning curves of `polyvse adapt`: per-language image-sentence mR on Flickr8K's official val and test photos of
a checkpoint taught each language from 100, 1k, 10k and all MultiScript30k lines (teacher and procrustes), against
zero-shot (every fallback part), with the model's French as the reference. Writes one JSON record.

    python scripts/adapt_curves.py --checkpoint runs/model/checkpoint --langs qu,gn,es,ar \\
        --sizes 100,1000,10000,all --methods teacher,procrustes --work runs/adapt-curves \\
        --out results/adapt-curves-f8k-full.json

Choices (the zero-shot fallback, the method, the size) are to be made on ``val``; ``test`` is recorded beside them
to be reported once for the chosen ones. The captions of a language are MultiScript30k's lines of the gallery's
photos (machine translations of Multi30K's English line: one caption a photo, so the gallery is the photos that
have one -- say so beside every figure). The parallel files come from `polyvse data parallel` (every evaluation
photo and sentence left out); photo vectors come from the checkpoint and never change. Resumable: finished
adaptations (their checkpoint folders under --work) are reused, a stopped teacher run resumes.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--langs", default="qu,gn,es,ar", help="MultiScript30k languages (default %(default)s)")
    p.add_argument("--sizes", default="100,1000,10000,all", help="lines per adaptation (default %(default)s)")
    p.add_argument("--methods", default="teacher,procrustes", help="adapt methods (default %(default)s)")
    p.add_argument("--pivot", default="en")
    p.add_argument("--reference", default="fr", help="a trained language scored on the same galleries")
    p.add_argument("--work", required=True, help="folder for parallel files and adapted checkpoints")
    p.add_argument("--out", required=True, help="JSON record to write (e.g. under results/)")
    p.add_argument("--data-root")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-photos", type=int, help="the first N photos of each split only (a smoke run)")
    p.add_argument("--quiet", action="store_true")
    return p.parse_args(argv)


def galleries(model, root: Path, langs: list[str], reference: str, progress: bool, max_photos=None,
              splits=("val", "test")) -> dict:
    """{split: {"images": embeddings, "captions": {lang: (texts, image rows)}}} for val and test (or `splits`)."""
    from polyvse.data.f8kfull import load_f8kfull
    from polyvse.data.flickr8kcn import official_split
    from polyvse.data.multiscript30k import MultiScript30kReader
    from polyvse.features.cache import extract_features
    from polyvse.paths import cache_root

    corpus = load_f8kfull(root, langs=[reference])
    reader = MultiScript30kReader(root)
    lines = {lang: reader.all_lines([lang]) for lang in langs}
    split_of, out = official_split(root), {}
    for split in splits:
        photos = sorted(p for p, s in split_of.items() if s == split and p in corpus.photos)[:max_photos]
        feats = extract_features([corpus.photos[p].path for p in photos], model.extractor,
                                 cache_root(root) / "features", progress=progress)
        ok = [photos[i] for i in feats.index]
        row = {p: i for i, p in enumerate(ok)}
        caps = {reference: [(c.text, row[c.photo_id]) for c in corpus.captions
                            if c.split == split and c.lang == reference and c.photo_id in row]}
        for lang in langs:
            caps[lang] = [(x.text, row[x.photo_id]) for x in lines[lang] if x.photo_id in row]
        out[split] = {"images": model.encode_image_features(feats.features),
                      "captions": {k: ([t for t, _ in v], np.array([r for _, r in v])) for k, v in caps.items()}}
    return out


def mean_recall(model, gallery: dict, lang: str, caption_emb: np.ndarray) -> dict:
    from polyvse.evaluation.retrieval import evaluate_by_language

    _, rows = gallery["captions"][lang]
    m = evaluate_by_language(gallery["images"], caption_emb, rows, [lang] * len(rows), score_fn=model.similarity)[lang]
    return {"mr": m["mr"], "n_images": m["n_images"], "n_captions": m["n_captions"]}


def scores_through_part(model, gals: dict, vecs: dict, lang: str, part) -> dict:
    from polyvse.adaptation.zero_shot import encode_through_part

    with torch.no_grad():
        return {split: mean_recall(model, g, lang, encode_through_part(model.model, vecs[split], part.eval())
                                   .cpu().numpy()) for split, g in gals.items()}


def main(argv=None) -> int:
    import polyvse
    from polyvse.adaptation import AdaptRequest, adapt_language, trained_languages
    from polyvse.adaptation.line_vectors import line_vectors
    from polyvse.adaptation.multiscript_lines import write_multiscript_parallel
    from polyvse.adaptation.zero_shot import fallback_part
    from polyvse.atomic import write_json_atomic
    from polyvse.models.pretrained.cache import sentence_cache_dir
    from polyvse.paths import data_root

    args = parse_args(argv)
    t0, root, progress = time.perf_counter(), data_root(args.data_root), not args.quiet
    work, cache = Path(args.work), sentence_cache_dir(args.data_root)
    langs = [x.strip() for x in args.langs.split(",") if x.strip()]
    sizes = [None if s == "all" else int(s) for s in args.sizes.split(",")]
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    model = polyvse.load(args.checkpoint, device="cpu")
    gals = galleries(model, root, langs, args.reference, progress, args.max_photos)
    record = {"checkpoint": str(args.checkpoint), "pivot": args.pivot, "seed": args.seed,
              "captions": "MultiScript30k machine translations of Multi30K's English line (one a photo)",
              "reference": {args.reference: {s: mean_recall(model, g, args.reference, model.encode_text(
                  g["captions"][args.reference][0], args.reference)) for s, g in gals.items()}},
              "zero_shot": {}, "adapted": {}}
    for lang in langs:
        vecs = {s: torch.from_numpy(line_vectors(model.captions, g["captions"][lang][0], lang, cache, progress))
                for s, g in gals.items()}
        record["zero_shot"][lang] = {how: scores_through_part(model, gals, vecs, lang, fallback_part(
            model.model.text_encoder, how, trained_languages(model))) for how in ["mean"] + trained_languages(model)}
        pairs = work / f"{lang}-{args.pivot}.tsv"
        if not pairs.is_file():
            record.setdefault("parallel_files", {})[lang] = write_multiscript_parallel(root, lang, pairs, args.pivot,
                                                                                       seed=args.seed)
        for method in methods:
            for size in sizes:
                out = work / f"{lang}-{method}-{size or 'all'}"
                if not (out / "config.json").is_file():
                    adapt_language(AdaptRequest(Path(args.checkpoint), lang, pairs, out, method=method,
                                                pivot_lang=args.pivot, lines=size, resume=True, cache_dir=cache,
                                                progress=progress))
                adapted = polyvse.load(out, device="cpu")
                scores = scores_through_part(model, gals, vecs, lang, adapted.model.text_encoder.universal[lang])
                record["adapted"].setdefault(lang, {}).setdefault(method, {})[str(size or "all")] = {
                    **scores, "adaptation": adapted.adapted_languages[lang]}
                print(f"{lang} {method} {size or 'all'}: val mR {scores['val']['mr']:.1f}", file=sys.stderr)
    record["seconds"] = round(time.perf_counter() - t0)
    write_json_atomic(Path(args.out), record)
    print(f"wrote {args.out} ({record['seconds']} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
