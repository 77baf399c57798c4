"""`python -m polyvse_app ARGS` = `polyvse ARGS`: the command line for torchrun (`torchrun ... -m polyvse_app train ...`),
which starts modules, not console scripts."""

import sys

from .cli import main

sys.exit(main())
