"""Word-translation P@1 of docs/results.md section 5, without rerunning the whole zoo.

Trains the given configs on F8K-ML's official split (seed 0) under the zoo's CPU budget (the spec
``configs/zoo/cpu.yaml``, applied as `polyvse zoo run` applies it), one run after the other, with the zoo's
folder layout and evaluation (``<out>/<config>/official-s0/tasks.json``); finished runs are reused. Then
rewrites section 5 of ``--doc`` in place from those runs (:func:`polyvse_train.zoo.tables.words_section`).

    PYTHONPATH=src POLYVSE_DATA=<data root> python scripts/word_translation.py \
        [--configs ame-sym,ame-fme,translator-t2,vse,pivot-sym] [--out runs/words] [--doc docs/results.md]
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from polyvse.util.paths import data_root
from polyvse_train.zoo import find_configs, load_spec, plan_runs, run_zoo
from polyvse_train.zoo.report import replace_section
from polyvse_train.zoo.results import collect
from polyvse_train.zoo.tables import words_section

REPO = Path(__file__).resolve().parents[1]
DEFAULT_CONFIGS = "ame-sym,ame-fme,translator-t2,vse,pivot-sym"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--configs", default=DEFAULT_CONFIGS, help="comma-separated config names (default: %(default)s)")
    p.add_argument(
        "--spec", default=str(REPO / "configs" / "zoo" / "cpu.yaml"), help="zoo budget (default: %(default)s)"
    )
    p.add_argument("--configs-dir", default=str(REPO / "configs"))
    p.add_argument("--out", default="runs/words", help="run folders (default: %(default)s)")
    p.add_argument("--doc", default=str(REPO / "docs" / "results.md"), help="document whose section 5 is rewritten")
    p.add_argument("--data-root", help="data root (default: $POLYVSE_DATA, else ~/.cache/polyvse)")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")

    spec = load_spec(args.spec)
    spec.folds, spec.official, spec.seeds, spec.curve_configs = 0, True, [0], []  # official split, seed 0 only
    names = args.configs.split(",")
    runs = plan_runs(find_configs(Path(args.configs_dir), names), spec)
    counts = run_zoo(runs, Path(args.out), data_root(args.data_root), spec)
    print(", ".join(f"{k}: {v}" for k, v in sorted(counts.items())))
    results, failed = collect(Path(args.out))
    for f in failed:
        print(f"failed {f['run_id']}: {f['error']}", file=sys.stderr)
    command = f"PYTHONPATH=src POLYVSE_DATA=<data root> python scripts/word_translation.py --configs {args.configs}"
    section = words_section([r for r in results if r.config in names], names, spec, command=command)
    replace_section(Path(args.doc), "## 5. ", section)
    print(f"rewrote section 5 of {args.doc}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
