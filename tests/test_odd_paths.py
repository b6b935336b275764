r"""Odd load names under Wine (issue 10 item 6): a `\\?\` path and a name with trailing dots or spaces.
Wine (with +loaddll) is the truth for whether each load succeeds; `dlltrace run --wine` then `dlltrace
report --json` must give the same error with no difference from the loader's probes
(rules.rule_dos_path_name, rules.rule_load_name; tests/test_rules.py has their unit tests)."""

from __future__ import annotations

import json
import secrets
import shutil
import string
import sys
from pathlib import Path

import pytest

import winetools

pytestmark = pytest.mark.wine

ROOT = Path(__file__).resolve().parent.parent
NONCE = "".join(secrets.choice(string.ascii_lowercase) for _ in range(4))
UNIX = f"dtpath-{NONCE}"
DLL = f"C:\\{UNIX}\\p\\plain.dll"
V = "\\\\?\\"

# name, flags, loads under Wine (what the loader opens: the same file, or none)
CASES = [
    ("verbatim", V + DLL, 0, True),                      # \\?\C:\...\plain.dll: the file as written
    ("verbatim_trailing_dot", V + DLL + ".", 0, False),  # kept by \\?\: "plain.dll." is not there
    ("trailing_dot", DLL + ".", 0, True),                # a normal path drops it
    ("trailing_space", DLL + " ", 0, True),
    ("trailing_dots_spaces", DLL + ". .", 0, True),
    ("folder_dot", f"C:\\{UNIX}\\p.\\plain.dll", 0, True),
    ("bare_trailing_space", "plain.dll ", 0x1000, True),  # after AddDllDirectory(the folder)
]


@pytest.fixture(scope="module")
def layout(wine_prefix):
    winetools.require("wine", "mingw64")
    sys.path.insert(0, str(ROOT / "fixtures" / "traces"))
    import record

    root = winetools.drive_c() / UNIX
    (root / "p").mkdir(parents=True)
    shutil.copy2(record.host_exe(winetools.CACHE / "trace-cases"), root / "casehost.exe")
    winetools.mingw_compile([ROOT / "fixtures" / "dlls" / "plain.c"], root / "p" / "plain.dll", dll=True)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def traced_run(tmp_path: Path, host: str, args: list[str]) -> Path:
    return winetools.traced_run(tmp_path / "t.jsonl", host, args)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_odd_name_is_the_file_the_loader_opens(layout, case, tmp_path):
    _, name, flags, loads = case
    args = (["adddir", f"C:\\{UNIX}\\p"] if flags & 0x1000 else []) + ["load", name, hex(flags)]
    host = f"C:\\{UNIX}\\casehost.exe"
    out = winetools.run_wine([host, *args], winedebug="+loaddll").stdout.decode("utf-8", "replace").split()
    assert out[-2:] == ["load", "ok"] if loads else out[-3:] == ["load", "err", "126"], out
    trace = traced_run(tmp_path, host, args)
    rep = json.loads(winetools.dlltrace("report", "--json", "--all", str(trace)).stdout)
    calls = [c for c in rep["calls"] if c["name"] == name]
    assert len(calls) == 1, rep["calls"]  # (--all lists the loads that succeeded too)
    if loads:
        assert all(c["real_error"] == 0 and c["error"] == 0 for c in calls), calls
    else:
        assert [(c["real_error"], c["error"]) for c in calls] == [(126, 126)]
        assert calls[0]["leaf"]["cause"] == "not_found"
        # no fix pointing at the file the name does not name: plain.dll is not "plain.dll."
        assert not any(f.get("path", "").lower() == DLL.lower() for f in calls[0].get("fixes", [])), calls[0]["fixes"]
    assert all(not c.get("differences") for c in calls), [c.get("differences") for c in calls]
