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
import functools
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
    p.add_argument("--seed", type=int, default=0, help="the parallel files' shuffle (which lines a size takes)")
    p.add_argument("--chosen-seeds", default="",
                   help="more training seeds (e.g. 1,2) for each language's adaptation chosen on val: its test mR is "
                        "then reported as the mean over seed 0 (the curve's point) and these")
    p.add_argument("--max-photos", type=int, help="the first N photos of each split only (a smoke run)")
    p.add_argument("--quiet", action="store_true")
    p.add_argument("--readme", action="store_true", help="rewrite README's adapt-curves block from the record")
    p.add_argument("--from-record", action="store_true",
                   help="measure nothing: rewrite README's block from the existing --out record")
    return p.parse_args(argv)


def chosen_adaptation(record: dict, lang: str) -> tuple[str, str, dict] | None:
    """(method, size, scores) of ``lang``'s adaptation with the best val mR (ties: fewer lines, then the method
    listed first), or None when none was measured: the choice is made on val only."""
    runs = [(method, size, sc) for method, by_size in record.get("adapted", {}).get(lang, {}).items()
            for size, sc in by_size.items() if "val" in sc]
    if not runs:
        return None
    lines = (lambda size: float("inf") if size == "all" else int(size))
    return max(runs, key=lambda r: (round(r[2]["val"]["mr"], 6), -lines(r[1])))


def chosen_pick(record: dict, lang: str) -> tuple[str, str, dict] | None:
    """What ``lang`` is served by on val: its chosen adaptation, or its best zero-shot fallback
    (``("zero-shot", how, scores)``) where that scores higher on val; None when nothing was measured."""
    z = record.get("zero_shot", {}).get(lang, {})
    best_z = max(z.items(), key=lambda kv: kv[1]["val"]["mr"]) if z else None
    pick = chosen_adaptation(record, lang)
    if best_z and (pick is None or best_z[1]["val"]["mr"] > pick[2]["val"]["mr"]):
        return "zero-shot", best_z[0], best_z[1]
    return pick


def seed_summary(record: dict, lang: str) -> dict | None:
    """{"seeds": n, "mean": {split: mR}, "sd": {split: mR}} of ``lang``'s chosen adaptation over its training seeds
    (``--chosen-seeds``), or None where only seed 0 was run or the chosen one is not the one the seeds ran."""
    runs = record.get("chosen_seeds", {}).get(lang)
    pick = chosen_adaptation(record, lang)
    if not runs or pick is None or (runs["method"], runs["size"]) != pick[:2] or len(runs["seeds"]) < 2:
        return None
    by_split = {s: [sc[s]["mr"] for sc in runs["seeds"].values()] for s in ("val", "test")}
    return {"seeds": len(runs["seeds"]), "mean": {s: float(np.mean(v)) for s, v in by_split.items()},
            "sd": {s: float(np.std(v, ddof=1)) for s, v in by_split.items()}}


def chosen_zero_shot(record: dict) -> tuple[str, float] | None:
    """The zero-shot fallback with the best mean val mR over the measured languages the towers read, or None."""
    means: dict[str, list[float]] = {}
    for by_how in record.get("zero_shot", {}).values():
        for how, sc in by_how.items():
            if "val" in sc:
                means.setdefault(how, []).append(sc["val"]["mr"])
    if not means:
        return None
    how = max(means, key=lambda h: sum(means[h]) / len(means[h]))
    return how, sum(means[how]) / len(means[how])


