"""`--redact`: the user's names, home folders and machine names replaced, from facts the trace holds
(docs/redaction.md).

The identifying values come from the trace itself, never from a list of likely names: the folder
that IS a user profile (`C:\\Users\\NAME`, `C:\\Documents and Settings\\NAME`, Wine's
`C:\\users\\NAME`), a Unix home (`/home/NAME`, `Z:\\home\\NAME`, `/root`), the server of a UNC path
(`\\\\SERVER\\share`, `\\??\\UNC\\SERVER`, `\\\\?\\UNC\\SERVER`), and USERNAME / USERPROFILE / HOME /
COMPUTERNAME where a trace's `env` records them. A value is replaced as a whole path component, in
its place only (a user named `lib` is replaced in `C:\\Users\\lib`, never in `venv\\Lib`), with either
separator, case-insensitively. Every spelling of a value is a place too: URL-encoded, 8.3 short
names, ~NAME, /tmp/NAME-x, a URL's host and user. A user, a word of a full name or a machine name of
three letters or more is also replaced wherever it stands alone as a word (a message, the command
line, the trace file's name); one a file path of the trace uses otherwise (`lib`: `venv\\Lib`) is left
in file paths, and a URL never counts as one (docs/redaction.md).

redact_trace() makes a redacted copy of the whole trace before any report is made of it: every
form (text, terminal, JSON, Markdown) is made from it, so none can bypass the redaction, and a form
that cuts a path short (a message cut at 160 characters) cuts the redacted one. redact() is the
same positional rules on any text (the report's own output is passed through it once more)."""

from __future__ import annotations

import errno
import gzip
import json
import os
import re
import shutil
import tempfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Iterable, Iterator, Optional, Union
from urllib.parse import quote, unquote

from dlltrace.console import output_file
from dlltrace.errors import EXIT_BAD_TRACE, EXIT_OUTPUT, EXIT_USAGE, DlltraceError
from dlltrace.trace.files import event_lines
from dlltrace.trace.reader import Events, Trace, paused_gc, raw_lines, read_trace

USER, MACHINE, NAME, HOME = "user", "machine", "name", "home"

_ENC = r"%5C|%2F"  # a separator URL-encoded (any case of the hex: every pattern is (?i))
_SEP = rf"(?:[\\/]|{_ENC})+"
_DELIM = r"""\s"'`(\[=,;…"""
_LEFT = rf"(?:^|(?<=[{_DELIM}]))"  # where a path starts: the start of a string or after a delimiter
_END = r"""(?=[\\/\s"'`;,:)\]}|<>…*?]|%5C|%2F|%20|$)"""  # where a path component ends
_COMP = rf"""(?:(?!{_ENC})[^\\/\s"'`;,:*?<>|…])+"""  # a component in running text (it ends at a space)
_COMP_SPACED = rf"""(?:(?!{_ENC})[^\\/"'`;:*?<>|…\r\n\t]){{1,80}}?"""  # a component that may hold spaces (a whole path)

_PROFILE_ROOT = rf"(?:(?<=[\\/…])|(?<=%5C)|(?<=%2F)|{_LEFT})(?:Users|Documents and Settings){_SEP}"
_HOME_ROOT = rf"(?:{_LEFT}|(?<=[A-Za-z]:)|(?<=unix)){_SEP}home{_SEP}"
_ROOT_HOME = re.compile(rf"(?i)((?:{_LEFT}|(?<=[Zz]:)|(?<=unix)){_SEP})root{_END}")
_UNC_ROOT = (rf"(?:\\+\?{{1,2}}\\+UNC{_SEP}|(?:{_LEFT}|(?<=\?\\))(?:\\{{2,}}|//)(?![?.][\\/])"
             rf"|{_LEFT}(?:%5C){{2}}(?![?.](?:%5C|%2F)))")
# a URL's scheme and user (https://, ssh://alice@, the URL-encoded https%3A%2F%2F): a machine name is its host
_URL_HEAD = r"(?<![\w+.-])[A-Za-z][\w+.-]*(?:://|%3A%2F%2F)"
_URL = re.compile(rf"(?i){_URL_HEAD}[^\s\"'`<>]*")

# the folders under Users that are nobody's
NOT_PROFILES = frozenset({"public", "default", "default user", "all users", "defaultapppool"})

# fields that are whole paths (or ;-lists of paths): a profile folder in them may hold spaces
PATH_KEYS = frozenset({"path", "exe", "cwd", "name", "caller", "shim", "executable", "prefix", "base_prefix",
                       "exec_prefix", "conda_prefix", "system32", "windows", "modules", "sys_path", "dll_directory",
                       "app", "user_dirs", "value", "installed_at", "source", "site", "user_site"})
