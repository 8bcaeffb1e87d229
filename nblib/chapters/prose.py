"""What every chapter's words share: the Markdown they are written in."""

from __future__ import annotations


def bullets(lines) -> str:
    """Markdown bullet list, one line each (every chapter's conclusions)."""
    return "\n".join(f"- {line}" for line in lines)
