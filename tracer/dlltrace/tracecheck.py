"""Checking values against this package's JSON Schemas: each trace event against schemas/trace-v1.json,
a whole scenario against schemas/scenario-v1.json (diagnosis/scenario.py).

The reader (trace.py) keeps every event it can use: an event whose field has the wrong type loses
that field (it reads as absent) and the reader says so; nothing downstream then meets a number
where it expects a path. The checks are compiled once from the schema itself, so the schema stays
the one description of the format.

Only the keywords in IMPLEMENTED are understood (annotations such as description and title are
skipped). A schema that uses any other keyword is refused when it is compiled: SchemaKeywordError
names the keyword and where it sits in the schema, so a check is never silently missing.

Differences from a general validator, on purpose:
- "integer" is a JSON integer (type int): 1.0 is not one, and true is neither a number nor an
  integer; const and enum compare the JSON type too (1.0 is not the const 1).
- $ref reaches only into the same document ("#/$defs/name", "#/properties/..."), and a $ref that
  reaches back into itself is refused: every check then has a depth fixed by the schema, whatever
  the depth of the value, and Validator.first_error walks the value in a loop, not by recursion.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional, Union

SCHEMA_PATH = Path(__file__).resolve().parent / "schemas" / "trace-v1.json"
SCENARIO_SCHEMA_PATH = Path(__file__).resolve().parent / "schemas" / "scenario-v1.json"

Check = Callable[[Any], bool]
Schema = Union[dict, bool]

_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,),
    "null": (type(None),), "array": (list,), "object": (dict,),
}
_IGNORED = {"description", "title", "$comment", "$schema", "$id", "$defs", "default", "examples"}
IMPLEMENTED = frozenset({
    "type", "const", "enum", "minimum", "maximum", "minLength", "maxLength", "pattern",
    "items", "properties", "required", "additionalProperties", "propertyNames",
    "anyOf", "oneOf", "allOf", "not", "if", "then", "else", "$ref",
})


class SchemaKeywordError(ValueError):
    """A schema uses a keyword (or a form of one) that tracecheck does not implement."""

    def __init__(self, keyword: str, where: str, why: str = "is not implemented by dlltrace.tracecheck"):
        super().__init__(f"schema keyword {keyword!r} at {where} {why}")
        self.keyword = keyword
        self.where = where


def _pointer(where: str, *parts: Union[str, int]) -> str:
    return where + "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


class Node:
    """One compiled subschema: `ok` (a predicate) and what Validator.first_error needs to say
    which keyword failed. `where` is the subschema's place in its document (a JSON pointer)."""

    __slots__ = ("schema", "where", "ok", "types", "never", "props", "required", "extra", "names",
                 "items", "any_of", "one_of", "all_of", "not_", "if_", "then", "else_", "ref")

    def __init__(self, schema: Schema, where: str):
        self.schema = schema
        self.where = where
        self.ok: Check = _always
        self.types: Optional[frozenset] = None
        self.never = schema is False
        self.props: dict[str, Node] = {}
        self.required: tuple[str, ...] = ()
        self.extra: Optional[Node] = None
        self.names: Optional[Node] = None
        self.items: Optional[Node] = None
        self.any_of: list[Node] = []
        self.one_of: list[Node] = []
        self.all_of: list[Node] = []
        self.not_: Optional[Node] = None
        self.if_: Optional[Node] = None
        self.then: Optional[Node] = None
        self.else_: Optional[Node] = None
        self.ref: Optional[Node] = None

    @property
    def title(self) -> Optional[str]:
        return self.schema.get("title") if isinstance(self.schema, dict) else None


def _always(v: Any) -> bool:
    return True


def _never(v: Any) -> bool:
    return False


