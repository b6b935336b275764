"""One explained call (ExplainedCall), and its words: the one place each section of a failed load's
explanation is worded, for `dlltrace simulate` and `dlltrace report` alike, as terminal text (built
with rich: a Tree for the module chain, Tables for where the loader looked and what it found
elsewhere), as Markdown (render/markdown.py) and as JSON (render.call_dict).

Every style is chosen from a typed field (a candidate's result, a node's cause, a fix's
verification), never by reading the words back."""

from __future__ import annotations

import ast
import io
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Literal, Optional, Sequence, Union

from dlltrace import winpath
from dlltrace.model import (TORCH_ORIGINS, ERROR_TEXT, RESULT_WORDS, AlsoMissing, CallResult, Candidate, Cause, Elsewhere, Fix, Leaf,
                            Node, flags_text)
from dlltrace.trace.reader import STARTUP_STATUS_TEXT
from dlltrace.console import shown_on
from dlltrace.render.escape import escape_lines, escape_prose, escape_terminal
from dlltrace.render.wrap import Chain, Grid, wrap_text
from dlltrace.render.fixwords import fix_lines, fix_markdown, relation_text

if TYPE_CHECKING:
    from rich.console import Console, RenderableType

# How the terminal shows a piece of the text (RICH_STYLES): a line's style, or a table cell's.
LineStyle = Literal["", "failure", "success", "heading", "disagreement", "went_on", "warning", "muted"]

RICH_STYLES: dict[LineStyle, str] = {"": "", "failure": "bold red", "success": "green", "heading": "bold",
                                     "disagreement": "yellow", "went_on": "dim", "warning": "yellow", "muted": "dim"}


class Styled(str):
    """A line of the text with the style its producer gave it (a str: printed as it is)."""

    style: LineStyle

    def __new__(cls, text: str, style: LineStyle) -> "Styled":
        line = super().__new__(cls, text)
        line.style = style
        return line


def style_of(line: str) -> LineStyle:
    return line.style if isinstance(line, Styled) else ""


def visible(text: str) -> str:
    """`text` as it may be printed: each control character (a name from a trace may hold an ANSI escape),
    lone surrogate (legal in a Windows name) and bidi control as its Python escape (\\x1b, \\udc80,
    \\u202e: escape.escape_lines); newlines and tabs stay (a name's own are escaped where it is put:
    escape.escape_terminal). A Styled line keeps its style. Called where the text is emitted (block_lines,
    rendered_lines, print_blocks, markdown_report)."""
    shown = escape_lines(text)
    if shown is text:
        return text
    return Styled(shown, text.style) if isinstance(text, Styled) else shown


# --- the one table of words per cause ---------------------------------------------------------------
@dataclass(frozen=True)
class CauseWords:
    """A cause's words: `verdict`, the sentence that names the failure (fields: name, path, detail,
    need — " — it is needed by X" —, built_for, process); `mark`, what the module chain says at the
    node (fields: detail); `at_path`, whether the chain shows the node's folder (a file was chosen)."""

    verdict: str
    mark: str
    at_path: bool = True


CAUSE_WORDS: dict[Cause, CauseWords] = {
    "not_found": CauseWords("{name} was not found{need}", "not found", at_path=False),
    "apiset_no_host": CauseWords("{name} is an API set with no host on this system{need}", "API set with no host",
                                 at_path=False),
    "bad_machine": CauseWords("{name} is built for {built_for}, but this process is {process}{need}", "wrong machine"),
    "not_pe": CauseWords("{name} at {path} is not a valid DLL{need}", "not a PE"),
    "missing_export": CauseWords("{name} at {path} does not export {detail}{need}", "lacks {detail}"),
    "missing_ordinal": CauseWords("{name} at {path} lacks {detail}{need}", "lacks {detail}"),
    "init_failed": CauseWords("{name}: its initialisation (DllMain) failed; every dependency resolved",
                              "DllMain failed"),
    "invalid_parameter": CauseWords("invalid parameters: {detail}", "invalid parameters"),
    "access_denied": CauseWords("access to {path} was denied{need}", "access denied"),
}

# The bits of each machine (model.MACHINES), for "a 64-bit DLL in a 32-bit process".
MACHINE_BITS = {"x64": 64, "arm64": 64, "x86": 32, "arm": 32}


