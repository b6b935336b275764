"""The CUDA stack table's three forms: terminal text (rich tables, as explained.Block), Markdown, and JSON
(schemas/cuda-v1.json, docs/cuda.md). Every word comes from a typed field of cuda.CudaTable; the
sentences of a mismatch and of a fix are mismatch_text (here) and fixwords.fix_text (the one fix type's words).

For `dlltrace report`: cuda_table_of_trace(trace) is the table of what the trace recorded, or None when
the trace touched no CUDA file and recorded no CUDA variable (then the report shows nothing of it).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

from dlltrace.diagnosis.cuda import (CudaTable, Framework, Mismatch, Platform, cuda_table, facts_of_trace,
                                    rule_imported_cpu_build)
from dlltrace.diagnosis.outcome import imports_a_cpu_build_framework
from dlltrace.model import Fix
from dlltrace.render.escape import escape_prose, escape_table_cell, escape_terminal
from dlltrace.render.wrap import Grid
from dlltrace.render.fixwords import fix_text
from dlltrace.render.explained import Block, LineStyle, Styled, block_lines

FORMAT = "dlltrace-cuda"
VERSION = 1


def cuda_table_of_trace(trace, pid: Optional[int] = None) -> Optional[CudaTable]:
    """The table of a trace's process (the first by default), from what it recorded: its PATH-like
    variables and the files it touched. None when there is nothing CUDA in it."""
    facts = facts_of_trace(trace, pid)
    if facts is None:
        return None
    table = cuda_table(facts)
    if table.empty and not table.cuda_path:
        return None
    return table


def imported_cpu_builds(trace, table: Optional[CudaTable] = None) -> list[Framework]:
    """The CPU builds of GPU frameworks the program imported (diagnosis/cuda.py rule_imported_cpu_build, of its
    py_import events), from the trace's CUDA table (`table`, made here when not given, and only when the program
    imported such a framework at all: outcome.imports_a_cpu_build_framework)."""
    modules = [e.get("module") for e in trace.of("py_import")]
    if not imports_a_cpu_build_framework(modules):
        return []
    table = table if table is not None else cuda_table_of_trace(trace)
    return rule_imported_cpu_build(table, modules) if table is not None else []


def cpu_build_text(fws: "list[Framework]", platform: Optional[str]) -> str:
    """The words of the CPU-only builds `fws` (imported_cpu_builds), a paragraph each (cpu_build_words), "" for none;
    `platform`: the trace header's ("linux", else Windows' words)."""
    return "\n\n".join("\n".join(cpu_build_words(fw, "linux" if platform == "linux" else "windows")) for fw in fws)


def cpu_build_words(fw: Framework, platform: Platform) -> list[str]:
    """What a program that imported a CPU build of a GPU framework is told (rule_imported_cpu_build): the build, where
    that was read, and how to get a CUDA build, one sentence a line."""
    label = f"{fw.name} {fw.version}".strip() if fw.version else fw.name
    read = " (the onnxruntime distribution, not onnxruntime-gpu)" if fw.name == "onnxruntime" else \
        " (no jax-cuda plugin is installed)" if fw.name == "jax" else \
        f" ({fw.cuda_from} says it has no CUDA)" if fw.cuda_from else ""
    out = [f"{label} is a CPU-only build{read}: it never loads CUDA, so the program runs on the CPU whatever GPU "
           "this machine has."]
    if fw.name == "torch":
        out.append("torch.cuda.is_available() is False with it. For an NVIDIA GPU, install a CUDA build of torch: "
                   "the install selector on pytorch.org gives the pip command for your CUDA"
                   + (" (on Windows, `pip install torch` alone gives this CPU build)." if platform == "windows" else "."))
    elif fw.name == "tensorflow" and platform == "windows":
        out.append("TensorFlow 2.11 and later have no GPU build for native Windows: run it under WSL2 "
                   "(pip install 'tensorflow[and-cuda]' there), or use tensorflow 2.10, the last with native "
                   "Windows GPU support.")
    elif fw.name == "tensorflow":
        out.append("For the GPU, install tensorflow with its CUDA libraries in place of tensorflow-cpu: "
                   "pip install 'tensorflow[and-cuda]'.")
    elif fw.name == "onnxruntime":
        out.append("It has no CUDA execution provider: an InferenceSession asked for CUDAExecutionProvider runs on the "
                   "CPU. For the GPU, uninstall onnxruntime and install onnxruntime-gpu: both install the one "
                   "onnxruntime module, and with both the one installed last is what loads.")
    elif fw.name == "jax" and platform == "windows":
        out.append("jaxlib has no CUDA build for native Windows: run jax under WSL2 with pip install 'jax[cuda12]'.")
    elif fw.name == "jax":
        out.append("jax's CUDA build is a plugin of its own: pip install 'jax[cuda12]' (or cuda13) adds it and the "
                   "CUDA libraries it needs.")
    elif fw.name == "paddle":
        out.append("For the GPU, install paddlepaddle-gpu (its CUDA build) in place of paddlepaddle.")
    return out


def cpu_build_dict(fw: Framework) -> dict[str, Any]:
    return {"framework": fw.name, "version": fw.version, "read_from": fw.cuda_from or None}


# --- JSON ---------------------------------------------------------------------------------------------------

# schemas/cuda-v1.json's name of each fix action (the table's own names, kept for the JSON's readers)
CUDA_ACTION_NAMES = {"path_prepend": "add_to_path", "package_mechanism": "preload_dlls", "preload_path": "preload_full_path",
                     "other_cuda_build": "other_build"}


def _fix_dict(f: Fix, platform) -> dict[str, Any]:
    """A fix as cuda-v1.json has it: the table's action name and its operands."""
    action = CUDA_ACTION_NAMES.get(f.action, f.action)
    if f.action == "set_env" and f.variable == "LD_LIBRARY_PATH":
        action = "add_to_path"
    return {"action": action, "driver": f.driver or None, "cuda": f.cuda or None, "folder": f.folder or None,
            "before": f.ahead_of or None, "cudnn": f.cudnn,
            "package": f.package or None,
            "files": list(f.files), "family_driver": f.family_driver or None, "text": fix_text(f)}


