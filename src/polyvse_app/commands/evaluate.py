"""`polyvse evaluate --checkpoint DIR (--dataset NAME | --images DIR --captions FILE) [--split S] [--json OUT]`,
`polyvse evaluate --checkpoint DIR --task crosslingual|sts|words [--json OUT]` and
`polyvse evaluate --checkpoint DIR --task languages [--langs L,..] [--split val|test] [--json OUT]`: each task one
evaluator of polyvse.evaluation.tasks. Without torch (the light install) the model is the numpy one search serves,
photos through the checkpoint's ONNX image encoder (polyvse.model.loading.photo_model); --task words scores the
torch text encoder's word vectors, so it needs torch."""

from __future__ import annotations

from pathlib import Path

from polyvse.errors import DataError
from polyvse.util.paths import cache_root, data_root

from .shared import add_device_args, add_photo_fit_arg, squash_of


def register(sub) -> None:
    p = sub.add_parser("evaluate", help="evaluate a saved model on a dataset (per-language retrieval)")
    p.add_argument("--checkpoint", required=True, help="checkpoint folder")
    p.add_argument(
        "--task",
        default="retrieval",
        choices=["retrieval", "crosslingual", "sts", "words", "languages"],
        help="retrieval (default): per-language image-sentence retrieval on --dataset or --images; "
        "crosslingual: caption-caption retrieval on F8K-ML test and Multi30K test_2016 (the "
        "model's training photos left out); sts: SemEval STS Pearson x 100; words: word "
        "translation P@1 on the MUSE dictionaries; languages: mR of every language the model serves (trained: "
        "f8k-full captions; --langs: MultiScript30k lines) on Flickr8K's official --split photos, "
        "ranked as search ranks",
    )
    src = p.add_mutually_exclusive_group()
    src.add_argument("--dataset", help="a dataset name from `polyvse data list`")
    src.add_argument("--images", help="folder of photos (with --captions): your own data")
    p.add_argument("--captions", help="captions file (CSV or JSONL: image, lang, caption) for --images")
    p.add_argument("--lang", default="en", help="language of captions without a lang field (generic data)")
    p.add_argument(
        "--split",
        help="evaluate this split only (default: test for built-in datasets, all for "
        "your own data); --task languages: val or test (default), or val,test",
    )
    p.add_argument(
        "--langs",
        help="--task languages: the MultiScript30k languages to score beside the trained ones (default es,ar,zh,qu,gn)",
    )
    p.add_argument("--max-photos", type=int, help="--task languages: the first N photos of each split only")
    p.add_argument("--data-root", help="data root (default: $POLYVSE_DATA, else ~/.cache/polyvse)")
    p.add_argument("--json", help="also write the metrics to this JSON file")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument(
        "--scoring",
        choices=["checkpoint", "similarity"],
        default="checkpoint",
        help="how retrieval ranks: as the checkpoint says (default; CSLS where it carries CSLS banks) or "
        "by the model's similarity alone (to compare)",
    )
    p.add_argument(
        "--csls-k",
        type=int,
        help="CSLS scoring with this many neighbours instead of the checkpoint's (its banks stay the same)",
    )
    add_photo_fit_arg(p)
    add_device_args(p)
    p.set_defaults(func=run)


def run(args) -> int:
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
        corpus = load_dataset("generic", root, images=args.images, captions=args.captions, default_lang=args.lang)
        split = args.split
        name = f"{args.captions}"
        for problem in getattr(corpus, "problems", []):
            print(f"skipped: {problem}")
    else:
        corpus = load_dataset(args.dataset, root)
        split = args.split or "test"
        name = args.dataset
    model = photo_model(args.checkpoint, device=args.device, squash_photos=squash_of(args))
    set_scoring(model, args.scoring, args.csls_k)
    result = RetrievalEvaluator.on_corpus(corpus, cache_root(root) / "features", split=split, progress=not args.quiet)(
        model
    )
    result = {
        "dataset": name,
        "split": split or "all",
        "checkpoint": str(Path(args.checkpoint)),
        "retrieval": retrieval_of(model),
        **result,
    }
    print(f"\n{name} · split {result['split']}\n")
    print(markdown_table(result["languages"]))
    others = {lang: how for lang, how in result.get("served_as", {}).items() if how != "trained"}
    if others:
        print(
            "\nserved "
            + "; ".join(
                f"{how}: {', '.join(x for x in others if others[x] == how)}" for how in sorted(set(others.values()))
            )
            + " (scored as search embeds a query in that language)"
        )
    if result["skipped_languages"]:
        print(f"\nnot evaluated (the model cannot read them): {', '.join(result['skipped_languages'])}")
    if result["n_failed_photos"]:
        print(f"\n{result['n_failed_photos']} photos could not be read and were skipped")
    if args.json:
        from polyvse.provenance import provenance

        write_json_atomic(Path(args.json), {**result, "provenance": provenance(model=args.checkpoint)})
    return 0


def photo_model(path, device: str = "auto", squash_photos: bool | None = None):
    """The model that embeds photos and text: torch's where installed, else the numpy one with the checkpoint's
    ONNX image encoder (``polyvse.model.loading.photo_model``)."""
    from polyvse.model.loading import photo_model as load_photo_model

    return load_photo_model(path, device=device, squash_photos=squash_photos)