def bitness_text(name: str, machines: Sequence[str], process: str) -> str:
    """A wrong-machine leaf in words (error 193): "a.dll is a 64-bit DLL (x64) in a 32-bit process (x86)" when
    the DLL and the process differ in bits, the commonest report (a win_amd64 wheel in a 32-bit Python, and the
    reverse); else "a.dll is built for arm64, but this process is x64"."""
    bits = {MACHINE_BITS.get(m) for m in machines}
    own = MACHINE_BITS.get(process)
    if len(bits) == 1 and None not in bits and own is not None and own not in bits:
        (dll_bits,) = bits
        return (f"{name} is a {dll_bits}-bit DLL ({' / '.join(machines)}) in a {own}-bit process ({process}): "
                f"Windows cannot load a {dll_bits}-bit DLL into a {own}-bit process")
    return f"{name} is built for {' / '.join(machines) or 'another machine'}, but this process is {process}"


# Whether a missing leaf has a copy anywhere (ExplainedCall.leaf_state), and its words.
LeafState = Literal["", "installed_not_searched", "not_installed", "missing_from_its_distribution",
                    "built_for_another_python"]
LEAF_STATE_WORDS: dict[LeafState, str] = {
    "": "", "installed_not_searched": "installed but not searched",
    "not_installed": "not installed anywhere dlltrace looked",
    "missing_from_its_distribution": "its distribution's RECORD lists it, and it is not there",
    # (explain.rule_extension_of_another_python: said with the importer, its wheel and the Python it is for)
    "built_for_another_python": "{parent} is {package} {version}'s build for Python {need}, another Python"}

# The headings, said the same way by every form.
LOOKED = "Where Windows looked for {name}"
FOUND_ELSEWHERE = "Found elsewhere"
OTHER_VERSIONS = ("Other versions (a different file name: they never satisfy {name}, whatever the PATH order)")
ALSO_MISSING = "Also missing — you would hit these next"
FIX = "Fix"
NOT_CHECKED = "not checked by the model"

RESULT_STYLES: dict[str, LineStyle] = {
    "found": "success", "not_there": "muted", "wrong_machine": "failure", "not_pe": "failure",
    "access_denied": "failure"}


# --- the model ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Looked:
    """One attempt's search for the leaf: the candidates in order, and what the flags do not search."""

    name: str  # the leaf
    flags: int  # the call's flags
    candidates: tuple[Candidate, ...]
    not_searched: str = ""
    which: str = ""  # "" for the only attempt; "first attempt", "attempt 2", ...


@dataclass
class ExplainedCall:
    """A call and everything said about it, as data: built from a CallResult (from_result) and, for a
    report, the trace's context (text.explained_incident: the real error, the retries)."""

    result: CallResult  # the model's result (of the first attempt, for a report)
    op: str
    name: str
    flags: int = 0
    origin: str = ""
    error: Optional[int] = 0  # what the call returned (a report: the real loader's); None: it never returned
    failed: bool = False
    start_status: Optional[int] = None  # op "start": the process's NTSTATUS
    chain: list[Node] = field(default_factory=list)  # the module chain, from the call's module down to the leaf
    looked: list[Looked] = field(default_factory=list)
    show_fixes: bool = True  # False for a load the program went past: it needs none

    @property
    def leaf(self) -> Optional[Leaf]:
        return self.result.leaf

    @property
    def fixes(self) -> list[Fix]:
        return self.result.fixes if self.show_fixes else []

    @property
    def found_elsewhere(self) -> list[Elsewhere]:
        return self.result.found_elsewhere

    @property
    def close_names(self) -> list[Elsewhere]:
        return self.result.close_names

    @property
    def also_missing(self) -> list[AlsoMissing]:
        return self.result.also_missing

    @property
    def leaf_state(self) -> LeafState:
        """For a missing leaf: whether a copy of it is installed (found elsewhere, for the process's machine)."""
        if self.leaf is None or self.leaf.cause != "not_found":
            return ""
        first = self.result.fixes[0] if self.result.fixes else None
        if first is not None and first.kind == "reinstall" and first.action == "install" and first.package and \
                first.need and first.name.lower().startswith("python3"):
            return "built_for_another_python"  # (explain.rule_extension_of_another_python: nothing of it is gone)
        if first is not None and first.kind == "reinstall" and first.action == "install" and first.package:
            return "missing_from_its_distribution"  # (the file the load wanted is gone: another copy is no cause)
        if any(e.result == "found" for e in self.found_elsewhere):
            return "installed_not_searched"
        if any(f.kind == "reinstall" and f.action == "install" and f.package and not f.need for f in self.result.fixes):
            return "missing_from_its_distribution"  # (explain.owner_reinstall: the environment's record says whose)
        return "not_installed"


