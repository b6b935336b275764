"""Redaction by tokens that cannot be switched off (issue 28 item 8, docs/redaction.md "Every spelling"):
each spelling of a user or machine name the trace shows is replaced in every field, whatever else a
message holds (a URL, /tmp/NAME-build). One example per spelling, through `dlltrace redact` (the file's
bytes) and `report --redact` (the three forms); then a property test planting names in every field."""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from dlltrace import cli
from test_redact import FORMS, TRACES, case_trace, run

USER = "bartholomew"


def planted_trace(tmp_path: Path, user: str, message: str, command: tuple[str, ...] = (), machine: str = "",
                  env: dict[str, str] | None = None, name: str = "t.jsonl") -> Path:
    """s4 (an exception: its message is in every report) with its Python under C:\\Users\\USER (or under
    \\\\MACHINE\\c$\\Users\\USER), the exception's message `message`, the header's command line and the env
    event's variables with more."""
    root = rf"\\{machine}\c$\Users\{user}" if machine else rf"C:\Users\{user}"
    p = case_trace(tmp_path, "s4", {r"C:\Python312": root + r"\Python312"}, name=name)
    lines = p.read_text(encoding="utf-8").split("\n")
    head = json.loads(lines[0])
    head["command"] = [*head.get("command", []), *command]
    events = [json.loads(x) for x in lines[1:] if x.strip()]
    exc = next(e for e in events if e.get("ev") == "py_exception")
    exc["message"] = message + " " + exc["message"]
    for e in events:
        if e.get("ev") == "env" and env:
            e["vars"].update(env)
    p.write_text("\n".join(json.dumps(x, ensure_ascii=False) for x in [head, *events]) + "\n", encoding="utf-8")
    return p


def redacted_file(capsys, src: Path) -> str:
    out = src.with_name(src.name + ".out.jsonl")
    capsys.readouterr()
    assert cli.main(["redact", str(src), "-o", str(out)]) in (0, 3)
    capsys.readouterr()
    return out.read_text(encoding="utf-8")


def strings_of(text: str) -> str:
    """Every string (and key) of every JSON line, unescaped, one a line: what a leak check reads."""
    out: list[str] = []

    def walk(v):
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, dict):
            for k, x in v.items():
                out.append(k)
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)
    for line in text.splitlines():
        try:
            walk(json.loads(line))
        except ValueError:
            out.append(line)
    return "\n".join(out)


def outputs(capsys, src: Path) -> dict[str, str]:
    """The redacted file's strings and `report --redact` in the three forms."""
    got = {"redact": strings_of(redacted_file(capsys, src))}
    for form in FORMS:
        out = run(capsys, src, *form, "--redact")[1]
        got["report " + " ".join(form)] = strings_of(out) if form == ["--json"] else out
    return got


def assert_gone(capsys, src: Path, *names: str, shown: str = "") -> dict[str, str]:
    """None of `names` (case-insensitively) in the redacted file nor in any form of `report --redact`; and
    (the test means something) `shown` in the plain report."""
    if shown:
        assert shown.casefold() in run(capsys, src)[1].casefold()
    got = outputs(capsys, src)
    for where, text in got.items():
        for n in names:
            assert n.casefold() not in text.casefold(), (where, n, text[:3000])
    return got


# --- the two switches ---------------------------------------------------------------------------------
@pytest.mark.parametrize("switch", ["see https://host.example/~bartholomew/ for it", "built in /tmp/bartholomew-build/x",
                                    "from https://github.com/bartholomew/proj"])
def test_a_url_or_a_tmp_folder_in_a_message_switches_nothing_off(tmp_path, capsys, switch):
    """Before: one message with a URL naming the user (`~user`, a path of a URL) or /tmp/user-build made the
    user's name a word 'a path uses otherwise', and the name survived as a word everywhere: the command
    line, the header, every message."""
    src = planted_trace(tmp_path, USER, f"{switch}; ask Bartholomew.", command=("--owner", USER))
    got = assert_gone(capsys, src, USER, shown="ask Bartholomew")
    assert "ask <user>." in got["report "]
    head = json.loads(redacted_file(capsys, src).split("\n")[0])
    assert head["command"][-2:] == ["--owner", "<user>"]


