#!/bin/sh
# Run render.py with a Python >= 3.8: $BOOK_PYTHON if set, else the active virtualenv's,
# else python3 / python on PATH. render.py uses only the standard library, so any of them
# works; `jupyter book` does not export the venv to this shell, hence the search.
set -e
here=$(cd "$(dirname "$0")" && pwd)
for py in "$BOOK_PYTHON" "${VIRTUAL_ENV:+$VIRTUAL_ENV/bin/python}" python3 python; do
    if [ -n "$py" ] && command -v "$py" >/dev/null 2>&1; then
        exec "$py" "$here/render.py" "$@"
    fi
done
echo "render.sh: no Python found (set BOOK_PYTHON)" >&2
exit 127