def leaf_of(tree: Optional[Node]) -> Optional[Node]:
    chain = tree.failure_chain() if tree is not None else []
    return chain[-1] if chain and chain[-1].cause else None


def from_result(r: CallResult) -> ExplainedCall:
    """A simulated call, explained."""
    leaf = leaf_of(r.tree)
    looked = [Looked(leaf.name, r.flags, tuple(leaf.candidates), r.not_searched)] if leaf and leaf.candidates else []
    return ExplainedCall(r, r.op, r.name, r.flags, r.origin, r.error, bool(r.error),
                         chain=r.tree.failure_chain() if r.tree else [], looked=looked)


# Python's repr of a string ('C:\\x'), as some producers still write a call into their words (ctypes.CDLL(...)
# origins): printed as the raw string a user types (r"C:\x"). A repr that cannot be one (it ends in a
# backslash, or holds a double quote) is left as it is.
# (a quote right after a backslash starts none: each \' of a line with no closing quote was one, each read to the
# line's end, so a long such line took time quadratic in its length)
_REPR = re.compile(r"(?<![\w\"'\\])'((?:[^'\\\n]|\\.)*)'")


# the escapes Python's repr of a str writes: quoted text with any other backslash is not a repr (a path a producer
# wrote as it is, 'C:\sdk\bin.dll', whose \b literal_eval would read as a backspace, and whose \s a Python
# 3.12+ prints a SyntaxWarning for)
_REPR_ESCAPE = re.compile(r"\\(?:[\\'nrt]|x[0-9a-f]{2}|u[0-9a-f]{4}|U[0-9a-f]{8})|\\")


def as_typed(words: str) -> str:
    r"""Words with each Python string repr in them written as the user types it: 'C:\\x' -> r"C:\x". Quoted text
    that is not exactly a repr is left as it is."""
    def typed(m: "re.Match[str]") -> str:
        text = m.group(0)
        if any(e.group(0) == "\\" for e in _REPR_ESCAPE.finditer(text)):  # (a backslash no repr writes)
            return text
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            return text
        if not isinstance(value, str) or repr(value) != text:
            return text
        if '"' in value or value.endswith("\\") or not value.isprintable():  # (a control character stays escaped)
            return text
        return f'r"{value}"' if "\\" in value else f'"{value}"'
    return _REPR.sub(typed, words) if "'" in words else words


# --- words: one function per section ------------------------------------------------------------------
def verdict_text(e: ExplainedCall) -> str:
    """The verdict line: "✗ cublas64_12.dll was not found — it is needed by ctranslate2.pyd; installed
    but not searched", "✓ a.dll loaded from C:\\x\\a.dll"."""
    leaf = e.leaf
    name = winpath.basename(e.name or "?")
    if leaf is None:
        if e.failed:
            return f"✗ {name} failed with {e.error}; the model could not say why"
        return f"✓ {name} loaded from {e.result.module_path}"
    words = CAUSE_WORDS[leaf.cause]
    facts = leaf.facts
    need = f" — it is needed by {leaf.parent}" if leaf.parent else ""
    text = words.verdict.format(
        name=leaf.name, path=leaf.path, detail=leaf.detail, need=need,
        built_for=" / ".join(facts.machines) or "another machine", process=facts.process_machine or "x64")
    if leaf.cause == "bad_machine":
        text = bitness_text(leaf.name, facts.machines, facts.process_machine or "x64") + need
    state = LEAF_STATE_WORDS[e.leaf_state]
    if e.leaf_state == "built_for_another_python":
        f = e.result.fixes[0]
        state = state.format(parent=f.parent, package=f.package, version=f.version, need=f.need)
    return f"✗ {text}; {state}" if state else f"✗ {text}"


