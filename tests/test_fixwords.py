"""render/fixwords.py: a fix's code pastes as it is. Its Python literals compile to the path they name, whatever
the path holds (a quote, a trailing backslash, spaces, non-ASCII); its bash lines, run by a real bash, set what
they say and keep what was there; its cmd and PowerShell lines quote the folder whole."""

from __future__ import annotations

import ast
import sys
import shutil
import subprocess

import pytest

from dlltrace.model import Fix
from dlltrace.render.fixwords import cmd_set_prepend, fix_text, ps_set_prepend, py_str, sh_export_prepend

ODD = ['C:\\Users\\me\\venv\\Lib\\site-packages\\nvidia\\cublas\\bin', 'C:\\odd "name"', 'C:\\ends\\with\\',
       'C:\\Program Files (x86)\\CUDA & co\\bin', 'C:\\Users\\Zoë\\ü', "C:\\it's", "C:\\tab\there"]


@pytest.mark.parametrize("path", ODD)
def test_a_python_literal_of_a_fix_is_the_path_it_names(path):
    assert ast.literal_eval(py_str(path)) == path
    f = Fix("add_dll_directory", "add_dll_directory", name="a.dll", folder=path, before="import torch")
    call = fix_text(f).split(":  ", 1)[1]
    tree = ast.parse(call, mode="eval")  # (it parses: a call with one literal argument)
    assert isinstance(tree.body, ast.Call) and ast.literal_eval(tree.body.args[0]) == path


@pytest.mark.parametrize("folder", ["/opt/my lib", "/opt/$HOME/`x`", "/opt/it's", "/opt/plain"])
@pytest.mark.parametrize("before", [None, "", "/old/a:/old/b"])
def test_a_bash_line_of_a_fix_sets_what_it_says_in_a_real_bash(folder, before):
    if shutil.which("bash") is None:
        pytest.skip("needs bash")
    line = sh_export_prepend("LD_LIBRARY_PATH", folder)
    f = Fix("env", "set_env", name="libx.so", folder=folder, variable="LD_LIBRARY_PATH", value=folder, python=False)
    assert fix_text(f) == f"Before starting the program:  {line}"
    env = {"PATH": "/usr/bin:/bin"} if before is None else {"PATH": "/usr/bin:/bin", "LD_LIBRARY_PATH": before}
    out = subprocess.run(["bash", "-c", line + '\nprintf %s "$LD_LIBRARY_PATH"'], env=env, capture_output=True,
                         text=True, check=True).stdout
    # the folder first, the old value after it, and no empty element (ld.so's current folder) when it had none
    assert out == (folder if not before else f"{folder}:{before}")


def test_the_patchelf_and_ld_so_conf_lines_quote_what_they_name():
    runpath = fix_text(Fix("linker", "set_runpath", name="libx.so", value="$ORIGIN:/opt/x lib", path="/app/my app/libapp.so",
                           python=False))
    assert runpath == "patchelf --set-rpath '$ORIGIN:/opt/x lib' '/app/my app/libapp.so'"
    conf = fix_text(Fix("linker", "add_ld_so_conf", name="libx.so.1", folder="/opt/x lib", python=False))
    assert conf == "echo '/opt/x lib' | sudo tee /etc/ld.so.conf.d/libx.conf && sudo ldconfig"


def test_the_cmd_and_powershell_lines_keep_the_folder_whole():
    folder = "C:\\Program Files (x86)\\CUDA & co\\bin"
    assert cmd_set_prepend("PATH", folder) == 'set "PATH=C:\\Program Files (x86)\\CUDA & co\\bin;%PATH%"'
    assert ps_set_prepend("PATH", "C:\\it's") == "$env:PATH = 'C:\\it''s;' + $env:PATH"
    f = Fix("path", "path_prepend", name="a.dll", folder=folder, python=False)
    assert cmd_set_prepend("PATH", folder) in fix_text(f) and ps_set_prepend("PATH", folder) in fix_text(f)