class _Compiler:
    def __init__(self, root: Optional[dict]):
        self.root = root
        self.refs: dict[str, Node] = {}
        self.active: list[str] = []

    def resolve(self, ref: Any, where: str) -> Node:
        if not isinstance(ref, str) or not ref.startswith("#"):
            raise SchemaKeywordError("$ref", where, f"is {ref!r}: only references into the same document (#/...) are implemented")
        if ref in self.refs:
            return self.refs[ref]
        if ref in self.active:
            raise SchemaKeywordError("$ref", where, f"is {ref!r}, which refers back into itself: recursive schemas are not implemented")
        target: Any = self.root
        for part in ref[1:].split("/")[1:] if ref != "#" else []:
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(target, dict) and part in target:
                target = target[part]
            elif isinstance(target, list) and part.isdigit() and int(part) < len(target):
                target = target[int(part)]
            else:
                raise SchemaKeywordError("$ref", where, f"is {ref!r}, which the schema does not hold")
        self.active.append(ref)
        try:
            node = self.compile(target, ref)
        finally:
            self.active.pop()
        self.refs[ref] = node
        return node

    def compile(self, schema: Schema, where: str) -> Node:
        node = Node(schema, where)
        if schema is True or schema is False:
            node.ok = _always if schema else _never
            return node
        if not isinstance(schema, dict):
            raise SchemaKeywordError("(schema)", where, f"is {type(schema).__name__}, not an object or a boolean")
        for k in schema:
            if k not in IMPLEMENTED and k not in _IGNORED:
                raise SchemaKeywordError(k, where)
        for k in ("then", "else"):
            if k in schema and "if" not in schema:
                raise SchemaKeywordError(k, where, "has no 'if' beside it")
        node.ok = self._predicate(node, schema, where)
        return node

    def _sub(self, schema: Schema, where: str, *parts: Union[str, int]) -> Node:
        return self.compile(schema, _pointer(where, *parts))

    def _predicate(self, node: Node, schema: dict, where: str) -> Check:
        """The fast predicate; the common shapes get one small function each: a trace has 100,000
        events of about ten fields."""
        keys = set(schema) - _IGNORED
        types: Optional[frozenset] = None
        if "type" in schema:
            names = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
            for n in names:
                if n not in _TYPES:
                    raise SchemaKeywordError("type", where, f"names the type {n!r}, which is not a JSON type")
            types = frozenset(t for n in names for t in _TYPES[n])
            node.types = types
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
            return _enum_check(schema, where)
        checks: list[Check] = []
        if types is not None:
            checks.append(lambda v: type(v) in types)
        for key in ("const", "enum"):
            if key in schema:
                checks.append(_enum_check({key: schema[key]}, where))
        if "minimum" in schema or "maximum" in schema:
            lo = schema.get("minimum", float("-inf"))
            hi = schema.get("maximum", float("inf"))
            checks.append(lambda v: type(v) not in (int, float) or lo <= v <= hi)
        if "minLength" in schema or "maxLength" in schema:
            short = schema.get("minLength", 0)
            long = schema.get("maxLength", float("inf"))
            checks.append(lambda v: type(v) is not str or short <= len(v) <= long)
        if "pattern" in schema:
            rx = re.compile(schema["pattern"])
            checks.append(lambda v: type(v) is not str or rx.search(v) is not None)
        if "items" in schema:
            if not isinstance(schema["items"], (dict, bool)):
                raise SchemaKeywordError("items", where, "is an array (the tuple form): not implemented")
            node.items = self._sub(schema["items"], where, "items")
            item = node.items.ok

            def of_items(v: Any) -> bool:
                if type(v) is list:
                    for x in v:
                        if not item(x):
                            return False
                return True
            checks.append(of_items)
        if "properties" in schema or "required" in schema or "additionalProperties" in schema or "propertyNames" in schema:
            node.props = {k: self._sub(s, where, "properties", k) for k, s in schema.get("properties", {}).items()}
            node.required = tuple(schema.get("required", ()))
            if "additionalProperties" in schema:
                node.extra = self._sub(schema["additionalProperties"], where, "additionalProperties")
            if "propertyNames" in schema:
                node.names = self._sub(schema["propertyNames"], where, "propertyNames")
            props = {k: n.ok for k, n in node.props.items()}
            required = node.required
            extra_check = node.extra.ok if node.extra is not None else None
            name_check = node.names.ok if node.names is not None else None

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
                    if name_check is not None and not name_check(k):
                        return False
                return True
            checks.append(of_object)
        if "anyOf" in schema:
            node.any_of = [self._sub(s, where, "anyOf", i) for i, s in enumerate(schema["anyOf"])]
            alts = [a.ok for a in node.any_of]

            def any_of(v: Any) -> bool:
                for a in alts:
                    if a(v):
                        return True
                return False
            checks.append(any_of)
        if "oneOf" in schema:
            node.one_of = [self._sub(s, where, "oneOf", i) for i, s in enumerate(schema["oneOf"])]
            ones = [a.ok for a in node.one_of]
            checks.append(lambda v: sum(1 for a in ones if a(v)) == 1)
        if "allOf" in schema:
            node.all_of = [self._sub(s, where, "allOf", i) for i, s in enumerate(schema["allOf"])]
            checks.extend(a.ok for a in node.all_of)
        if "not" in schema:
            node.not_ = self._sub(schema["not"], where, "not")
            neg = node.not_.ok
            checks.append(lambda v: not neg(v))
        if "if" in schema:
            node.if_ = self._sub(schema["if"], where, "if")
            node.then = self._sub(schema["then"], where, "then") if "then" in schema else None
            node.else_ = self._sub(schema["else"], where, "else") if "else" in schema else None
            cond = node.if_.ok
            yes = node.then.ok if node.then is not None else _always
            no = node.else_.ok if node.else_ is not None else _always
            checks.append(lambda v: yes(v) if cond(v) else no(v))
        if "$ref" in schema:
            node.ref = self.resolve(schema["$ref"], _pointer(where, "$ref"))
            checks.append(node.ref.ok)  # (complete: a $ref into itself was refused)
        if not checks:
            return _always
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