# fields whose values are words of the trace format, never the user's (left as they are)
# (and `pe`: the facts read from inside a binary, its imports and exports, never a path)
FORMAT_KEYS = frozenset({"ev", "api", "op", "kind", "reason", "why", "via", "machine", "format", "handle", "base",
                         "cookie", "result", "file", "bytes", "hook", "hooks", "type", "version", "platform", "tool",
                         "pe", "known_dlls", "sets"})
# env `vars` that name the user, their home, their machine, where a trace records them
USER_VARS = ("USERNAME", "USER", "LOGNAME")
HOME_VARS = ("USERPROFILE", "HOME", "HOMEPATH")
MACHINE_VARS = ("COMPUTERNAME", "HOSTNAME", "USERDOMAIN", "LOGONSERVER")
IDENTITY_VARS = {**{v: USER for v in USER_VARS}, **{v: MACHINE for v in MACHINE_VARS}}
_QUOTED = re.compile(r""""([^"\r\n]*)"|'([^'\r\n]*)'""")
_WORDS = re.compile(r"[\s.]+")
_PATH_TOKEN = re.compile(r"""(?:[A-Za-z]:[\\/]|\\\\|\\\?\?\\|(?<![\w.])/)[^\s"'`<>|;,]*""")  # a path in running text


def _spaced(root: str) -> "re.Pattern[str]":
    """A component after `root` that may hold spaces: in a whole path, up to the next separator or the end."""
    return re.compile(rf"(?i){root}({_COMP_SPACED})(?=[\\/]|{_ENC}|$)")


def spellings(value: str) -> list[str]:
    """The ways a value is written in a trace: as it is, and URL-encoded (every byte that is not a letter,
    a digit or `_.-~` as %XX, a space as %20 or +)."""
    out = [value, quote(value, safe="")]
    if " " in value:
        out += [value.replace(" ", "%20"), value.replace(" ", "+")]
    return list(dict.fromkeys(out))


def _spelled(values: Iterable[str]) -> str:
    """A regex alternation of every spelling of the values, the longest first (never matching when none)."""
    alts = sorted({x for v in values for x in spellings(v)}, key=len, reverse=True)
    return "|".join(re.escape(x) for x in alts) or r"(?!)"


def short_base(value: str) -> str:
    """The stem of the 8.3 short names Windows gives a folder named `value` (`longusername` -> `LONGUS`,
    whose short names are `LONGUS~1` to `LONGUS~9`): spaces and dots dropped, the characters 8.3 names
    cannot hold as `_`, upper-cased, the first six."""
    return re.sub(r'["*+,/:;<=>?\[\]\\|]', "_", re.sub(r"[\s.]", "", value)).upper()[:6]


def _in_file_path(s: str, start: int, end: int, whole: bool, dotted: bool = False) -> bool:
    """Whether s[start:end] is part of a file path (not of a URL): it stands next to a separator; or `whole`
    (s is a path field, or a ;-list of paths) and its piece of s holds a separator or no space; or inside a
    path of running text (C:\\x, /x, \\\\x). `dotted`: or a part of a dotted name (tensorflow_core.python.x, python.exe: a module's, a file's)."""
    urls = [m.span() for m in _URL.finditer(s)] if "/" in s or "%" in s else []
    if any(a <= start < b for a, b in urls):
        return False
    if s[start - 1:start] in ("\\", "/") or s[end:end + 1] in ("\\", "/"):
        return True
    if whole:  # (the ;-separated piece it is in: a path when it holds a separator, or no space: python.exe)
        piece = s[s.rfind(";", 0, start) + 1:(s.find(";", end) + 1 or len(s) + 1) - 1]
        if "\\" in piece or "/" in piece or not re.search(r"\s", piece.strip()):
            return True
    if dotted and ((s[start - 1:start] == "." and s[start - 2:start - 1].isalnum())
                   or (s[end:end + 1] == "." and s[end + 1:end + 2].isalnum())):
        return True
    blank = s
    for a, b in urls:
        blank = blank[:a] + " " * (b - a) + blank[b:]
    return any(m.start() <= start and end <= m.end() for m in _PATH_TOKEN.finditer(blank))


_FIND = {USER: (_spaced(_PROFILE_ROOT), re.compile(rf"(?i){_PROFILE_ROOT}({_COMP})")),
         HOME: (_spaced(_HOME_ROOT), re.compile(rf"(?i){_HOME_ROOT}({_COMP})")),
         MACHINE: (re.compile(rf"(?i){_UNC_ROOT}({_COMP})"), re.compile(rf"(?i){_UNC_ROOT}({_COMP})"))}