def test_pip_is_the_traced_pythons_own(tmp_path):
    """`pip install` runs with the traced program's interpreter (a venv's python, not the first pip on PATH):
    on Linux one bash line (a path with spaces quoted, and it runs); on Windows a path with spaces for cmd and
    for PowerShell, which runs a quoted path with `&`."""
    venv = tmp_path / "my venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").symlink_to(sys.executable)
    f = Fix("install", "install_package", name="libcudart.so.11.0", folder="/v/nvidia/cuda_runtime/lib",
            package="nvidia-cuda-runtime-cu11", python=False, exe=str(venv / "python"))
    line = fix_text(f).split(" (it puts", 1)[0]
    assert line == f"'{venv / 'python'}' -m pip install nvidia-cuda-runtime-cu11"
    ran = subprocess.run(["bash", "-c", line.replace(" install nvidia-cuda-runtime-cu11", " --version")],
                         capture_output=True, text=True)
    assert ran.returncode == 0 and ran.stdout.startswith("pip "), ran.stderr  # (that interpreter's pip)
    win = Fix("install", "install_package", name="cudart64_12.dll", folder="C:\\v\\nvidia\\cuda_runtime\\bin",
              package="nvidia-cuda-runtime-cu12", exe="C:\\Program Files\\Python311\\python.exe")
    words = fix_text(win)
    assert 'in cmd  "C:\\Program Files\\Python311\\python.exe" -m pip install nvidia-cuda-runtime-cu12' in words
    assert 'in PowerShell  & "C:\\Program Files\\Python311\\python.exe" -m pip install nvidia-cuda-runtime-cu12' in words
    plain = Fix("install", "install_package", name="a.dll", folder="C:\\x", package="a", exe="C:\\venv\\Scripts\\python.exe")
    assert fix_text(plain).startswith("C:\\venv\\Scripts\\python.exe -m pip install a (it puts")
    # a path without a space that cmd still splits: `&` ends the command there (C:\R, then D\py311\python.exe ...)
    amp = Fix("install", "install_package", name="a.dll", folder="C:\\x", package="a", exe="C:\\R&D\\py311\\python.exe")
    words = fix_text(amp)
    assert 'in cmd  "C:\\R&D\\py311\\python.exe" -m pip install a' in words, words
    assert 'in PowerShell  & "C:\\R&D\\py311\\python.exe" -m pip install a' in words
    dollar = Fix("install", "install_package", name="a.dll", folder="C:\\x", package="a",
                 exe="C:\\$py311\\python.exe")  # ("$py311" in double quotes: PowerShell's variable, empty)
    words = fix_text(dollar)
    assert 'in cmd  "C:\\$py311\\python.exe" -m pip install a' in words, words
    assert "in PowerShell  & 'C:\\$py311\\python.exe' -m pip install a" in words


def test_a_system_package_fix_is_one_apt_get_line_that_bash_parses():
    """The system packages a library needs, with those of the libraries it fails on next, are one command (sudo
    unless the program ran as root); bash reads it as one apt-get call with each package a word."""
    keysyms = Fix("install", "install_system_package", name="libxcb-keysyms.so.1", package="libxcb-keysyms1",
                  folder="/usr/lib/x86_64-linux-gnu", python=False)
    f = Fix("install", "install_system_package", name="libxcb-icccm.so.4", package="libxcb-icccm4",
            folder="/usr/lib/x86_64-linux-gnu", python=False, then=(keysyms,))
    text = fix_text(f)
    assert text.startswith("sudo apt-get install libxcb-icccm4 libxcb-keysyms1 (Debian, Ubuntu: the system's "
                           "packages of libxcb-icccm.so.4, libxcb-keysyms.so.1")
    root = fix_text(Fix("install", "install_system_package", name="libgl.so.1", package="libgl1", value="root",
                        python=False))
    assert root.startswith("apt-get install libgl1 (")
    if shutil.which("bash"):
        line = text.split(" (", 1)[0]
        words = subprocess.run(["bash", "-c", 'set -- ' + line + '; printf "%s\\n" "$@"'], capture_output=True,
                               text=True, check=True).stdout.split("\n")
        assert words[:5] == ["sudo", "apt-get", "install", "libxcb-icccm4", "libxcb-keysyms1"]