def _enum_check(schema: dict, where: str = "#") -> Check:
    allowed = schema["enum"] if "enum" in schema else [schema["const"]]
    if not isinstance(allowed, list):
        raise SchemaKeywordError("enum", where, "is not an array")
    scalars = [a for a in allowed if type(a) not in (list, dict)]
    if len(scalars) != len(allowed):
        raise SchemaKeywordError("enum" if "enum" in schema else "const", where, "holds an array or an object: not implemented")
    pairs = frozenset((type(a), a) for a in allowed)
    scalar = frozenset(type(a) for a in allowed)
    return lambda v: type(v) in scalar and (type(v), v) in pairs


def compile_node(schema: Schema, root: Optional[dict] = None, where: str = "#") -> Node:
    """`schema` (a subschema of `root`, which its $refs are resolved in) compiled into a Node."""
    return _Compiler(root if root is not None else (schema if isinstance(schema, dict) else None)).compile(schema, where)


def compile_schema(schema: Schema, root: Optional[dict] = None, where: str = "#") -> Check:
    """A predicate that is true when a value satisfies `schema`.

    Values come from json.loads (or tomllib), so `type(v)` is exactly one of str, int, float, bool,
    None, list and dict (JSON's true is a bool, never an integer). Raises SchemaKeywordError on a
    keyword it does not implement."""
    return compile_node(schema, root, where).ok


# --- explaining a failure: which keyword, where in the value ------------------------------------------------


@dataclass
class SchemaError:
    """The first place a value breaks its schema: `path` into the value (keys and indexes), the
    failing `keyword`, the compiled `node` that holds it (node.where: its place in the schema), the
    offending `value`, and `message`, a few words for a one-line error (`key` is the unknown or
    missing key for additionalProperties, propertyNames and required)."""

    path: tuple
    keyword: str
    node: Node
    value: Any
    message: str
    key: Optional[str] = None


def show(v: Any, limit: int = 60) -> str:
    """A value for a message: its repr (escapes control characters), cut to `limit` characters."""
    text = repr(v)
    return text if len(text) <= limit else text[: limit - 3] + "..."


_WORDS = {"string": "a string", "integer": "an integer", "number": "a number", "boolean": "true or false",
          "null": "null", "array": "a list", "object": "a table"}
_JSON_NAMES = {str: "a string", int: "an integer", float: "a number", bool: "a boolean", type(None): "null",
               list: "a list", dict: "a table"}


def json_type(v: Any) -> str:
    return _JSON_NAMES.get(type(v), type(v).__name__)


