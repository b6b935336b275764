"""DllMain failures under Wine (issue 10 item 5): the failing DllMain's module is the leaf, with the chain
above it, whether the DLL is the one loaded or a dependency, loaded by full path or by bare name, and
whether its DllMain returns FALSE (fixtures/dlls/initfail.c), crashes (initcrash.c: an access violation)
or calls ExitProcess (initexit.c). initdep.c is a DLL importing one of them.

Each case runs twice: under plain wine64 with WINEDEBUG=+loaddll (the truth: what the host's LoadLibrary
gave, the process's exit code, which modules Wine's log loads and unloads), then under `dlltrace run
--wine` and `dlltrace report --json`, whose verdict must name the failed DllMain's module. What Wine
8.0 does, measured here: FALSE gives 1114; an access violation inside DllMain is caught by the loader
and LoadLibrary gives 998 (ERROR_NOACCESS, status 0xC0000005), the DLL and its importer unloaded;
ExitProcess ends the process inside the load (exit code 77, no load_end in the trace).
"""

from __future__ import annotations

import json
import re
import secrets
import shutil
import string
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import winetools

pytestmark = pytest.mark.wine

ROOT = Path(__file__).resolve().parent.parent
DLLS = ROOT / "fixtures" / "dlls"
NONCE = "".join(secrets.choice(string.ascii_lowercase) for _ in range(4))
UNIX_BASE = f"dtdm-{NONCE}"
WBASE = f"C:\\{UNIX_BASE}"
KINDS = ("initfail", "initcrash", "initexit")


@dataclass(frozen=True)
class Case:
    id: str
    kind: str         # which failing DllMain (KINDS)
    target: str       # the DLL loaded: the failing one, or initdep_<kind>.dll importing it
    bare: bool        # loaded by bare name (after AddDllDirectory) instead of by full path
    host_error: int   # what LoadLibraryExW gives under Wine (0: it never returns)
    exit_code: int
    reason: str       # the verdict rule (docs/verdicts.md)

    @property
    def folder(self) -> str:
        return f"{WBASE}\\{self.kind}"

    def host_args(self) -> list[str]:
        if self.bare:  # LOAD_LIBRARY_SEARCH_DEFAULT_DIRS: the AddDllDirectory folder is searched
            return ["adddir", self.folder, "load", self.target, "0x1000"]
        # LOAD_WITH_ALTERED_SEARCH_PATH: a dependency is found next to its importer
        return ["load", f"{self.folder}\\{self.target}", "0x8"]

    @property
    def chain(self) -> list[str]:
        return [self.target] if self.target == f"{self.kind}.dll" else [self.target, f"{self.kind}.dll"]


def cases() -> list[Case]:
    out = []
    for kind, err, code, reason in (("initfail", 1114, 1114, "nonzero_exit"), ("initcrash", 998, 998, "nonzero_exit"),
                                    ("initexit", 0, 77, "died_in_load")):
        for dep in (False, True):
            for bare in (False, True):
                target = f"initdep_{kind}.dll" if dep else f"{kind}.dll"
                out.append(Case(f"{kind}-{'dep' if dep else 'self'}-{'bare' if bare else 'full'}", kind, target,
                                bare, err, code, reason))
    return out


CASES = cases()
RETRIED: list[str] = []  # reports that failed once (test_dllmain_failure_is_named_as_the_leaf): said in the summary


@pytest.fixture(scope="module", autouse=True)
def _retried(summary):
    summary["dllmain reports retried"] = lambda: ("DllMain cases whose report failed once and was traced again: "
                                                  + " | ".join(RETRIED)) if RETRIED else ""


@pytest.fixture(scope="module")
def layout(wine_prefix):
    """Build the DLLs and casehost once; lay them out under C:\\dtdm-<nonce>\\<kind>\\ on the prefix."""
    winetools.require("wine", "mingw64")
    sys.path.insert(0, str(ROOT / "fixtures" / "traces"))
    import record  # casehost.exe, built once per source change

    root = winetools.drive_c() / UNIX_BASE
    root.mkdir(parents=True)
    shutil.copy2(record.host_exe(winetools.CACHE / "trace-cases"), root / "casehost.exe")
    for kind in KINDS:
        d = root / kind
        d.mkdir()
        dll = winetools.mingw_compile([DLLS / f"{kind}.c"], d / f"{kind}.dll", dll=True)
        winetools.mingw_compile([DLLS / "initdep.c"], d / f"initdep_{kind}.dll", dll=True,
                                extra=[f"-DDEPFN={kind}_fn", str(dll)])
    yield root
    shutil.rmtree(root, ignore_errors=True)


