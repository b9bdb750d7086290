"""``python -m pytest_reliable COMMAND``: the commands live in `pytest_reliable.cli`."""

import sys

from pytest_reliable.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
