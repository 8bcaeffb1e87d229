"""`python -m nblib.lccp.merge`: see nblib.lccp.merge.cli."""

import sys

from nblib.cli import run_cli
from nblib.lccp.merge.cli import main

sys.exit(run_cli(main))
