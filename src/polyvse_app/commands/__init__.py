"""One module per top-level command; each defines register(subparsers) and sets args.func."""
from . import adapt, data, demo, evaluate, features, index, report, rerank, search, serve, train, zoo

COMMANDS = [data, train, adapt, demo, evaluate, features, rerank, index, search, serve, zoo, report]
