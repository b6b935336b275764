"""The real terminal (issue 26 item 2; render/terminal.py, render/wrap.py, deep.py): `dlltrace report` run as a
user runs it, on a pseudo-terminal or in tmux.

- Ctrl-C during `report` of a big trace (tmux, 80x24, the progress bar shown): exit 130 (README's exit codes),
  the cursor visible again (tmux's cursor_flag) and no colour left on (the cells of the shell's next lines
  have no attribute: capture-pane -e);
- `--color always|never|auto` and NO_COLOR: no escape code at all where there should be none, colour
  where asked, on a pipe too;
- a console that is not UTF-8 (PYTHONIOENCODING=ascii with LC_ALL=C, cp1252): no UnicodeEncodeError, the
  names it cannot show escaped (\\u7528), the lines still within the terminal's width.

tmux is installed by tools/setup.sh --tests; in CI (CI=true) a test that would skip fails instead (conftest).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rich.cells import cell_len

ROOT = Path(__file__).resolve().parent.parent
S1_TRACE = ROOT / "fixtures" / "traces" / "s1.jsonl"
USER = "Jürgen用户😀"
SGR = re.compile(r"\x1b\[([0-9;:]*)m")
ESC = "\x1b["

sys.path.insert(0, str(ROOT / "bench"))
from report_speed import generate  # noqa: E402  (the big-trace bench's trace)


def env_for(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("NO_COLOR", "FORCE_COLOR", "PYTHONIOENCODING", "PYTHONUTF8", "LC_ALL", "LANG", "COLUMNS",
                        "TERM", "CLICOLOR_FORCE", "TTY_COMPATIBLE", "TTY_INTERACTIVE")}
    env.update(PYTHONPATH=str(ROOT / "tracer"), TERM="xterm-256color", **extra)
    return env


def on_pty(argv: list[str], **extra: str) -> tuple[int, bytes]:
    """`python -m dlltrace ARGV` with stdout a terminal (a pty): its exit code and what it printed there."""
    pty = pytest.importorskip("pty")
    master, slave = pty.openpty()
    p = subprocess.Popen([sys.executable, "-m", "dlltrace", *argv], stdout=slave, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL, env=env_for(**extra))
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
    err = p.stderr.read().decode("utf-8", "replace")
    p.stderr.close()
    rc = p.wait(timeout=120)
    assert err == "", err
    return rc, b"".join(chunks)


def on_pipe(argv: list[str], **extra: str) -> tuple[int, bytes]:
    r = subprocess.run([sys.executable, "-m", "dlltrace", *argv], capture_output=True, env=env_for(**extra),
                       stdin=subprocess.DEVNULL, timeout=120)
    assert r.stderr == b"", r.stderr
    return r.returncode, r.stdout


@pytest.fixture(scope="module")
def unicode_trace(tmp_path_factory) -> Path:
    """s1's trace, its folders under a user name that no code page but UTF has all of."""
    text = S1_TRACE.read_text(encoding="utf-8").replace("C:\\\\dlltrace-cases", f"C:\\\\Users\\\\{USER}\\\\cases")
    path = tmp_path_factory.mktemp("terminal") / "unicode.jsonl"
    path.write_text(text, encoding="utf-8")
    return path


# --- colour ------------------------------------------------------------------------------------------------

def test_color_auto_colours_a_terminal_and_never_a_pipe():
    rc, out = on_pty(["report", str(S1_TRACE)], COLUMNS="100")
    assert rc == 0 and ESC + "1;31m" in out.decode()  # (the verdict in bold red)
    rc, out = on_pipe(["report", str(S1_TRACE)])
    assert rc == 0 and b"\x1b" not in out and b"cublas64_12.dll was not found" in out


@pytest.mark.parametrize("how", [{"argv": ["--color", "never"]}, {"env": {"NO_COLOR": "1"}}], ids=["never", "NO_COLOR"])
def test_no_colour_is_no_escape_code_at_all_and_still_the_terminal_width(how):
    rc, out = on_pty(["report", str(S1_TRACE), *how.get("argv", [])], COLUMNS="60", **how.get("env", {}))
    text = out.decode()
    assert rc == 0 and "\x1b" not in text and "cublas64_12.dll was not found" in text
    lines = text.replace("\r\n", "\n").splitlines()
    assert max(map(cell_len, lines)) <= 60 and len(lines) > 40  # (wrapped: 60 columns, no escape)


