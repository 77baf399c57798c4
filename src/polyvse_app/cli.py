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
    """Parse ``argv`` with ``parser`` and run the chosen command; a PolyvseError becomes one line and exit 2, and so
    does a package of the [train] extra missing (the light install): the command, what it needs, the pip line."""
    from polyvse.errors import PolyvseError

    from .train_extra import missing_extra, needs_extra_message

    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except PolyvseError as exc:
        print(f"polyvse: error: {exc}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as exc:
        what = missing_extra(exc)
        if what is None:
            raise
        print(f"polyvse: error: {needs_extra_message(command_name(args), what)}", file=sys.stderr)
        return 2


def command_name(args) -> str:
    """The command that ran, with its action where it has one (``model build``, ``export onnx``)."""
    name = str(getattr(args, "command", "") or "")
    for attr in (f"{name}_command", f"{name}_format"):
        action = getattr(args, attr, None)
        if isinstance(action, str):
            return f"{name} {action}"
    return name


if __name__ == "__main__":
    sys.exit(main())
