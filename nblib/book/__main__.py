"""`python -m nblib.book run|test|sync|toc` (nblib.book.build) and `html|stale` (nblib.book.reader)."""

import sys

from nblib.book.reader import main

if __name__ == "__main__":
    sys.exit(main())
