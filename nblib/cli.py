"""One error path for every command-line tool (`python -m nblib.train`, `.merge`, `.monitor`,
`.scaling`, `.data.bpe`).

A user error (a bad value, a missing or corrupt file, a locked run, a full disk, a
read-only folder) prints one line, `error: <what is wrong and what is allowed>`, and exits
with status 2: no traceback. `--debug` anywhere on the command line shows the traceback as
well. Anything else is a bug: it says so, exits 1, and `--debug` shows where.
"""

from __future__ import annotations

import errno
import json
import sys
import traceback

# The error types a user can cause and fix. ValueError covers ConfigError, BudgetError,
# MonitorError, TableError and argument checks; UserError the checkpoint and lock errors.
from nblib.errors import UserError

USER_ERRORS = (ValueError, UserError, FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError,
               FileExistsError, json.JSONDecodeError, UnicodeDecodeError, FloatingPointError)
OS_HINTS = {
    errno.ENOSPC: "the disk is full: free some space or point NBLIB_RUN_ROOT at another disk",
    errno.EDQUOT: "the disk quota is exceeded: free some space or point NBLIB_RUN_ROOT at another disk",
    errno.EROFS: "the file system is read-only: point NBLIB_RUN_ROOT (or --run-root, -o) at a writable folder",
    errno.EACCES: "permission denied: use a folder you can write",
    errno.ELOOP: "a symbolic link stands where a file is written: remove the link",
}


def user_message(e: BaseException) -> str | None:
    """The one-line message for a user error, or None when `e` is not one."""
    if isinstance(e, OSError) and e.errno in OS_HINTS:
        where = f" ({e.filename})" if getattr(e, "filename", None) else ""
        return f"{OS_HINTS[e.errno]}{where}"
    if isinstance(e, USER_ERRORS):
        text = str(e).strip() or type(e).__name__
        return " ".join(text.split()) if len(text) < 2000 else text[:2000] + " ..."
    return None


def run_cli(main, argv=None, on_error=None) -> int:
    """Run main(argv) and turn errors into the one error path: exit 2 for user errors, 1
    for bugs. on_error(message) is called with the message too (e.g. to write it to the
    run's train.log)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    argv = [a for a in argv if a != "--debug"]
    try:
        return main(argv)
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # the one place where any error becomes a message and an exit status
        msg = user_message(e)
        if debug:
            traceback.print_exc()
        if msg is not None:
            print(f"error: {msg}", file=sys.stderr)
            if on_error is not None:
                on_error(msg)
            return 2
        print(f"internal error: {type(e).__name__}: {e} (a bug: rerun with --debug for the traceback)",
              file=sys.stderr)
        return 1