def _mismatch_dict(m: Mismatch, platform, gpu: str = "") -> dict[str, Any]:
    d = {k: v for k, v in dataclasses.asdict(m).items() if k != "fixes"}
    d["found"] = list(m.found)
    d["fixes"] = [_fix_dict(f, platform) for f in m.fixes]
    d["text"] = mismatch_text(m, platform, gpu)
    return d


def cuda_dict(t: CudaTable) -> dict[str, Any]:
    """The documented JSON form (schemas/cuda-v1.json)."""
    def plain(x):
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in dataclasses.asdict(x).items()}

    return {
        "format": FORMAT, "version": VERSION, "platform": t.platform, "origin": t.origin,
        "driver": plain(t.driver) if t.driver else None, "driver_known": t.driver_known,
        "toolkits": [plain(x) for x in t.toolkits],
        "cudnn": [plain(x) for x in t.cudnns],
        "wheels": [plain(x) for x in t.wheels],
        "frameworks": [plain(x) for x in t.frameworks],
        "mismatches": [_mismatch_dict(m, t.platform, t.gpu) for m in t.mismatches],
        "path": list(t.path), "cuda_path": t.cuda_path, "sources": list(t.sources),
    }


# --- the rows, shared by text and Markdown ---------------------------------------------------------------------

def _or(v, dash: str = "—") -> str:
    return str(v) if v not in (None, "") else dash


def driver_line(t: CudaTable) -> tuple[str, LineStyle]:
    d = t.driver
    name = "nvcuda.dll" if t.platform == "windows" else "libcuda.so"
    if d is None and not t.driver_known:
        return f"not recorded (the trace never touched {name})", "muted"
    if d is None:
        where = ", ".join(_system_places(t)) or "the system folders"
        return f"no NVIDIA driver found ({name} is not in {where})", "warning"
    ver = d.version or "unknown version"
    fv = f" (file version {d.file_version})" if d.file_version else ""
    sup = (f"supports CUDA up to {d.supports}" if d.supports else "supports no CUDA release this table knows") + \
        (f", CUDA {d.supports_major}.x through minor version compatibility"
         if d.supports_major and (not d.supports or int(d.supports.split('.')[0]) < d.supports_major) else "")
    return f"{ver}{fv} · {sup} · {d.path}", ""


def _system_places(t: CudaTable) -> list[str]:
    return ["System32"] if t.platform == "windows" else ["the library folders"]


def toolkit_rows(t: CudaTable) -> list[tuple[str, ...]]:
    return [(tk.version, tk.bin if tk.exists else f"{tk.root} (not there)",
             f"{tk.cudart.name} {_or(tk.cudart.version, '')}".strip() if tk.cudart else "—",
             f"{tk.cublas.name} {_or(tk.cublas.version, '')}".strip() if tk.cublas else "—",
             ", ".join(tk.sources), f"PATH {tk.path_index}" if tk.path_index else "not on PATH")
            for tk in t.toolkits]


