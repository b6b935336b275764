"""`dlltrace redact TRACE -o OUT` (trace/redact.py redact_trace_file, docs/redaction.md): the trace
itself redacted, for a bug report.

test_redact.py's generated corpus of user names, full names, machine names and paths, written into the
committed traces of fixtures/traces/ (and, under Wine, into real-wheel runs of tests/test_real_corpus.py),
redacted to a file. For every case: none of the planted names is in the redacted file's bytes, the
events read back are those `report --redact` reports from, and the report of the redacted file is the
report of the original with --redact, in the three forms, with the same exit code."""

from __future__ import annotations

import dataclasses

import gzip
import json
import os
import re
from pathlib import Path

import pytest

from dlltrace import cli, errors
from dlltrace.trace.redact import redact_trace, redact_trace_file, redactor_of, trace_bytes
from dlltrace.trace.reader import read_trace
from test_redact import CASES, FORMS, PATH_WORDS, _id, case_trace, esc, run, without_attach_line

def planted_in(data: bytes, values: list[str]) -> list[str]:
    """The planted values in a trace file's bytes: a distinctive one anywhere (case-insensitively, as
    raw UTF-8 and JSON-escaped); one that is also a common word (lib, a, me) at its identifying places
    (a profile folder, a home, a UNC server), with the JSON escapes undone."""
    text = data.decode("utf-8", "replace")
    flat = text.replace("\\\\", "\\")
    found = []
    for v in values:
        distinctive = v.casefold() not in {w.casefold() for w in PATH_WORDS} and len(v) >= 4
        if distinctive and (v.casefold() in text.casefold() or esc(v).casefold() in text.casefold()):
            found.append(v)
        sep = r"[\\/]+"
        place = (rf"(?:Users|home|Documents and Settings){sep}{re.escape(v)}(?![\w-])"
                 rf"|(?:(?<![\\\w])\\\\|UNC{sep}){re.escape(v)}(?![\w-])")
        if re.search(place, flat, re.I):
            found.append(v)
    return found


def redact_cli(capsys, src: Path, dst: Path) -> tuple[int, str, str]:
    capsys.readouterr()
    code = cli.main(["redact", str(src), "-o", str(dst)])
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def same_reports(capsys, real: Path, out: Path) -> None:
    """The report of the redacted file is `report --redact` of the original, in each form, with the same
    exit code (the file's own path told apart)."""
    red_name = redactor_of(read_trace(real)).text(str(real), anywhere=True)
    for form in FORMS:
        want_code, want = run(capsys, real, *form, "--redact")
        got_code, got = run(capsys, out, *form)
        assert got_code == want_code, form
        assert without_attach_line(got.replace(str(out), red_name)) == without_attach_line(want), form


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_the_redacted_trace_holds_no_planted_name_and_replays_to_the_redacted_report(case, tmp_path, capsys):
    fixture, moves, values, kind = case
    real = case_trace(tmp_path, fixture, {k: v[0] for k, v in moves.items()})
    assert planted_in(real.read_bytes(), values)  # planted: the case means something
    out = tmp_path / "shared" / "t.jsonl"
    out.parent.mkdir()
    code, said, err = redact_cli(capsys, real, out)
    assert code == 0 and err == "" and "redacted trace written to" in said
    assert not planted_in(out.read_bytes(), values), planted_in(out.read_bytes(), values)
    # the events read back are those `report --redact` reports from: one redaction, not two
    assert read_trace(out).events == redact_trace(read_trace(real)).events
    same_reports(capsys, real, out)
    assert verdict_of(run(capsys, out, "--json")[1]) == verdict_of(run(capsys, real, "--json")[1])


def verdict_of(report_json: str) -> dict:
    """What a replay concludes, without the paths: for each call its API, file name, error, leaf and
    its cause, fate, the kinds of its fixes and whether the model verified them, and its agreement."""
    j = json.loads(report_json)
    calls = [(c["op"], re.split(r"[\\/]", c["name"] or "")[-1], c["error"], c["real_error"],
              (c["leaf"] or {}).get("name"), (c["leaf"] or {}).get("cause"),
              (c["verdict"] or {}).get("fate"), (c["verdict"] or {}).get("reason"),
              [(f["kind"], f["verified"]) for f in c["fixes"]], c["agreed"]) for c in j["calls"]]
    return {"failed": j["failed"], "went_on": j["went_on"], "ending": j["ending"], "calls": calls}