def markdown(record: dict) -> str:
    """README's adapt-curves block: val mR of every zero-shot fallback and adaptation, test mR only for the choice
    made on val (the test split is reported once, for what was chosen)."""
    from polyvse.evaluation.report import markdown_rows

    ref_lang, ref = next(iter(record["reference"].items()))
    zs = chosen_zero_shot(record)
    sizes = sorted({size for by_m in record.get("adapted", {}).values() for by_s in by_m.values() for size in by_s},
                   key=lambda x: float("inf") if x == "all" else int(x))
    methods = sorted({m for by_m in record.get("adapted", {}).values() for m in by_m})
    head = (["language", "zero-shot val (fallback)"] + [f"{m} {s} val" for m in methods for s in sizes]
            + ["chosen on val", "its test mR", f"test mR / {ref_lang}'s"])
    body = []
    for lang in record.get("languages_done", list(record.get("zero_shot", {}))):
        z = record.get("zero_shot", {}).get(lang, {})
        best_z = max(z.items(), key=lambda kv: kv[1]["val"]["mr"]) if z else None
        row = [lang, f"{best_z[1]['val']['mr']:.1f} ({best_z[0]})" if best_z else "not read"]
        runs = record.get("adapted", {}).get(lang, {})
        row += [f"{runs[m][s]['val']['mr']:.1f}" if s in runs.get(m, {}) else "-" for m in methods for s in sizes]
        pick = chosen_pick(record, lang)
        seeds = seed_summary(record, lang) if pick and pick[0] != "zero-shot" else None
        if pick:
            test = seeds["mean"]["test"] if seeds else pick[2]["test"]["mr"]
            cell = f"{test:.1f} ± {seeds['sd']['test']:.1f} ({seeds['seeds']} seeds)" if seeds else f"{test:.1f}"
            row += [f"{pick[0]} {pick[1]}", cell, f"{100 * test / ref['test']['mr']:.0f}%"]
        else:
            row += ["-", "-", "-"]
        body.append(row)
    from polyvse.provenance import machine_line

    where = record.get("provenance", record)  # records before the provenance block: its fields at the top
    machine = machine_line(where["machine"]) if isinstance(where.get("machine"), dict) else where.get("machine", "?")
    note = (f"`{record['checkpoint']}`; MultiScript30k lines (machine translations of Multi30K's English line, one "
            f"a photo) of Flickr8K's official val and test photos; parallel files from `polyvse data parallel` "
            f"(pivot {record['pivot']}, every evaluation photo and sentence left out); the reference, {ref_lang} "
            f"(trained), scores val {ref['val']['mr']:.1f} / test {ref['test']['mr']:.1f} mR on the same photos' "
            f"{ref_lang} captions. Zero-shot: the best fallback part on val; on every language together the best "
            f"fallback on val is {zs[0]!r} ({zs[1]:.1f}). A chosen adaptation's test mR is the mean ± sd over its "
            f"training seeds where more than one ran (the choice itself is seed 0's val). Record `{record.get('out', '?')}` ({str(where.get('date', '?'))[:10]}, "
            f"{machine}{'' if record.get('complete') else '; PARTIAL: the run was stopped'}).\n\n")
    return note + markdown_rows(head, body)


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
    # ranked as search ranks: CSLS against the checkpoint's banks when it has them (``lang``'s caption bank, the
    # pooled one for a language without), else the model's similarity
    m = evaluate_by_language(gallery["images"], caption_emb, rows, [lang] * len(rows),
                             score_fn=functools.partial(model.retrieval_scores, lang=lang))[lang]
    return {"mr": m["mr"], "n_images": m["n_images"], "n_captions": m["n_captions"]}


def scores_through_part(model, gals: dict, vecs: dict, lang: str, part) -> dict:
    from polyvse.adaptation.zero_shot import encode_through_part

    with torch.no_grad():  # a subword student also reads the captions themselves
        return {split: mean_recall(model, g, lang, encode_through_part(model.model, vecs[split], part.eval(),
                                                                       g["captions"][lang][0])
                                   .cpu().numpy()) for split, g in gals.items()}


#: a curve's method label -> (polyvse adapt's --method, its teacher options)
SUBWORDS = "teacher+subwords"
TRAINED = ("teacher", SUBWORDS)  # the methods a training seed changes (procrustes on the same lines is fixed)


class Point:
    """One language's adaptations, each run (or reused from its folder under ``--work``) and scored."""

    def __init__(self, args, model, gals, vecs, lang, pairs, cache, progress):
        self.args, self.model, self.gals, self.vecs = args, model, gals, vecs
        self.lang, self.pairs, self.cache, self.progress = lang, pairs, cache, progress

    def run(self, method: str, size: int | None, seed: int = 0) -> dict:
        import polyvse
        from polyvse.adaptation import AdaptRequest, TeacherSettings, adapt_language

        out = Path(self.args.work) / (f"{self.lang}-{method}-{size or 'all'}" + (f"-seed{seed}" if seed else ""))
        if not (out / "config.json").is_file():
            adapt_language(AdaptRequest(Path(self.args.checkpoint), self.lang, self.pairs, out,
                                        method="teacher" if method == SUBWORDS else method,
                                        teacher=TeacherSettings(subwords=method == SUBWORDS, seed=seed),
                                        pivot_lang=self.args.pivot, lines=size, resume=True, cache_dir=self.cache,
                                        progress=self.progress))
        adapted = polyvse.load(out, device="cpu")
        part = (adapted.subword_student(self.lang) if method == SUBWORDS
                else adapted.model.text_encoder.universal[self.lang])
        scores = scores_through_part(self.model, self.gals, self.vecs, self.lang, part)
        print(f"{self.lang} {method} {size or 'all'}" + (f" seed {seed}" if seed else "") + ": " + ", ".join(
            f"{s} mR {v['mr']:.1f}" for s, v in scores.items()), file=sys.stderr)
        return {**scores, "adaptation": adapted.adapted_languages[self.lang]}


