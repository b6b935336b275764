"""Windows compares file names by upcasing them (RtlUpcaseUnicodeChar, the NLS/NTFS upcase table: one character
to one, the simple uppercase mapping), not by Unicode case folding (issue 28, item 10). winpath.key and same follow
it: `simulate` matched a name written with the Kelvin sign (U+212A, which lowercases to `k`) to k.dll."""

from __future__ import annotations

import pytest

from dlltrace import winpath
from dlltrace.diagnosis.scenario import scenario_from_dict
from dlltrace.loader.windows.engine import Simulator

KELVIN = "\u212a"


@pytest.mark.parametrize("a, b, same", [
    ("C:\\X\\Kernel32.DLL", "c:/x/kernel32.dll", True),  # ASCII: any case
    ("C:\\x\\\u00c9t\u00c9.dll", "C:\\X\\\u00e9t\u00e9.dll", True),  # É and é: the table maps é to É
    (f"C:\\x\\{KELVIN}.dll", "C:\\x\\k.dll", False),  # the Kelvin sign upcases to itself, k to K
    (f"C:\\x\\{KELVIN}.dll", "C:\\x\\K.dll", False),
    ("C:\\x\\stra\u00dfe.dll", "C:\\x\\STRASSE.dll", False),  # ß upcases to itself (no one-to-one capital)
    ("C:\\x\\\u0131.dll", "C:\\x\\I.dll", False),  # dotless ı: not in the table (Python's upper gives I)
    ("C:\\x\\\u017f.dll", "C:\\x\\S.dll", False),  # long ſ: neither (Python's upper gives S)
    ("C:\\x\\\u212b.dll", "C:\\x\\\u00e5.dll", False),  # the Angstrom sign upcases to itself, å to Å
    ("C:\\x\\\u0430.dll", "C:\\x\\\u0410.DLL", True),  # Cyrillic а and А
])
def test_same_is_windows_upcase(a, b, same):
    assert winpath.same(a, b) is same
    assert (winpath.key(a) == winpath.key(b)) is same


def test_simulate_does_not_load_k_dll_for_a_kelvin_sign_name():
    def load(name: str) -> int:
        s = scenario_from_dict({"process": {"exe": "C:\\app\\app.exe"},
                                "file": [{"path": "C:\\app\\k.dll", "exports": ["f"]}],
                                "call": [{"op": "LoadLibraryExW", "name": name, "flags": 0}]})
        return Simulator(s.world, s.process.copy()).load_library(name, 0).error
    assert load("C:\\app\\K.DLL") == 0
    assert load(f"C:\\app\\{KELVIN}.dll") == 126  # not found: Windows' table keeps U+212A as it is
    assert load(f"{KELVIN}.dll") == 126


def _split_normalize(path: str) -> str:
    """winpath.normalize as it always did it: split at the separators, drop empty and "." parts, resolve "..",
    the drive's letter upper-cased and followed by a backslash, a UNC path's two backslashes kept."""
    path = path.replace("/", "\\")
    unc = path.startswith("\\\\")
    drive, rest = "", path
    if unc:
        rest = path[2:]
    elif len(path) >= 2 and path[1] == ":" and path[0].isascii() and path[0].isalpha():
        drive, rest = path[:2], path[2:]
    parts: list[str] = []
    for part in rest.split("\\"):
        if part in ("", "."):
            continue
        if part == "..":
            if parts:
                parts.pop()
            continue
        parts.append(part)
    if unc:
        return "\\\\" + "\\".join(parts)
    if drive:
        return drive[0].upper() + ":\\" + "\\".join(parts)
    return "\\".join(parts)


def test_normalize_returns_a_normal_path_as_it_is_and_any_other_as_the_split_makes_it():
    """normalize's fast path (bench/report_speed.py: most paths of a trace are normal already) tells a normal path
    without splitting it: every string of up to 5 characters of separators, dots, a colon, letters of both cases
    and a non-ASCII one normalises as the split does."""
    import itertools

    alphabet = ["\\", "/", ".", ":", "C", "c", "a", "\u00e9", " "]
    for n in range(6):
        for chars in itertools.product(alphabet, repeat=n):
            path = "".join(chars)
            assert winpath.normalize.__wrapped__(path) == _split_normalize(path), path