def verdict_style(e: ExplainedCall) -> LineStyle:
    return "success" if e.leaf is None and not e.failed else "failure"


def call_text(e: ExplainedCall) -> str:
    """The call and what it returned: "import x: LoadLibraryExW(C:\\x\\a.dll, 0x1100)  → 126 The specified
    module could not be found."."""
    if e.op == "start":
        status = e.start_status or 0
        return (f"{e.name} and its static imports  → {status:#x} {STARTUP_STATUS_TEXT.get(status, '')} "
                f"(error {e.error}); the process ended before its entry point")
    head = f"{e.op}({e.name}, {e.flags:#x})"
    # (torch's own loop: the model's typed origin, not the trace's last Python event; diagnosis.explain.torch_origin)
    origin = e.result.origin if e.result.origin_kind in TORCH_ORIGINS and e.result.origin else e.origin
    if origin:
        head = f"{as_typed(origin)}: {head}"
    if e.error is None:
        return f"{head}  → (no return: the process ended)"
    return f"{head}  → {e.error} {'ok' if e.error == 0 else ERROR_TEXT.get(e.error, '')}".rstrip()


def node_mark(n: Node) -> str:
    """What the chain says at a node: its folder and the rule that chose it, or ✗ and its cause."""
    if n.cause:
        words = CAUSE_WORDS[n.cause]
        mark = "✗ " + words.mark.format(detail=n.detail)
        return f"{winpath.dirname(n.path)}  {mark}{owned(n)}" if n.path and words.at_path else mark
    return f"{winpath.dirname(n.path) if n.path else ''}  {n.how}{owned(n)}".strip()


def owned(n: Node) -> str:
    """"  (numpy 2.1.3's)": the distribution that installed the file, where the environment says."""
    return f"  ({n.owner}'s)" if n.owner else ""


def looked_heading(lk: Looked) -> str:
    which = f" ({lk.which}, " if lk.which else " ("
    return LOOKED.format(name=winpath.basename(lk.name)) + f"{which}flags {flags_text(lk.flags)}):"


def result_words(c: Candidate) -> str:
    """"not there", "wrong machine (x86)"; a candidate a 32-bit process opened elsewhere (WOW64's SysWOW64 for
    System32) says where: "not there (in C:\\Windows\\SysWOW64: a 32-bit process's System32)"."""
    words = RESULT_WORDS[c.result] + (f" ({c.machine})" if c.result == "wrong_machine" and c.machine else "")
    if c.opened and c.result != "already_loaded":
        words += f" (in {winpath.dirname(c.opened)}: a 32-bit process's {winpath.basename(winpath.dirname(c.path))})"
    return words


def looked_rows(lk: Looked) -> list[tuple[str, str, str, str]]:
    """Each place looked: number, folder, rule, result."""
    return [(str(i), winpath.dirname(c.path), c.rule, result_words(c)) for i, c in enumerate(lk.candidates, 1)]


def elsewhere_facts(c: Elsewhere) -> str:
    """"x64 · 12.1.3.1 · on PATH (entry 2), which this load does not search"."""
    return "".join(f"{x} · " for x in (c.machine, c.version) if x) + relation_text(c)


def also_missing_row(a: AlsoMissing) -> tuple[str, str, str, str]:
    """name, what is wrong, who needs it, where it is installed."""
    where = ("installed at " + ", ".join(a.installed_at)) if a.installed_at else LEAF_STATE_WORDS["not_installed"]
    return a.name, CAUSE_WORDS[a.cause].mark.format(detail=""), f"needed by {a.needed_by}", where


def outcome_text(f: Fix) -> str:
    """What the model's re-run with the fix gave, when it did not load."""
    o = f.outcome
    if o is None:
        return "the model re-ran the load with this fix: it still fails"
    if o.error == 0:
        return "the model re-ran the load with this fix: it loads"
    cause = f" ({CAUSE_WORDS[o.cause].mark.format(detail='')})" if o.cause else ""
    on = f" on {o.leaf}{cause}" if o.leaf else ""
    return f"the model re-ran the load with this fix: it still fails with {o.error}{on}"