def cudnn_rows(t: CudaTable) -> list[tuple[str, ...]]:
    return [(_or(c.version, str(c.major)), f"cuDNN {c.major}",
             f"CUDA {c.cuda_major} ({c.cuda_major_from})" if c.cuda_major else "CUDA ?", c.folder,
             f"PATH {c.on_path}" if c.on_path else "not on PATH") for c in t.cudnns]


def wheel_rows(t: CudaTable) -> list[tuple[str, ...]]:
    return [(f"nvidia-{w.name}", f"CUDA {w.cuda_major}" if w.cuda_major else "CUDA ?", w.folder,
             "on the search path" if w.searched else "not searched", ", ".join(w.files)) for w in t.wheels]


def framework_rows(t: CudaTable) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = []
    for fw in t.frameworks:
        cuda = "CPU build" if fw.cpu_build else f"CUDA {fw.cuda}" if fw.cuda else "CUDA ?"
        if fw.cudnn_major:
            cuda += f", cuDNN {fw.cudnn_major}"
        src = fw.cuda_from or "its files say nothing of CUDA"
        libs = (f"bundles {len(fw.bundles)} CUDA file{'s' if len(fw.bundles) != 1 else ''}" if fw.bundles else "") + \
            ("; " if fw.bundles and fw.needs else "") + (f"loads {', '.join(fw.needs)}" if fw.needs else "")
        out.append((f"{fw.name} {_or(fw.version, '')}".strip(), cuda, src, libs or "—", fw.folder))
    return out


HEADERS = {
    "toolkits": ("CUDA", "bin", "cudart", "cuBLAS", "found by", "PATH"),
    "cudnn": ("version", "major", "built for", "folder", "PATH"),
    "wheels": ("wheel", "CUDA", "folder", "search", "files"),
    "frameworks": ("framework", "build", "read from", "CUDA files", "folder"),
}


def _sections(t: CudaTable) -> list[tuple[str, tuple[str, ...], list[tuple[str, ...]]]]:
    return [("Toolkits", HEADERS["toolkits"], toolkit_rows(t)), ("cuDNN", HEADERS["cudnn"], cudnn_rows(t)),
            ("nvidia-* wheels", HEADERS["wheels"], wheel_rows(t)), ("Frameworks", HEADERS["frameworks"], framework_rows(t))]


def heading(t: CudaTable) -> str:
    where = {"machine": "this machine", "scenario": "the scenario", "trace": "what the trace recorded",
             "layout": "a Windows folder layout"}.get(t.origin, t.origin)
    return f"CUDA stack ({where}, {t.platform})"


# --- text -------------------------------------------------------------------------------------------------------

def _grid(headers: tuple[str, ...], rows: list[tuple[str, ...]]):
    """A table without borders, its header in bold, four cells in (render/wrap.py: on a narrow terminal a cell
    wraps in its column at spaces and path separators, never inside a name)."""
    from rich.text import Text

    g = Grid(["left"] * len(headers), indent=4, header=[Text(h) for h in headers])
    for r in rows:
        g.add_row(*(Text(escape_terminal(c)) for c in r))
    return g


def none_found(t: CudaTable) -> str:
    """A section with no rows: of a trace, only what the program looked at is known (a toolkit it never searched
    is not in it: /usr/local/cuda-13.0 on a machine whose program loaded no CUDA library from there)."""
    return "none in the trace (it holds only the files the program looked for)" if t.origin == "trace" else "none found"


def cuda_blocks(t: CudaTable) -> list[Block]:
    """The table for a terminal (explained.print_blocks) or as plain lines (explained.block_lines)."""
    out: list[Block] = [Styled(heading(t), "heading")]
    text, style = driver_line(t)
    out.append(Styled(f"  Driver  {text}", style))
    for title, headers, rows in _sections(t):
        if not rows:
            out.append(Styled(f"  {title}  {none_found(t)}", "muted"))
            continue
        out.append(Styled(f"  {title}", "heading"))
        out.append(_grid(headers, rows))
    if t.mismatches:
        out.append(Styled("  Mismatches", "heading"))
        for m in t.mismatches:
            out.append(Styled(f"    ✗ {mismatch_text(m, t.platform, t.gpu)}", "failure" if m.severity == "error" else "warning"))
    else:
        out.append(Styled("  No mismatch between the parts found", "success" if not t.empty else "muted"))
    return out