def describe_node(node: Node) -> str:
    """What a value must be, in a few words: the subschema's title when it has one. (Recursive in
    the schema's depth, which compiling bounded.)"""
    if node.title:
        return node.title
    s = node.schema
    if s is True:
        return "anything"
    if s is False:
        return "nothing"
    if "enum" in s:
        return "one of " + ", ".join(json.dumps(a) for a in s["enum"])
    if "const" in s:
        return json.dumps(s["const"])
    if node.ref is not None and len(set(s) - _IGNORED) == 1:
        return describe_node(node.ref)
    alts = node.any_of or node.one_of
    if alts:
        return " or ".join(describe_node(a) for a in alts)
    names = s.get("type")
    if names is None:
        return "valid"
    names = names if isinstance(names, list) else [names]
    text = " or ".join(_WORDS[n] for n in names)
    if "minimum" in s and "maximum" in s:
        text += f" {s['minimum']}..{s['maximum']}"
    elif "minimum" in s:
        text += f" >= {s['minimum']}"
    elif "maximum" in s:
        text += f" <= {s['maximum']}"
    if s.get("minLength") == 1 and "maxLength" not in s:
        text = "a non-empty string" if text == "a string" else text + " (not empty)"
    elif "minLength" in s or "maxLength" in s:
        text += f" of {s.get('minLength', 0)} to {s.get('maxLength', 'any number of')} characters"
    if node.items is not None and "array" in names:
        text += f", each item {describe_node(node.items)}"
    return text


def _problem(node: Node, v: Any, path: tuple) -> Union[SchemaError, tuple, None]:
    """At one node: the error of one of its own keywords, or (child node, child value, child path),
    the first child that fails, or None (nothing fails here: only when `node.ok(v)` is true)."""
    s = node.schema
    if node.never:
        return SchemaError(path, "false", node, v, "is not allowed here")
    if not isinstance(s, dict):  # true (false is `never`, above)
        return None
    if node.types is not None and type(v) not in node.types:
        return SchemaError(path, "type", node, v, f"must be {describe_node(node)}, not {json_type(v)}")
    for key in ("const", "enum"):
        if key in s and not _enum_check({key: s[key]})(v):
            title = node.title
            if title:
                listed = f" ({', '.join(s['enum'])})" if key == "enum" and all(type(a) is str for a in s["enum"]) else ""
                return SchemaError(path, key, node, v, f"{show(v)} is not {title}{listed}")
            return SchemaError(path, key, node, v, f"{show(v)} is not {describe_node(node)}" if key == "enum"
                               else f"must be {describe_node(node)}, not {show(v)}")
    if type(v) in (int, float):
        for key, bad in (("minimum", lambda lim: not lim <= v), ("maximum", lambda lim: not v <= lim)):
            if key in s and bad(s[key]):
                return SchemaError(path, key, node, v, f"must be {describe_node(node)}, not {show(v)}")
    if type(v) is str:
        if "minLength" in s and len(v) < s["minLength"] or "maxLength" in s and len(v) > s["maxLength"]:
            key = "minLength" if "minLength" in s and len(v) < s["minLength"] else "maxLength"
            what = "is empty" if v == "" else f"is {len(v)} characters long"
            return SchemaError(path, key, node, v, f"{what}: must be {describe_node(node)}")
        if "pattern" in s and re.search(s["pattern"], v) is None:
            return SchemaError(path, "pattern", node, v, f"must be {describe_node(node)}, not {show(v)}")
    if type(v) is dict and (node.props or node.required or node.extra is not None or node.names is not None):
        if node.extra is not None and node.extra.never:
            for k in v:
                if k not in node.props:
                    return SchemaError(path, "additionalProperties", node, v,
                                       f"unknown key {show(k)} (expected one of: {', '.join(sorted(node.props))})", k)
        for r in node.required:
            if r not in v:
                return SchemaError(path, "required", node, v, f"needs `{r}`", r)
        for k, x in v.items():
            if node.names is not None and not node.names.ok(k):
                return SchemaError(path, "propertyNames", node, v, f"key {show(k)} must be {describe_node(node.names)}", k)
            c = node.props.get(k, node.extra)
            if c is not None and not c.ok(x):
                return c, x, path + (k,)
    if type(v) is list and node.items is not None:
        for i, x in enumerate(v):
            if not node.items.ok(x):
                return node.items, x, path + (i,)
    for alts, key in ((node.any_of, "anyOf"), (node.one_of, "oneOf")):
        if not alts:
            continue
        passing = sum(1 for a in alts if a.ok(v))
        if passing == 1 or passing and key == "anyOf":
            continue
        if passing > 1:
            return SchemaError(path, key, node, v, f"matches more than one of: {describe_node(node)}")
        # explain the one alternative made for this JSON type, when there is one (a const or an
        # enum beside it is not: "" beside a path, explain the path)
        typed = [a for a in alts if type(v) in _types_of(a)]
        if len(typed) > 1:
            typed = [a for a in typed if not _is_listing(a)]
        if len(typed) == 1:
            return typed[0], v, path
        return SchemaError(path, key, node, v, f"must be {describe_node(node)}, not {show(v)}")
    for a in node.all_of:
        if not a.ok(v):
            return a, v, path
    if node.not_ is not None and node.not_.ok(v):
        return SchemaError(path, "not", node, v, f"must not be {describe_node(node.not_)}")
    if node.if_ is not None:
        branch = node.then if node.if_.ok(v) else node.else_
        if branch is not None and not branch.ok(v):
            return branch, v, path
    if node.ref is not None and not node.ref.ok(v):
        return node.ref, v, path
    return None


