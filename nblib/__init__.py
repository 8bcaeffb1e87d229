"""nblib: the library behind the book.

The notebooks orchestrate and plot; this package does the work. Submodules are
imported lazily by the chapters that need them, so `import nblib` stays cheap.
"""

__version__ = "0.1.0"