def test_the_verdict_is_unchanged(tmp_path, capsys):
    """Every fixture trace and its redacted copy: the same verdict (failures, leaves, fates, fixes)."""
    for f in sorted((Path(__file__).parent.parent / "fixtures" / "traces").glob("s*.jsonl")):
        out = tmp_path / f.name
        assert redact_cli(capsys, f, out)[0] == 0
        (c1, a), (c2, b) = run(capsys, f, "--json"), run(capsys, out, "--json")
        assert c1 == c2 and verdict_of(a) == verdict_of(b), f.name
        assert verdict_of(a)["calls"], f.name


def test_gzip_when_the_name_ends_in_gz(tmp_path, capsys):
    real = case_trace(tmp_path, "s1", {r"C:\dlltrace-cases": r"C:\Users\Bartholomew\cases"})
    plain, packed = tmp_path / "r.jsonl", tmp_path / "r.jsonl.gz"
    assert redact_cli(capsys, real, plain)[0] == 0 and redact_cli(capsys, real, packed)[0] == 0
    data = packed.read_bytes()
    assert data[:2] == b"\x1f\x8b" and not plain.read_bytes().startswith(b"\x1f\x8b")
    assert gzip.decompress(data) == plain.read_bytes() == trace_bytes(packed)
    assert b"Bartholomew" not in data and b"r.jsonl" not in data  # (no file name in the gzip header)
    assert len(data) < len(plain.read_bytes()) / 4


def test_a_gzip_trace_in_and_out(tmp_path, capsys):
    """A .gz trace in (as `dlltrace run` writes them) and out: read and reported like a plain one."""
    real = case_trace(tmp_path, "s1", {r"C:\dlltrace-cases": r"C:\Users\Bartholomew\cases"})
    src = tmp_path / "in.jsonl.gz"
    src.write_bytes(gzip.compress(real.read_bytes()))
    out = tmp_path / "out.jsonl.gz"
    code, _, err = redact_cli(capsys, src, out)
    assert code == 0, err
    assert b"Bartholomew" not in gzip.decompress(out.read_bytes())
    assert read_trace(out).events == redact_trace(read_trace(real)).events
    same_reports(capsys, src, out)


def test_the_header_is_redacted_and_says_so(tmp_path, capsys):
    real = case_trace(tmp_path, "s1", {r"C:\dlltrace-cases": r"C:\Users\Bartholomew\cases"})
    lines = real.read_text(encoding="utf-8").split("\n")
    head = json.loads(lines[0])
    assert "Bartholomew" in json.dumps(head["command"])
    # a value only the header shows (an older trace's command, no event of it): replaced in its place too
    head["command"].append(r"C:\Users\Zenobia\other.txt")
    real.write_text("\n".join([json.dumps(head), *lines[1:]]), encoding="utf-8")
    out = tmp_path / "r.jsonl"
    assert redact_cli(capsys, real, out)[0] == 0
    got = json.loads(out.read_text(encoding="utf-8").split("\n")[0])
    assert got["redacted"] is True and got["format"] == "dlltrace-trace" and got["tool"] == head["tool"]
    assert got["command"][0].startswith(r"C:\Users\<user>\cases") and got["command"][-1] == r"C:\Users\<user2>\other.txt"
    # (the reader's Header is the same but for its command, which it reads redacted: Header.command names the
    # program in the report's one-line messages)
    assert read_trace(out).header == dataclasses.replace(read_trace(real).header, command=tuple(got["command"]))
    assert "Bartholomew" not in repr(read_trace(out).header) and "Zenobia" not in repr(read_trace(out).header)


