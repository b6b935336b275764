"""`dlltrace report --redact` (trace/redact.py, docs/redaction.md): a generated corpus of user names,
full names, machine names and paths written into the committed traces of fixtures/traces/, each
reported in the three forms with and without --redact.

For every case: no identifying value is left in any form, and the redacted report IS the report of
the same trace with the identifying values replaced by their placeholders in the trace itself (so
the report reads the same otherwise: site-packages, Lib, bin, Scripts are untouched, whatever the
user is called)."""

from __future__ import annotations

import json
import random
import re
import string
import sys
from pathlib import Path

import pytest

from dlltrace import cli, errors
from dlltrace.trace.redact import redact, redact_trace, redactor_of
from dlltrace.trace.reader import read_trace

ROOT = Path(__file__).resolve().parent.parent
TRACES = ROOT / "fixtures" / "traces"
FORMS = ([], ["--markdown"], ["--json"])

# user names that are also words of paths and of the report, then generated ones of 1 to 20 characters
PATH_WORDS = ["lib", "Lib", "user", "bin", "python", "temp", "me", "a", "Scripts", "site", "x64", "cuda", "windows"]
_rng = random.Random(108)


def _name(n: int) -> str:
    return _rng.choice(string.ascii_letters) + "".join(_rng.choice(string.ascii_letters + string.digits + "-_")
                                                        for _ in range(n - 1))


GENERATED = [_name(n) for n in range(1, 21)]
SURNAMES = ["Smith", "Nakamura", "Müller", "Okonkwo-Bright", "Zyx"]
MACHINES = ["FILESRV01", "DESKTOP-7Q2K9LM", "nas", "build-agent-17"]


def esc(path: str) -> str:
    """A Windows path as the trace's JSON spells it."""
    return json.dumps(path)[1:-1]


def case_trace(tmp_path: Path, fixture: str, subs: dict[str, str], name: str = "t.jsonl") -> Path:
    """A fixture trace with some of its folders moved (each key, a JSON-escaped path, by its value)."""
    text = (TRACES / f"{fixture}.jsonl").read_text(encoding="utf-8")
    for old, new in subs.items():
        assert esc(old) in text, old
        if new.startswith("\\\\"):  # a UNC path: its NT form is \??\UNC\server\share
            text = text.replace(esc("\\??\\" + old), esc("\\??\\UNC\\" + new[2:]))
        text = text.replace(esc(old), esc(new))
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def run(capsys, path: Path, *extra: str) -> tuple[int, str]:
    capsys.readouterr()
    code = cli.main(["report", str(path), *extra])
    return code, capsys.readouterr().out


def report(capsys, path: Path, *extra: str, code: int = 0) -> str:
    got, out = run(capsys, path, *extra)
    assert got == code
    return out


# (fixture, the folder of the fixture moved, where to: real value, placeholder), identifiers left in plain sight
def cases():
    out = []
    for u in PATH_WORDS + GENERATED:
        out.append(("s1", {r"C:\dlltrace-cases": (rf"C:\Users\{u}\cases", r"C:\Users\<user>\cases")}, [u], "profile"))
    for u in PATH_WORDS[:6] + GENERATED[::4]:
        out.append(("s1", {r"C:\dlltrace-cases": (rf"Z:\home\{u}\cases", r"Z:\home\<user>\cases")}, [u], "wine home"))
        out.append(("s1", {r"C:\dlltrace-cases": (rf"C:\Documents and Settings\{u}\cases",
                                                    r"C:\Documents and Settings\<user>\cases")}, [u], "xp profile"))
        # a long path: the exception message is cut at 160 characters, inside or after the user name
        out.append(("s8", {r"C:\Python37": (rf"C:\Users\{u}\AppData\Local\Programs\Python\Python37",
                                            r"C:\Users\<user>\AppData\Local\Programs\Python\Python37"),
                           r"C:\Users\me": (rf"C:\Users\{u}", r"C:\Users\<user>")}, [u], "long path"))
    for first, last in zip(["Alice", "lib", "a", "Jean-Luc", GENERATED[9]], SURNAMES):
        full = f"{first} {last}"
        out.append(("s1", {r"C:\dlltrace-cases": (rf"C:\Users\{full}\cases", r"C:\Users\<user>\cases")},
                    [full, last], "full name"))
        out.append(("s4", {r"C:\Python312": (rf"C:\Users\{full}\Python312", r"C:\Users\<user>\Python312"),
                           r"C:\Users\me": (rf"C:\Users\{full}", r"C:\Users\<user>")},
                    [full, last], "full name, exception"))
    for m in MACHINES:
        out.append(("s1", {r"C:\dlltrace-cases": (rf"\\{m}\share\cases", r"\\<machine>\share\cases")}, [m], "unc"))
        out.append(("s8", {r"C:\Python37": (rf"\\{m}\tools\Python37", r"\\<machine>\tools\Python37"),
                           r"C:\Users\me": (r"C:\Users\<user>", r"C:\Users\<user>")}, [m],
                    "unc, exception"))
    return out


