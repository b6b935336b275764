"""The package's data files (tracer/dlltrace/data/*.json), read as text.

From the package's folder when it is on disk, as every install has it (a wheel is unpacked); through
importlib.resources otherwise (a package imported from a zip). importlib.resources' first read imports
zipfile and its readers: with its own import, ~10 ms of the start of every command that reads a data file
(bench/wine_run.py: `run`'s summary reads three).
"""

from __future__ import annotations

import os

_DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


def read_data(name: str) -> str:
    """The text (UTF-8) of data/<name>."""
    try:
        with open(os.path.join(_DATA, name), encoding="utf-8") as f:
            return f.read()
    except OSError:
        from importlib import resources

        return resources.files("dlltrace").joinpath("data").joinpath(name).read_text(encoding="utf-8")