# the redacted strings kept for the next ask of the same (a trace's paths come again and again); a
# 19 MB trace has ~100,000 distinct ones: 500,000 held ~100 MB (bench/report_memory.py --redact)
REDACT_CACHE = 4096


@dataclass
class Redactor:
    """The identifying values of one trace and their placeholders (`<user>`, `<user2>`, `<machine>`,
    `<name>`...: one per value, so that two users' folders stay two folders)."""

    placeholders: dict[str, str] = field(default_factory=dict)  # casefolded value -> placeholder
    kinds: dict[str, str] = field(default_factory=dict)  # casefolded value -> USER / MACHINE / NAME
    values: dict[str, str] = field(default_factory=dict)  # casefolded value -> as first seen
    prefixes: list[tuple[str, str]] = field(default_factory=list)  # a home folder from `env`, its user's placeholder
    anywhere: set[str] = field(default_factory=set)  # replaced wherever they stand alone as a word (3 letters or more)
    in_paths: set[str] = field(default_factory=set)  # ...but those a file path of the trace uses otherwise: not in file paths
    _compiled: Optional[tuple[int, list[tuple["re.Pattern[str]", Any, tuple[str, ...]]]]] = None
    _cache: dict[str, str] = field(default_factory=dict)
    _any_compiled: Optional[tuple[int, Optional["re.Pattern[str]"]]] = None

    # --- the facts ------------------------------------------------------------------------------------
    def add(self, kind: str, value: str) -> str:
        """The placeholder of a value (given one the first time it is seen)."""
        value = value.strip()
        k = value.casefold()
        if not k or k.startswith("<"):
            return value
        if k not in self.placeholders:
            n = sum(1 for x in self.kinds.values() if x == kind) + 1
            self.placeholders[k] = f"<{kind}{n if n > 1 else ''}>"
            self.kinds[k] = kind
            self.values[k] = value
        if kind == USER:  # the words of a full name ("Alice Smith", "alice.smith")
            words = [w for w in _WORDS.split(value) if len(w) >= 2 and any(c.isalpha() for c in w)]
            if len(words) > 1:
                for w in words:
                    self.add(NAME, w)
        return self.placeholders[k]

    def learn(self, s: str, spaced: bool, whole: bool) -> None:
        """The identifying values in one string of the trace. `whole`: the pass over whole paths (a
        `spaced` field, a whole path or ;-list of paths, and any quoted path), where a profile folder may
        hold spaces; else the pass over running text, where a component ends at a space."""
        if whole:
            for piece in (s.split(";") if spaced else [a or b for a, b in _QUOTED.findall(s)]):
                for kind in (USER, HOME):
                    for m in _FIND[kind][0].finditer(piece):
                        self._found(kind, m.group(1), whole)
            return
        for kind in (USER, HOME, MACHINE):
            for m in _FIND[kind][1].finditer(s):
                self._found(kind, m.group(1), whole)

    def _found(self, kind: str, value: str, whole: bool) -> None:
        if "%" in value:  # (C:%5CUsers%5CAlice%20Smith: the user is Alice Smith)
            value = unquote(value)
        k = value.casefold()
        if k in NOT_PROFILES or k.startswith("<"):
            return
        if kind == MACHINE:
            self.add(MACHINE, value)
        elif whole or not any(v.startswith(k + " ") for v in self.placeholders):
            self.add(USER, value)  # (a home's user is a user: Wine's C:\\users\\alice is /home/alice)

    def learn_env(self, env: dict) -> None:
        """USERNAME, USERPROFILE, HOME, COMPUTERNAME... where the `env` event records them."""
        env_vars = env.get("vars")
        if not isinstance(env_vars, dict):
            return
        by_name = {str(k).upper(): v for k, v in env_vars.items() if isinstance(v, str) and v.strip()}
        for var in USER_VARS:
            if var in by_name:
                self.add(USER, by_name[var])
        for var in MACHINE_VARS:
            if var in by_name and by_name[var].strip("\\/"):
                self.add(MACHINE, by_name[var].strip("\\/"))
                self.anywhere.add(by_name[var].strip("\\/").casefold())  # (of any length: it is the machine's)
        for var in HOME_VARS:
            home = by_name.get(var, "").rstrip("\\/")
            last = re.split(r"[\\/]", home)[-1] if home else ""
            if last and last.casefold() not in NOT_PROFILES and len(home) > len(last):
                self.prefixes.append((home, self.add(USER, last)))

    # --- the replacement ------------------------------------------------------------------------------
    def _patterns(self) -> list[tuple["re.Pattern[str]", Any, tuple[str, ...]]]:
        if self._compiled is not None and self._compiled[0] == len(self.placeholders) + len(self.prefixes):
            return self._compiled[1]

        def alt(*kinds: str) -> str:
            return _spelled(self.values[k] for k in self.placeholders if self.kinds[k] in kinds)

        # each pattern, the replacement, and the words one of which a string must hold for it to match
        pats: list[tuple["re.Pattern[str]", Any, tuple[str, ...]]] = []
        for home, ph in sorted(self.prefixes, key=lambda p: len(p[0]), reverse=True):
            *up, last = re.split(r"[\\/]+", home)
            pats.append((re.compile(rf"(?i)({_SEP.join(map(re.escape, up))}{_SEP})"
                                    rf"{re.escape(last)}{_END}"), lambda m, ph=ph: m.group(1) + ph, (last.casefold(),)))
        users = alt(USER, NAME)
        pats.append((re.compile(rf"(?i)({_PROFILE_ROOT})(?:({users}){_END}|({_COMP}))"), self._user_sub,
                     ("users", "documents and settings")))
        pats.append((re.compile(rf"(?i)({_HOME_ROOT})(?:({users}){_END}|({_COMP}))"), self._user_sub, ("home",)))
        pats.append((_ROOT_HOME, r"\1<home>", ("root",)))
        pats.append((re.compile(rf"(?i)({_UNC_ROOT})(?:({alt(MACHINE)}){_END}|({_COMP}))"), self._machine_sub,
                     ("\\\\", "//", "unc", "%5c%5c")))
        # the other spellings of a name found: ~alice (a Unix home, https://host/~alice/), a temporary folder
        # of the user's (/tmp/alice-build), a URL's host (https://MACHINE:8080/) and user (ssh://alice@host)
        known = self._known_sub
        pats.append((re.compile(rf"(?i)((?<![\w~])(?:~|%7E))({users}){_END}"), known, ("~", "%7e")))
        pats.append((re.compile(rf"(?i)((?<![\w.-])te?mp{_SEP})({users})(?=[-_]|{_END})"), known, ("tmp", "temp")))
        pats.append((re.compile(rf"(?i)({_URL_HEAD}(?:[^\s/@\"'`<>]*@)?)({alt(MACHINE)})(?=[.:/?#@]|{_END})"), known,
                     ("://", "%3a%2f%2f")))
        pats.append((re.compile(rf"(?i)({_URL_HEAD})({alt(USER)})(?=[:@]|%40)"), known, ("://", "%3a%2f%2f")))
        # the 8.3 short names of a user's folder (C:\\Users\\LONGUS~1 for longusername), wherever they stand
        shorts: dict[str, str] = {}
        for k, v in self.values.items():
            if self.kinds[k] == USER and short_base(v):
                shorts.setdefault(short_base(v).casefold(), self.placeholders[k])
        if shorts:
            bases = "|".join(re.escape(b) for b in sorted(shorts, key=len, reverse=True))
            pats.append((re.compile(rf"(?i)(?<![\w~])({bases})~[1-9](?![\w~])"),
                         lambda m, shorts=shorts: shorts[m.group(1).casefold()], ("~",)))
        # a path the report shortened ("…\alice\x"): the part cut off may have been the profile's root
        pats.append((re.compile(rf"(?i)(…{_SEP})({alt(USER, MACHINE, NAME)}){_END}"), self._known_sub, ("…",)))
        self._compiled = (len(self.placeholders) + len(self.prefixes), pats)
        return pats

    def _key(self, matched: str) -> Optional[str]:
        """The value a pattern matched (in any case, any of its spellings)."""
        k = matched.casefold()
        if k in self.placeholders:
            return k
        for k in (unquote(matched).casefold(), unquote(matched.replace("+", " ")).casefold()):
            if k in self.placeholders:
                return k
        for k, v in self.values.items():  # (a case the casefold does not give back: the regex's own folding)
            if any(re.fullmatch(re.escape(x), matched, re.I) for x in spellings(v)):
                return k
        return None

    def _ph(self, matched: str) -> str:
        k = self._key(matched)
        return self.placeholders[k] if k is not None else f"<{USER}>"

    def _user_sub(self, m: "re.Match[str]") -> str:
        if m.group(2):
            return m.group(1) + self._ph(m.group(2))
        value = m.group(3)
        if value.casefold() in NOT_PROFILES or value.startswith("<"):
            return m.group(0)
        return m.group(1) + self.add(USER, value)

    def _machine_sub(self, m: "re.Match[str]") -> str:
        return m.group(1) + (self._ph(m.group(2)) if m.group(2) else self.add(MACHINE, m.group(3)))

    def _known_sub(self, m: "re.Match[str]") -> str:
        return m.group(1) + self._ph(m.group(2))

    def _anywhere(self) -> Optional["re.Pattern[str]"]:
        """The names of three letters or more, wherever they stand alone as a word."""
        if self._any_compiled is None or self._any_compiled[0] != len(self.anywhere):
            pat = re.compile(rf"(?i)(?<!\w)({_spelled(self.values.get(k, k) for k in self.anywhere)})(?!\w)") \
                if self.anywhere else None
            self._any_compiled = (len(self.anywhere), pat)
        return self._any_compiled[1]

    def _alone_sub(self, s: str, whole: bool) -> "Any":
        def sub(m: "re.Match[str]") -> str:
            k = self._key(m.group(1))
            if s[m.start() - 1:m.start()] == "<" and re.match(r"\d*>", s[m.end():]):
                return m.group(0)  # (a placeholder: a user named user is not replaced in <user>)
            if k in self.in_paths and _in_file_path(s, m.start(), m.end(), whole, dotted=True):
                return m.group(0)  # (lib in venv\\Lib, python in python.exe: a word of the trace's paths)
            return self.placeholders[k] if k is not None else f"<{USER}>"
        return sub

    def text(self, s: str, anywhere: bool = False, whole: bool = False) -> str:
        """`s` with every identifying value in its place replaced (`anywhere`: also the names of three
        letters or more wherever they stand alone as a word: for the trace's own strings, not for the
        report's words; but where a file path of the trace uses such a name otherwise, it is left in file
        paths (`whole`: s is a path field))."""
        key = ("\0" if anywhere else "") + ("\1" if whole else "") + s
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        out = s
        low = s.casefold()
        for pat, rep, words in self._patterns():
            if any(w in low for w in words):
                out = pat.sub(rep, out)
                low = out.casefold()
        alone = self._anywhere() if anywhere else None
        if alone is not None:
            out = alone.sub(self._alone_sub(out, whole), out)
        if len(s) < 4096 and len(self._cache) < REDACT_CACHE:  # (the trace's strings: not a report's pieces)
            self._cache[key] = out
        return out