def main(argv=None) -> int:
    import polyvse
    from polyvse.adaptation import trained_languages
    from polyvse.adaptation.line_vectors import line_vectors
    from polyvse.adaptation.multiscript_lines import write_multiscript_parallel
    from polyvse.adaptation.zero_shot import fallback_part
    from polyvse.atomic import write_json_atomic
    from polyvse.models.pretrained.cache import sentence_cache_dir
    from polyvse.paths import data_root

    args = parse_args(argv)
    if args.from_record:
        import json

        return readme_block(json.loads(Path(args.out).read_text(encoding="utf-8")))
    t0, root, progress = time.perf_counter(), data_root(args.data_root), not args.quiet
    work, cache = Path(args.work), sentence_cache_dir(args.data_root)
    langs = [x.strip() for x in args.langs.split(",") if x.strip()]
    sizes = [None if s == "all" else int(s) for s in args.sizes.split(",")]
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    extra_seeds = [int(x) for x in args.chosen_seeds.split(",") if x.strip()]
    model = polyvse.load(args.checkpoint, device="cpu")
    gals = galleries(model, root, langs, args.reference, progress, args.max_photos)
    from polyvse.provenance import provenance

    record = {"checkpoint": str(args.checkpoint), "pivot": args.pivot, "seed": args.seed,
              "provenance": provenance(["python", "scripts/adapt_curves.py", *(argv if argv is not None
                                                                               else sys.argv[1:])], args.checkpoint),
              "out": str(args.out), "complete": False, "languages_done": [],
              "captions": "MultiScript30k machine translations of Multi30K's English line (one a photo)",
              "reference": {args.reference: {s: mean_recall(model, g, args.reference, model.encode_text(
                  g["captions"][args.reference][0], args.reference)) for s, g in gals.items()}},
              "zero_shot": {}, "adapted": {}}
    for lang in langs:
        vecs = {s: torch.from_numpy(line_vectors(model.captions, g["captions"][lang][0], lang, cache, progress,
                                                model.model.text_encoder))
                for s, g in gals.items()}
        record["zero_shot"][lang] = {how: scores_through_part(model, gals, vecs, lang, fallback_part(
            model.model.text_encoder, how, trained_languages(model))) for how in ["mean"] + trained_languages(model)}
        pairs = work / f"{lang}-{args.pivot}.tsv"
        if not pairs.is_file():
            record.setdefault("parallel_files", {})[lang] = write_multiscript_parallel(root, lang, pairs, args.pivot,
                                                                                       seed=args.seed)
        point = Point(args, model, gals, vecs, lang, pairs, cache, progress)
        for method in methods:
            for size in sizes:
                record["adapted"].setdefault(lang, {}).setdefault(method, {})[str(size or "all")] = point.run(
                    method, size)
        pick = chosen_adaptation(record, lang)
        if extra_seeds and pick and pick[0] in TRAINED:  # the choice is seed 0's val; more seeds for its test
            method, size = pick[:2]
            record.setdefault("chosen_seeds", {})[lang] = {"method": method, "size": size, "seeds": {
                "0": pick[2], **{str(sd): point.run(method, None if size == "all" else int(size), sd)
                                 for sd in extra_seeds}}}
        # a partial record after each language: a stopped run keeps what it measured (and resumes its adaptations)
        record["languages_done"].append(lang)
        record["seconds"] = round(time.perf_counter() - t0)
        write_json_atomic(Path(args.out), record)
    record["complete"] = True
    record["seconds"] = round(time.perf_counter() - t0)
    write_json_atomic(Path(args.out), record)
    print(f"wrote {args.out} ({record['seconds']} s)", file=sys.stderr)
    return readme_block(record) if args.readme else 0


def readme_block(record: dict) -> int:
    from polyvse_train.zoo.report import update_readme_block

    table = markdown(record)
    print(table)
    if not update_readme_block(Path(__file__).resolve().parents[1] / "README.md", table, tag="adapt-curves"):
        print("README.md has no adapt-curves block", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