def fix_notes(f: Fix, leaf: str = "") -> list[tuple[str, LineStyle]]:
    """What is said under a fix: its further steps ("then: …"), what else it fixes, and whether the model
    checked it (nothing when it did and the load succeeds)."""
    out: list[tuple[str, LineStyle]] = []
    for step in f.then:  # (each command on a line of its own: fixwords.fix_lines)
        out += [(("then: " if k == 0 else "      ") + text, "") for k, (text, _) in enumerate(fix_lines(step, as_typed))]
    also = [n for n in f.covers if not winpath.same(n, leaf)] if leaf else list(f.covers)
    if also:
        out.append(("it also fixes " + ", ".join(also), ""))
    if f.breaks:
        out.append((f"(it breaks {', '.join(f.breaks)}: loaded in the run as recorded, with this fix the model "
                    "has it fail or load another copy)", "warning"))
    elif f.verified is None:
        out.append((f"({NOT_CHECKED})", "warning"))
    elif f.verified is False:
        out.append((f"({outcome_text(f)})", "warning"))
    return out


def fix_notes_markdown(f: Fix, leaf: str = "") -> list[str]:
    """fix_notes, with the code of the further steps marked."""
    notes = fix_notes(f, leaf)
    steps = sum(len(fix_lines(step, as_typed)) for step in f.then)  # (fix_notes' lines of the steps: one a command)
    return ([f"then: {fix_markdown(step, as_typed)}" for step in f.then]
            + [escape_prose(text) for text, _ in notes[steps:]])


# --- text, with rich ----------------------------------------------------------------------------------
Block = Union[str, "RenderableType"]  # a line (Styled: with its style), or a rich renderable (a table, a tree)
INDENT = 2


def _text(s: str, style: LineStyle = ""):
    """A table cell or a tree label: a name's newline, control or bidi control escaped (escape_terminal)."""
    from rich.text import Text
    return Text(escape_terminal(s), style=RICH_STYLES[style])


def _table(*justify: Literal["left", "right"], indent: int = 4, gap: int = 2):
    """A table without borders, its columns two spaces apart, `indent` cells in (render/wrap.py's Grid): on a
    narrow terminal a cell wraps inside its column at spaces and path separators, never inside a name."""
    return Grid(justify, gap=gap, min_widths=[2 if j == "right" else 0 for j in justify], indent=indent)


def chain_tree(nodes: list[Node], indent: int = 4):
    """The module chain (render/wrap.py's Chain): each module's name, then (aligned, whatever the depth and
    the width of its characters) its folder and the rule that chose it, or ✗ and its cause; on a narrow
    terminal the folder wraps in its own column at its separators."""
    if not nodes:
        return None
    return Chain([(_text(winpath.basename(n.name)), _text(node_mark(n), "failure" if n.cause else "")) for n in nodes],
                 indent=indent, guide_style=RICH_STYLES["muted"])


def full_tree(node: Node):
    """The whole resolution tree (every module, not only the failure chain), as a rich Tree."""
    from rich.text import Text
    from rich.tree import Tree

    def label(n: Node):
        t = Text(escape_terminal(winpath.basename(n.name)) + "   ")
        t.append(escape_terminal(node_mark(n)), style=RICH_STYLES["failure" if n.cause else ""])
        return t

    def add(parent, n: Node):
        for c in n.children:
            add(parent.add(label(c)), c)

    tree = Tree(label(node), guide_style=RICH_STYLES["muted"])
    add(tree, node)
    return tree


def looked_table(lk: Looked):
    t = _table("right", "left", "left", "left")
    for c, row in zip(lk.candidates, looked_rows(lk)):
        t.add_row(_text(row[0]), _text(row[1]), _text(row[2]), _text(row[3], RESULT_STYLES.get(c.result, "")))
    return t


def sections(e: ExplainedCall) -> list[Block]:
    """Everything said about a call after its verdict and its call line, the same for simulate and report:
    the module chain, where the loader looked, what is elsewhere, what is missing next, the fixes."""
    out: list[Block] = []
    tree = chain_tree(e.chain) if e.failed or e.leaf else None
    if tree is not None:
        out.append(tree)
    for lk in e.looked:
        out += [Styled("", ""), Styled(" " * INDENT + looked_heading(lk), "heading"), looked_table(lk)]
        if lk.not_searched:
            out.append(Styled(f"    {lk.not_searched}", ""))
    out.extend(tail(e))
    if e.result.note:
        out.append(Styled(f"  note: {as_typed(e.result.note)}", ""))
    return out