def _types_of(node: Node) -> frozenset:
    """The Python types a node can accept at all (every type when it does not say)."""
    while (node.types is None and node.ref is not None and isinstance(node.schema, dict)
           and len(set(node.schema) - _IGNORED) == 1):
        node = node.ref
    if node.types is not None:
        return node.types
    s = node.schema
    if isinstance(s, dict) and ("const" in s or "enum" in s):
        return frozenset(type(a) for a in (s["enum"] if "enum" in s else [s["const"]]))
    return frozenset(t for ts in _TYPES.values() for t in ts) if s is not False else frozenset()


def _is_listing(node: Node) -> bool:
    s = node.schema
    return isinstance(s, dict) and bool({"const", "enum"} & set(s)) and not (set(s) - _IGNORED - {"const", "enum"})


class Validator:
    """A whole document's schema compiled once: is_valid (the fast predicate) and first_error."""

    def __init__(self, schema: dict):
        self.schema = schema
        self.root = compile_node(schema, schema)

    @classmethod
    def from_path(cls, path: Path) -> "Validator":
        return cls(json.loads(path.read_text(encoding="utf-8")))

    def is_valid(self, value: Any) -> bool:
        return self.root.ok(value)

    def first_error(self, value: Any) -> Optional[SchemaError]:
        """None when `value` is valid; otherwise its first error, found by walking down from the
        root to the first failing child of each failing node (a loop: no recursion on the value)."""
        if self.root.ok(value):
            return None
        node, v, path = self.root, value, ()
        while True:
            found = _problem(node, v, path)
            if found is None:  # (cannot happen: every failing node has a failing keyword or child)
                return SchemaError(path, "?", node, v, f"must be {describe_node(node)}")
            if isinstance(found, SchemaError):
                return found
            node, v, path = found


# --- trace events -------------------------------------------------------------------------------------------


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


# The keywords load_specs reads at the level of an event kind and of the common `event` def (the
# fields' own schemas are compiled, and refused there when they use anything else).
_KIND_KEYWORDS = {"type", "properties", "required"}
_EVENT_KEYWORDS = {"type", "properties", "required", "allOf", "not"}


def _only(schema: dict, allowed: set, where: str) -> None:
    for k in schema:
        if k not in allowed and k not in _IGNORED:
            raise SchemaKeywordError(k, where, "is not implemented at the level of an event (dlltrace.tracecheck.load_specs)")


class EventSpec:
    """One event kind: a check and a description per field, the fields a writer always writes, and `valid`: the
    whole event's check made one function (_event_function), true when every field it has passes and every
    field a writer always writes is there."""

    def __init__(self, kind: str, schema: dict, base: dict, root: Optional[dict] = None, where: str = "#"):
        props = {**base.get("properties", {}), **schema.get("properties", {})}
        self.kind = kind
        own = schema.get("properties", {})
        nodes = {k: compile_node(s, root, _pointer(where if k in own else "#/$defs/event", "properties", k))
                 for k, s in props.items()}
        self.checks: dict[str, Check] = {k: n.ok for k, n in nodes.items()}
        self.wants: dict[str, str] = {k: describe(s) for k, s in props.items()}
        self.required = frozenset(r for r in schema.get("required", base.get("required", ())) if r in props)
        self._nodes = nodes
        self._fast: Optional[Callable[[dict], bool]] = None
        self._seen = 0
        # `valid` is False (check_event's loop decides) for a kind's first FAST_AFTER events, then fast(): compiling a
        # kind's function takes about 0.5 ms (20 ms for the forty kinds, at import, when it was made there), which a
        # trace of a few thousand events would not win back
        self.valid: Callable[[dict], bool] = self._warming

    def fast(self) -> Callable[[dict], bool]:
        """The kind's one function (_event_function), compiled the first time it is asked for."""
        if self._fast is None:
            self._fast = _event_function(self._nodes, self.required)
        return self._fast

    def _warming(self, obj: dict) -> bool:
        self._seen += 1
        if self._seen >= FAST_AFTER:
            self.valid = self.fast()
        return False


