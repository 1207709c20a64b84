"""``python -m reproduce.bundle``, the command the library's messages name: :mod:`reproduce.driver.bundle`."""

import sys

from reproduce.driver.bundle import main

if __name__ == "__main__":
    sys.exit(main())