def tail(e: ExplainedCall) -> list[Block]:
    """Where else the leaf is, other versions of it, what is missing next, and the fixes."""
    out: list[Block] = []
    if e.found_elsewhere:
        t = _table("left", "left")
        for c in e.found_elsewhere:
            t.add_row(_text(c.path), _text(elsewhere_facts(c), "success" if c.result == "found" else "failure"))
        out += [Styled("", ""), Styled("  " + FOUND_ELSEWHERE, "heading"), t]
    if e.close_names:
        t = _table("left", "left")
        for c in e.close_names:
            t.add_row(_text(c.path), _text(relation_text(c)))
        out += [Styled("", ""), Styled("  " + OTHER_VERSIONS.format(name=e.leaf.name if e.leaf else "it"), ""), t]
    if e.also_missing:
        t = _table("left", "left", "left", "left")
        for a in e.also_missing:
            name, what, by, where = also_missing_row(a)
            t.add_row(_text(name), _text("✗ " + what, "failure"), _text(by), _text(where, "success" if a.installed_at else "muted"))
        out += [Styled("", ""), Styled("  " + ALSO_MISSING, "heading"), t]
    if e.fixes:
        cause = cause_line(e)
        out += [Styled("", "")] + ([Styled("  " + CAUSE_LINE.format(cause), "")] if cause else []) + [
            Styled("  " + FIX, "heading"), fix_table(e.fixes, e.leaf.name if e.leaf else "")]
    return out


CAUSE_LINE = "Cause: {}"


def cause_line(e: ExplainedCall) -> str:
    """The root cause in one line, said above the fixes (issue 24: the root cause first): what is wrong where the
    user can act on it, from the typed result (the leaf, where its copies are, whose they are, the fix that names
    the file at fault); "" when the verdict says all there is."""
    leaf, res = e.leaf, e.result
    if leaf is None:
        return ""
    name = leaf.name
    first = e.fixes[0] if e.fixes else None
    if first is not None and first.action == "rename_file":
        why = f"lacks {first.lacks}" if first.lacks else f"is built for {first.machine or 'another machine'}"
        return f"a stale {name} wins the search: {first.path} {why}, and a usable copy is elsewhere"
    if first is not None and first.action in ("vc_redist", "import_first") and first.version:
        return (f"an old {first.name} ({first.version}, {first.path or first.bound}) is the copy in use; "
                f"{first.leaf or name} needs {first.need or 'a newer one'}")
    if leaf.cause == "not_found":
        state = e.leaf_state
        found = next((c for c in e.found_elsewhere if c.result == "found"), None)
        if state == "installed_not_searched" and found is not None:
            whose = f" ({found.owner}'s)" if found.owner else ""
            return f"{name} is installed at {found.path}{whose}, in a folder this load does not search"
        if state == "missing_from_its_distribution" and first is not None:
            return f"{first.package}'s install is damaged: its own {name} is gone"
        return ""
    if leaf.cause in ("missing_export", "missing_ordinal") and leaf.path:
        node = res.tree.failure_chain()[-1] if res.tree is not None else None
        if node is not None and node.how_kind in ("already_loaded", "loaded_same_file"):
            by = f" ({node.loaded_by})" if node.loaded_by else ""
            return f"{name} was loaded first from {leaf.path}{by}, a copy that lacks {leaf.detail}"
    return ""


def fix_table(fixes: list[Fix], leaf: str = ""):
    """The fixes, numbered, each with its notes under it (its further steps, what else it fixes, whether
    the model checked it); a fix too long for a narrow terminal wraps in its column (render/wrap.py)."""
    t = _table("right", "left", gap=1)
    t.min_widths = ()
    for i, f in enumerate(fixes, 1):
        for k, (text, _) in enumerate(fix_lines(f, as_typed)):  # (each command a line of its own: it pastes as it is)
            t.add_row(_text(f"{i}." if k == 0 else ""), _text(text))
        for note, style in fix_notes(f, leaf):
            t.add_row(_text(""), _text(note, style))
    return t


