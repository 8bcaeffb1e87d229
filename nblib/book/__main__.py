"""`python -m nblib.book run|test|sync`: see nblib.book.build."""

import sys

from nblib.book.build import main

if __name__ == "__main__":
    sys.exit(main())
