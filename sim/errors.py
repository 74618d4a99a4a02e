"""The one error type for bad user input.

Anything a user can get wrong (a YAML profile, a trace file, a CLI value) raises
`InputError`; the CLI prints its single line and exits with status 2.
"""

from __future__ import annotations


class InputError(Exception):
    """Bad user input: names where (file), what (field) and what is allowed."""

    def __init__(self, where: str, field: str | None, allowed: str):
        self.where = str(where)
        self.field = field
        self.allowed = allowed
        super().__init__(self.line())

    def line(self) -> str:
        """One human line: `file: field: what is allowed`."""
        parts = [self.where]
        if self.field:
            parts.append(self.field)
        parts.append(self.allowed)
        return ": ".join(parts)
