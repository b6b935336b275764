"""Windows consoles: output on a code page (cp1252, cp437) that lacks the report's characters, redirected
or on a terminal, never a traceback (console.py). Text gets ASCII stand-ins (✗ x, → ->) for the report's own
characters, and a name's character the code page lacks is its Python escape (用 \\u7528: two names still read
apart); JSON stays valid and lossless (JSON escapes); `-o FILE` is UTF-8 whatever the
console; on a terminal rich still colours, and draws with what the code page has.

Each run is a real `python -m dlltrace` with PYTHONIOENCODING set, as a redirected stdout on Windows
has (not run on a real Windows console: the encoding a Windows console gives Python is what is set here)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "tracer" / "dlltrace" / "examples" / "s1.toml"
S1_TRACE = ROOT / "fixtures" / "traces" / "s1.jsonl"
USER = "Jürgen用户😀"  # ü is in both code pages; 用户 and 😀 in neither
ENCODINGS = ["cp1252", "cp437"]
ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|x[0-9a-fA-F]{2})")  # a character written as an escape


def dlltrace(*argv: str, encoding: str = "utf-8", cwd: Path | None = None) -> tuple[int, bytes, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONIOENCODING", "PYTHONUTF8", "LC_ALL", "LANG")}
    env.update(PYTHONPATH=str(ROOT / "tracer"), PYTHONIOENCODING=encoding)
    r = subprocess.run([sys.executable, "-m", "dlltrace", *argv], capture_output=True, env=env, timeout=120,
                       stdin=subprocess.DEVNULL, cwd=cwd)
    return r.returncode, r.stdout, r.stderr.decode(encoding, "replace")


@pytest.fixture(scope="module")
def unicode_scenario(tmp_path_factory) -> Path:
    """The built-in example with a user name no Windows code page has."""
    f = tmp_path_factory.mktemp("console") / "s1-unicode.toml"
    f.write_text(EXAMPLE.read_text(encoding="utf-8").replace("\\Users\\me\\", f"\\Users\\{USER}\\"), encoding="utf-8")
    return f


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_text_on_a_code_page_gets_stand_ins(encoding, unicode_scenario):
    rc, out, err = dlltrace("simulate", str(unicode_scenario), encoding=encoding)
    assert rc == 1 and err == "", err  # (a scenario whose load fails: 1)
    text = out.decode(encoding)  # (what the console can show, all of it)
    assert "x cublas64_12.dll was not found" in text and "  -> 126 The specified module" in text
    assert "C:\\Users\\Jürgen\\u7528\\u6237\\U0001f600\\venv" in text  # (用户 and 😀: escaped; ü kept)
    assert set(ESCAPE.findall(text)) == {"u7528", "u6237", "U0001f600"}  # (only the name's: the rest stand-ins)
    rc, out, err = dlltrace("simulate", "--example", encoding=encoding)
    assert rc == 0 and err == "" and "x cublas64_12.dll was not found" in out.decode(encoding)


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize("form", [[], ["--markdown"]])
def test_report_on_a_code_page(encoding, form):
    rc, out, err = dlltrace("report", str(S1_TRACE), *form, encoding=encoding)
    assert rc == 0 and err == "", err
    text = out.decode(encoding)
    assert "cublas64_12.dll was not found" in text and "Traceback" not in text
    assert not ESCAPE.search(text)
    utf8 = dlltrace("report", str(S1_TRACE), *form)[1].decode("utf-8")
    assert len(text.splitlines()) == len(utf8.splitlines())  # (the same report, characters replaced)


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_json_on_a_code_page_is_valid_and_loses_nothing(encoding, unicode_scenario):
    rc, out, err = dlltrace("simulate", str(unicode_scenario), "--json", encoding=encoding)
    assert rc == 1 and err == "", err
    doc = json.loads(out.decode(encoding))
    assert doc == json.loads(dlltrace("simulate", str(unicode_scenario), "--json")[1].decode("utf-8"))
    assert USER in doc["calls"][0]["name"]
    rc, out, err = dlltrace("report", str(S1_TRACE), "--json", encoding=encoding)
    assert rc == 0 and err == ""
    assert json.loads(out.decode(encoding)) == json.loads(dlltrace("report", str(S1_TRACE), "--json")[1].decode("utf-8"))


@pytest.mark.parametrize("argv", [["simulate", "{scenario}", "--json"], ["simulate", "{scenario}"],
                                  ["simulate", "--example"], ["report", "{trace}", "--markdown"],
                                  ["report", "{trace}", "--json"], ["report", "{trace}"]])
def test_output_file_is_utf8_whatever_the_console(argv, unicode_scenario, tmp_path):
    of_scenario, is_json = "{scenario}" in argv, "--json" in argv
    argv = [a.format(scenario=unicode_scenario, trace=S1_TRACE) for a in argv]
    out = tmp_path / "out.txt"
    rc, stdout, err = dlltrace(*argv, "-o", str(out), encoding="cp437")
    assert rc in (0, 1) and err == "" and stdout == b"", err
    written = out.read_bytes().decode("utf-8")  # (strict: UTF-8)
    plain = dlltrace(*argv)[1].decode("utf-8")  # (the same on a UTF-8 stdout)
    assert written == plain
    if of_scenario:
        assert USER in written  # (characters neither code page has, as they are)
    elif not is_json:
        assert "—" in written  # (cp437 has no —)


def test_output_file_that_cannot_be_written_is_one_line_exit_5(tmp_path):
    rc, out, err = dlltrace("simulate", "--example", "-o", str(tmp_path / "no" / "such" / "dir.txt"))
    assert rc == 5 and out == b"" and len(err.strip().splitlines()) == 1 and err.startswith("dlltrace: cannot write ")


def test_errors_on_a_code_page_are_one_line(unicode_scenario, tmp_path):
    missing = tmp_path / f"{USER}.toml"
    rc, out, err = dlltrace("simulate", str(missing), encoding="cp1252")
    assert rc == 2 and err.strip() == f"dlltrace: {tmp_path}{os.sep}Jürgen\\u7528\\u6237\\U0001f600.toml: no such file"


@pytest.mark.parametrize("encoding, boxes", [("cp1252", False), ("cp437", False), ("utf-8", True)])
def test_a_terminal_on_a_code_page_keeps_colour_and_draws_in_ascii(encoding, boxes):
    """On a terminal (a pty) rich renders, told the console's encoding: colour stays, and the tree is drawn
    with box characters on UTF-8 and in ASCII (rich's own ASCII guides) on a code page."""
    pty = pytest.importorskip("pty")
    master, slave = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "PYTHONIOENCODING", "TERM")}
    env.update(PYTHONPATH=str(ROOT / "tracer"), PYTHONIOENCODING=encoding, TERM="xterm-256color", COLUMNS="200")
    p = subprocess.Popen([sys.executable, "-m", "dlltrace", "report", str(S1_TRACE)], stdout=slave,
                         stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # (the pty is closed when the program ends)
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    err = p.stderr.read().decode()
    p.stderr.close()
    assert p.wait(timeout=120) == 0 and err == "", err
    text = b"".join(chunks).decode(encoding)
    assert "\x1b[" in text  # colour
    assert "cublas64_12.dll was not found" in text
    assert ("└── " in text) == boxes and ("`-- " in text) == (not boxes)
