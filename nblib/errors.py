"""The errors a user can cause and fix (nblib.cli prints them as one line and exits 2)."""


class UserError(Exception):
    """Base of nblib's own user-facing errors: a corrupt checkpoint, a locked run."""
