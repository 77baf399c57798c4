"""`python -m polyvse_train.cli` and console scripts installed before the command line moved to polyvse_app
(the README's torchrun lines use this path): the same `polyvse` command line."""
import sys

from polyvse_app.cli import main

if __name__ == "__main__":
    sys.exit(main())