# --- one example per spelling ---------------------------------------------------------------------------------
@pytest.mark.parametrize("spelled", [r"C:%5CUsers%5Cbartholomew%5Cx", r"C:%5cUsers%5cbartholomew%5cx",
                                     "C:%2FUsers%2Fbartholomew%2Fx", "file:///C:/Users/bartholomew/x"])
def test_url_encoded_separators(tmp_path, capsys, spelled):
    """The profile's place with its separators URL-encoded (either case of the hex): before, it always survived."""
    src = planted_trace(tmp_path, "somebody", f"see {spelled} and ~x")
    got = assert_gone(capsys, src, USER, shown=spelled)
    assert "Users" in got["redact"]


def test_url_encoded_alone_teaches_the_name(tmp_path, capsys):
    """A user whose name only a URL-encoded profile path shows (a space as %20) is found in it: the name
    decoded, then each of its spellings and words replaced."""
    src = planted_trace(tmp_path, "somebody", "opened C:%5CUsers%5CAlice%20Zyxwv%5Cdoc (Alice+Zyxwv, alice zyxwv)")
    assert_gone(capsys, src, "Zyxwv", shown="Alice%20Zyxwv")


def test_a_full_name_url_encoded(tmp_path, capsys):
    src = planted_trace(tmp_path, "Alice Zyxwv", r"see \\?\C:\Users\Alice%20Zyxwv\x and https://h/~Alice%20Zyxwv/")
    assert_gone(capsys, src, "Zyxwv", "Alice%20", shown="Alice%20Zyxwv")


@pytest.mark.parametrize("n", [1, 2, 9])
def test_8dot3_short_names(tmp_path, capsys, n):
    """C:\\Users\\LONGUS~1 is longusername's folder: the short name gets the user's placeholder, wherever it stands
    (before: only at the profile's place, as a user of its own)."""
    src = planted_trace(tmp_path, "longusername", rf"cwd C:\PROGRA~1\x and LONGUS~{n}\AppData", command=(rf"C:\Users\LONGUS~{n}\a.py",))
    got = assert_gone(capsys, src, "longusername", f"LONGUS~{n}", shown=f"LONGUS~{n}")
    assert "PROGRA~1" in got["report "]  # (another 8.3 name: nobody's)
    assert "<user>\\AppData" in got["redact"]  # (the long name's placeholder: one user, not two)


def test_short_base():
    from dlltrace.trace.redact import short_base

    assert short_base("longusername") == "LONGUS"
    assert short_base("Alice Smith") == "ALICES" and short_base("a.b+c") == "AB_C"


def test_nt_prefix(tmp_path, capsys):
    src = planted_trace(tmp_path, USER, r"at \\?\C:\Users\bartholomew\x.dll and \??\C:\Users\bartholomew\y.dll")
    assert_gone(capsys, src, USER, shown=r"\\?\C:\Users\bartholomew")


def test_unc_admin_share(tmp_path, capsys):
    """\\\\host\\c$\\Users\\user: the machine and the user, and the machine as a word of a message."""
    src = planted_trace(tmp_path, USER, r"from \\WKSTN-4471\c$\Users\bartholomew\x; WKSTN-4471 was up",
                        machine="WKSTN-4471")
    got = assert_gone(capsys, src, USER, "WKSTN-4471", shown="WKSTN-4471 was up")
    assert "<machine> was up" in got["report "]


