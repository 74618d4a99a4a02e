"""Limits of a validation replay, importable without the validation machinery (the CLI's option defaults)."""

DEFAULT_MAX_SIM_REQUESTS = 50_000  # above every bundled case (all simulated as measured); a cap for huge files