def test_color_always_colours_a_pipe_whatever_no_color_says():
    for extra in ({}, {"NO_COLOR": "1"}):
        rc, out = on_pipe(["report", str(S1_TRACE), "--color", "always"], **extra)
        assert rc == 0 and ESC + "1;31m" in out.decode(), extra
    rc, out = on_pipe(["simulate", "--example", "--color", "always"])
    assert rc == 0 and ESC in out.decode()
    rc, out = on_pipe(["simulate", "--example", "--color", "never"])
    assert rc == 0 and b"\x1b" not in out


def test_an_empty_no_color_is_not_set():
    """no-color.org: NO_COLOR "when present and not an empty string"."""
    rc, out = on_pty(["report", str(S1_TRACE)], COLUMNS="100", NO_COLOR="")
    assert rc == 0 and ESC + "1;31m" in out.decode()


def test_a_bad_color_word_is_one_line_exit_2():
    r = subprocess.run([sys.executable, "-m", "dlltrace", "report", str(S1_TRACE), "--color", "sometimes"],
                       capture_output=True, env=env_for(), timeout=60)
    assert r.returncode == 2 and b"Traceback" not in r.stderr and b"--color" in r.stderr


# --- a console that is not UTF-8 -----------------------------------------------------------------------------

@pytest.mark.parametrize("encoding", ["ascii", "cp1252"])
def test_a_terminal_without_utf8_escapes_what_it_cannot_show(encoding, unicode_trace):
    rc, out = on_pty(["report", str(unicode_trace)], COLUMNS="60", LC_ALL="C", PYTHONIOENCODING=encoding)
    text = out.decode(encoding)  # (strict: every byte is of the console's encoding)
    assert rc == 0 and "Traceback" not in text and "UnicodeEncodeError" not in text
    name = USER.encode(encoding, "backslashreplace").decode(encoding)  # (J\xfcrgen\u7528... on ascii)
    assert "\\u7528\\u6237\\U0001f600" in name and name in text
    assert "x cublas64_12.dll was not found" in text  # (✗: its stand-in)
    lines = [SGR.sub("", line) for line in text.replace("\r\n", "\n").splitlines()]
    too_wide = [line for line in lines if cell_len(line) > 60 and " " in line.strip()]
    assert not too_wide, too_wide  # (laid out after the escapes: within the width)


def test_a_pipe_without_utf8_never_raises(unicode_trace):
    rc, out = on_pipe(["report", str(unicode_trace)], LC_ALL="C", PYTHONIOENCODING="ascii")
    text = out.decode("ascii")
    assert rc == 0 and "J\\xfcrgen\\u7528\\u6237\\U0001f600" in text


def test_a_cp1252_stream_in_process(unicode_trace, monkeypatch):
    """A cp1252 stream handed to the terminal console (console.setup_streams' error handler, as a Windows
    console's): the same report, the characters it lacks escaped or stood in for, every line within 60."""
    import io

    from dlltrace.console import TEXT_ERRORS
    from dlltrace.render.explained import print_blocks
    from dlltrace.render.summary import produce_blocks
    from dlltrace.render.terminal import terminal_console
    from dlltrace.trace.reader import read_trace

    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding="cp1252", errors=TEXT_ERRORS, newline="\n")
    monkeypatch.setenv("COLUMNS", "60")  # (a pipe: COLUMNS is its width)
    console = terminal_console("never", stream)
    print_blocks(produce_blocks(read_trace(str(unicode_trace))), console)
    stream.flush()
    text = raw.getvalue().decode("cp1252")
    assert "Jürgen\\u7528\\u6237\\U0001f600" in text and "\x1b" not in text
    assert all(cell_len(line) <= 60 or " " not in line.strip() for line in text.splitlines())


# --- tmux: Ctrl-C ------------------------------------------------------------------------------------------