FAST_AFTER = 500  # events of a kind checked by check_event's loop before the kind's function is compiled (EventSpec)


def _inline(node: Node, v: str, ns: dict[str, Any]) -> str:
    """A Python expression over the variable `v` that is true exactly when node.ok(v) is: for the shapes
    _predicate gives a small function of their own, the same test written out (its constants put in `ns`);
    for any other, a call of node.ok. (`type(v) is T` for a one-type set: json.loads makes no subclass.)"""
    def const(value: Any) -> str:
        return _const_name(ns, value)

    s = node.schema
    if s is True or s is False:
        return str(s)
    keys = set(s) - _IGNORED
    types = node.types
    if types is not None and keys == {"type"}:
        if len(types) == 1:
            (only,) = types
            return f"type({v}) is {const(only)}"
        return f"type({v}) in {const(types)}"
    if types is not None and keys and keys <= {"type", "minimum", "maximum"} and types <= {int, float, type(None)}:
        lo, hi = s.get("minimum", float("-inf")), s.get("maximum", float("inf"))
        bounds = " and ".join(([f"{const(lo)} <= {v}"] if lo != float("-inf") else [])
                              + ([f"{v} <= {const(hi)}"] if hi != float("inf") else [])) or "True"
        if types == {int}:
            return f"(type({v}) is int and {bounds})"
        return f"(type({v}) in {const(types)} and ({v} is None or ({bounds})))"
    if keys == {"enum"} or keys == {"const"}:
        allowed = s["enum"] if "enum" in s else [s["const"]]
        if allowed and all(type(a) is str for a in allowed):
            return f"(type({v}) is str and {v} in {const(frozenset(allowed))})"
        pairs = frozenset((type(a), a) for a in allowed)
        scalar = frozenset(type(a) for a in allowed)
        return f"(type({v}) in {const(scalar)} and (type({v}), {v}) in {const(pairs)})"
    if types is not None and keys == {"type", "pattern"}:
        search = const(re.compile(s["pattern"]).search)
        if types == {str}:
            return f"(type({v}) is str and {search}({v}) is not None)"
        return f"(type({v}) in {const(types)} and (type({v}) is not str or {search}({v}) is not None))"
    return f"{const(node.ok)}({v})"


def _event_function(nodes: dict[str, Node], required: frozenset) -> Callable[[dict], bool]:
    """One function of an event that is true exactly when each of its fields in `nodes` passes its check and
    every `required` field is there: the required fields asked at once, each field's test written out inline
    (_inline), its constants the function's own locals. check_event's loop over the fields, a call a field, is
    what it takes only for an event that fails (for its words)."""
    ns: dict[str, Any] = {}
    body = [f"    if not o.keys() >= {_const_name(ns, required)}:", "        return False"]
    for k, node in nodes.items():
        test = _inline(node, "v", ns)
        if k in required:
            body += [f"    v = o[{k!r}]", f"    if not {test}:", "        return False"]
        else:
            body += [f"    if {k!r} in o:", f"        v = o[{k!r}]", f"        if not {test}:", "            return False"]
    params = "".join(f", {name}={name}" for name in ns)
    src = "\n".join([f"def valid(o{params}):", *body, "    return True"])
    exec(compile(src, "<tracecheck event>", "exec"), ns)
    return ns["valid"]


def _const_name(ns: dict[str, Any], value: Any) -> str:
    """`value` put in the namespace `ns` under a new name, the name (a constant of _event_function's source)."""
    name = f"_c{len(ns)}"
    ns[name] = value
    return name


