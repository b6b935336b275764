"""Words for the files a package loads only on demand (data/loaders.json rows with `optional`): shared by the
Windows renderer (render/static.py) and the Linux `deps FOLDER` output (commands/deps.py), which imports nothing
heavier than this."""

from __future__ import annotations

# the loaders (data/loaders.json rows) that load files only on demand and do without them: a row of status optional
OPTIONAL_WORDS = {"qt_plugins": "Qt plugins only", "numba_threading_layers": "numba threading layer only",
                  "imagecodecs_lazy_codecs": "imagecodecs codecs only"}


def optional_words(row: str) -> str:
    """A loader row that loads files only on demand (data/loaders.json), in words."""
    return OPTIONAL_WORDS.get(row, "files loaded on demand only")