def test_tilde_user(tmp_path, capsys):
    src = planted_trace(tmp_path, "me", "see ~me/proj, https://h.example/~me/ and %7Eme/x; me too")
    got = assert_gone(capsys, src, "~me", "%7Eme")
    assert "; me too" in got["report "]  # (a name of two letters: in its places and spellings only)


def test_tmp_user_folder(tmp_path, capsys):
    src = planted_trace(tmp_path, "me", r"built in /tmp/me-build/x and C:\Temp\me_1\y; for me")
    got = assert_gone(capsys, src, "/tmp/me-", r"Temp\me_")
    assert "/tmp/<user>-build/x" in got["report "] and "for me" in got["report "]


@pytest.mark.parametrize("url", ["http://WKSTN-4471:8080/x", "https://wkstn-4471.corp.example/x",
                                 "file://WKSTN-4471/share/x", "ssh://bob@wkstn-4471/x", "https%3A%2F%2Fwkstn-4471%2Fx"])
def test_the_machine_in_a_url(tmp_path, capsys, url):
    src = planted_trace(tmp_path, USER, f"fetch {url}", machine="WKSTN-4471")
    assert_gone(capsys, src, "WKSTN-4471", shown=url)


def test_the_user_of_a_url(tmp_path, capsys):
    src = planted_trace(tmp_path, "bo", "push to ssh://bo@git.example/x and https://bo:pw@h.example/")
    got = assert_gone(capsys, src, "://bo")
    assert "ssh://<user>@git.example/x" in got["report "]


def test_short_names_keep_ordinary_words(tmp_path, capsys):
    """A user named `a` or `me`: replaced in their places and spellings, never inside the words of a message."""
    for u in ("a", "me"):
        src = planted_trace(tmp_path, u, f"a name made me a dll; see ~{u}/x", name=f"{u}.jsonl")
        got = outputs(capsys, src)
        assert "a name made me a dll; see ~<user>/x" in got["report "], u


def test_a_name_a_path_uses_otherwise_is_left_in_paths_and_replaced_in_words(tmp_path, capsys):
    """A user named `python`: python.exe and Lib\\site-packages\\...\\python keep their names (the replay reads
    them), the word alone in a message does not."""
    src = planted_trace(tmp_path, "python", "ask python about tensorflow_core.python.x")
    got = outputs(capsys, src)["report "]
    assert "ask <user> about tensorflow_core.python.x" in got and r"Users\<user>\Python312" in got


# --- the property: names planted in every field, in every spelling ----------------------------------------------
_S4 = (TRACES / "s4.jsonl").read_text(encoding="utf-8")
_LETTERS = st.characters(whitelist_categories=("Lu", "Ll", "Lo"), max_codepoint=0x2FFF)
_META = "$().^{}-_"  # (regex metacharacters a Windows user name may hold)
_word = st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"), min_size=1, max_size=12)
users = st.one_of(
    st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyz"), min_size=1, max_size=2),  # a, me: places only
    _word,
    st.builds(lambda a, m, b: a + m + b, _word, st.text(st.sampled_from(_META), min_size=1, max_size=3), _word),
    st.text(_LETTERS, min_size=1, max_size=10),  # Unicode
    st.builds(lambda a, b: f"{a} {b}", _word, _word),  # a full name
)
machines = st.builds(lambda a, b: a + b, st.text(st.sampled_from("ABCDEFGHIJKLMNOPQRSTUVWXYZ"), min_size=1, max_size=1),
                     st.text(st.sampled_from("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-"), max_size=10)).map(lambda s: s.rstrip("-"))
_BASELINE: list[str] = []
_PLACEHOLDERS = "<user> <user2> <user3> <machine> <machine2> <name> <name2> <name3> <home> redacted true"