def test_a_lone_surrogate_survives(tmp_path, capsys):
    """A LoadLibraryW name with a lone surrogate (legal on Windows): written as its escape, read back as
    the same name, the user's folder in it replaced."""
    real = case_trace(tmp_path, "s1", {r"C:\dlltrace-cases": r"C:\Users\Bartholomew\cases"})
    text = real.read_text(encoding="utf-8")
    assert "_ext.cp311-win_amd64.pyd" in text
    real.write_text(text.replace("_ext.cp311-win_amd64.pyd", "_ext\\udc80.pyd"), encoding="utf-8")
    out = tmp_path / "r.jsonl"
    assert redact_cli(capsys, real, out)[0] == 0
    data = out.read_bytes()
    assert b"\\udc80" in data and b"Bartholomew" not in data
    names = [e["name"] for e in read_trace(out).events if e["ev"] == "load_begin"]
    assert r"C:\Users\<user>\cases\s1\venv\Lib\site-packages\myext" + "\\_ext\udc80.pyd" in names
    assert read_trace(out).events == redact_trace(read_trace(real)).events
    for form in FORMS:
        assert run(capsys, out, *form)[0] == 0


def test_damaged_lines_stay_damaged_and_redacted(tmp_path, capsys):
    """An unreadable line, a range of zero bytes then a whole event, a line that is not UTF-8, and a
    last line cut short: each stays what it was (the report of the copy warns about the same lines, with
    the same exit code), and none keeps the name."""
    real = case_trace(tmp_path, "s1", {r"C:\dlltrace-cases": r"C:\Users\Bartholomew\cases"})
    lines = real.read_bytes().split(b"\n")
    assert lines[-1] == b""
    probe = next(x for x in lines if b'"ev":"probe"' in x and b"Bartholomew" in x)
    lines[3:3] = [probe[:70] + b" garbled",  # unreadable
                  b"\0" * 40 + probe,  # a writer's unwritten range, then a whole line
                  b'{"ev":"warning","seq":0,"pid":1,"tid":0,"t":0,"message":"\xff C:\\\\Users\\\\Bartholomew"}']
    data = b"\n".join(lines[:-1]) + b"\n" + probe[:90]  # cut short, no newline
    real.write_bytes(data)
    out = tmp_path / "r.jsonl"
    code, _, err = redact_cli(capsys, real, out)
    assert code == errors.EXIT_BAD_TRACE and "Bartholomew" not in err and err.count("dlltrace: warning:") == 5  # (and: the line after the zeros repeats one)
    assert not planted_in(out.read_bytes(), ["Bartholomew"]) and b"Barthol" not in out.read_bytes()
    assert not out.read_bytes().endswith(b"\n")
    tr, want = read_trace(out), redact_trace(read_trace(real))
    assert tr.events == want.events
    assert [w.replace(str(out), "T") for w in tr.warnings] == [w.replace(want.path, "T") for w in want.warnings]
    same_reports(capsys, real, out)


@pytest.mark.parametrize("how", ["same", "other spelling", "symlink"])
def test_refuses_to_write_over_the_input(tmp_path, capsys, monkeypatch, how):
    real = case_trace(tmp_path, "s1", {r"C:\dlltrace-cases": r"C:\Users\Bartholomew\cases"})
    before = real.read_bytes()
    monkeypatch.chdir(tmp_path)
    dst = {"same": real, "other spelling": Path("sub/../t.jsonl"), "symlink": tmp_path / "link.jsonl"}[how]
    (tmp_path / "sub").mkdir()
    (tmp_path / "link.jsonl").symlink_to(real)
    code, out, err = redact_cli(capsys, real, dst)
    assert code == errors.EXIT_USAGE and out == "" and len(err.splitlines()) == 1 and "is the input trace" in err
    assert real.read_bytes() == before


@pytest.mark.parametrize("what, code, needle", [
    ("missing", errors.EXIT_USAGE, "no such file"),
    ("not a trace", errors.EXIT_BAD_TRACE, "not a dlltrace trace"),
    ("empty", errors.EXIT_BAD_TRACE, "empty file"),
    ("output folder missing", errors.EXIT_OUTPUT, "cannot write"),
    ("output is a folder", errors.EXIT_USAGE, "is a folder"),
])
def test_bad_inputs_are_one_line_and_a_documented_code(tmp_path, capsys, what, code, needle):
    src, dst = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    if what == "not a trace":
        src.write_text("hello\n")
    elif what == "empty":
        src.write_text("")
    elif what != "missing":
        src = case_trace(tmp_path, "s1", {})
        dst = tmp_path / "no" / "such" / "out.jsonl" if what == "output folder missing" else tmp_path
    got, out, err = redact_cli(capsys, src, dst)
    assert got == code and len(err.splitlines()) == 1 and needle in err and "Traceback" not in err, err
    assert what == "output is a folder" or not dst.exists()
    assert not [p for p in tmp_path.rglob(".dlltrace-redact-*")]  # no temporary file left


