"""``python -m a0py ARGS``: the same command line as the ``a0py`` script."""

import sys

from a0py.cli import main

if __name__ == "__main__":
    sys.exit(main(prog_name="python -m a0py"))
