"""`dlltrace check` of everything given in one call: each target opened, then checked with the others as its peers
(a DLL one of them provides is `required` or `given`), a Windows (or pure) target by diagnosis/static.py's check, a
Linux wheel by diagnosis/static_elf.py's check_elf. Neither the Windows nor the Linux side imports the other
(pyproject.toml's contracts): this module, in neither, joins them."""

from __future__ import annotations

from typing import Iterable, Optional

from dlltrace.diagnosis.static import CheckResult, GateOptions, Target, check, check_targets, open_target
from dlltrace.diagnosis.static_elf import check_elf


def check_target(target: Target, peers: Iterable[Target], options: GateOptions) -> CheckResult:
    if target.platform == "linux":
        return check_elf(target, [p for p in peers if p is not target], options)
    return check(target, peers=peers, options=options)


def check_paths(given: Iterable[str], options: GateOptions, python: Optional[str] = None, use_cache: bool = True,
                vc_runtime: bool = True) -> list[CheckResult]:
    """Every wheel or folder given (a folder of wheels: each wheel in it), checked together."""
    targets = [open_target(t, python=python, use_cache=use_cache, vc_runtime=vc_runtime)
               for g in given for t in check_targets(g)]
    return [check_target(t, targets, options) for t in targets]