class Specs:
    """kind -> EventSpec, from the trace schema's `event` dispatch (allOf: if ev == kind then $ref), each kind's
    EventSpec made when first asked for (all forty at import took ~5 ms of every command that reads a trace, which
    meets a dozen kinds; load_specs makes them all). Raises SchemaKeywordError on a keyword it would otherwise
    skip: in the dispatch and the common `event` def here, in a kind's def when the kind is made."""

    def __init__(self, path: Path = SCHEMA_PATH):
        schema = json.loads(path.read_text(encoding="utf-8"))
        defs = schema["$defs"]
        base = defs["event"]
        _only(base, _EVENT_KEYWORDS, "#/$defs/event")
        self._schema, self._defs, self._base = schema, defs, base
        self._refs: dict[str, str] = {}  # kind -> the name of its def
        for i, branch in enumerate(base.get("allOf", ())):
            where = f"#/$defs/event/allOf/{i}"
            _only(branch, {"if", "then"}, where)
            cond, then = branch.get("if", {}), branch.get("then", {})
            if set(cond) != {"properties"} or set(cond["properties"]) != {"ev"} or set(cond["properties"]["ev"]) != {"const"}:
                raise SchemaKeywordError("if", where + "/if", "is not of the form {properties: {ev: {const: KIND}}}")
            if set(then) != {"$ref"} or not str(then["$ref"]).startswith("#/$defs/"):
                raise SchemaKeywordError("then", where + "/then", "is not of the form {$ref: #/$defs/KIND}")
            self._refs[cond["properties"]["ev"]["const"]] = then["$ref"].rsplit("/", 1)[-1]
        self._made: dict[str, EventSpec] = {}
        self.other = EventSpec("", {}, base, schema)  # (an event of a kind this version does not know)

    def get(self, kind: str, default: Optional[EventSpec] = None) -> Optional[EventSpec]:
        spec = self._made.get(kind)
        if spec is None:
            ref = self._refs.get(kind)
            if ref is None:
                return default
            _only(self._defs[ref], _KIND_KEYWORDS, f"#/$defs/{ref}")
            spec = self._made[kind] = EventSpec(kind, self._defs[ref], self._base, self._schema, f"#/$defs/{ref}")
        return spec

    def kinds(self) -> list[str]:
        return list(self._refs)

    def values(self) -> list[EventSpec]:
        return [self[k] for k in self._refs]

    def __getitem__(self, kind: str) -> EventSpec:
        spec = self.get(kind)
        if spec is None:
            raise KeyError(kind)
        return spec


def load_specs(path: Path = SCHEMA_PATH) -> tuple[dict[str, EventSpec], EventSpec]:
    """(kind -> EventSpec, the spec of an event of another kind), every kind made now (Specs). Raises
    SchemaKeywordError on a keyword it would otherwise skip."""
    specs = Specs(path)
    return {k: specs[k] for k in specs.kinds()}, specs.other


SPECS = Specs()
OTHER = SPECS.other
_MADE = SPECS._made



# a C0/C1 control character or a lone surrogate: escaped in the words of a warning (one line, safe to print)
_UNSEEN = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


def plain(text: str, limit: int = 60) -> str:
    """`text` for a one-line message: cut to `limit` characters, control characters and lone surrogates as
    their escapes (\\r, \\x1b, \\udc80)."""
    if len(text) > limit:
        text = text[:limit - 3] + "..."
    return text if _UNSEEN.search(text) is None else _UNSEEN.sub(
        lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def _is_int(v: Any) -> bool:
    return type(v) is int


def check_event(obj: dict, essential: tuple[str, ...] = ()) -> tuple[list[str], bool]:
    """Check one event (a dict with a string "ev") against the schema of its kind.

    Returns (problems, usable): one phrase per problem. An event is unusable when one of the
    `essential` integer fields (those the reader indexes by) is missing or invalid; otherwise every
    field that breaks the schema is removed from `obj` (it reads as absent), and a field a writer
    always writes that is missing is only reported. An event of a kind this version does not know
    gets only the checks every event gets (a later minor version may add kinds)."""
    spec = _MADE.get(obj["ev"]) or SPECS.get(obj["ev"], OTHER) or OTHER  # (a dict's get first: once per event)
    if spec.valid(obj):  # (the common case, in one function, once the kind is common: only the essential fields then)
        for name in essential:
            if type(obj.get(name)) is not int:
                break
        else:
            return [], True
    kind = obj["ev"] if spec is not OTHER else plain(obj["ev"])  # (words for a warning line)
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
        if bad is not None and name in bad or type(obj[name]) is not int:  # (_is_int, inline: 5 calls an event)
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