def plantings(u: str, m: str) -> tuple[str, tuple[str, ...], dict[str, str]]:
    """The message, the command line's extra arguments and the env variables, each spelling of u and m in them."""
    q = quote(u, safe="")
    spellings = [rf"C:\Users\{u}\a.py", rf"\\?\C:\Users\{u}\x", rf"\\{m}\c$\Users\{u}\x", f"C:%5CUsers%5C{q}%5Cx",
                 f"c:%5cusers%5c{q.lower()}%5cx", f"C:%2FUsers%2F{q}%2Fx", f"~{u}/proj", f"/tmp/{u}-build/x",
                 f"https://{m}:8080/~{u}/x", f"https://example.org/~{q}/", f"file://{m}/share/x", f"ask {u} on {m}."]
    if short_base_of(u):
        spellings.append(rf"C:\Users\{short_base_of(u)}~1\x")
    message = " ; ".join(spellings)
    return message, tuple(spellings), {"PYTHONPATH": ";".join(spellings), "NOTE": message}


def short_base_of(u: str) -> str:
    from dlltrace.trace.redact import short_base

    return short_base(u)


def survivors(text: str, u: str, m: str) -> list[str]:
    """What is left of u and m: a name of three letters or more anywhere (as it is or URL-encoded); a shorter one
    in its places and spellings."""
    low = text.casefold()
    found = []
    for n in [u, m, *u.split(" ")]:
        if len(n) >= 3 and (n.casefold() in low or quote(n, safe="").casefold() in low):
            found.append(n)
    e, qe = re.escape(u), re.escape(quote(u, safe=""))
    sep = r"(?:[\\/]|%5C|%2F)+"
    places = [rf"Users{sep}(?:{e}|{qe})(?![\w])", rf"~(?:{e}|{qe})/", rf"/tmp/{e}-", rf"://{re.escape(m)}[:/.]",
              rf"\\\\{re.escape(m)}\\"]
    if short_base_of(u):
        places.append(rf"(?<![\w~]){re.escape(short_base_of(u))}~1")
    found += [p for p in places if re.search(p, text, re.I)]
    return found


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(u=users, m=machines)
def test_no_planted_name_survives(tmp_path_factory, capsys, u, m):
    """A user and a machine name (short, long, with regex metacharacters, Unicode, a full name) planted in every
    field of a trace (the profile and the UNC share of its Python, the header's command line, env variables,
    an exception's message with URLs), in every spelling: none survives `dlltrace redact` (the file's strings)
    nor `report --redact`."""
    u, m = u.strip(), m.strip()
    assume(u and m and not u.endswith(".") and u.casefold() != m.casefold())
    message, command, env = plantings(u, m)
    if not _BASELINE:  # (the report's own words, for a trace of neutral names)
        tmp = tmp_path_factory.mktemp("base")
        _BASELINE.append(run(capsys, planted_trace(tmp, "somebody", "x", machine="SRV"), "--redact")[1])
    forbidden = (_S4 + _BASELINE[0] + _PLACEHOLDERS + message.replace(u, " ").replace(m, " ")
                 + quote(u, safe="") + " " + quote(u, safe="").lower()).casefold()
    for n in [u, m, *u.split(" ")]:  # (a name that is a word of the trace or of the planting: not a leak to find)
        assume(len(n) < 3 or n.casefold() not in forbidden)
    assume(u.casefold() not in m.casefold() and m.casefold() not in u.casefold())
    # (nor one the planting's own words around it make, with the machine's name kept: a machine name too short to
    # redact stays, and u 'N A' is in "ask <user> on A0.")
    assume(u.casefold() not in message.replace(u, " ").casefold())
    tmp = tmp_path_factory.mktemp("p")
    src = planted_trace(tmp, u, message, command=command, machine=m, env=env)
    plain = src.read_text(encoding="utf-8")
    assert survivors(strings_of(plain), u, m)  # (planted)
    red = strings_of(redacted_file(capsys, src))
    assert not survivors(red, u, m), (u, m, survivors(red, u, m))
    rep = run(capsys, src, "--redact")[1]
    assert not survivors(rep, u, m), (u, m, survivors(rep, u, m))
