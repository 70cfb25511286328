"""``python -m pegboard.testing PLUGIN``: the same as ``pegboard check PLUGIN``."""

import sys

from ._cli import run_cli

__all__ = ()

if __name__ == "__main__":
    sys.exit(run_cli(sys.argv[1:]))
