"""One module per top-level command; each defines register(subparsers) and sets args.func."""
from . import data, demo, evaluate, features, rerank, train

COMMANDS = [data, train, demo, evaluate, features, rerank]
