"""Compare two runs' metrics.json (or two folders of runs) for exact equality, ignoring what differs between
identical trainings: wall time, the config as stored, device and precision.

    python scripts/compare_metrics.py BEFORE/metrics.json AFTER/metrics.json
    python scripts/compare_metrics.py BEFORE_DIR AFTER_DIR     # every <run>/metrics.json found in both

Prints one line per run (same / differs, with the first differing keys) and exits 1 if any run differs or is
missing on one side. Used to show that a refactoring leaves training unchanged.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

IGNORED = frozenset({"wall_time_s", "config", "device", "precision"})


def differences(before, after, path: str = "") -> list[str]:
    """Paths (``languages.en.t2i_r1``) where two JSON values differ, IGNORED keys left out at the top level."""
    if isinstance(before, dict) and isinstance(after, dict):
        out = []
        for key in sorted(set(before) | set(after)):
            if not path and key in IGNORED:
                continue
            where = f"{path}.{key}" if path else key
            if key not in before or key not in after:
                out.append(f"{where} (only {'after' if key in after else 'before'})")
            else:
                out += differences(before[key], after[key], where)
        return out
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        return [d for i, (b, a) in enumerate(zip(before, after)) for d in differences(b, a, f"{path}[{i}]")]
    return [] if before == after else [f"{path}: {before!r} != {after!r}"]


def metrics_files(root: Path) -> dict[str, Path]:
    """{run name: metrics.json} under a folder (a file is one run named by its folder)."""
    if root.is_file():
        return {root.parent.name: root}
    return {str(p.parent.relative_to(root)): p for p in sorted(root.glob("**/metrics.json"))}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("before", type=Path)
    p.add_argument("after", type=Path)
    args = p.parse_args(argv)
    before, after = metrics_files(args.before), metrics_files(args.after)
    if args.before.is_file() and args.after.is_file():
        after = {name: after[n] for name, n in zip(before, after)}  # two files: compare them whatever their folders
    failed = 0
    for name in sorted(set(before) | set(after)):
        if name not in before or name not in after:
            print(f"{name}: missing {'before' if name not in before else 'after'}")
            failed += 1
            continue
        diff = differences(json.loads(before[name].read_text()), json.loads(after[name].read_text()))
        print(f"{name}: {'same' if not diff else 'DIFFERS: ' + '; '.join(diff[:5])}")
        failed += bool(diff)
    print(f"{len(set(before) | set(after)) - failed} same, {failed} differ or missing")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