def test_the_default_output_name(tmp_path, capsys, monkeypatch):
    real = case_trace(tmp_path, "s1", {})
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert cli.main(["redact", "t.jsonl"]) == 0
    assert (tmp_path / "t.redacted.jsonl.gz").read_bytes()[:2] == b"\x1f\x8b"
    assert real.exists()


def test_the_library_call_says_what_it_did(tmp_path):
    """redact_trace_file, as `dlltrace run --redact` calls it: its summary."""
    real = case_trace(tmp_path, "s8", {r"C:\Python37": r"\\FILESRV01\tools\Python37", r"C:\Users\me": r"C:\Users\carol"})
    s = redact_trace_file(real, tmp_path / "r.jsonl.gz")
    assert s.compressed and s.size == os.path.getsize(tmp_path / "r.jsonl.gz") and s.warnings == []
    assert s.values.get("user") == 1 and s.values.get("machine") == 1
    assert s.lines == len(real.read_bytes().split(b"\n")) - 1 and 1 < s.changed < s.lines


@pytest.mark.wine
def test_real_wheel_runs_redacted(tmp_path_factory, tmp_path, capsys):
    """Real traces (tests/test_real_corpus.py's runs of torch and CTranslate2 DLLs under Wine, 6-8 MB),
    with their folder moved under a user profile and a UNC share: no planted name in the redacted file,
    and the same report as `report --redact` of the original in the three forms."""
    import test_real_corpus as rc

    runs = rc.corpus_runs(tmp_path_factory)
    sits = [s for s in rc.SITUATIONS if s.name in ("torch_without_libiomp5md", "ct2_ext_needs_python311")]
    outcomes = runs.run(sits)
    for sit in sits:
        o = outcomes[sit.name]
        assert not o.harness, o.harness
        trace = runs.work / sit.name / "t.jsonl"
        text = trace.read_text(encoding="utf-8")
        root = esc(o.root_win)
        assert root in text
        for i, (place, values) in enumerate([(r"C:\Users\Maximilian Okonkwo-Bright\work", ["Maximilian", "Okonkwo-Bright"]),
                                             (r"\\DESKTOP-7Q2K9LM\share\work", ["DESKTOP-7Q2K9LM"])]):
            real = tmp_path / f"{sit.name}-{i}.jsonl"
            real.write_text(text.replace(root, esc(place)).replace(esc("\\??\\" + place), esc("\\??\\UNC\\" + place[2:])),
                            encoding="utf-8")
            assert planted_in(real.read_bytes(), values)
            out = tmp_path / f"{sit.name}-{i}.redacted.jsonl"
            assert redact_cli(capsys, real, out)[0] == 0
            assert not planted_in(out.read_bytes(), values), (sit.name, values)
            same_reports(capsys, real, out)
            verdict = verdict_of(run(capsys, out, "--json")[1])
            assert verdict["failed"] and verdict == verdict_of(run(capsys, real, "--json")[1])
            with capsys.disabled():
                print(f"\n{sit.name} ({values[0]}): {real.stat().st_size:,} bytes, redacted {out.stat().st_size:,}, "
                      f"failed calls {verdict['failed']}")


def test_keys_and_format_words_are_redacted_in_the_file(tmp_path, capsys):
    """`report --redact` leaves the format's words and the PE facts as they are (they never hold a path);
    in the file's bytes a name there is replaced too (a key, a format word, an odd export), positionally."""
    real = case_trace(tmp_path, "s1", {r"C:\dlltrace-cases": r"C:\Users\Bartholomew\cases"})
    lines = real.read_text(encoding="utf-8").split("\n")
    k = next(i for i, x in enumerate(lines) if x.startswith("{") and json.loads(x).get("kind") == "pe")
    e = json.loads(lines[k])
    e["extra"] = {r"C:\Users\Bartholomew\key": 1}
    e["pe"]["exports"] = [*e["pe"]["exports"], r"\\Bartholomew\share"]
    lines[k] = json.dumps(e)
    real.write_text("\n".join(lines), encoding="utf-8")
    out = tmp_path / "r.jsonl"
    assert redact_cli(capsys, real, out)[0] == 0
    assert b"Bartholomew" not in out.read_bytes()
    got = [x for x in read_trace(out).events if "extra" in x][0]
    assert got["extra"] == {r"C:\Users\<user>\key": 1}
    assert got["pe"]["exports"][-1] == r"\\<user>\share"  # (one placeholder per value, whatever its place)


