"""The version of dlltrace (pyproject.toml's, tests/test_wheels.py checks they agree)."""

__version__ = "0.1.0"
