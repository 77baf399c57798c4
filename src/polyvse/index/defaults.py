"""Build settings' defaults, in a module of their own so that the command line's help reads them without
importing numpy (a fresh `polyvse search` process limits math threads before numpy loads)."""

DEFAULT_EXACT_THRESHOLD = 20_000
DEFAULT_RECALL_TARGET = 0.95
