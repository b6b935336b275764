"""Write tracer/dlltrace/data/apisets-builtin.json, the API-set table used when a trace or a
scenario has no schema of its own.

    python tools/make_apiset_table.py WIN11.json [OUT.json]

WIN11.json is data/apisetschema/10.0.22621.2506-amd64.json of the public repository
learn-more/apisets (MIT licence, Mark Jansen; the data behind apisets.info): the schema of
apisetschema.dll 10.0.22621.2506, Windows 11 22H2 x64, with each contract's default host and its
exception (alt_name -> alt_host). The origin, licence and limits go into the output file.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

SOURCE = "learn-more/apisets, data/apisetschema/10.0.22621.2506-amd64.json (commit 8f110c7e3ae4)"
ORIGIN = ("The API-set schema of apisetschema.dll 10.0.22621.2506 (Windows 11 22H2, x64) as published in "
          f"{SOURCE}, the data behind apisets.info; converted by tools/make_apiset_table.py. "
          "api-ms-win-crt-* -> ucrtbase.dll agrees with Microsoft's UCRT documentation.")
LICENCE = "MIT License, Copyright (c) 2019 Mark Jansen (learn-more/apisets)"
LIMITS = ("Used only when a trace or scenario has no schema of its own (older traces, scenarios without "
          "system.api_sets, static mode); a trace made by the shim carries the process's own schema. One "
          "Windows build: a contract added later is missing here and is then searched for as a file (the "
          "loader does the same with a name its schema lacks); a host that moved between builds may "
          "differ. Wine 8.0's schema holds 504 contracts, 501 of them here, 28 with another host "
          "(Wine hosts gdi32/shell32 sets itself). Exceptions: one per contract at most, as the source "
          "gives them.")


def sets_from_learn_more(doc: dict) -> dict:
    out: dict = {}
    for n in doc["namespaces"]:
        name = n["name"].lower().removesuffix(".dll")
        host = (n.get("host") or "").lower()
        if n.get("alt_name"):
            out[name] = {"host": host, "exceptions": {n["alt_name"].lower(): (n.get("alt_host") or "").lower()}}
        else:
            out[name] = host
    return dict(sorted(out.items()))


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    src = Path(argv[1])
    out = Path(argv[2]) if len(argv) > 2 else Path(__file__).resolve().parents[1] / "tracer/dlltrace/data/apisets-builtin.json"
    doc = json.loads(src.read_text(encoding="utf-8"))
    sets = sets_from_learn_more(doc)
    table = {"format": "dlltrace-apisets", "version": 6, "windows": doc.get("PE", {}).get("FileVersion"),
             "origin": ORIGIN, "licence": LICENCE, "limits": LIMITS, "sets": sets}
    out.write_text(json.dumps(table, indent=0, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{out}: {len(sets)} contracts")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