CASES = cases()


def _id(c) -> str:
    return f"{c[0]}-{c[3]}-{c[2][0]}"


def without_attach_line(out: str) -> str:
    """A report less the Markdown line that names the trace file to attach and its size (render/markdown.py)."""
    from dlltrace.render.markdown import ATTACH

    return "\n".join(line for line in out.split("\n") if not line.startswith(ATTACH))


def json_strings(v) -> list[str]:
    if isinstance(v, str):
        return [v]
    if isinstance(v, dict):
        return [s for k, x in v.items() for s in [k, *json_strings(x)]]
    if isinstance(v, list):
        return [s for x in v for s in json_strings(x)]
    return []


def leaks(out: str, values: list[str]) -> list[str]:
    """The identifying values still in a report (JSON: in any of its strings): a distinctive value
    anywhere (case-insensitively); a value that is also a common word (lib, a) in its identifying places
    (the profile folder, the home, the server of a UNC path)."""
    text = out if not out.startswith("{") else "\n".join(json_strings(json.loads(out)))
    found = []
    for v in values:
        distinctive = v.casefold() not in {w.casefold() for w in PATH_WORDS} and len(v) >= 4
        if distinctive and v.casefold() in text.casefold():
            found.append(v)
        sep = r"[\\/]+"
        place = (rf"(?:Users|home|Documents and Settings){sep}{re.escape(v)}(?![\w-])"
                 rf"|(?:(?<![\\\w])\\\\|UNC{sep}){re.escape(v)}(?![\w-])")
        if re.search(place, text, re.I):
            found.append(v)
    return found


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_redacted_report_is_the_report_with_placeholders_and_leaks_nothing(case, tmp_path, capsys):
    fixture, moves, values, kind = case
    real = case_trace(tmp_path, fixture, {k: v[0] for k, v in moves.items()})
    plain_runs = [run(capsys, real, *f) for f in FORMS]
    red_runs = [run(capsys, real, *f, "--redact") for f in FORMS]
    assert [c for c, _ in red_runs] == [c for c, _ in plain_runs]  # --redact changes no exit code
    plain, red = [o for _, o in plain_runs], [o for _, o in red_runs]
    # the name is there without --redact (in the traced paths), and nowhere with it
    assert any(values[0].casefold() in p.casefold() for p in plain)
    for form, out in zip(FORMS, red):
        assert not leaks(out, values), (form, leaks(out, values))
    json.loads(red[2])  # still a JSON document
    # the same trace with the placeholders written into it gives the very same report
    expected_trace = case_trace(tmp_path, fixture, {k: v[1] for k, v in moves.items()})
    assert expected_trace == real  # (the same file name: the report's first line names it)
    expected = [run(capsys, expected_trace, *f)[1] for f in FORMS]
    for form, out, exp in zip(FORMS, red, expected):
        assert without_attach_line(out) == without_attach_line(exp), form
    # but for the trace to attach: the Markdown of --redact says the file itself is not redacted
    assert "this report is redacted, the trace file `t.jsonl`" in red[1]
    # the folders of the program keep their names, whatever the user is called
    for words in (r"venv\Lib\site-packages", r"\bin"):
        if words in plain[0].replace(values[0], ""):
            assert words in red[0]


def test_a_user_named_lib_is_replaced_in_the_profile_only(tmp_path, capsys):
    p = case_trace(tmp_path, "s1", {r"C:\dlltrace-cases": r"C:\Users\lib\cases"})
    out = report(capsys, p, "--redact")
    assert r"C:\Users\<user>\cases\s1\venv\Lib\site-packages\myext" in out
    assert "<user>\\site-packages" not in out and "<user>rary" not in out
    js = json.loads(report(capsys, p, "--json", "--redact"))
    assert js["calls"][0]["leaf"]["name"] == "cublas64_12.dll"
    assert r"C:\Users\<user>\cases" in json.dumps(js, ensure_ascii=False).replace("\\\\", "\\")


