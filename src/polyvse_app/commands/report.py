"""`polyvse report [--check]`: every generated block of README and docs (and the zoo's docs/results.md) rendered
again from the committed records; `--check` writes nothing and lists what is stale."""

from __future__ import annotations

import sys
from pathlib import Path


def register(sub) -> None:
    p = sub.add_parser(
        "report",
        help="regenerate every generated block of README.md and docs/ from the records "
        "under results/ and benchmarks/results/ (--check: list the stale ones)",
    )
    p.add_argument(
        "--repo", default=".", help="the checkout whose README, docs and records to use (default: the current folder)"
    )
    p.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 listing each block that differs from what its records render",
    )
    p.set_defaults(func=run)


def run(args) -> int:
    from polyvse.errors import PolyvseError
    from polyvse_train.report import stale, write_all

    repo = Path(args.repo).resolve()
    if not (repo / "README.md").exists():
        raise PolyvseError(f"{repo} has no README.md: run `polyvse report` in the repository (or pass --repo)")
    if args.check:
        out = stale(repo)
        for line in out:
            print(f"stale: {line}")
        if out:
            print("run `polyvse report` to regenerate them from the records", file=sys.stderr)
            return 1
        print("every generated block matches its records")
        return 0
    for path in write_all(repo):
        print(f"wrote {path.relative_to(repo)}")
    return 0
