"""`polyvse evaluate --checkpoint DIR (--dataset NAME | --images DIR --captions FILE) [--split S] [--json OUT]`,
`polyvse evaluate --checkpoint DIR --task crosslingual|sts|words [--json OUT]` and
`polyvse evaluate --checkpoint DIR --task languages [--langs L,..] [--split val|test] [--json OUT]`: each task one
evaluator of polyvse.evaluation.tasks."""
from __future__ import annotations

from pathlib import Path

from polyvse.errors import DataError
from polyvse.util.paths import cache_root, data_root

from .shared import add_device_args, add_photo_fit_arg, squash_of


def register(sub) -> None:
    p = sub.add_parser("evaluate", help="evaluate a saved model on a dataset (per-language retrieval)")
    p.add_argument("--checkpoint", required=True, help="checkpoint folder")
    p.add_argument("--task", default="retrieval", choices=["retrieval", "crosslingual", "sts", "words", "languages"],
                   help="retrieval (default): per-language image-sentence retrieval on --dataset or --images; "
                        "crosslingual: caption-caption retrieval on F8K-ML test and Multi30K test_2016 (the "
                        "model's training photos left out); sts: SemEval STS Pearson x 100; words: word "
                        "translation P@1 on the MUSE dictionaries; languages: mR of every language the model serves (trained: "
                        "f8k-full captions; --langs: MultiScript30k lines) on Flickr8K's official --split photos, "
                        "ranked as search ranks")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--dataset", help="a dataset name from `polyvse data list`")
    src.add_argument("--images", help="folder of photos (with --captions): your own data")
    p.add_argument("--captions", help="captions file (CSV or JSONL: image, lang, caption) for --images")
    p.add_argument("--lang", default="en", help="language of captions without a lang field (generic data)")
    p.add_argument("--split", help="evaluate this split only (default: test for built-in datasets, all for "
                                   "your own data); --task languages: val or test (default), or val,test")
    p.add_argument("--langs", help="--task languages: the MultiScript30k languages to score beside the trained ones "
                                   "(default es,ar,zh,qu,gn)")
    p.add_argument("--max-photos", type=int, help="--task languages: the first N photos of each split only")
    p.add_argument("--data-root", help="data root (default: $POLYVSE_DATA, else ~/.cache/polyvse)")
    p.add_argument("--json", help="also write the metrics to this JSON file")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument("--scoring", choices=["checkpoint", "similarity"], default="checkpoint",
                   help="how retrieval ranks: as the checkpoint says (default; CSLS where it carries CSLS banks) or "
                        "by the model's similarity alone (to compare)")
    p.add_argument("--csls-k", type=int, help="CSLS scoring with this many neighbours instead of the checkpoint's "
                                              "(its banks stay the same)")
    add_photo_fit_arg(p)
    add_device_args(p)
    p.set_defaults(func=run)


