"""The one error type a user ever sees from this tool: a bad input, reported on one line.

CLIs catch `UsageError`, print `error: <message>` to stderr and exit with code 2 (no traceback).
"""

from __future__ import annotations

EXIT_USAGE = 2


class UsageError(Exception):
    """Bad input: names the field, the value and the fix.

    >>> str(UsageError("--tp", 3, "must divide num_attention_heads=32; use 1, 2, 4, 8, 16 or 32"))
    "--tp=3: must divide num_attention_heads=32; use 1, 2, 4, 8, 16 or 32"
    """

    def __init__(self, field: str, value: object, fix: str):
        self.field, self.value, self.fix = field, value, fix
        super().__init__(f"{field}={value}: {fix}")