def test_redacting_a_redacted_trace_changes_nothing(tmp_path, capsys):
    real = case_trace(tmp_path, "s8", {r"C:\Python37": r"\\FILESRV01\tools\Python37", r"C:\Users\me": r"C:\Users\carol"})
    once, twice = tmp_path / "once.jsonl", tmp_path / "twice.jsonl"
    assert redact_cli(capsys, real, once)[0] == 0
    code, said, _ = redact_cli(capsys, once, twice)
    assert code == 0 and "nothing to replace; 0 of" in said
    assert once.read_bytes() == twice.read_bytes()


N_FUZZ = int(os.environ.get("DLLTRACE_REDACT_FUZZ", "200"))


def test_redact_under_the_trace_fuzzer(tmp_path, summary):
    """tests/test_fuzz.py's trace mutations (seeded, DLLTRACE_FUZZ_SEED), through `dlltrace redact`: no
    traceback, one line and a documented exit code, and where a copy was written, its report (text and
    JSON) is `report --redact` of the mutated trace, with the same exit code."""
    import test_fuzz as fz

    s = fz.seed()
    codes: dict[int, int] = {}
    failures = []
    for i in range(N_FUZZ):
        src, out = tmp_path / f"c{i}.jsonl", tmp_path / f"c{i}.redacted.jsonl"
        src.write_bytes(fz.trace_case(i, s))
        rc, said, err, escaped = fz.run_cli(["redact", str(src), "-o", str(out)])
        codes[rc] = codes.get(rc, 0) + 1
        bad = fz.problems("report", rc, "", err, escaped, "text", False)
        if rc not in (0, errors.EXIT_BAD_TRACE) or not out.exists():  # (3 and no copy: not a trace at all)
            bad += [] if not out.exists() else ["a copy was written with an error"]
            bad += ["exit 0 and no copy"] if rc == 0 and not out.exists() else []
        else:
            with fz.deep_enough():  # (a mutation nests deeper than the default recursion limit; the command runs deep)
                name = redactor_of(read_trace(src)).text(str(src), anywhere=True)
            for form in ([], ["--json"]):
                want = fz.run_cli(["report", str(src), *form, "--redact"])
                got = fz.run_cli(["report", str(out), *form])
                if (got[0], got[1].replace(str(out), name)) != (want[0], want[1]):
                    bad.append(f"report {form} of the copy differs from report --redact: exit {got[0]}, {want[0]}")
        if bad:
            failures.append(f"case {i} (DLLTRACE_FUZZ_SEED={s}): {bad[:2]}")
            (tmp_path / "failed").mkdir(exist_ok=True)
            (tmp_path / "failed" / src.name).write_bytes(src.read_bytes())
        for p in (src, out):
            p.unlink(missing_ok=True)
    summary["redact fuzz"] = f"{N_FUZZ} trace mutations through dlltrace redact, exit codes {dict(sorted(codes.items()))}, " \
                             f"{len(failures)} failing"
    assert not failures, failures[:5]


def test_a_home_folder_replaced_by_its_pattern_is_said(tmp_path, capsys):
    """A Linux trace whose only identifying part is root's home folder in paths (/root/…: no user name to
    replace): replaced, and the summary says so instead of "nothing to replace" (a user's home, /home/zed,
    is learned as a user: "1 user")."""
    trace = tmp_path / "t.jsonl"
    trace.write_text("\n".join(json.dumps(e) for e in [
        {"format": "dlltrace-trace", "version": 1, "platform": "linux"},
        {"ev": "audit_start", "pid": 7, "tid": 7, "seq": 1, "t": 1, "exe": "/usr/bin/python3"},
        {"ev": "objsearch", "pid": 7, "tid": 7, "seq": 2, "t": 2, "name": "/root/.pyenv/libexec/x.dylib",
         "flag": "LA_SER_ORIG", "by": ""}]) + "\n")
    out = tmp_path / "r.jsonl"
    code, said, _ = redact_cli(capsys, trace, out)
    assert code == 0 and "home folders in paths; 2 of 3 lines changed" in said, said
    assert b"/root/" not in out.read_bytes()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs resource limits (Linux, macOS)")
