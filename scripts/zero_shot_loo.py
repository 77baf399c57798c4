"""Zero-shot languages, leave one language out: how a language the towers read but no part was taught scores, with
each fallback part, measured on the languages at hand by holding each out in turn.

    python scripts/zero_shot_loo.py --checkpoint runs/model/checkpoint --held-out es,ar,de,fr,cs,zh \\
        --teach es,ar,zh,qu,gn,de,fr,cs --lines 4000 --work runs/zero-shot-loo --out results/zero-shot-loo.json

For each held-out language H, on Flickr8K's official val photos (choices are made on val; test is not computed
here):

* ``mean``: the mean of the trained languages' parts other than H (today's fallback, ``polyvse.model.zero_shot``);
* ``part:<code>``: one trained language's own part alone (each of them);
* ``mean_same_towers``: the mean of the parts of the trained languages that the same towers read as H (USE reads
  no Czech, so the Czech part learnt its map with USE's slice at zero; for a language USE reads, it is left out);
* ``ensemble``: every trained part's joint-space embedding of the caption, each unit-normalised, averaged: the mean
  of the parts' outputs after the shared head (not of their weights, as ``mean``);
* ``centred``: the mean part reading H's tower vectors moved by the difference of the languages' means, ``x - mu_H +
  mu_en`` (language-mean centring, Libovický et al. 2020: what tells languages apart in a multilingual encoder is
  largely a per-language offset); ``mu_H`` from H's own training lines alone (``--lines`` of them, monolingual: no
  pairing is used), ``mu_en`` from the English counterparts of every ``--teach`` language's lines;
* ``slice:<tower>x<w>``: the mean part reading H's vectors with one tower's slice scaled by ``w`` (0 or 0.5): whether
  one tower reads H worse than the other (the model trained with tower dropout, so a zeroed slice is an input it
  knows);
* ``universal``: one part learnt by teacher learning (``polyvse.adaptation.teacher``, plain Linear: no subword
  student, which is language-specific) from that mean, on the training lines of every ``--teach`` language but H
  (``--lines`` a language, English counterparts; Multi30K task1 lines for de/fr/cs, MultiScript30k for es/ar/zh/qu/gn;
  every evaluation photo and sentence left out by ``polyvse.data.exclusion``): the model's own English embedding
  of the counterpart is the target, so the part learns to read *any* language onto the shared space rather than
  averaging five language-specific maps.

H's captions: f8k-full's human captions for a language the model trained on (de, fr, cs, zh) and MultiScript30k's
line of each photo for es and ar (one caption a photo). A trained H is only partly held out -- its part is left
out, but the towers' tail and the head trained on its captions too -- so its rows are an upper bound (and its CSLS penalties use its own caption bank); es and ar are held out
entirely. The reference is French through its own trained part on the same photos (the goal: a
zero-shot language within 5 mR of French). Resumable: each teacher run keeps its state under ``--work``, and the
record is written after every held-out language.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

SLICE_WEIGHTS = (0.0, 0.5)  # ``slice:<tower>x<w>``: one tower's slice of a held-out language's vectors scaled


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--held-out", default="es,ar,de,fr,cs,zh", help="languages scored zero-shot (default %(default)s)")
    p.add_argument(
        "--teach",
        default="es,ar,zh,qu,gn,de,fr,cs",
        help="languages whose lines teach the universal part (default %(default)s)",
    )
    p.add_argument("--lines", type=int, default=4000, help="training lines per teaching language (default %(default)s)")
    p.add_argument("--reference", default="fr")
    p.add_argument("--work", required=True, help="folder for teacher states")
    p.add_argument("--out", required=True, help="JSON record to write")
    p.add_argument("--data-root")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-photos", type=int, help="the first N val photos only (a smoke run)")
    p.add_argument("--quiet", action="store_true")
    return p.parse_args(argv)


def teaching_pairs(root, lang: str, lines: int, seed: int) -> list[tuple[str, str]]:
    """(sentence in ``lang``, English counterpart) of Multi30K's training split, no evaluation photo or sentence
    (Multi30K's human lines for de/fr/cs, MultiScript30k's for the others), a seeded draw of ``lines`` of them."""
    import numpy as np

    from polyvse.adaptation.multiscript_lines import multiscript_pairs

    pairs = [(t, e) for t, e, _ in multiscript_pairs(root, lang, "en")]
    order = np.random.default_rng([seed, len(pairs)]).permutation(len(pairs))
    return [pairs[i] for i in order[:lines]]


def tower_slices(captions) -> dict[str, tuple[int, int]]:
    """Each tower's columns ``(start, end)`` in the fused vector a part reads."""
    out, start = {}, 0
    for tower in captions.towers:
        out[tower.name] = (start, start + tower.dim)
        start += tower.dim
    return out


def output_ensemble(model, vecs, parts, texts):
    """Each part's unit joint-space embedding of the captions (tower vectors ``vecs``), averaged and normalised."""
    import torch

    from polyvse.model.zero_shot import encode_through_part

    with torch.no_grad():
        each = [
            torch.nn.functional.normalize(encode_through_part(model.model, vecs, part.eval(), texts), dim=-1)
            for part in parts
        ]
    return torch.nn.functional.normalize(torch.stack(each).mean(0), dim=-1).cpu().numpy()