class Tmux:
    """A tmux server of its own (-L), one 80x24 session running bash without its rc files."""

    def __init__(self, name: str, cwd: Path, env: dict[str, str]) -> None:
        self.base = ["tmux", "-L", name]
        env_args = [f"{k}={v}" for k, v in env.items() if k in ("PATH", "HOME", "PYTHONPATH", "TERM")]
        self.run("new-session", "-d", "-x", "80", "-y", "24", "-s", "t", "-c", str(cwd),
                 "env", "-i", *env_args, "PS1=$ ", "bash", "--norc", "--noprofile")

    def run(self, *args: str) -> str:
        env = {k: v for k, v in os.environ.items() if k not in ("TMUX", "TMUX_PANE")}  # (run inside tmux: a server of its own)
        return subprocess.run([*self.base, *args], capture_output=True, text=True, check=True, timeout=30, env=env).stdout

    def screen(self, escapes: bool = False) -> str:
        return self.run("capture-pane", "-p", *(["-e"] if escapes else []), "-t", "t")

    def wait_for(self, pattern: str, timeout: float) -> str:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            screen = self.screen()
            if re.search(pattern, screen):
                return screen
            time.sleep(0.1)
        raise AssertionError(f"{pattern!r} never on the screen:\n{self.screen()}")

    def kill(self) -> None:
        env = {k: v for k, v in os.environ.items() if k not in ("TMUX", "TMUX_PANE")}
        subprocess.run([*self.base, "kill-server"], capture_output=True, timeout=30, env=env)


def attributes(screen: str) -> list[list[tuple[str, frozenset[str]]]]:
    """Each line of capture-pane -e as its characters with the SGR attributes on when each was drawn (tmux
    writes an attribute change where it happens: the state runs on from line to line)."""
    on: set[str] = set()
    out = []
    for line in screen.split("\n"):
        cells, pos = [], 0
        for m in [*SGR.finditer(line), None]:
            end = m.start() if m else len(line)
            cells += [(ch, frozenset(on)) for ch in line[pos:end]]
            if m is None:
                break
            pos = m.end()
            params = [int(p or 0) for p in re.split("[;:]", m.group(1))] if m.group(1) else [0]
            i = 0
            while i < len(params):
                p = params[i]
                if p == 0:
                    on.clear()
                elif p in (38, 48):  # (256 colours or RGB: their arguments follow)
                    on.add("fg" if p == 38 else "bg")
                    i += 2 if params[i + 1:i + 2] == [5] else 4
                elif 30 <= p <= 37 or 90 <= p <= 97:
                    on.add("fg")
                elif 40 <= p <= 47 or 100 <= p <= 107:
                    on.add("bg")
                elif p in (39, 49):
                    on.discard("fg" if p == 39 else "bg")
                elif 21 <= p <= 29:
                    on -= {str(p - 20)} | ({"1", "2"} if p == 22 else set())
                else:
                    on.add(str(p))
                i += 1
        out.append(cells)
    return out


@pytest.fixture(scope="module")
def big_trace(tmp_path_factory) -> Path:
    """A trace of about 100,000 events (bench/report_speed.py): reading and replaying it takes seconds, the
    progress bar shows after one."""
    path = tmp_path_factory.mktemp("big") / "big.jsonl"
    generate(path, 100_000)
    return path


def test_ctrl_c_during_report_restores_the_cursor_and_the_colours(big_trace):
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed (tools/setup.sh --tests installs it)")
    tmux = Tmux(f"dlltrace-test-{os.getpid()}", big_trace.parent, env_for())
    try:
        tmux.wait_for(r"(?m)^\$", 30)
        tmux.run("send-keys", "-t", "t", f"{shlex.quote(sys.executable)} -m dlltrace report {big_trace.name}; echo EXIT=$?",
                 "Enter")
        tmux.wait_for(r"dlltrace: (reading the trace|replaying the loads)", 120)  # (the bar: the cursor hidden)
        assert tmux.run("display", "-p", "-t", "t", "#{cursor_flag}").strip() == "0"
        tmux.run("send-keys", "-t", "t", "C-c")
        screen = tmux.wait_for(r"EXIT=\d+\n\$", 60)
        assert "EXIT=130" in screen and "dlltrace: interrupted" in screen, screen  # (README: 130, interrupted)
        assert "Traceback" not in screen
        assert tmux.run("display", "-p", "-t", "t", "#{cursor_flag}").strip() == "1"  # the cursor visible again
        tmux.run("send-keys", "-t", "t", "echo after", "Enter")
        tmux.wait_for(r"\nafter\n", 30)
        cells = attributes(tmux.screen(escapes=True))
        text = ["".join(ch for ch, _ in line) for line in cells]
        at = next(i for i, line in enumerate(text) if line.startswith("dlltrace: interrupted"))
        shown = [(text[i], ch, on) for i in range(at, len(cells)) for ch, on in cells[i] if not ch.isspace()]
        assert any(t.startswith("after") for t, _, _ in shown), text
        left_on = [(t, ch, sorted(on)) for t, ch, on in shown if on]
        assert not left_on, left_on  # (what the shell prints after: drawn with no colour, no bold)
    finally:
        tmux.kill()
