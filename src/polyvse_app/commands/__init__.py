"""One module per top-level command; each defines register(subparsers) and sets args.func."""

from . import adapt, data, demo, evaluate, export, features, index, model, report, rerank, search, serve, train, zoo

COMMANDS = [data, train, adapt, model, demo, evaluate, features, rerank, index, export, search, serve, zoo, report]