def _strings(v: Any, key: Optional[str] = None):
    """(key, string) of every string value in an event, with the key it is under (a list: its key; a
    variable of `vars`: "value", a path or ;-list of paths)."""
    if isinstance(v, str):
        yield key, v
    elif isinstance(v, dict):
        for k, x in v.items():
            if key == "vars":
                if str(k).upper() not in IDENTITY_VARS:
                    yield from _strings(x, "value")
            elif k not in FORMAT_KEYS:
                yield from _strings(x, k)
    elif isinstance(v, list):
        for x in v:
            yield from _strings(x, key)


def _redacted(v: Any, red: Redactor, key: Optional[str] = None) -> Any:
    if isinstance(v, str):
        return red.text(v, anywhere=True, whole=key in PATH_KEYS)
    if isinstance(v, dict):
        if key == "vars":  # USERNAME, COMPUTERNAME...: the whole value is the user's, or the machine's
            return {k: (red.add(IDENTITY_VARS[str(k).upper()], x) if str(k).upper() in IDENTITY_VARS and
                        isinstance(x, str) else _redacted(x, red, "value")) for k, x in v.items()}
        return {k: (x if k in FORMAT_KEYS else _redacted(x, red, k)) for k, x in v.items()}
    if isinstance(v, list):
        return [_redacted(x, red, key) for x in v]
    return v