def wine_truth(case: Case) -> tuple[int, str, list[str], str]:
    """(exit code, the host's output, the modules of the case Wine's log unloads, the log)."""
    r = winetools.run_wine([f"{WBASE}\\casehost.exe", *case.host_args()], winedebug="+loaddll", timeout=120)
    log = r.stderr.decode("utf-8", "replace")
    unloaded = [m.lower() for m in re.findall(r'Unloaded module L"[^"]*\\\\([^"\\]+)" ', log)]
    return r.returncode, r.stdout.decode("utf-8", "replace"), unloaded, log


def traced_run(tmp_path: Path, host: str, args: list[str]) -> Path:
    return winetools.traced_run(tmp_path / "t.jsonl", host, args)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_dllmain_failure_is_named_as_the_leaf(layout, case, tmp_path):
    code, out, unloaded, log = wine_truth(case)
    # what Wine does (the model follows it): the case's layout really fails where it says
    assert code == case.exit_code & 0xFF, (out, log[-2000:])  # (a Unix exit status: the low byte)
    if case.host_error:
        assert f"load err {case.host_error}" in out
        assert f"{case.kind}.dll" in unloaded  # the failed DllMain's module is unloaded again
        if case.target != f"{case.kind}.dll":
            assert case.target.lower() in unloaded  # and so is its importer (rule_failed_load_keeps_loaded_dependencies)
    else:
        assert "load" not in out.split()  # the load never returned (casehost prints after each load)
        assert f'{case.kind}.dll" at' in log  # mapped, then the process ended inside its DllMain

    trace = traced_run(tmp_path, f"{WBASE}\\casehost.exe", case.host_args())
    rep = winetools.dlltrace("report", "--json", str(trace))
    if rep.returncode != 0 or not rep.stdout.strip():
        # Seen once in CI (initfail-self-bare: an empty report), never in 200 runs of that case here: what it was
        # goes into the run's summary, and the case is traced once more; a second failure fails the test
        text = trace.read_text(errors="replace")
        RETRIED.append(f"{case.id}: report exit {rep.returncode}, stderr {rep.stderr.strip()[-400:]!r}, trace of "
                       f"{len(text.splitlines())} lines: {text[:2000]!r}")
        (tmp_path / "again").mkdir()
        trace = traced_run(tmp_path / "again", f"{WBASE}\\casehost.exe", case.host_args())
        rep = winetools.dlltrace("report", "--json", str(trace))
    # (a report that fails says why: its exit code, its one line, and the trace it was given)
    assert rep.returncode == 0 and rep.stdout.strip(), (rep.returncode, rep.stderr[-3000:], trace.read_text()[:6000])
    data = json.loads(rep.stdout)
    call = data["calls"][0]
    assert call["real_error"] == (case.host_error or None)
    assert call["leaf"]["name"] == f"{case.kind}.dll", call["leaf"]
    assert call["leaf"]["cause"] == "init_failed"
    assert call["leaf"]["path"].lower() == f"{case.folder}\\{case.kind}.dll".lower()
    assert call["chain"] == case.chain
    assert call["verdict"]["fate"] == "fatal" and call["verdict"]["reason"] == case.reason
    assert call["verdict"]["exit_code"] == case.exit_code
    assert not call.get("differences"), call.get("differences")  # the model agrees with the loader
    detail = call["leaf"]["detail"]
    if case.kind == "initfail":
        assert call["error"] == 1114 and detail.startswith("DllMain returned FALSE")
    elif case.kind == "initcrash":
        assert call["error"] == 998 and "its DllMain crashed (0xc0000005)" in detail
    else:
        assert "the process ended inside its DllMain" in detail
    text = winetools.dlltrace("report", str(trace)).stdout
    assert f"{case.kind}.dll: its initialisation (DllMain) failed" in text
    assert "please report" not in text and "could not say why" not in text
