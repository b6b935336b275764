"""The API-set schema: how the loader maps api-ms-* / ext-ms-* names to the DLL that hosts them.

A schema is what the process's PEB points to (ApiSetMap, API_SET_NAMESPACE version 6 on
Windows 10/11 and under Wine). The shim records it once per process (the `apisets` event,
docs/trace-format.md); a scenario may give its own (docs/scenarios.md); anything else uses the
built-in table, data/apisets-builtin.json (Windows 11 22H2; origin, licence and limits in the file).

Each contract has a default host ("" = none on this system) and, per importing module, an
exception host ahead of the default. Matching is in rules.rule_api_set_match.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal, Mapping, Optional

from dlltrace.datafiles import read_data

ApiSetSource = Literal["trace", "scenario", "builtin"]
SOURCE_TEXT: dict[str, str] = {
    "trace": "the process's own API-set schema (recorded in the trace)",
    "scenario": "the scenario's API-set table",
    "builtin": "the built-in Windows 11 (22H2) table",
}
BUILTIN_FILE = "apisets-builtin.json"


def hashed_name(name: str) -> str:
    """The part of a contract name the loader compares: lower case, without ".dll", without its
    last "-N" component (api-ms-win-crt-string-l1-1-0 -> api-ms-win-crt-string-l1-1)."""
    n = name.lower()
    if n.endswith(".dll"):
        n = n[:-4]
    return n.rsplit("-", 1)[0] if "-" in n else n


@dataclass(frozen=True)
class ApiSetContract:
    name: str  # as the schema spells it, lower case, no ".dll"
    host: str  # the default host ("" = no host)
    exceptions: Mapping[str, str] = field(default_factory=dict)  # importer base name (lower) -> host

    def host_for(self, importer: Optional[str]) -> str:
        """The host this importer gets: its exception, else the default."""
        if importer:
            h = self.exceptions.get(importer.lower())
            if h is not None:
                return h
        return self.host


@dataclass(frozen=True)
class ApiSetSchema:
    contracts: Mapping[str, ApiSetContract]  # hashed_name -> contract
    source: ApiSetSource = "builtin"
    version: Optional[int] = 6

    def lookup(self, name: str) -> Optional[ApiSetContract]:
        return self.contracts.get(hashed_name(name))

    def __len__(self) -> int:
        return len(self.contracts)


def parse_sets(sets: Mapping[str, Any]) -> dict[str, ApiSetContract]:
    """The `sets` of a trace's `apisets` event or a scenario's system.api_sets:
    contract -> host, or contract -> {"host": .., "exceptions": {importer: host}}. Raises
    ValueError naming the first value of another shape."""
    out: dict[str, ApiSetContract] = {}
    for name, v in sets.items():
        if not isinstance(name, str) or not name:
            raise ValueError(f"contract name {name!r} is not a non-empty string")
        if isinstance(v, str):
            c = ApiSetContract(name.lower().removesuffix(".dll"), v.lower())
        elif isinstance(v, Mapping) and isinstance(v.get("host", ""), str) and isinstance(v.get("exceptions", {}), Mapping):
            exc = v.get("exceptions", {})
            if not all(isinstance(k, str) and isinstance(h, str) for k, h in exc.items()):
                raise ValueError(f"{name}: exceptions must map importer names to host names")
            c = ApiSetContract(name.lower().removesuffix(".dll"), str(v.get("host", "")).lower(),
                               {k.lower(): h.lower() for k, h in exc.items()})
        else:
            raise ValueError(f"{name}: a host name, or a table with host and exceptions")
        out.setdefault(hashed_name(c.name), c)
    return out


def schema_from_sets(sets: Mapping[str, Any], source: ApiSetSource, version: Optional[int] = 6) -> ApiSetSchema:
    return ApiSetSchema(parse_sets(sets), source, version)


@lru_cache(maxsize=1)
def builtin_document() -> dict[str, Any]:
    """data/apisets-builtin.json as it is (origin, limits, sets)."""
    text = read_data(BUILTIN_FILE)
    return json.loads(text)


@lru_cache(maxsize=1)
def builtin_schema() -> ApiSetSchema:
    doc = builtin_document()
    return schema_from_sets(doc["sets"], "builtin", doc.get("version", 6))