def redactor_of(trace: Union[Trace, Any]) -> Redactor:
    """The identifying values of a trace: its env events' variables first, then every path of every event,
    the trace file's own path and the reader's warnings."""
    with paused_gc():
        return _redactor_of(trace)


def _redactor_of(trace: Union[Trace, Any]) -> Redactor:
    red = Redactor()
    events = getattr(trace, "events", [])  # (a read trace's Events: each parsed when read, not all at once)
    for e in (trace.of("env") if isinstance(trace, Trace) else (e for e in events if e.get("ev") == "env")):
        red.learn_env(e)
    env_machines = {k for k, kind in red.kinds.items() if kind == MACHINE}
    texts = [getattr(trace, "path", "") or "", *getattr(trace, "warnings", [])]
    strings = dict.fromkeys((key in PATH_KEYS, s) for e in events for key, s in _strings(e))  # each once
    for whole in (True, False):  # whole paths first: "C:\\Users\\Alice Smith" is one user, not "Alice"
        for spaced, s in [*strings, *((False, t) for t in texts)]:
            red.learn(s, spaced=spaced, whole=whole)
    # A user name, a word of a full name or a machine name of three letters or more is also replaced
    # wherever it stands alone as a word: a message, the command line, the trace file's own name
    # (alice.jsonl), a warning. One a file path of the trace uses otherwise, once every place and spelling
    # of the names is redacted (lib: venv\\Lib; python: python.exe; bin: Library\\bin), is left in file
    # paths (in_paths), and still replaced elsewhere. A URL is no file path: nothing in it counts, so a
    # message with https://host/~alice/ or /tmp/alice-build switches nothing off. Words of one or two
    # letters (a, me) are words of every message: in their places and spellings only.
    names = [k for k in red.values if red.kinds[k] in (USER, NAME, MACHINE) and len(k) >= 3]
    red.anywhere.update(names)
    alone = red._anywhere()
    if alone is not None:
        for whole, s in strings:
            t = red.text(s)
            for m in alone.finditer(t):
                if t[m.start() - 1:m.start()] == "<":
                    continue  # (a placeholder)
                k = red._key(m.group(1))
                if k is not None and k not in red.in_paths and _in_file_path(t, m.start(), m.end(), whole):
                    red.in_paths.add(k)
        red.in_paths -= env_machines  # (COMPUTERNAME's value: the machine's name wherever it stands)
    return red


