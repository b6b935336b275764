"""Checking each event of a trace against the format's JSON Schema (schemas/trace-v1.json).

The reader (trace.py) keeps every event it can use: an event whose field has the wrong type loses
that field (it reads as absent) and the reader says so; nothing downstream then meets a number
where it expects a path. The checks are compiled once from the schema itself, so the schema stays
the one description of the format. Only the keywords the schema uses are understood: type, const,
enum, items, properties, required, additionalProperties, anyOf, minimum, maximum, pattern.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Callable, Optional

SCHEMA_PATH = Path(__file__).resolve().parent / "schemas" / "trace-v1.json"

Check = Callable[[Any], bool]

_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,),
    "null": (type(None),), "array": (list,), "object": (dict,),
}
_IGNORED = {"description", "title", "$comment"}


def compile_schema(schema: dict) -> Check:
    """A predicate that is true when a value satisfies `schema` (a subschema of the trace schema).

    Values come from json.loads, so `type(v)` is exactly one of str, int, float, bool, None, list
    and dict (JSON's true is a bool, never an integer). The common shapes get one small function
    each: a trace has 100,000 events of about ten fields."""
    keys = set(schema) - _IGNORED
    types: Optional[frozenset] = None
    if "type" in schema:
        names = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        types = frozenset(t for n in names for t in _TYPES[n])
    if keys == {"type"}:
        assert types is not None
        if len(types) == 1:
            (only,) = types
            return lambda v: type(v) is only
        return lambda v: type(v) in types
    if keys and keys <= {"type", "minimum", "maximum"} and types is not None and types <= {int, float, type(None)}:
        lo = schema.get("minimum", float("-inf"))
        hi = schema.get("maximum", float("inf"))
        return lambda v: type(v) in types and (v is None or lo <= v <= hi)
    if keys == {"enum"} or keys == {"const"}:
        allowed = schema["enum"] if "enum" in schema else [schema["const"]]
        pairs = frozenset((type(a), a) for a in allowed)
        scalar = frozenset(type(a) for a in allowed) - {list, dict}
        return lambda v: type(v) in scalar and (type(v), v) in pairs
    checks: list[Check] = []
    if types is not None:
        checks.append(lambda v: type(v) in types)
    for key in ("const", "enum"):
        if key in schema:
            checks.append(compile_schema({key: schema[key]}))
    if "minimum" in schema or "maximum" in schema:
        lo = schema.get("minimum", float("-inf"))
        hi = schema.get("maximum", float("inf"))
        checks.append(lambda v: type(v) not in (int, float) or lo <= v <= hi)
    if "pattern" in schema:
        rx = re.compile(schema["pattern"])
        checks.append(lambda v: type(v) is not str or rx.search(v) is not None)
    if "items" in schema:
        item = compile_schema(schema["items"])

        def of_items(v: Any) -> bool:
            if type(v) is list:
                for x in v:
                    if not item(x):
                        return False
            return True
        checks.append(of_items)
    if "properties" in schema or "required" in schema or "additionalProperties" in schema:
        props = {k: compile_schema(s) for k, s in schema.get("properties", {}).items()}
        required = tuple(schema.get("required", ()))
        extra = schema.get("additionalProperties")
        extra_check = compile_schema(extra) if isinstance(extra, dict) else None

        def of_object(v: Any) -> bool:
            if type(v) is not dict:
                return True
            for r in required:
                if r not in v:
                    return False
            for k, x in v.items():
                c = props.get(k, extra_check)
                if c is not None and not c(x):
                    return False
            return True
        checks.append(of_object)
    if "anyOf" in schema:
        alts = [compile_schema(s) for s in schema["anyOf"]]

        def any_of(v: Any) -> bool:
            for a in alts:
                if a(v):
                    return True
            return False
        checks.append(any_of)
    if not checks:
        return lambda v: True
    if len(checks) == 1:
        return checks[0]
    if len(checks) == 2:
        first, second = checks
        return lambda v: first(v) and second(v)

    def all_of(v: Any) -> bool:
        for c in checks:
            if not c(v):
                return False
        return True
    return all_of


def describe(schema: dict) -> str:
    """What a field must be, in a few words, for a message."""
    if "enum" in schema:
        return "one of " + ", ".join(json.dumps(a) for a in schema["enum"])
    if "const" in schema:
        return json.dumps(schema["const"])
    if "anyOf" in schema:
        return " or ".join(describe(s) for s in schema["anyOf"])
    names = schema.get("type")
    if names is None:
        return "valid"
    names = names if isinstance(names, list) else [names]
    words = {"string": "a string", "integer": "an integer", "number": "a number", "boolean": "true or false",
             "null": "null", "array": "a list", "object": "an object"}
    text = " or ".join(words[n] for n in names)
    if "items" in schema and "array" in names:
        text += f" (items {describe(schema['items'])})"
    return text


class EventSpec:
    """One event kind: a check and a description per field, the fields a writer always writes."""

    def __init__(self, kind: str, schema: dict, base: dict):
        props = {**base.get("properties", {}), **schema.get("properties", {})}
        self.kind = kind
        self.checks: dict[str, Check] = {k: compile_schema(s) for k, s in props.items()}
        self.wants: dict[str, str] = {k: describe(s) for k, s in props.items()}
        self.required = frozenset(r for r in schema.get("required", base.get("required", ())) if r in props)


def load_specs(path: Path = SCHEMA_PATH) -> tuple[dict[str, EventSpec], EventSpec]:
    """(kind -> EventSpec, the spec of an event of another kind), from the trace schema's `event`
    dispatch (allOf: if ev == kind then $ref)."""
    schema = json.loads(path.read_text(encoding="utf-8"))
    defs = schema["$defs"]
    base = defs["event"]
    specs: dict[str, EventSpec] = {}
    for branch in base.get("allOf", ()):
        kind = branch["if"]["properties"]["ev"]["const"]
        ref = branch["then"]["$ref"].rsplit("/", 1)[-1]
        specs[kind] = EventSpec(kind, defs[ref], base)
    return specs, EventSpec("", {}, base)


SPECS, OTHER = load_specs()


def _is_int(v: Any) -> bool:
    return type(v) is int


def check_event(obj: dict, essential: tuple[str, ...] = ()) -> tuple[list[str], bool]:
    """Check one event (a dict with a string "ev") against the schema of its kind.

    Returns (problems, usable): one phrase per problem. An event is unusable when one of the
    `essential` integer fields (those the reader indexes by) is missing or invalid; otherwise every
    field that breaks the schema is removed from `obj` (it reads as absent), and a field a writer
    always writes that is missing is only reported. An event of a kind this version does not know
    gets only the checks every event gets (a later minor version may add kinds)."""
    kind = obj["ev"]
    spec = SPECS.get(kind, OTHER)
    checks = spec.checks
    bad = None
    for k, v in obj.items():
        c = checks.get(k)
        if c is not None and not c(v):
            if bad is None:
                bad = [k]
            else:
                bad.append(k)
    for name in essential:
        if name not in obj:
            return [f"{kind} event without {name!r} field, skipped"], False
        if bad is not None and name in bad or not _is_int(obj[name]):
            if not _is_int(obj[name]):
                return [f"{kind} event with a non-integer {name!r} field, skipped"], False
            return [f"{kind} event with an invalid {name!r} field (must be {spec.wants[name]}), skipped"], False
    if bad is None and spec.required <= obj.keys():
        return [], True
    problems: list[str] = []
    for k in bad or ():
        problems.append(f"{kind} event with an invalid {k!r} field (must be {spec.wants[k]}), read as absent")
        del obj[k]
    for r in sorted(spec.required - obj.keys()):
        if not (bad and r in bad):
            problems.append(f"{kind} event without {r!r} field, read as absent")
    return problems, True