def text_model(path, device: str = "auto"):
    """The model of a text-only task: torch's where installed, else the numpy text model (no image encoder
    needed)."""
    from polyvse.errors import CheckpointError
    from polyvse.model.loading import load, query_model, uses_torch

    if uses_torch(device):
        return load(path, device=device)
    model = query_model(path)
    if model is None:
        raise CheckpointError(
            f"{path}: this checkpoint's text branch has no numpy path, so it needs torch: pip install 'polyvse[train]'"
        )
    return model


def torch_model(path, device: str, task: str):
    """``polyvse.load``'s model, for a task only torch computes; without torch, the message that says so."""
    import polyvse
    from polyvse.features.onnx_encoder import torch_installed

    from ..train_extra import needs_extra_message

    if not torch_installed():
        raise DataError(
            needs_extra_message(f"evaluate --task {task}") + " (it scores the torch text encoder's word vectors)"
        )
    return polyvse.load(path, device=device)


def set_scoring(model, scoring: str, csls_k: int | None) -> None:
    """--scoring similarity drops the checkpoint's CSLS banks; --csls-k scores CSLS with another k (the torch
    model's banks are its checkpoint's; a numpy model's are its own, read from the weights file)."""
    numpy_model = not hasattr(model.checkpoint, "hubness")
    if scoring == "similarity":
        if csls_k is not None:
            raise DataError("--csls-k applies to CSLS scoring; drop it or --scoring similarity")
        if numpy_model:
            model.hubness = None
        else:
            model.checkpoint.hubness = None
    elif csls_k is not None:
        if model.hubness is None:
            raise DataError(
                f"--csls-k: the checkpoint carries no CSLS banks (it was not trained with "
                f"model.retrieval_scoring csls); it scores by {model.similarity_name}"
            )
        try:
            if numpy_model:
                model.hubness = numpy_banks_with_k(model.checkpoint.weights, csls_k)
            else:
                model.checkpoint.hubness = model.hubness.with_k(csls_k)
        except ValueError as exc:
            raise DataError(f"--csls-k {csls_k}: {exc}") from None


def numpy_banks_with_k(weights: Path, k: int):
    """A numpy model's CSLS banks (``polyvse.csls.search.SearchHubness``) scored with ``k`` neighbours; ValueError
    where a bank has fewer than ``k`` rows, as ``HubnessBanks.with_k`` says."""
    from polyvse.csls.search import SearchHubness
    from polyvse.model.checkpoint import HubnessBankFile

    if isinstance(k, bool) or int(k) != k or k < 1:
        raise ValueError(f"csls k must be a positive integer, got {k!r}")
    banks = HubnessBankFile(weights)
    photos = banks.photos()
    if photos.ndim != 2 or photos.shape[0] < k:
        raise ValueError(f"the photo bank needs at least k={k} rows of embeddings, got shape {tuple(photos.shape)}")
    for lang, (_, shape) in banks.caption_shapes().items():
        if len(shape) != 2 or shape[1] != photos.shape[1] or shape[0] < k:
            raise ValueError(
                f"caption bank {lang!r}: shape {tuple(shape)}; needs at least k={k} rows of the "
                f"photo bank's width {photos.shape[1]}"
            )
    return SearchHubness.from_bank_file(int(k), banks)


def retrieval_of(model) -> dict:
    """How the run scored retrieval, as config.json's ``retrieval`` section says it (after --scoring/--csls-k)."""
    if hasattr(model.checkpoint, "hubness"):  # the torch model's Checkpoint
        return model.checkpoint.retrieval
    if model.hubness is None:
        return {"scoring": "similarity"}
    return {**model.checkpoint.retrieval, "k": model.hubness.k}


def run_task(args, root: Path) -> int:
    from polyvse.modules.pretrained.captions import use_sentence_cache
    from polyvse.util.atomic import write_json_atomic

    if args.dataset or args.images:
        raise DataError(f"--task {args.task} uses its own data (see --help); drop --dataset/--images")
    if args.task != "languages" and (args.langs or args.max_photos is not None):
        raise DataError("--langs and --max-photos are options of --task languages")
    if args.task == "words":
        model = torch_model(args.checkpoint, args.device, args.task)
    elif args.task == "languages":
        model = photo_model(args.checkpoint, device=args.device)
    else:
        model = text_model(args.checkpoint, device=args.device)
    model = use_sentence_cache(model, root)
    evaluator = task_evaluator(args, root)
    why = evaluator.skip_reason(model)
    if why:
        raise DataError(
            f"--task {args.task} does not apply to this model (languages: {', '.join(model.languages)}; {why})"
        )
    result = evaluator.evaluate(model)
    print(evaluator.table(result))
    if args.json:
        from polyvse.provenance import provenance

        extra = {"splits": list(evaluator.splits), "langs": evaluator.langs} if args.task == "languages" else {}
        write_json_atomic(
            Path(args.json),
            {
                "task": args.task,
                "checkpoint": str(Path(args.checkpoint)),
                **extra,
                "result": result,
                "provenance": provenance(model=args.checkpoint),
            },
        )
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
    return LanguagesEvaluator(
        root,
        **({"langs": langs} if langs is not None else {}),
        splits=splits,
        max_photos=args.max_photos,
        progress=not args.quiet,
    )