_COPY_OF = "_redacted_copy_of"  # (on a redacted copy: the path of the trace it was made of)


def redact_trace(trace: Trace, red: Optional[Redactor] = None) -> Trace:
    """A copy of the trace with every identifying value replaced: what `dlltrace report --redact` reports."""
    red = red or redactor_of(trace)
    with paused_gc():
        events: Union[Events, list[dict]]
        if isinstance(trace.events, Events):  # (a read trace's: kept as compactly as the trace's own)
            events = Events()
            for e in trace.events:
                events.add(_redacted(e, red), None)
        else:
            events = [_redacted(e, red) for e in trace.events]
        copy = Trace(path=red.text(trace.path, anywhere=True), header=trace.header, events=events,
                     warnings=[red.text(w, anywhere=True) for w in trace.warnings], checked=trace.checked)
    copy.__dict__[_COPY_OF] = redacted_copy_of(trace) or trace.path
    return copy


def redacted_copy_of(trace: Trace) -> Optional[str]:
    """For a copy redact_trace made: the path of the trace file it was made of (render/attach.py: the
    file a report attaches is that one, which is not redacted); None for a trace read from a file."""
    return trace.__dict__.get(_COPY_OF)


def redacted_name(path: str) -> str:
    """The name `dlltrace redact` gives a trace's redacted copy: t.jsonl (or t.jsonl.gz) -> t.redacted.jsonl.gz."""
    base = path[:-3] if path.lower().endswith(".gz") else path
    stem = base[:-6] if base.lower().endswith(".jsonl") else base
    return stem + ".redacted.jsonl.gz"


def redact(text: str, trace: Union[Trace, Any, Redactor]) -> str:
    """Text (a report, raw or JSON-escaped) with the trace's identifying values replaced in their places."""
    red = trace if isinstance(trace, Redactor) else redactor_of(trace)
    return red.text(text)


# --- a redacted trace file (`dlltrace redact TRACE -o OUT`, `dlltrace run --redact`) ------------------------
GZIP_MAGIC = b"\x1f\x8b"
HEADER_FIELD = "redacted"  # the header of a trace written here says so: {"redacted": true}


@dataclass
class RedactionSummary:
    """What redact_trace_file wrote: where, how many lines (the header included) and how many of them it
    changed, the distinct values replaced by kind (USER, MACHINE, NAME, HOME), the reader's warnings
    about the input (redacted), and the file written (gzip or plain JSON Lines, its size in bytes)."""

    source: str
    output: str
    lines: int
    changed: int
    values: dict[str, int]
    warnings: list[str]
    compressed: bool
    size: int


def trace_bytes(path: Union[str, Path]) -> bytes:
    """The bytes of a trace file, gunzipped when it is gzip (one member or several; a member cut short,
    as by a crash, gives what it holds up to the cut)."""
    data = Path(path).read_bytes()
    if not data.startswith(GZIP_MAGIC):
        return data
    out: list[bytes] = []
    while data.startswith(GZIP_MAGIC):
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            out.append(d.decompress(data))
            out.append(d.flush())
        except zlib.error:
            break
        if not d.eof:
            break
        data = d.unused_data.lstrip(b"\0")
    return b"".join(out)