def test_fix_lines_put_each_command_on_a_line_of_its_own():
    """What a terminal shows of a fix (render/diagnosis.py, render/explained.py): a command that begins the words or
    follows two spaces is a line of its own, flagged, so that copying the line pastes into a shell or a Python
    prompt as it is; the words around it are lines of their own; a command inside a sentence stays there."""
    from dlltrace.render.fixwords import fix_lines

    apt = Fix("install", "install_system_package", name="libodbc.so.2", package="libodbc2", python=False)
    assert fix_lines(apt) == [("sudo apt-get install libodbc2", True),
                              ("(Debian, Ubuntu: the system's package of libodbc.so.2, which no pip package ships)", False)]
    env = Fix("env", "set_env", name="x.so", folder="/a b", variable="LD_LIBRARY_PATH", value="/a b", python=False)
    assert fix_lines(env) == [("Before starting the program:", False), (sh_export_prepend("LD_LIBRARY_PATH", "/a b"), True)]
    path = Fix("path", "path_prepend", name="b.dll", folder="C:\\x y", python=False)
    got = fix_lines(path)
    assert [c for _, c in got] == [False, True, False, True], got
    assert got[1][0] == cmd_set_prepend("PATH", "C:\\x y") and got[3][0] == ps_set_prepend("PATH", "C:\\x y")
    assert got[2][0] == "or in PowerShell"
    conda = Fix("env", "activate_conda", folder="C:\\conda")
    assert fix_lines(conda) == [(fix_text(conda), False)]  # (`conda activate` inside its sentence)
    plain = Fix("install", "install", name="b.dll", instruction="Install the B runtime")
    assert fix_lines(plain) == [("Install the B runtime", False)]


def test_every_command_line_of_every_fix_is_one_of_its_code_spans():
    """For every fix of the scenarios and fixture traces (tests/test_pasteable.py's, whose spans its checkers
    take): a line flagged a command is exactly one code span, and every span set apart in the words (at their
    start or after two spaces, and at their end or before two spaces or " (") is such a line: it pastes by itself."""
    import re

    from test_pasteable import all_fixes, spans

    from dlltrace.render.fixwords import fix_lines

    checked = 0
    for f in all_fixes():
        lines = fix_lines(f)
        own = spans(f)
        for text, command in lines:
            if command:
                assert text in [re.sub(r"\\(.)", r"\1", s) for s in own] or text in own, (f.action, text, own)
                checked += 1
        words = fix_text(f)
        for s in own:
            at = words.find(s)
            before, after = words[:at], words[at + len(s):]
            if (not before or before.endswith("  ")) and (not after or after.startswith(("  ", " ("))):
                assert (s, True) in lines, (f.action, s, lines)
    assert checked > 10


def test_fix_notes_markdown_a_step_of_several_lines_once():
    """A fix whose next step is two lines in a terminal ("Before the load:" and its os.add_dll_directory line: the
    field test's pip install openslide-bin, then os.add_dll_directory): the Markdown says the step once. Before,
    its second line came again after it, as if it were a note (notes were counted one per step)."""
    from dlltrace.render.explained import fix_notes, fix_notes_markdown

    folder = "C:\\py\\Lib\\site-packages\\openslide_bin"
    step = Fix("add_dll_directory", "add_dll_directory", name="libopenslide-1.dll", folder=folder,
               path=folder + "\\libopenslide-1.dll", before='ctypes.CDLL("libopenslide-1.dll")', python=True)
    f = Fix("install", "install_package", name="libopenslide-1.dll", package="openslide-bin", folder=folder,
            path=step.path, then=(step,))
    assert len([t for t, _ in fix_notes(f) if "add_dll_directory" in t]) == 1  # (the terminal: one line of two)
    md = fix_notes_markdown(f)
    assert sum("add_dll_directory" in line for line in md) == 1, md
    assert md[0].startswith("then: Before `ctypes.CDLL") and md[-1] == "(not checked by the model)", md
