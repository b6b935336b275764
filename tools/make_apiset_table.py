"""Write tracer/dlltrace/data/apisets-builtin.json from the `apisets` event of a trace.

    python tools/make_apiset_table.py TRACE.jsonl [OUT.json]

The built-in table is the API-set schema of a real process: the one the loader of Wine 8.0
(Debian's wine64 8.0~repack-4) puts in the PEB, recorded by the shim. Wine builds that schema
from dlls/apisetschema/apisetschema.spec, its model of the Windows 10 schema. The origin and
limits written into the file say what that means for a replay.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ORIGIN = ("The API-set schema (PEB ApiSetMap, version 6) of a process under Wine 8.0 (Debian wine64 "
          "8.0~repack-4), recorded by the dlltrace shim and written here by tools/make_apiset_table.py. "
          "Wine builds it from dlls/apisetschema/apisetschema.spec, its model of the Windows 10 schema. "
          "api-ms-win-crt-* -> ucrtbase.dll agrees with Microsoft's UCRT documentation (the UCRT is part "
          "of Windows 10 and later, and those API sets forward to ucrtbase.dll).")
LIMITS = ("Used only when a trace or scenario has no schema of its own (older traces, scenarios without "
          "system.api_sets, static mode). Windows 10/11 have more contracts than Wine (about 500 here): a "
          "contract missing from this table is searched for as a file, as the loader does with a name its "
          "schema lacks. Hosts follow Wine where Windows may name another DLL of the same family "
          "(kernel32/kernelbase); no per-importer exceptions are recorded (Wine's schema has none). "
          "tests/test_apisets.py checks this file against the schema the shim records under Wine.")


def main(argv: list[str]) -> int:
    trace = Path(argv[1])
    out = Path(argv[2]) if len(argv) > 2 else Path(__file__).resolve().parents[1] / "tracer/dlltrace/data/apisets-builtin.json"
    ev = next((json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines()
               if '"ev":"apisets"' in line), None)
    if ev is None or not isinstance(ev.get("sets"), dict):
        print(f"{trace}: no apisets event with a version-6 schema", file=sys.stderr)
        return 1
    doc = {"format": "dlltrace-apisets", "version": ev.get("version"), "origin": ORIGIN, "limits": LIMITS,
           "sets": dict(sorted(ev["sets"].items()))}
    out.write_text(json.dumps(doc, indent=0, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{out}: {len(doc['sets'])} contracts")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
