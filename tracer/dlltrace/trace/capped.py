"""A trace that reached its size cap (`dlltrace run --max-size`, native/common/jsonw.h): what was dropped,
as the typed fact the launcher's `capped` event records, and which loads the cap cut.

Past 90% of the cap the writers drop the bulky lines (probe, dll_notify), past the cap every line but
the launcher's and the shims' last (`stats`) lines; each dropped line is counted by kind, with its bytes
and the earliest "t" of any of them (`first_t`). A load none of whose events is at or after `first_t`
is whole; any other may have lost its probes, its nested loads or its end, so the report gives it no
verdict and no comparison with the model (diagnosis/verdict.py: rule_cut_by_cap).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from dlltrace.trace.reader import Load, Trace

KIND_WORDS = {"load_begin": ("load", "loads"), "probe": ("probe", "probes"),
              "dll_notify": ("DLL notification", "DLL notifications"), "load_end": ("load end", "load ends"),
              "other": ("other event", "other events")}


@dataclass(frozen=True)
class Capped:
    max_size: int              # the cap, in bytes of the uncompressed trace
    dropped: dict[str, int]    # lines dropped, by kind (KIND_WORDS)
    dropped_bytes: int
    first_t: int               # the earliest "t" of a dropped line

    @property
    def total(self) -> int:
        return sum(self.dropped.values())


def capped(trace: Trace) -> Optional[Capped]:
    """The trace's `capped` event as a fact; None for a trace that was not capped."""
    e = next(trace.of("capped"), None)
    if e is None or not isinstance(e.get("dropped"), dict):
        return None
    dropped = {k: v for k, v in e["dropped"].items() if isinstance(k, str) and isinstance(v, int) and v > 0}
    return Capped(max_size=int(e.get("max_size") or 0), dropped=dropped,
                  dropped_bytes=int(e.get("dropped_bytes") or 0), first_t=int(e.get("first_t") or 0))


def cut_by_cap(cap: Optional[Capped], load: Load) -> bool:
    """Whether the cap may have dropped some of this load's events: it did not end, or one of its events
    (its own, its probes', its nested loads') is at or after the first dropped line."""
    if cap is None or not cap.total:
        return False
    if load.end is None:
        return True
    last = max([load.t, int(load.end.get("t") or 0), *(p.t for p in load.probes)])
    return last >= cap.first_t or any(cut_by_cap(cap, c) for c in load.children)


def size_text(n: int) -> str:
    for unit, size in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= size:
            v = n / size
            return f"{v:.0f} {unit}" if v >= 10 or v == int(v) else f"{v:.1f} {unit}"
    return f"{n} bytes"


def capped_line(cap: Capped) -> str:
    """The report's sentence for a capped trace (text and Markdown; JSON has the fields)."""
    order = ["load_begin", "probe", "dll_notify", "load_end", "other"]
    parts = [f"{cap.dropped[k]:,} {KIND_WORDS[k][cap.dropped[k] != 1]}" for k in order if cap.dropped.get(k)]
    parts += [f"{v:,} {k}" for k, v in cap.dropped.items() if k not in KIND_WORDS]
    return (f"The trace reached its size cap of {size_text(cap.max_size)} (dlltrace run --max-size): "
            f"{cap.total:,} events after it were dropped ({', '.join(parts)}; {size_text(cap.dropped_bytes)}). "
            "Loads after the cap are not in this report, and whether those it cut short failed is not known; "
            "run again with a larger --max-size (or 0, no cap) to see them.")


def capped_dict(cap: Optional[Capped]) -> Optional[dict]:
    """The JSON report's `capped` member (docs/json-output.md)."""
    if cap is None:
        return None
    return {"max_size": cap.max_size, "dropped": dict(cap.dropped), "dropped_bytes": cap.dropped_bytes,
            "first_t": cap.first_t, "text": capped_line(cap)}
