"""`python -m nblib.book run|test|sync`: see nblib.book.build."""

import sys

from nblib.book.build import main

sys.exit(main())