def _text_line(raw: bytes, red: Redactor, anywhere: bool = True) -> bytes:
    """A line that is not an event (unreadable, cut short, not UTF-8, not an object): redacted as text, so
    that it stays what it was (unreadable: the replay warns about it as about the original's). `anywhere`
    False: the positional rules only (an event's line: a name's word alone is also a word of the format,
    `x64`, and is replaced field by field instead)."""
    s = raw.decode("utf-8", "surrogateescape")
    return red.text(s, anywhere=anywhere).encode("utf-8", "surrogateescape")


def _event_line(raw: bytes, red: Redactor, header: bool = False) -> tuple[bytes, bool]:
    """One line of the trace, redacted, and whether it changed. An event is redacted field by field, as
    redact_trace does it (the format's words, the binaries' `pe` facts left as they are), then its line
    as text once more (a key, a format word: nothing identifying is left in the file's bytes); a line
    nothing was replaced in is kept byte for byte."""
    if b"\0" in raw:  # a range a writer reserved and never wrote, then a whole line (trace/reader.py)
        cut = raw.rindex(b"\0") + 1
        rest, changed = _event_line(raw[cut:], red, header)
        head = _text_line(raw[:cut], red)
        return head + rest, changed or head != raw[:cut]
    try:
        obj = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError):
        obj = None
    if not isinstance(obj, dict):
        out = _text_line(raw, red) if raw.strip() else raw
        return out, out != raw
    new = _scrubbed(obj, red)
    if header:
        new[HEADER_FIELD] = True
    if new == obj:
        return raw, False
    return event_lines([new])[:-1], True  # (a lone surrogate as its escape: trace/files.py)


def _scrubbed(v: Any, red: Redactor, key: Optional[str] = None) -> Any:
    """_redacted (what `report --redact` reports from), and the keys and the format's own words (FORMAT_KEYS,
    the `pe` facts) through the positional rules too: nothing identifying is left in a trace file's bytes.
    (A name's word alone is not replaced there: a user named x64 is not the PE facts' machine x64.)"""
    if isinstance(v, str):
        return red.text(v, anywhere=True, whole=key in PATH_KEYS)
    if isinstance(v, dict):
        if key == "vars":
            return {red.text(k): (red.add(IDENTITY_VARS[k.upper()], x) if k.upper() in IDENTITY_VARS and
                                  isinstance(x, str) else _scrubbed(x, red, "value")) for k, x in v.items()}
        return {red.text(k): (_positional(x, red) if k in FORMAT_KEYS else _scrubbed(x, red, k)) for k, x in v.items()}
    if isinstance(v, list):
        return [_scrubbed(x, red, key) for x in v]
    return v


def _positional(v: Any, red: Redactor) -> Any:
    if isinstance(v, str):
        return red.text(v)
    if isinstance(v, dict):
        return {red.text(k): _positional(x, red) for k, x in v.items()}
    if isinstance(v, list):
        return [_positional(x, red) for x in v]
    return v


def _source_lines(src: str) -> Iterator[bytes]:
    """raw_lines of the trace being redacted, a read error as the one-line error it is (EXIT_BAD_TRACE)."""
    try:
        yield from raw_lines(src)
    except OSError as e:
        raise DlltraceError(f"{src}: cannot read: {e.strerror or e}", EXIT_BAD_TRACE) from None