@pytest.mark.parametrize("out", ["out.jsonl", "out.jsonl.gz"])
def test_a_destination_that_cannot_be_written_is_a_write_error_and_leaves_nothing(tmp_path, out):
    """A full disk (a file-size limit here) while the redacted copy is written: "cannot write" the
    destination, exit 5 (not "cannot read" the source), and no temporary file left in its folder; a
    gzip copy needs little more room than itself (its events wait in a gzip temporary file)."""
    import subprocess
    import sys

    src = tmp_path / "in.jsonl"
    lines = (Path(__file__).resolve().parent.parent / "fixtures" / "traces" / "s5.jsonl").read_bytes()
    src.write_bytes(lines + b"".join(lines.splitlines(keepends=True)[1:]) * 40)  # (the events again and again)
    dest = tmp_path / "dest"
    dest.mkdir()
    prog = ("import resource, signal, sys\n"
            "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
            "resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[3]), resource.RLIM_INFINITY))\n"
            "from dlltrace.cli import entry\n"
            "sys.argv = ['dlltrace', 'redact', sys.argv[1], '-o', sys.argv[2]]\n"
            "sys.exit(entry())\n")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent / "tracer")}
    full = subprocess.run([sys.executable, "-c", prog, str(src), str(dest / out), str(1 << 30)], env=env,
                          capture_output=True, text=True)
    assert full.returncode == errors.EXIT_BAD_TRACE, full.stderr  # (written; it warns of the events repeated)
    size = (dest / out).stat().st_size
    (dest / out).unlink()
    small = subprocess.run([sys.executable, "-c", prog, str(src), str(dest / out), str(size // 2)], env=env,
                           capture_output=True, text=True)
    assert small.returncode == errors.EXIT_OUTPUT, small.stderr
    assert small.stderr.strip().splitlines()[-1].endswith(f"{dest / out}: cannot write: File too large")
    assert list(dest.iterdir()) == []
    if out.endswith(".gz"):  # (room for the copy and a little more is enough)
        room = subprocess.run([sys.executable, "-c", prog, str(src), str(dest / out), str(size + size // 2)], env=env,
                              capture_output=True, text=True)
        assert room.returncode == errors.EXIT_BAD_TRACE and (dest / out).stat().st_size == size, room.stderr


def test_the_owners_index_is_redacted_like_every_path(tmp_path):
    """py_dists (who owns each DLL) holds the site-packages folder: under a home folder it names the user,
    and the redacted trace holds no trace of it, while the owners it gives are the same ones."""
    from dlltrace.trace.reader import Trace as T
    from dlltrace.trace.redact import redact_trace

    site = "/home/zarathustra/venv/lib/python3.11/site-packages"
    events = [{"ev": "py_env", "pid": 1, "tid": 1, "seq": 1, "t": 1, "prefix": "/home/zarathustra/venv",
               "sys_path": [site], "user_site": "C:\\Users\\zarathustra the 2nd\\AppData\\Local\\Packages\\x"},
              {"ev": "py_dists", "pid": 1, "tid": 1, "seq": 2, "t": 2, "cut": False, "conda": [], "conda_prefix": None,
               "dists": [{"name": "numpy", "version": "2.1.3", "site": site, "files": ["numpy.libs/libscipy_openblas.so"]}]}]
    t = T(path=str(tmp_path / "t.jsonl"), header=None, events=events)  # type: ignore[arg-type]
    red = redact_trace(t)
    assert "zarathustra" not in json.dumps(list(red.events)) and "the 2nd" not in json.dumps(list(red.events))
    (owner,) = red.owners(1)["libscipy_openblas.so"]
    assert (owner.dist, owner.version, owner.path) == ("numpy", "2.1.3", "numpy.libs/libscipy_openblas.so")
    assert owner.root.endswith("/venv/lib/python3.11/site-packages") and "zarathustra" not in owner.root