def cuda_lines(t: CudaTable) -> list[str]:
    return block_lines(cuda_blocks(t))


def cuda_text(t: CudaTable) -> str:
    return "\n".join(cuda_lines(t))


# --- Markdown -----------------------------------------------------------------------------------------------------

def _md_cell(s: str) -> str:
    """Words that hold names (a path, a DLL) as Markdown running text in a table cell (render/escape.py)."""
    return escape_table_cell(escape_prose(s, line_start=False))


def cuda_markdown(t: CudaTable, level: int = 3) -> str:
    h = "#" * level
    lines = [f"{h} {escape_prose(heading(t))}", "", f"**Driver:** {_md_cell(driver_line(t)[0])}", ""]
    for title, headers, rows in _sections(t):
        lines.append(f"**{escape_prose(title)}:**" + (f" {escape_prose(none_found(t))}" if not rows else ""))
        lines.append("")
        if rows:
            lines.append("| " + " | ".join(_md_cell(x) for x in headers) + " |")
            lines.append("|" + "---|" * len(headers))
            lines += ["| " + " | ".join(_md_cell(c) for c in r) + " |" for r in rows]
            lines.append("")
    if t.mismatches:
        lines.append("**Mismatches:**")
        lines.append("")
        lines += [f"- {'❌' if m.severity == 'error' else '⚠️'} {_md_cell(mismatch_text(m, t.platform, t.gpu))}" for m in t.mismatches]
    else:
        lines.append("No mismatch between the parts found.")
    return "\n".join(lines) + "\n"


# the mismatches about the driver itself: the others are libraries, which no GPU-less machine can use
DRIVER_MISMATCHES = ("no_driver", "driver_too_old", "driver_minor_compat")


def mismatch_text(m: Mismatch, platform: Platform = "windows", gpu: str = "") -> str:
    """The sentence naming a mismatch, then its fixes; `gpu`, the table's driver state (worlds/gpu.py): on a
    machine with no NVIDIA GPU a library's fix says that installing it would not make a program use one, as the
    report's fallbacks do (render/diagnosis.py)."""
    needs = f"bundles CUDA {m.needs_cuda}" if m.bundled else f"needs CUDA {m.needs_cuda}"
    if m.kind == "no_driver":
        s = f"{m.subject} {needs}, and no NVIDIA driver was found"
    elif m.kind in ("driver_too_old", "driver_minor_compat"):
        sup = f"supports up to CUDA {m.driver_supports}" if m.driver_supports else "supports no CUDA this table knows"
        how = "" if m.kind == "driver_too_old" else " (it runs only through minor version compatibility, with a limited feature set)"
        s = f"{m.subject} {needs}; your driver {m.driver} {sup}{how}"
    elif m.kind == "cuda_major_missing":
        s = f"{m.subject} is built for CUDA {m.needs_cuda} and loads {m.dll}, which is nowhere here" + \
            (f" (only {m.have})" if m.have else "")
    elif m.kind == "framework_toolkit_major":
        s = f"{m.subject} is built for CUDA {m.needs_cuda}; PATH reaches only {m.have} ({m.found[0]}), and {m.dll} " \
            f"is in {m.found[1]}, which is not on PATH"
    elif m.kind == "path_order":
        s = f"{m.subject} want CUDA {m.needs_cuda}, but {m.dll} of {m.have} ({m.found[0]}) comes first on PATH and " \
            f"wins every load of that name"
    elif m.kind == "cudnn_major_missing":
        s = f"{m.subject} needs {m.dll}" + (f"; there is only {m.have}" if m.have else ", and no cuDNN was found")
    elif m.kind == "cudnn_cuda_major":
        s = f"{m.subject} uses CUDA {m.needs_cuda}, but the {m.dll} it gets ({m.found[0]}) is {m.have}"
    elif m.kind == "wheel_not_searched":
        s = f"{m.subject} needs {m.dll}: it is in {m.found[0]} (an nvidia-* wheel), which no search reaches"
    else:  # pragma: no cover
        s = m.kind
    s = s + ": " + "; ".join(_lower_first(fix_text(f)) for f in m.fixes) if m.fixes else s
    if gpu == "no_gpu" and m.kind not in DRIVER_MISMATCHES:
        s += " (this machine has no NVIDIA GPU: installing them would not make a program use one)"
    return s


def _lower_first(words: str) -> str:
    """A fix's sentence after a colon ("...: update the NVIDIA driver to >= 531.14")."""
    return words[:1].lower() + words[1:]