def test_a_full_name_is_replaced_whole_and_its_words_alone(tmp_path, capsys):
    """A profile folder "Alice Smith": the folder is one placeholder (no "<user> Smith"), and each word
    of the name that no path of the trace uses otherwise is replaced where it stands alone (a message)."""
    p = case_trace(tmp_path, "s4", {r"C:\Python312": r"C:\Users\Alice Smith\Python312"})
    events = [json.loads(line) for line in p.read_text(encoding="utf-8").splitlines()]
    exc = next(e for e in events if e.get("ev") == "py_exception")
    exc["message"] = "Smith's build: " + exc["message"] + " (ask alice)"
    p.write_text("\n".join(json.dumps(e, ensure_ascii=False) for e in events) + "\n", encoding="utf-8")
    plain = report(capsys, p)
    assert "Alice Smith" in plain and "Smith's build" in plain
    for form in FORMS:
        out = report(capsys, p, *form, "--redact")
        assert "smith" not in out.casefold() and "alice" not in out.casefold(), form
    out = report(capsys, p, "--redact")
    assert r"C:\Users\<user>\Python312\Lib\site-packages" in out and "<name2>'s build" in out


def test_a_word_of_a_full_name_that_a_path_uses_otherwise_is_left_there(tmp_path, capsys):
    """"Lib Nakamura": Lib is also venv\\Lib, so it is replaced only inside the full name (the profile);
    Nakamura, which no path uses otherwise, wherever it stands."""
    p = case_trace(tmp_path, "s1", {r"C:\dlltrace-cases": r"C:\Users\Lib Nakamura\cases"})
    out = report(capsys, p, "--redact")
    assert r"C:\Users\<user>\cases\s1\venv\Lib\site-packages" in out and "Nakamura" not in out


def test_two_letter_and_one_letter_users_in_json(tmp_path, capsys):
    for u in ("me", "a", "Jo"):
        p = case_trace(tmp_path, "s8", {r"C:\Users\me": rf"C:\Users\{u}"})
        js = run(capsys, p, "--json", "--redact")[1]
        assert not re.search(rf"Users\\\\{u}\\\\|Users\\\\{u}\"", js), u
        assert "Users\\\\<user>" in js


def test_a_linux_home_in_the_json_source_and_the_trace(tmp_path, capsys):
    """A Wine run: the cwd in the Unix home (Z:\\home\\alice), and the trace file in /home/alice."""
    home = tmp_path / "home" / "alice"
    home.mkdir(parents=True)
    p = case_trace(home, "s1", {r"C:\dlltrace-cases\s1": r"Z:\home\alice\s1"})
    text = p.read_text(encoding="utf-8")
    assert text.count("alice") > 5
    for form in FORMS:
        out = report(capsys, p, *form, "--redact")
        assert "alice" not in out, form
    js = json.loads(report(capsys, p, "--json", "--redact"))
    assert js["source"].endswith("/home/<user>/t.jsonl")


def test_the_unix_home_and_machine_from_env_vars_when_a_trace_records_them(tmp_path):
    """USERNAME, USERPROFILE, HOME, COMPUTERNAME in `env` (a trace may record them): replaced where they
    stand, the home as a whole prefix (a home outside /home and C:\\Users too)."""
    p = case_trace(tmp_path, "s1", {r"C:\dlltrace-cases": r"C:\Users\ALICE~1\cases"})
    events = [json.loads(line) for line in p.read_text(encoding="utf-8").splitlines()]
    env = next(e for e in events if e.get("ev") == "env")
    env["vars"].update({"USERNAME": "alice", "USERPROFILE": r"D:\profiles\alice", "HOME": "/srv/people/alice",
                        "COMPUTERNAME": "WS-0042"})
    env["cwd"] = r"D:\profiles\alice\work"
    env["vars"]["PYTHONPATH"] = r"Z:\srv\people\alice\py;/srv/people/alice/lib;\\WS-0042\c$\x;WS-0042"
    p.write_text("\n".join(json.dumps(e) for e in events) + "\n", encoding="utf-8")
    red = redact_trace(read_trace(p))
    e = next(x for x in red.events if x.get("ev") == "env")
    assert e["cwd"] == r"D:\profiles\<user>\work"
    assert e["vars"]["PYTHONPATH"] == r"Z:\srv\people\<user>\py;/srv/people/<user>/lib;\\<machine>\c$\x;<machine>"
    assert "USERNAME" in e["vars"] and e["vars"]["USERNAME"] == "<user>"
    assert "ALICE~1" not in json.dumps(list(red.events))  # (an 8.3 short name at the profile's place is replaced there)


