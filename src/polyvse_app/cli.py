"""Command line: `polyvse <command> ...`. Each command lives in polyvse_app.commands.<name>."""
from __future__ import annotations

import argparse
import sys


def build_parser() -> argparse.ArgumentParser:
    from polyvse._version import __version__

    from .commands import COMMANDS

    parser = argparse.ArgumentParser(prog="polyvse", description=__doc__)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for module in COMMANDS:
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    return run(build_parser(), argv)


def run(parser, argv: list[str] | None = None) -> int:
    """Parse ``argv`` with ``parser`` and run the chosen command; a PolyvseError becomes one line and exit 2."""
    from polyvse.errors import PolyvseError

    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except PolyvseError as exc:
        print(f"polyvse: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
