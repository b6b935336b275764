"""`--redact`: user names, home folders and machine names replaced in a report's text."""

from __future__ import annotations

import json
import re

from dlltrace.trace.reader import Trace

_USERS = re.compile(r"(?i)([A-Za-z]:\\(?:Users|Documents and Settings)\\)([^\\/\"'\s]+)")
_HOMES = re.compile(r"(?i)((?:[A-Z]:)?[\\/](?:home)[\\/])([^\\/\"'\s]+)")


def redact(text: str, trace: Trace) -> str:
    names = set()
    for m in _USERS.finditer(json.dumps([e for e in trace.events], ensure_ascii=False).replace("\\\\", "\\")):
        if m.group(2).lower() not in ("public", "default", "all users", "<user>"):
            names.add(m.group(2))
    text = _USERS.sub(lambda m: m.group(1) + ("<user>" if m.group(2).lower() not in ("public", "default") else m.group(2)), text)
    text = _HOMES.sub(lambda m: m.group(1) + "<user>", text)
    text = re.sub(r"(?i)\bZ:\\root\b", r"Z:\\<home>", text)
    # the machine name in a UNC path (\\SERVER\share, \??\UNC\SERVER\share), raw or JSON-escaped
    start = r"(?<![^\s\"'(\[,=])"  # a path starts a word, a string or a value
    for prefix in (r"\\\\", r"\\\\\\\\", r"\\\?\?\\UNC\\", r"\\\\\?\?\\\\UNC\\\\"):
        text = re.sub(start + "(" + prefix + r")(?!<machine>)([^\\\s\"'/]+)", r"\1<machine>", text)
    for n in sorted(names, key=len, reverse=True):
        if len(n) >= 3:
            text = re.sub(re.escape(n), "<user>", text, flags=re.I)
    return text
