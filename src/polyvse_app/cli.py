"""Command line: `polyvse <command> ...`. Each command lives in polyvse_app.commands.<name>."""
from __future__ import annotations

import argparse
import sys


def build_parser() -> argparse.ArgumentParser:
    from .commands import COMMANDS

    parser = argparse.ArgumentParser(prog="polyvse", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for module in COMMANDS:
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    from polyvse.errors import PolyvseError

    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except PolyvseError as exc:
        print(f"polyvse: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