def call_blocks(e: ExplainedCall) -> list[Block]:
    """One call as `dlltrace simulate` shows it: the call line, the verdict under it, then the sections."""
    if e.result.tree is None:
        return [Styled(f"{e.op}({e.name}{', ' + hex(e.flags) if e.flags else ''})  → "
                       f"{'ok' if e.error == 0 else f'error {e.error}'}", "")]
    out: list[Block] = [Styled(call_text(e), ""), Styled("  " + verdict_text(e), verdict_style(e))]
    if e.failed or e.leaf:
        out.append(Styled("", ""))
    return out + sections(e)


# --- rendering blocks ---------------------------------------------------------------------------------
WIDE = 4096  # plain text: no line is wrapped, so a path stays whole


def plain_console(width: int = WIDE) -> "Console":
    from rich.console import Console
    return Console(file=io.StringIO(), width=width, color_system=None, force_terminal=False, highlight=False,
                   markup=False, emoji=False, legacy_windows=False, soft_wrap=False)


def rendered_lines(renderable, console: Optional["Console"] = None) -> list[str]:
    """A renderable as plain lines (trailing padding removed)."""
    from rich.segment import Segment

    console = console or plain_console()
    lines = console.render_lines(renderable, console.options, pad=False)
    return [visible("".join(s.text for s in line if not s.control).rstrip()) for line in map(Segment.strip_links, lines)]


def block_lines(blocks: list[Block]) -> list[str]:
    """The blocks as plain lines: a Styled line as it is, a table or tree as its rendered lines (never
    wrapped: WIDE). (rich's console is made for the first table or tree: a report of lines alone, `run`'s
    "every load succeeded", imports no rich.)"""
    console: Optional["Console"] = None
    out: list[str] = []
    for b in blocks:
        if isinstance(b, str):  # (one line: a newline in it is a name's, escaped)
            out.append(_one_line(b))
        elif isinstance(b, (Grid, Chain)):  # (render/wrap.py)
            out.extend(visible(t.plain.rstrip()) for t in b.lines(WIDE))
        else:
            console = console or plain_console()
            out.extend(rendered_lines(b, console))
    return out


def _one_line(line: str) -> str:
    """A line of the text as it may be printed: every newline, control and bidi control in it escaped (a
    name's: the line's own end is not in it), its style kept."""
    shown = escape_terminal(line)
    if shown is line:
        return line
    return Styled(shown, line.style) if isinstance(line, Styled) else shown


def print_blocks(blocks: list[Block], console: "Console", clean: Optional[Callable[[str], str]] = None) -> None:
    """The blocks on a terminal, each piece in the style its field gave it, wrapped to the console's width
    at spaces and path separators, never inside a name (render/wrap.py); `clean` (redaction) is applied
    to each piece of text, then visible (control characters and lone surrogates escaped); on a console
    whose encoding is not UTF, each character it lacks is replaced (console.shown_on: ✗ as x, 用 as
    \\u7528) before the text is laid out, so that the widths are those of what is printed."""
    from rich.text import Text

    encoding = "utf-8" if console.encoding.lower().startswith("utf") else console.encoding

    def fit(s: str) -> str:
        return s if encoding == "utf-8" else shown_on(encoding, s)

    def shown(s: str) -> str:
        return fit(visible(clean(s) if clean else s))

    width = console.width
    for b in blocks:
        if isinstance(b, str):  # (one line: a newline in it is a name's, escaped)
            text = Text(fit(escape_terminal(clean(b) if clean else b)), style=RICH_STYLES[style_of(b)])
            for line in wrap_text(text, width):
                console.print(line, soft_wrap=True)
        elif isinstance(b, (Grid, Chain)):  # (render/wrap.py: laid out for this width)
            for line in b.cleaned(shown).lines(width, ascii_only=console.options.ascii_only):
                console.print(line, soft_wrap=True)
        else:
            for seg_line in console.render_lines(b, console.options, pad=False):
                console.print(Text.assemble(*((shown(s.text), s.style or "") for s in seg_line if not s.control)),
                              soft_wrap=True)