def run(args) -> int:
    import polyvse
    from polyvse.data.registry import load_dataset
    from polyvse.evaluation.report import markdown_table
    from polyvse.evaluation.retrieval import RetrievalEvaluator
    from polyvse.util.atomic import write_json_atomic

    root = data_root(args.data_root)
    if args.task != "retrieval":
        return run_task(args, root)
    if not (args.images or args.dataset):
        raise DataError("--task retrieval needs --dataset NAME or --images DIR --captions FILE")
    if args.images:
        if not args.captions:
            raise DataError("--images needs --captions (a CSV or JSONL file with image, lang, caption)")
        corpus = load_dataset("generic", root, images=args.images, captions=args.captions,
                              default_lang=args.lang)
        split = args.split
        name = f"{args.captions}"
        for problem in getattr(corpus, "problems", []):
            print(f"skipped: {problem}")
    else:
        corpus = load_dataset(args.dataset, root)
        split = args.split or "test"
        name = args.dataset
    model = polyvse.load(args.checkpoint, device=args.device, squash_photos=squash_of(args))
    set_scoring(model, args.scoring, args.csls_k)
    result = RetrievalEvaluator.on_corpus(corpus, cache_root(root) / "features", split=split,
                                          progress=not args.quiet)(model)
    result = {"dataset": name, "split": split or "all", "checkpoint": str(Path(args.checkpoint)),
              "retrieval": model.checkpoint.retrieval, **result}
    print(f"\n{name} · split {result['split']}\n")
    print(markdown_table(result["languages"]))
    others = {lang: how for lang, how in result.get("served_as", {}).items() if how != "trained"}
    if others:
        print("\nserved " + "; ".join(f"{how}: {', '.join(x for x in others if others[x] == how)}"
                                      for how in sorted(set(others.values())))
              + " (scored as search embeds a query in that language)")
    if result["skipped_languages"]:
        print(f"\nnot evaluated (the model cannot read them): {', '.join(result['skipped_languages'])}")
    if result["n_failed_photos"]:
        print(f"\n{result['n_failed_photos']} photos could not be read and were skipped")
    if args.json:
        from polyvse.provenance import provenance

        write_json_atomic(Path(args.json), {**result, "provenance": provenance(model=args.checkpoint)})
    return 0


def set_scoring(model, scoring: str, csls_k: int | None) -> None:
    """--scoring similarity drops the checkpoint's CSLS banks; --csls-k scores CSLS with another k."""
    if scoring == "similarity":
        if csls_k is not None:
            raise DataError("--csls-k applies to CSLS scoring; drop it or --scoring similarity")
        model.checkpoint.hubness = None
    elif csls_k is not None:
        if model.hubness is None:
            raise DataError(f"--csls-k: the checkpoint carries no CSLS banks (it was not trained with "
                            f"model.retrieval_scoring csls); it scores by {model.similarity_name}")
        try:
            model.checkpoint.hubness = model.hubness.with_k(csls_k)
        except ValueError as exc:
            raise DataError(f"--csls-k {csls_k}: {exc}") from None


def run_task(args, root: Path) -> int:
    import polyvse
    from polyvse.modules.pretrained.captions import use_sentence_cache
    from polyvse.util.atomic import write_json_atomic

    if args.dataset or args.images:
        raise DataError(f"--task {args.task} uses its own data (see --help); drop --dataset/--images")
    if args.task != "languages" and (args.langs or args.max_photos is not None):
        raise DataError("--langs and --max-photos are options of --task languages")
    model = use_sentence_cache(polyvse.load(args.checkpoint, device=args.device), root)
    evaluator = task_evaluator(args, root)
    why = evaluator.skip_reason(model)
    if why:
        raise DataError(f"--task {args.task} does not apply to this model (languages: "
                        f"{', '.join(model.languages)}; {why})")
    result = evaluator.evaluate(model)
    print(evaluator.table(result))
    if args.json:
        from polyvse.provenance import provenance

        extra = {"splits": list(evaluator.splits), "langs": evaluator.langs} if args.task == "languages" else {}
        write_json_atomic(Path(args.json), {"task": args.task, "checkpoint": str(Path(args.checkpoint)), **extra,
                                            "result": result, "provenance": provenance(model=args.checkpoint)})
    return 0


def task_evaluator(args, root: Path):
    """The evaluator of ``--task`` (not retrieval), with its options from the command line."""
    from polyvse.evaluation.languages import LanguagesEvaluator
    from polyvse.evaluation.tasks import EVALUATORS

    if args.task != "languages":
        return EVALUATORS[args.task](root)
    splits = [s.strip() for s in (args.split or "test").split(",") if s.strip()]
    bad = [s for s in splits if s not in ("val", "test")]
    if bad:
        raise DataError(f"--task languages scores Flickr8K's official val and test photos, not {', '.join(bad)}")
    langs = [x.strip() for x in args.langs.split(",") if x.strip()] if args.langs else None
    return LanguagesEvaluator(root, **({"langs": langs} if langs is not None else {}), splits=splits,
                              max_photos=args.max_photos, progress=not args.quiet)
