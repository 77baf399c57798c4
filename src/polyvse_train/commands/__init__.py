"""One module per top-level command; each defines register(subparsers) and sets args.func."""
from . import data

COMMANDS = [data]
