"""`polyvse adapt --checkpoint C --lang qu --parallel FILE --out C2 [--method teacher|procrustes|rcsls] ...`: teach
a frozen-tower model a new language from sentence pairs, no photos (``polyvse.adaptation``; docs/guides/adapt.md). The parallel file's format is in ``polyvse.adaptation.parallel_file``."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub) -> None:
    from polyvse.adaptation.options import TeacherSettings

    defaults = TeacherSettings()
    p = sub.add_parser(
        "adapt",
        help="teach a model a new language from a parallel file (no photos)",
        description="Teach a frozen-tower model a new language from sentence pairs: FILE holds "
        "sentences in the new language with their counterpart in a language the model "
        "knows, TSV (new<TAB>known, optional header such as 'qu<TAB>en') or JSONL "
        '({"text", "pivot_text", "pivot_lang"}). Old languages\' vectors and photo '
        "indexes stay valid.",
    )
    _add_input_arguments(p)
    _add_teacher_arguments(p, defaults)
    _add_subword_arguments(p, defaults)
    _add_run_arguments(p, defaults)
    p.set_defaults(func=run)


def _add_input_arguments(p) -> None:
    """What to adapt, from which pairs, into which folder, and how."""
    from polyvse.adaptation.options import METHODS

    p.add_argument("--checkpoint", required=True, help="checkpoint folder to adapt")
    p.add_argument("--lang", required=True, help="the new language (ISO 639 code, e.g. qu)")
    p.add_argument(
        "--parallel", required=True, metavar="FILE", help="the parallel file (.tsv/.txt or .jsonl, optionally .gz)"
    )
    p.add_argument("--out", required=True, help="folder of the adapted checkpoint (not the input's)")
    p.add_argument(
        "--method",
        default="teacher",
        choices=METHODS,
        help="teacher (default): learn the new part against the model's own embedding of each "
        "counterpart; procrustes / rcsls: map the new language's tower vectors onto the pivot's "
        "and use the pivot's part (seconds, no training)",
    )
    p.add_argument(
        "--pivot-lang",
        default="en",
        help="language of the counterparts in a TSV file, and of JSONL lines without pivot_lang (default en)",
    )
    p.add_argument("--lines", type=int, help="use the file's first N pairs only")


def _add_teacher_arguments(p, defaults) -> None:
    """Teacher learning's settings (``defaults``: TeacherSettings())."""
    from polyvse.adaptation.options import ZERO_SHOT_DEFAULT

    p.add_argument("--epochs", type=int, help="teacher epochs (default: enough for ~300 steps, 5 to 100)")
    p.add_argument("--batch-size", type=int, default=defaults.batch_size, help="teacher batch (default %(default)s)")
    p.add_argument("--lr", type=float, default=defaults.lr, help="teacher learning rate (default %(default)s)")
    p.add_argument(
        "--temperature", type=float, default=defaults.temperature, help="InfoNCE temperature (default %(default)s)"
    )
    p.add_argument(
        "--mse-weight",
        type=float,
        default=defaults.mse_weight,
        help="add this times the squared distance to the target (default %(default)s: InfoNCE only)",
    )
    p.add_argument(
        "--init",
        default=ZERO_SHOT_DEFAULT,
        help="the teacher's starting part: mean (of the trained languages' parts) or a trained "
        "language's code (default %(default)s)",
    )


def _add_subword_arguments(p, defaults) -> None:
    """The subword student's settings (``defaults``: TeacherSettings())."""
    p.add_argument(
        "--subwords",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="teacher: a subword student, the part plus a learned bag of hashed words and character "
        "3-5-grams of each sentence (polyvse.model.subwords). Default: on (chosen on val for qu, "
        "gn, es and ar); --no-subwords: the Linear part alone",
    )
    p.add_argument(
        "--subword-buckets",
        type=int,
        default=defaults.subword_buckets,
        help="rows of the subword table (default %(default)s)",
    )
    p.add_argument(
        "--subword-dim", type=int, default=defaults.subword_dim, help="width of the subword table (default %(default)s)"
    )
    p.add_argument(
        "--subword-word-ngrams",
        type=int,
        default=defaults.subword_word_ngrams,
        help="n: runs of 2..n neighbouring words join the words and character n-grams; 1: none (default %(default)s)",
    )
    p.add_argument(
        "--subword-dropout",
        type=float,
        default=defaults.subword_dropout,
        help="in training, leave out each of a sentence's bag rows with this probability (default %(default)s)",
    )


def _add_run_arguments(p, defaults) -> None:
    """Seed, resuming, bad lines, cache and progress."""
    p.add_argument("--seed", type=int, default=defaults.seed, help="seed of batches and held-out pairs")
    p.add_argument("--resume", action="store_true", help="continue a stopped run from <out>.adapt-state.pt")
    p.add_argument(
        "--skip-bad-lines",
        action="store_true",
        help="leave out unreadable lines (each is still reported with its line number)",
    )
    p.add_argument("--data-root", help="data root whose cache holds the sentence vectors (default $POLYVSE_DATA)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")


def run(args) -> int:
    from polyvse.adaptation import AdaptRequest, TeacherSettings, adapt_language
    from polyvse.errors import DataError
    from polyvse.modules.pretrained.cache import sentence_cache_dir

    if args.lines is not None and args.lines < 1:
        raise DataError(f"--lines must be at least 1, got {args.lines}")
    if args.epochs is not None and args.epochs < 1:
        raise DataError(f"--epochs must be at least 1, got {args.epochs}")
    if args.batch_size < 2:
        raise DataError(f"--batch-size must be at least 2 (InfoNCE needs negatives), got {args.batch_size}")
    if args.subword_buckets < 1 or args.subword_dim < 1 or args.subword_word_ngrams < 1:
        raise DataError("--subword-buckets, --subword-dim and --subword-word-ngrams must be at least 1")
    if not 0.0 <= args.subword_dropout < 1.0:
        raise DataError(f"--subword-dropout must be in [0, 1), got {args.subword_dropout}")
    teacher = TeacherSettings(
        epochs=args.epochs,
        batch_size=args.batch_size,
        lr=args.lr,
        temperature=args.temperature,
        mse_weight=args.mse_weight,
        seed=args.seed,
        subwords=args.subwords,
        subword_buckets=args.subword_buckets,
        subword_dim=args.subword_dim,
        subword_word_ngrams=args.subword_word_ngrams,
        subword_dropout=args.subword_dropout,
    )
    adapt_language(
        AdaptRequest(
            checkpoint=Path(args.checkpoint),
            lang=args.lang,
            parallel=Path(args.parallel),
            out=Path(args.out),
            method=args.method,
            pivot_lang=args.pivot_lang,
            lines=args.lines,
            zero_shot_init=args.init,
            teacher=teacher,
            resume=args.resume,
            skip_bad_lines=args.skip_bad_lines,
            cache_dir=sentence_cache_dir(args.data_root),
            progress=not args.quiet,
        )
    )
    return 0
