"""`python -m nblib.book run|test|sync|toc`: see nblib.book.build."""

import sys

from nblib.book.build import main

if __name__ == "__main__":
    sys.exit(main())
