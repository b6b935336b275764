"""What a trace asks of its DLLs' exports (worlds/recorded.py: trimmed export lists): every name and ordinal
a recorded PE imports, and the forwarders followed. Here, below the worlds, so the trace reader folds in each
`file` event's `pe` object in its one pass (trace/reader.py FileIndex) instead of the world parsing them again."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping  # (not typing's: its isinstance is slower, and this is asked per file event)
from typing import Any, Optional

TRIMMED = "trimmed"  # the `pe` field that marks trimmed export lists: {"exports": N, "export_ordinals": N, "forwarders": N}

@dataclasses.dataclass(frozen=True)
class Asked:
    """The exports a trace asks for: every name and ordinal a recorded PE imports (or delay-
    imports) from any DLL, and the target of every forwarder kept, to a fixed point."""

    names: frozenset[str]
    ordinals: frozenset[int]

    def wants(self, key: str) -> bool:
        """Whether an export key is asked for: a name, or "#7" (a forwarder with no name) for ordinal 7."""
        if key.startswith("#") and key[1:].isdigit():
            return int(key[1:]) in self.ordinals
        return key in self.names


def _forward_func(target: str) -> tuple[Optional[str], Optional[int]]:
    """A forwarder target "dll.func" -> ("func", None); "dll.#7" -> (None, 7) (rules.rule_forwarder_target)."""
    func = target.rpartition(".")[2]
    if func.startswith("#") and func[1:].isdigit():
        return None, int(func[1:])
    return func, None


class AskedFold:
    """asked_exports a `pe` object at a time (RecordedWorld folds in each as it reads its file events)."""

    def __init__(self) -> None:
        self.names: set[str] = set()
        self.ordinals: set[int] = set()
        self.forwards: dict[str, list[str]] = {}  # export key -> forwarder targets (of every DLL)

    def add(self, pe: Mapping[str, Any]) -> None:
        names, ordinals = self.names, self.ordinals
        for key in ("imports", "delay_imports"):
            for imp in _list(pe, key):
                if type(imp) is dict or isinstance(imp, Mapping):  # (a dict first: the ABC's check is slower)
                    imp_names = _list(imp, "names")
                    if imp_names:  # (an empty list: nothing to fold, no generator made)
                        names.update(n for n in imp_names if isinstance(n, str))
                    imp_ordinals = _list(imp, "ordinals")
                    if imp_ordinals:
                        ordinals.update(o for o in imp_ordinals if isinstance(o, int) and not isinstance(o, bool))
        fw = pe.get("forwarders")
        if fw and (type(fw) is dict or isinstance(fw, Mapping)):
            for key, target in fw.items():
                if isinstance(key, str) and isinstance(target, str):
                    self.forwards.setdefault(key, []).append(target)

    def result(self) -> Asked:
        """The asked names and ordinals, the forwarders followed to a fixed point (once: it uses them up)."""
        names, ordinals, forwards = self.names, self.ordinals, self.forwards
        todo = [n for n in names if n in forwards] + [f"#{o}" for o in ordinals if f"#{o}" in forwards]
        while todo:
            for target in forwards.pop(todo.pop(), ()):
                func, ordinal = _forward_func(target)
                if func is not None and func not in names:
                    names.add(func)
                    if func in forwards:
                        todo.append(func)
                elif ordinal is not None and ordinal not in ordinals:
                    ordinals.add(ordinal)
                    if f"#{ordinal}" in forwards:
                        todo.append(f"#{ordinal}")
        return Asked(frozenset(names), frozenset(ordinals))


def _list(d: Mapping[str, Any], key: str) -> list:
    """d[key] when it is a list, else [] (a field of another type in an unchecked trace)."""
    v = d.get(key)
    return v if isinstance(v, list) else []