def redact_trace_file(src: Union[str, Path], dst: Union[str, Path]) -> RedactionSummary:
    """Write the trace `src` (plain or gzip) to `dst` with every user name, home folder and machine name
    replaced, by the same Redactor (redactor_of) as `dlltrace report --redact`: the events read back from
    `dst` are redact_trace's, so the replay of `dst` gives the report of `src --redact` (docs/redaction.md).
    Line for line: a damaged line stays damaged (redacted as text), so the replay warns as the original's
    does. `dst` ending in `.gz` is written gzip, else plain JSON Lines. `dst` is written through
    (console.output_file, as `report -o`: a symlink, a FIFO or a device stays what it is, nothing is
    renamed over it) and only once the whole copy is made: an error before (reading, redacting) leaves it
    untouched, an error while it is written (a full disk) leaves no partial copy. The redacted events wait
    meanwhile in an anonymous temporary file (tempfile.TemporaryFile: no name on Linux, deleted by the
    system on every exit, SIGTERM and SIGKILL too). Refuses to write over `src`, or into a folder."""
    src_s, dst_s = str(src), str(dst)
    if not os.path.exists(src_s):
        raise DlltraceError(f"{src_s}: no such file", EXIT_USAGE)
    if os.path.isdir(dst_s):
        raise DlltraceError(f"{dst_s}: is a folder; name the file to write", EXIT_USAGE)
    if os.path.abspath(src_s) == os.path.abspath(dst_s) or (os.path.exists(dst_s) and os.path.samefile(src_s, dst_s)):
        raise DlltraceError(f"{dst_s}: is the input trace; write the redacted trace to another file", EXIT_USAGE)
    folder = os.path.dirname(os.path.realpath(dst_s))
    if not os.path.isdir(folder):
        raise DlltraceError(f"{dst_s}: cannot write: {os.strerror(errno.ENOENT)}", EXIT_OUTPUT)
    trace = read_trace(src_s)  # (a file that is not a trace: one line, EXIT_BAD_TRACE)
    red = redactor_of(trace)
    warnings = [red.text(w, anywhere=True) for w in trace.warnings]
    del trace  # (what follows reads the file again, a line at a time: never the whole of it in memory)
    compressed = dst_s.lower().endswith(".gz")
    lines = changed = 0
    last = b""
    head: tuple[bytes, bool] = (b"", False)
    # (the body waits beside the output, on the disk it goes to, when the output is a file; else, a FIFO
    # or a device, in the system's temporary folder)
    regular = not os.path.exists(dst_s) or os.path.isfile(dst_s)
    try:
        # the events first, then the header (a value only the header shows gets the next placeholder, so
        # the events' placeholders are those of `report --redact`): the redacted events go to a file
        # first (gzip level 1: a tenth of the disk), then the header and they to the output
        with _body_file(folder if regular else None) as f:
            with gzip.GzipFile(filename="", mode="wb", fileobj=f, compresslevel=1, mtime=0) as body, paused_gc():
                raws = _source_lines(src_s)
                first = last = next(raws)
                for raw in raws:
                    last = raw
                    line, hit = _event_line(raw, red)
                    body.write(b"\n" + line)
                    lines += 1
                    changed += hit
                head = _event_line(first, red, header=True)
            f.seek(0)
            with output_file(dst_s) as out, gzip.GzipFile(filename="", mode="rb", fileobj=f) as events:
                if compressed:  # (no file name and no time in the gzip header: nothing of the machine)
                    with gzip.GzipFile(filename="", mode="wb", fileobj=out, compresslevel=6, mtime=0) as gz:
                        gz.write(head[0])
                        shutil.copyfileobj(events, gz, 1 << 20)
                else:
                    out.write(head[0])
                    shutil.copyfileobj(events, out, 1 << 20)
    except OSError as e:  # (writing: reading the source is _source_lines's, a one-line error of its own)
        raise DlltraceError(f"{dst_s}: cannot write: {e.strerror or e}", EXIT_OUTPUT) from None
    values: dict[str, int] = {}
    for kind in red.kinds.values():
        values[kind] = values.get(kind, 0) + 1
    # (lines: the header and the events, without the empty one after the last newline)
    return RedactionSummary(source=src_s, output=dst_s, lines=1 + lines - (last == b""),
                            changed=int(head[1]) + changed, values=values,
                            warnings=warnings, compressed=compressed, size=_size(dst_s))


def _body_file(folder: Optional[str]) -> IO[bytes]:
    """An anonymous temporary file for the redacted events: in `folder` (the output's, on the disk the output
    goes to) when it can be made there, else in the system's temporary folder."""
    if folder is not None:
        try:
            return tempfile.TemporaryFile(prefix=".dlltrace-redact-body-", dir=folder)
        except OSError:
            pass
    return tempfile.TemporaryFile(prefix=".dlltrace-redact-body-")


def _size(path: str) -> int:
    """The size of what was written (a FIFO or a device: 0, what its stat says)."""
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def redact_in_place(path: Path) -> Path:
    """`dlltrace run --redact`: the finished trace at `path` replaced by its redacted copy (redact_trace_file,
    the Redactor of `report --redact`), so that no unredacted copy is left; a failure
    leaves the trace as it was and says why in one line."""
    raw = path.with_name(path.name + ".unredacted")
    try:
        os.replace(path, raw)
    except OSError as e:
        raise DlltraceError(f"--redact: cannot redact {path}: {e.strerror or e}", EXIT_OUTPUT) from None
    try:
        redact_trace_file(raw, path)
    except BaseException:
        os.replace(raw, path)
        raise
    try:
        raw.unlink()
    except OSError as e:
        raise DlltraceError(f"--redact: the unredacted trace {raw} could not be removed: {e.strerror or e}",
                            EXIT_OUTPUT) from None
    return path