def test_unc_forms_and_json_escaped_text():
    from types import SimpleNamespace

    empty = SimpleNamespace(events=[])
    text = (r"\\SRV1\s\a.dll \??\UNC\SRV2\s\b.dll \\?\UNC\SRV3\s\c.dll //SRV4/s/d.dll (\\SRV5\s) '\\SRV6\s'"
            r" \\?\C:\x \\.\pipe\p C:\x\\y https://github.com/a")
    out = redact(text, empty)
    assert not re.search(r"SRV\d", out), out
    assert r"\\?\C:\x \\.\pipe\p C:\x\\y https://github.com/a" in out
    as_json = json.dumps({"p": r"\??\UNC\FILESRV01\share\a.dll", "q": r"\\FILESRV01\share"})
    assert "FILESRV01" not in redact(as_json, empty) and json.loads(redact(as_json, empty))["q"] == r"\\<machine>\share"


def test_shortened_forms_keep_nothing():
    """Forms a report makes when it cuts a path short: `…\\NAME\\x`, a message cut inside the name."""
    from types import SimpleNamespace

    trace = SimpleNamespace(events=[{"ev": "env", "cwd": r"C:\Users\Bartholomew\w", "vars": {}},
                                    {"ev": "probe", "path": r"\??\UNC\NASBOX\s\x.dll"}])
    red = redactor_of(trace)
    assert red.text(r"…\Bartholomew\w …\NASBOX\s") == r"…\<user>\w …\<machine>\s"
    assert red.text(r"C:\Users\Barthol…") == r"C:\Users\<user2>…"  # a cut name at the profile's place
    long_message = "x" * 150 + r" C:\Users\Bartholomew\w\a.dll"
    cut = redact_trace(read_trace_of(trace, long_message))
    assert "Barthol" not in json.dumps(cut.events)


def read_trace_of(trace, message: str):
    from dlltrace.trace.reader import Header, Trace

    return Trace(path="t.jsonl", header=Header("dlltrace-trace", 1),
                 events=[*trace.events, {"ev": "py_exception", "message": message}])


def test_two_users_stay_two_placeholders(tmp_path, capsys):
    p = case_trace(tmp_path, "s8", {r"C:\Python37": r"C:\Users\bob\Python37", r"C:\Users\me": r"C:\Users\carol"})
    out = run(capsys, p, "--redact")[1]
    assert "bob" not in out and "carol" not in out
    assert r"C:\Users\<user>" in out and r"C:\Users\<user2>" in out


@pytest.mark.parametrize("fixture", ["s1", "s2", "s8", "s10"])
def test_redact_does_not_change_exit_codes(fixture, tmp_path, capsys):
    p = case_trace(tmp_path, fixture, {})
    for form in FORMS:
        code = run(capsys, p, *form)[0]
        assert code in (0, errors.EXIT_BAD_TRACE) and run(capsys, p, *form, "--redact")[0] == code
    damaged = tmp_path / "damaged.jsonl"
    damaged.write_text(p.read_text(encoding="utf-8") + '{"ev": "probe", "pid": \n', encoding="utf-8")
    for form in FORMS:
        report(capsys, damaged, *form, code=errors.EXIT_BAD_TRACE)
        report(capsys, damaged, *form, "--redact", code=errors.EXIT_BAD_TRACE)


def test_warnings_on_stderr_are_redacted(tmp_path, capsys):
    home = tmp_path / "Users" / "dora"
    home.mkdir(parents=True)
    p = case_trace(home, "s1", {})
    p.write_text(p.read_text(encoding="utf-8") + '{"ev": "probe", "pid": \n', encoding="utf-8")
    capsys.readouterr()
    assert cli.main(["report", str(p), "--redact"]) == errors.EXIT_BAD_TRACE
    cap = capsys.readouterr()
    assert "dora" not in cap.err and "Users/<user>" in cap.err and "dora" not in cap.out


def test_the_terminal_report_on_a_narrow_terminal(tmp_path, capsys, monkeypatch):
    """On a terminal a long path folds inside its table cell; the report is made of the redacted trace,
    so no fold leaves a piece of a name."""
    p = case_trace(tmp_path, "s1", {r"C:\dlltrace-cases": r"\\DESKTOP-7Q2K9LM\users\Maximilian Okonkwo-Bright"})
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    monkeypatch.setenv("COLUMNS", "60")
    capsys.readouterr()
    assert cli.main(["report", str(p)]) == 0
    plain = capsys.readouterr().out
    assert "DESKTOP" in plain
    assert cli.main(["report", str(p), "--redact"]) == 0
    out = capsys.readouterr().out
    flat = re.sub(r"\s+|\x1b\[[0-9;]*m|[│├└─]", "", out)
    for piece in ("DESKTOP", "7Q2K9", "Maximil", "Okonkwo", "Bright"):
        assert piece.casefold() not in flat.casefold(), piece
