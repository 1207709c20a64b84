"""``python -m reproduce``: the study's command line (:mod:`reproduce.driver.cli`)."""

import sys

from reproduce.driver.cli import main

if __name__ == "__main__":
    sys.exit(main())
