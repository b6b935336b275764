"""The loaders (pkgloaders.py, data/loaders.json) of the packages in a folder of this disk: a site-packages, or one
package folder in it. Only text files are read (each package's __init__.py, the .pth files, the rows' own files),
so `deps FOLDER` of a Linux install can ask without the Windows static world."""

from __future__ import annotations

import os
from typing import Optional, Union

from dlltrace.pkgloaders import MAX_LOADER_FILE, LoaderRule, loader_files, loaders_from_files


def is_site_folder(folder: Union[str, os.PathLike]) -> bool:
    """Whether a folder of this disk is a site-packages (named so, or holding a distribution's .dist-info) rather
    than one package folder in it."""
    folder = os.fspath(folder)
    if os.path.basename(folder.rstrip(os.sep)).lower() in ("site-packages", "dist-packages"):
        return True
    try:
        return any(e.endswith(".dist-info") for e in os.listdir(folder))
    except OSError:
        return False


def site_loaders(folder: Union[str, os.PathLike]) -> tuple[str, list[LoaderRule]]:
    """(the site-packages a folder is, or is a package of; the loaders of its packages, or of that package)."""
    folder = os.path.abspath(os.fspath(folder))
    if is_site_folder(folder):
        return folder, folder_loaders(folder)
    return os.path.dirname(folder), folder_loaders(os.path.dirname(folder), os.path.basename(folder))


def folder_loaders(site: Union[str, os.PathLike], only: Optional[str] = None) -> list[LoaderRule]:
    """The loaders of the packages in a host site-packages folder (`only`: of that one package folder in it)."""
    site = os.fspath(site)
    try:
        entries = sorted(os.listdir(site)) if only is None else [only]
    except OSError:
        return []
    members = [f"{e}/__init__.py" for e in entries if os.path.isfile(os.path.join(site, e, "__init__.py"))]
    if only is None:
        members += [e for e in entries if e.endswith(".pth")] + ["win32/lib/pywin32_bootstrap.py",
                                                                  "win32/lib/win32serviceutil.py"]
    members += [f for f in loader_files() if f not in members and (only is None or f.split("/", 1)[0] == only)
                and os.path.isfile(os.path.join(site, *f.split("/")))]

    def read(name: str) -> Optional[str]:
        try:
            with open(os.path.join(site, *name.split("/")), "rb") as f:
                return f.read(MAX_LOADER_FILE).decode("utf-8", "replace")
        except OSError:
            return None
    return loaders_from_files(read, members)
