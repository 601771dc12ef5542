"""``python -m asyncz``: the same as the ``asyncz`` command."""

import sys

from asyncz.cli import main

if __name__ == "__main__":
    sys.exit(main())
