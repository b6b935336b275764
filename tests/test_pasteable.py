"""Every fix of every scenario and fixture trace pastes as it is (issue 24 item 4): each piece of code a fix's words
hold (the spans its Markdown puts in backticks) is checked by its language's own checker: Python by compile()
(and its path literal evaluates to the fix's path), C by the mingw compiler against windows.h (and its wide
string literal is the fix's path), bash by `bash -n`, and cmd's and PowerShell's assignments by a model of their
quoting. A span no checker takes fails: a new kind of code gets a checker before it is offered."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import dlltrace
from dlltrace.model import Fix
from dlltrace.render.fixwords import fix_markdown

import winetools

ROOT = Path(__file__).resolve().parent.parent
C_CALL = re.compile(r'^(AddDllDirectory|SetDllDirectoryW)\((L"(?:[^"\\]|\\.)*")\)$|'
                    r'^LoadLibraryExW\((L"(?:[^"\\]|\\.)*"), NULL, LOAD_WITH_ALTERED_SEARCH_PATH\)$')
CMD_SET = re.compile(r'^set "([A-Za-z_]+)=([^"%]*);%\1%"$')
PS_SET = re.compile(r"^\$env:([A-Za-z_]+) = '((?:[^']|'')*);' \+ \$env:\1$")
BASH = re.compile(r"^(export |patchelf |echo |sudo |apt-get |\S*python\S* -m pip |pip )")
# a one-line Python program for any shell (cmd, PowerShell, bash): double quotes around it, none, no $, % or `
# inside (193's check of the Python's bitness: python -c "import sys;print(64 if sys.maxsize > 2**32 else 32)")
PY_C = re.compile(r'^python -c "([^"$%`\\]*)"$')


def all_fixes() -> list[Fix]:
    out: list[Fix] = []

    def walk(f: Fix) -> None:
        out.append(f)
        for step in f.then:
            walk(step)
    inputs = sorted((ROOT / "fixtures" / "scenarios").glob("*.toml")) + sorted((ROOT / "fixtures" / "traces").glob("*.jsonl"))
    for p in inputs:
        for d in dlltrace.diagnose(p):
            for failure in d.failures:
                for f in failure.fixes:
                    walk(f)
    return out


def c_unescape(literal: str) -> str:
    """The value of a C wide string literal L"..." (the escapes c_wstr writes: \\\\, \\", octal)."""
    body = literal[2:-1]
    return re.sub(r'\\([0-7]{3}|.)', lambda m: chr(int(m.group(1), 8)) if len(m.group(1)) == 3 else m.group(1), body)


def spans(f: Fix) -> list[str]:
    return re.findall(r"`([^`]+)`", fix_markdown(f))


def test_every_fix_of_every_scenario_and_fixture_pastes():
    fixes = all_fixes()
    assert len(fixes) > 30
    python, c_calls, bash, other = [], [], [], []
    one_liners: list[str] = []
    for f in fixes:
        for s in spans(f):
            if C_CALL.match(s):
                c_calls.append((f, s))
            elif CMD_SET.match(s):
                value = CMD_SET.match(s).group(2)  # type: ignore[union-attr]
                assert f.folder and value == f.folder, (s, f.folder)  # (cmd: no quote nor % inside the quotes)
            elif PS_SET.match(s):
                value = PS_SET.match(s).group(2).replace("''", "'")  # type: ignore[union-attr]
                assert value == f.folder, (s, f.folder)
            elif BASH.match(s):
                bash.append(s)
            elif PY_C.match(s):
                compile(PY_C.match(s).group(1), "<fix>", "exec")  # type: ignore[union-attr]
                bash.append(s)
                one_liners.append(s)
            else:
                try:
                    compile(s, "<fix>", "exec")
                except SyntaxError as e:
                    other.append((f.action, s, str(e)))
                    continue
                python.append((f, s))
    assert not other, other  # (a span that is no Python, and no other checker's)
    # Python: each path literal is the fix's path
    for f, s in python:
        for node in ast.walk(ast.parse(s)):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and "\\" in node.value:
                assert node.value.rstrip(";") in (f.folder, f.path, f.value), (s, f)
    # C: each literal is the fix's path, and the calls compile against windows.h
    for f, s in c_calls:
        m = C_CALL.match(s)
        lit = m.group(2) or m.group(3)  # type: ignore[union-attr]
        assert c_unescape(lit) in (f.folder, f.path), (s, f)
    assert c_calls and python
    for s in bash:
        assert windows_pip_ok(s), s
        if shutil.which("bash"):
            r = subprocess.run(["bash", "-n", "-c", s], capture_output=True, text=True)
            assert r.returncode == 0, (s, r.stderr)
    for s in one_liners:  # (and it runs: it prints what it says it prints)
        r = subprocess.run([sys.executable, "-c", PY_C.match(s).group(1)], capture_output=True, text=True)  # type: ignore[union-attr]
        assert r.returncode == 0 and r.stdout.strip() in ("32", "64"), (s, r)
    if c_calls:
        winetools.require("mingw64")
        src = "#include <windows.h>\n" + "".join(f"void f{i}(void) {{ {s}; }}\n" for i, (_, s) in enumerate(c_calls))
        r = subprocess.run([winetools.CC64, "-fsyntax-only", "-Werror", "-x", "c", "-"], input=src,
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr[-3000:]


def windows_pip_ok(span: str) -> bool:
    """A pip command for cmd or PowerShell (not a POSIX path) has none of cmd's operators (< > | & ^) outside double
    quotes: `pip install nvidia-cudnn-cu12<9` unquoted reads 9 as a file to redirect from. (bash -n cannot tell.)"""
    if " -m pip " not in span or span.lstrip("& ").startswith(("/", "'/")):
        return True
    outside = re.sub(r'"[^"]*"', "", span.lstrip("& "))
    return not any(c in outside for c in "<>|&^")


def test_a_requirement_with_a_shell_operator_is_quoted_for_each_shell():
    """The issue's own example: a requirement with `<` (nvidia-cudnn-cu12<9, cuDNN 8 for CUDA 12) quoted for cmd and
    PowerShell (double quotes) and for bash (single), in every form of the pip fix; the embeddable Python's --target
    form too."""
    from dlltrace.render.fixwords import fix_text

    forms = [Fix("install", "install_package", name="cudnn64_8.dll", package="nvidia-cudnn-cu12<9", folder="C:\\x", exe=exe)
             for exe in ("C:\\Python311\\python.exe", "C:\\Program Files\\Python311\\python.exe", "")]
    forms.append(Fix("install", "install_package", name="cudnn64_8.dll", package="nvidia-cudnn-cu12<9", folder="C:\\x",
                     exe="C:\\app\\python.exe", value="embeddable", dest="C:\\app\\Lib\\site-packages"))
    for f in forms:
        for sp in spans(f):
            assert windows_pip_ok(sp), sp
        assert '"nvidia-cudnn-cu12<9"' in fix_text(f)
    assert not windows_pip_ok("C:\\Python311\\python.exe -m pip install nvidia-cudnn-cu12<9")  # (the checker can fail)
    linux = Fix("install", "install_package", name="libcudnn.so.8", package="nvidia-cudnn-cu12<9", folder="/x",
                exe="/venv/bin/python")
    (sp,) = spans(linux)
    assert sp == "/venv/bin/python -m pip install 'nvidia-cudnn-cu12<9'"
    assert subprocess.run(["bash", "-n", "-c", sp]).returncode == 0


def test_c_unescape_reads_what_c_wstr_writes():
    from dlltrace.render.fixwords import c_wstr

    for path in ("C:\\s1\\v12.1\\bin", 'C:\\odd "name"', "C:\\tab\there", "C:\\ends\\"):
        assert c_unescape(c_wstr(path)) == path
    assert c_wstr("C:\\s1\\v12.1\\bin") == 'L"C:\\\\s1\\\\v12.1\\\\bin"'  # (bare, \v and \b would be escapes)


@pytest.mark.wine
@pytest.mark.parametrize("path", ["C:\\s1\\v12.1\\bin", 'C:\\odd "name"', "C:\\tab\there"])
def test_a_c_fix_compiles_with_the_path_it_names(path, tmp_path):
    """The C words of a fix, compiled and run under Wine: the string the call gets is the path."""
    from dlltrace.render.fixwords import c_wstr

    winetools.require("mingw64")
    src = tmp_path / "p.c"
    src.write_text("#include <windows.h>\n#include <stdio.h>\nint main(void) { const wchar_t *s = "
                   + c_wstr(path) + "; for (; *s; s++) printf(\"%04x \", (unsigned)*s); return 0; }\n")
    r = subprocess.run([winetools.CC64, "-Werror", "-fsyntax-only", str(src)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    exe = winetools.mingw_compile([src], tmp_path / "p.exe")
    out = winetools.run_wine([str(exe)])
    assert out.returncode == 0
    assert out.stdout.decode().split() == [f"{ord(c):04x}" for c in path]