def main(argv=None) -> int:
    import torch

    import polyvse
    from polyvse.adaptation import trained_languages
    from polyvse.adaptation.adapt import held_out_rows, teacher_targets
    from polyvse.adaptation.curves import scores_through_part
    from polyvse.adaptation.line_vectors import line_vectors, towers_reading
    from polyvse.adaptation.options import TeacherSettings
    from polyvse.adaptation.teacher import fit_teacher
    from polyvse.evaluation.languages import LanguagesEvaluator
    from polyvse.model.zero_shot import fallback_part
    from polyvse.modules.pretrained.cache import sentence_cache_dir
    from polyvse.provenance import provenance
    from polyvse.util.atomic import write_json_atomic
    from polyvse.util.paths import data_root

    args = parse_args(argv)
    t0, root, progress = time.perf_counter(), data_root(args.data_root), not args.quiet
    work, cache = Path(args.work), sentence_cache_dir(args.data_root)
    work.mkdir(parents=True, exist_ok=True)
    held_out = [x.strip() for x in args.held_out.split(",") if x.strip()]
    teach = [x.strip() for x in args.teach.split(",") if x.strip()]
    model = polyvse.load(args.checkpoint, device="cpu")
    encoder, trained = model.model.text_encoder, trained_languages(model)
    evaluator = LanguagesEvaluator(root, [], splits=("val",), max_photos=args.max_photos, progress=progress)
    unseen = [x for x in held_out if x not in trained]
    gallery_of = evaluator.galleries(model, unseen, args.reference)  # the unseen languages' lines + the reference's
    reference = evaluator.mean_recall(model, gallery_of["val"], args.reference)

    def vectors(texts, lang):
        return torch.from_numpy(line_vectors(model.captions, texts, lang, cache, progress, encoder))

    pairs = {lang: teaching_pairs(root, lang, args.lines, args.seed) for lang in dict.fromkeys([*teach, *unseen])}
    x_new = {lang: vectors([a for a, _ in p], lang) for lang, p in pairs.items()}
    x_en = {lang: vectors([b for _, b in p], "en") for lang, p in pairs.items() if lang in teach}
    targets = {lang: teacher_targets(model.model, x, ["en"] * len(x)) for lang, x in x_en.items()}
    mu_en = torch.cat(list(x_en.values())).mean(0)
    record = {
        "checkpoint": str(args.checkpoint),
        "split": "val",
        "lines_per_language": args.lines,
        "teach": {lang: len(pairs[lang]) for lang in teach},
        "trained": trained,
        "reference": {args.reference: {"val": reference}},
        "held_out": {},
        "complete": False,
        "provenance": provenance(
            ["python", "scripts/zero_shot_loo.py", *(argv if argv is not None else sys.argv[1:])], args.checkpoint
        ),
    }
    for lang in held_out:
        gals = gallery_of if lang in unseen else evaluator.galleries(model, [], lang)
        vecs = {"val": vectors(gals["val"]["captions"][lang][0], lang)}
        others = [x for x in trained if x != lang]
        mean = fallback_part(encoder, "mean", others)
        taught = [x for x in teach if x != lang]
        x = torch.cat([x_new[t] for t in taught])
        t = torch.cat([targets[t] for t in taught])
        val, train = held_out_rows(len(x), args.seed)
        settings = TeacherSettings(subwords=False, seed=args.seed)
        universal, details = fit_teacher(
            model.model,
            mean,
            x[train],
            t[train],
            x[val],
            t[val],
            settings,
            state_path=work / f"universal-without-{lang}.state.pt",
            identity={
                "checkpoint": str(Path(args.checkpoint).resolve()),
                "without": lang,
                "teach": taught,
                "lines": args.lines,
            },
            resume=True,
            progress=progress,
            desc=f"universal part without {lang}",
        )
        row = {
            "captions": "MultiScript30k (machine-translated)" if lang in unseen else "f8k-full (human)",
            "held_out": "entirely" if lang in unseen else "its part only (the tail and head trained on it)",
            "taught_from": taught,
            "teacher": {"epochs": details["epochs"], "best_epoch": details["best_epoch"]},
        }
        towers = towers_reading(model.captions, lang)
        same = [x for x in others if towers_reading(model.captions, x) == towers]
        parts = {"mean": mean, "universal": universal, **{f"part:{x}": encoder.universal[x] for x in others}}
        if same and same != others:
            parts["mean_same_towers"] = fallback_part(encoder, "mean", same)
            row["same_towers"] = same
        for name, part in parts.items():
            row[name] = scores_through_part(evaluator, model, gals, vecs, lang, part, ["val"])["val"]
        moved = {"centred": vecs["val"] - x_new[lang].mean(0) + mu_en} if lang in unseen else {}
        for tower, (a, b) in tower_slices(model.captions).items():
            if tower in towers:
                for w in SLICE_WEIGHTS:
                    x_w = vecs["val"].clone()
                    x_w[:, a:b] *= w
                    moved[f"slice:{tower}x{w:g}"] = x_w
        for name, x_moved in moved.items():
            row[name] = scores_through_part(evaluator, model, gals, {"val": x_moved}, lang, mean, ["val"])["val"]
        parts = {**parts, **moved}
        row["ensemble"] = evaluator.mean_recall(
            model,
            gals["val"],
            lang,
            output_ensemble(
                model, vecs["val"], [encoder.universal[x] for x in others], gals["val"]["captions"][lang][0]
            ),
        )
        for name in [*parts, "ensemble"]:
            row[name]["gap_to_reference"] = row[name]["mr"] - reference["mr"]
        best = max([*parts, "ensemble"], key=lambda name: row[name]["mr"])
        print(
            f"{lang}: mean {row['mean']['mr']:.1f}, universal {row['universal']['mr']:.1f}, best {best} "
            f"{row[best]['mr']:.1f} ({args.reference} {reference['mr']:.1f})",
            file=sys.stderr,
        )
        record["held_out"][lang] = row
        record["seconds"] = round(time.perf_counter() - t0)
        write_json_atomic(Path(args.out), record)
    record["complete"] = True
    record["seconds"] = round(time.perf_counter() - t0)
    write_json_atomic(Path(args.out), record)
    print(f"wrote {args.out} ({record['seconds']} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
