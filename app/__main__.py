"""`python -m app ...`: the same command line as the `poimen` console script (`app/cli/main.py`)."""

import sys

from app.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
