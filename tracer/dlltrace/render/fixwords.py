"""The words of a fix and of where a copy lies: the one place each fix action's sentence is written
(model.Fix holds only the action and its operands). Markdown marks what is code to type with backticks, each
name escaped for where it stands (render/escape.py: a code span, or running text)."""

from __future__ import annotations

import os
import posixpath
import re
import shlex
from typing import Callable

from dlltrace import winpath
from dlltrace.model import VC_REDIST, Elsewhere, Fix, InvalidFlagsReason, flags_text
from dlltrace.render.escape import escape_code_span, escape_prose

FLAGS_FIX_TEXT: dict[InvalidFlagsReason, str] = {
    "altered_with_search_flags": "Drop LOAD_WITH_ALTERED_SEARCH_PATH (0x8) when passing LOAD_LIBRARY_SEARCH_* flags",
    "dll_load_dir_needs_full_path": "Pass a fully qualified path (os.path.abspath) when using LOAD_LIBRARY_SEARCH_DLL_LOAD_DIR",
    "altered_with_default_dirs_needs_full_path": (
        "Pass a fully qualified path (os.path.abspath): with SetDefaultDllDirectories in effect, "
        "LOAD_WITH_ALTERED_SEARCH_PATH (0x8) searches the DLL's own folder (LOAD_LIBRARY_SEARCH_DLL_LOAD_DIR)"),
}


def py_str(s: str) -> str:
    """A Python string literal of s that pastes as it is: r"..." for a path (its backslashes kept), a plain
    literal when a raw one cannot hold it (a double quote, a trailing backslash, a control character)."""
    if '"' not in s and not s.endswith("\\") and s.isprintable():
        return f'r"{s}"'
    return repr(s)


def c_wstr(s: str) -> str:
    r"""A C wide-string literal of s that compiles to s: L"C:\\x\\y" (each backslash and double quote escaped; a
    control character as an octal escape): "C:\s1\v12.1\bin" written bare would hold a vertical tab and a
    backspace."""
    out = []
    for ch in s:
        if ch in '\\"':
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\{ord(ch):03o}")
        else:
            out.append(ch)
    return 'L"' + "".join(out) + '"'


def sh_quote(s: str) -> str:
    """A word for bash (POSIX sh): as it is when it is safe, else in single quotes (shlex.quote)."""
    return shlex.quote(s)


def cmd_set_prepend(variable: str, folder: str) -> str:
    """cmd.exe: the folder first on a ;-list variable, the whole assignment quoted (a folder with spaces, & or
    parentheses stays one value)."""
    return f'set "{variable}={folder};%{variable}%"'


def ps_quote(s: str) -> str:
    """A word for PowerShell in single quotes (nothing in it expanded: `$` and a backtick are, in double quotes),
    a quote in it doubled."""
    return "'" + s.replace("'", "''") + "'"


def ps_set_prepend(variable: str, folder: str) -> str:
    """PowerShell: the folder first on a ;-list variable (single quotes: nothing in the path is expanded)."""
    return f"$env:{variable} = {ps_quote(folder + ';')} + $env:{variable}"


def system_package_steps(f: Fix) -> list[Fix]:
    """A system package fix and every package it needs next, in order: the model chains them as nested steps
    (libxcb-icccm4, whose `then` is libxcb-keysyms1, whose `then` is libxcb-xinerama0: PyQt5 5.15's xcb plugin)."""
    out = [f]
    for x in f.then:
        if x.action == f.action:
            out += system_package_steps(x)
    return out


def steps_said_after(f: Fix) -> list[Fix]:
    """The steps of a fix said after its words ("then: ..."): not those its own command already holds (the packages a
    system package fix needs next are in its one apt-get line: system_package_steps)."""
    return [x for x in f.then if not (f.action == x.action == "install_system_package")]


def sh_export_prepend(variable: str, folder: str) -> str:
    """bash: the folder first on a :-list variable, the old value kept only when it was set (no empty element,
    which ld.so would take for the current folder)."""
    return f"export {variable}={sh_quote(folder)}${{{variable}:+:${variable}}}"


def pip_args(package: str, windows: bool) -> str:
    """pip's arguments as a shell reads them: a requirement with a shell's special characters (`<`, `>`, `|`, `&`,
    ...: `nvidia-cudnn-cu12<9` is a redirect unquoted) in double quotes for cmd and PowerShell, single for bash;
    "--force-reinstall --no-deps x==1" is several arguments, each quoted alone."""
    out = []
    for a in package.split(" "):
        if a and any(c in a for c in "<>|&;^()$`'\"*?[]{}!~%"):
            a = f'"{a}"' if windows else sh_quote(a)
        out.append(a)
    return " ".join(out)


def pip_install(f: Fix, code: Callable[[str], str], verb: str = "install") -> str:
    """`pip install PACKAGE` with the traced program's own interpreter (f.exe: the venv's python, not the first
    pip on PATH, which may be another Python's): a path with spaces quoted for bash, or for cmd and PowerShell
    (PowerShell runs a quoted path with `&`); a requirement quoted for the shell (pip_args). `verb`: "uninstall -y"
    makes the same command uninstall it."""
    windows = not f.exe.startswith("/") if f.exe else True
    args = f" -m pip {verb} {pip_args(f.package or '', windows)}"
    if not f.exe:
        return code(f"pip {verb} " + pip_args(f.package or "", True))
    if f.exe.startswith("/"):
        return code(sh_quote(f.exe) + args)
    if not any(c in CMD_QUOTE for c in f.exe):
        return code(f.exe + args)
    quoted = f'"{f.exe}"'
    # (PowerShell expands $ and ` inside double quotes: such a path single-quoted, a quote in it doubled)
    ps = ps_quote(f.exe) if any(c in "$`" for c in f.exe) else quoted
    return f"in cmd  {code(quoted + args)}  or in PowerShell  {code('& ' + ps + args)}"


# the characters of a path cmd runs only quoted (`cmd /?`: "<space> &()[]{}^=;!'+,`~"; `&` ends the command), and
# PowerShell's (`&` and `$` too; `(`, `{`, `;`, `,`, `'` start or end something)
CMD_QUOTE = frozenset(" &()[]{}^=;!'+,`~$")


def _plain(s: str) -> str:
    return s


# how a user tells a 32-bit Python from a 64-bit one (the pointer size of the interpreter that runs it)
# (no quote inside: the report writes each Python repr in it as typed, 'P' as "P", which ends cmd's and
# PowerShell's double-quoted argument early: struct.calcsize(P), a NameError)
BITS_CHECK = "python -c \"import sys;print(64 if sys.maxsize > 2**32 else 32)\""


def fix_text(f: Fix, code: Callable[[str], str] = _plain) -> str:
    """A fix in words, made from its fields: the one place each fix's sentence is written. `code`
    marks what is code to type (Markdown puts it in backticks)."""
    a = f.action
    before = f"before {code(f.before) if code is not _plain else '`' + f.before + '`'}" if f.before else "before the load"
    if a == "add_dll_directory":
        call = code(f'os.add_dll_directory({py_str(f.folder)})' if f.python else f'AddDllDirectory({c_wstr(f.folder)})')
        if f.bound:
            return (f"The copy at {f.bound} lacks {f.lacks}; a matching copy is at {f.path}: {before}  {call} "
                    f"and make sure it is searched before {winpath.dirname(f.bound)}")
        if f.machine:
            return f"A {f.machine} copy is at {f.path}: {before}  {call}"
        return f"{before[0].upper() + before[1:]}:  {call}"
    if a == "path_prepend":
        if f.python and f.before:
            return f"{before[0].upper() + before[1:]}:  " + code(f'os.environ["PATH"] = {py_str(f.folder + ";")} + os.environ["PATH"]') + \
                " (this load searches PATH)"
        return (f"Put {f.folder} on PATH (this load searches PATH): in cmd  {code(cmd_set_prepend('PATH', f.folder))}"
                f"  or in PowerShell  {code(ps_set_prepend('PATH', f.folder))}")
    if a == "path_or_copy":
        return f"Put {f.folder} on PATH, or copy {f.name} next to {winpath.basename(f.exe)} ({winpath.dirname(f.exe)})"
    if a == "install" and not f.instruction and f.package:  # (Linux: a file its owner's record lists is gone)
        pin = f"{f.package}=={f.version}" if f.version else f.package
        if f.lacks == "conda":
            # (into the environment whose conda-meta lists it, by its prefix: the shell's active one may be another)
            env = "" if not f.folder else f"-p {sh_quote(f.folder)} " if f.folder.startswith("/") else \
                f'-p "{f.folder}" ' if any(c in CMD_QUOTE for c in f.folder) else f"-p {f.folder} "
            how = code(f"conda install {env}--force-reinstall {f.package}" + (f"={f.version}" if f.version else ""))
            listed = f" (its conda-meta lists {f.bound})" if f.bound else ""
            return (f"{f.name} belongs to the conda package {f.package} {f.version}{listed} and is not there: reinstall "
                    f"it:  {how}")
        pip = pip_install(Fix(f.kind, f.action, package=f"--force-reinstall --no-deps {pin}", exe=f.exe), code)
        if f.record_size is not None and f.size is not None:  # (explain.rule_not_the_file_its_distribution_installed)
            return (f"{f.name} at {f.path} is not the file {f.package} {f.version} installed: it is {f.size:,} bytes, "
                    f"and its RECORD lists {f.bound} at {f.record_size:,} (another build put over it: an upgrade that "
                    f"could not replace a file in use, or a copy): reinstall it:  {pip}")
        if f.need and f.name.lower().startswith("python3"):  # (explain.rule_extension_of_another_python)
            return (f"{f.parent} is {f.package} {f.version}'s (its RECORD lists {f.bound}), and that wheel is its build "
                    f"for Python {f.need}: {f.parent} imports {f.name}, the Python {f.need} interpreter's own DLL. "
                    f"Install its build for this Python with this Python's own pip:  {pip}")
        if f.other_machine and f.need:  # (a wheel of another machine: explain.rule_wheel_for_another_machine)
            bits = {"x86": "32-bit (x86)", "x64": "64-bit (x64)"}.get(f.other_machine, f"built for {f.other_machine}")
            return (f"{f.name} is {f.package} {f.version}'s (its RECORD lists {f.bound}), and the {f.package} installed "
                    f"here is its {f.need} wheel, {bits}, for another Python than this {f.machine} one: install its "
                    f"build for this Python with this Python's own pip:  {pip}")
        if f.other_machine:  # (there, of another machine: explain.rule_wrong_machine_file_of_its_own_wheel)
            bits = {"x86": "32-bit (x86)", "x64": "64-bit (x64)"}.get(f.other_machine, f"built for {f.other_machine}")
            return (f"{f.name} at {f.path} is {bits}: it is not the file {f.package} {f.version} "
                    f"installed (its RECORD lists {f.bound}, its build for this {f.machine} Python): reinstall it:  {pip}")
        return (f"{f.name} belongs to {f.package} {f.version} (its RECORD lists {f.bound}) and is not there: "
                f"reinstall it:  {pip}")
    if a == "install" and f.kind == "install" and f.value in WINDOWS_DRIVER_STATE_WORDS:  # (nvcuda.dll: explain.provider_advice)
        return WINDOWS_DRIVER_STATE_WORDS[f.value].format(name=f.name, v=f.driver or "?")
    if a == "install":
        return f.instruction
    if a == "newer_glibc":  # (Linux: the requester was built against a newer glibc than this system's)
        who = posixpath.basename(f.path) if f.path else "it"
        have = f" this system's is {f.version}" if f.version else " this system's is older"
        made = f"glibc {f.version}" if f.version else "this system's glibc"
        build = f"a build of {f.package or who} made for {made} or older"
        tag = f" (for a wheel: one tagged manylinux_2_{f.version.split('.', 1)[1]} or lower, often an earlier release)" \
            if f.version.startswith("2.") and "." in f.version else ""
        return (f"{who} needs glibc {f.need} (GLIBC_{f.need});{have}, and no file can add it: install {build}{tag}, "
                f"or run it on a system with glibc {f.need} or newer (a newer OS release)")
    if a == "find_package":
        if f.exe:
            return (f"Find the package that ships {f.name} and install it, then put its folder on PATH "
                    f"or copy {f.name} next to {winpath.basename(f.exe)}")
        if f.value == "path":  # (explain.rule_standard_order_searches_path_not_added_folders)
            return (f"Find the package that ships {f.name} and install it, then put its folder on PATH (this load "
                    "searches PATH, never os.add_dll_directory's folders)")
        return f"Find the package that ships {f.name} and install it, then add its folder with os.add_dll_directory"
    if a == "use_64bit_python":
        return (f"Get the 32-bit build of what ships {f.name} (a win32 wheel, the x86 download), or use a 64-bit "
                f"Python: this Python is 32-bit and {f.name} is 64-bit ({f.other_machine}), as when a win_amd64 wheel "
                f"is installed into a 32-bit Python. {code(BITS_CHECK)} prints 32 or 64 for the Python that runs it")
    if a == "use_build":
        article = "an" if f.other_machine[:1] in ("a", "x") else "a"
        if f.python and f.machine == "x64" and f.other_machine == "x86":  # (the reverse: a 32-bit DLL in a 64-bit Python)
            return (f"Get the 64-bit build of what ships {f.name} (a win_amd64 wheel, the x64 download), or use a 32-bit "
                    f"Python: this Python is 64-bit and {f.name} is 32-bit (x86), as when a win32 wheel or a 32-bit DLL "
                    f"meets a 64-bit Python. {code(BITS_CHECK)} prints 32 or 64 for the Python that runs it")
        return f"Use the {f.machine} build of {f.name}, or {article} {f.other_machine} " + ("Python" if f.python else "build of the program")
    if a == "reinstall":
        return f"{f.path} is not a valid DLL (truncated or corrupt download?): reinstall the package that ships it"
    if a in ("preload", "update_loaded"):
        by = f" ({f.loaded_by})" if f.loaded_by else ""
        if a == "preload":
            return (f"{f.name} was already loaded from {f.bound}{by}, which lacks {f.lacks}; the matching copy is {f.path}: "
                    f"load it first (before whatever loads {f.bound}), or update or remove the copy loaded first")
        return (f"{f.name} was already loaded from {f.bound}{by}, which lacks {f.lacks}: find what loads that copy "
                "first and update it")
    if a == "rename_file":  # (the copy at fault, named first: the search then goes on to a usable copy)
        why = f"lacks {f.lacks}" if f.lacks else (f"is built for {f.machine}" if f.machine else "cannot be used")
        owner = f"; it is {f.package}'s own copy, which a reinstall of it brings back" if f.package else ""
        return (f"{f.path} is the {f.name} this load reaches first, and it {why}: rename it (to {f.name}.old, say) so "
                f"that the search goes on to the next copy{owner}")
    if a == "install_matching":
        return f"{f.bound} is a different version from the one {f.parent} was built against: install matching versions"
    if a == "vc_redist" and f.lacks:  # (a missing export: the version that first has it, when the data knows it)
        copy = f"{f.path}" + (f" (version {f.version})" if f.version else "")
        need = f"; it first shipped with version {f.need}" if f.need else ""
        return (f"{f.name} in use is {copy}, which lacks {f.lacks}{need}: install the latest Visual C++ "
                f"Redistributable ({f.arch}, {VC_REDIST.format(arch=f.arch)})")
    if a == "vc_redist":
        built = f" ({f.leaf} was built with {f.need})" if f.built_with else ""
        if f.then:  # (its next step says what to load first)
            return (f"{f.name} in use is {f.path} version {f.version}, older than {f.need}{built}: install the latest "
                    f"Visual C++ Redistributable ({f.arch}, {VC_REDIST.format(arch=f.arch)})")
        return (f"{f.name} in use is {f.path} version {f.version}, older than {f.need}{built}: install the latest "
                f"Visual C++ Redistributable ({f.arch}, {VC_REDIST.format(arch=f.arch)}), or find the package that "
                f"ships that old copy and load torch before it")
    if a == "check_init":
        return (f"Every dependency of {f.name} resolved; its initialisation (DllMain) failed. Common causes: an old MSVC "
                "runtime loaded first, a CPU without AVX for builds that need it, or a missing GPU driver")
    if a == "update_windows":
        return (f"{f.name} has no host on this Windows: update Windows (or install the Universal C Runtime, KB2999226, "
                "for api-ms-win-crt-*)")
    if a == "flags":
        words = FLAGS_FIX_TEXT[f.reason] if f.reason is not None else ""
        if f.path:
            words += f" ({f.path})"
        if f.flags is not None:
            words += (f", and load with {f.flags:#x} ({flags_text(f.flags)}): LOAD_LIBRARY_SEARCH_DLL_LOAD_DIR alone "
                      "searches only the DLL's own folder, not System32 for its imports")
        return words
    if a == "permissions":
        return f"Access to {f.path} was denied: check its permissions, or whether antivirus software blocks it"
    if a == "preload_path":
        if f.python and len(f.files) > 1:
            return f"{before[0].upper() + before[1:]}:  " + "; ".join(code(f'ctypes.WinDLL({py_str(p)})') for p in f.files) + \
                " (loaded by full path, in this order)"
        if f.python:
            return f"{before[0].upper() + before[1:]}:  " + code(f'ctypes.WinDLL({py_str(f.path)})') + \
                f" (loaded by full path, it is the {f.name} every later request gets)"
        return (f"Load {f.path} by full path before the load (" + code(f'LoadLibraryExW({c_wstr(f.path)}, NULL, '
                'LOAD_WITH_ALTERED_SEARCH_PATH)') + f"): every later request for {f.name} gets it")
    if a == "copy_file":
        return f"Copy {f.path} into {f.dest}"
    if a == "set_dll_directory":
        return f"{before[0].upper() + before[1:]}:  " + code(f'SetDllDirectoryW({c_wstr(f.folder)})')
    if a == "install_driver" and f.value:  # (why the driver's library was not there: worlds/gpu.py rule_driver_state)
        table = WINDOWS_DRIVER_STATE_WORDS if f.name.lower().endswith(".dll") else DRIVER_STATE_WORDS
        return table.get(f.value, DRIVER_STATE_WORDS[f.value]).format(name=f.name, v=f.driver or "?")
    if a in ("update_driver", "install_driver"):
        verb = "Update the NVIDIA driver" if a == "update_driver" else "Install an NVIDIA driver"
        extra = (f" (a {f.family_driver} or later driver runs it through minor version compatibility, with a limited "
                 "feature set)") if f.family_driver else ""
        if not f.driver:
            return verb
        return (f"{verb} to >= {f.driver}{extra}" if a == "update_driver" else f"{verb} >= {f.driver}{extra}")
    if a == "install_cuda":
        return (f"Install the CUDA {f.cuda}.x libraries it loads: a CUDA {f.cuda} toolkit"
                + (f", or {code('pip install ' + f.package)}" if f.package else ""))
    if a == "other_cuda_build":
        return f"Or install the {f.package} build for CUDA {f.cuda}"
    if a == "reorder_path":
        return f"Put {f.folder} before {f.ahead_of} on PATH"
    if a == "install_cudnn":
        return f"Install cuDNN {f.cudnn} for CUDA {f.cuda}" + (f" ({code('pip install ' + f.package)})" if f.package else "")
    if a == "set_runpath":
        return code(f"patchelf --set-rpath {sh_quote(f.value)} {sh_quote(f.path)}")
    if a == "add_ld_so_conf":
        sudo = "" if f.value == "root" else "sudo "
        if f.dest:  # (the folder is listed already: ld.so.cache was made before the file was put there)
            return (f"{code(sudo + 'ldconfig')} ({f.folder} is listed in {f.dest}, but ld.so.cache was made before "
                    f"{f.name} was put there: ldconfig makes it again)")
        stem = f.name.split(".so")[0]
        return code(f"echo {sh_quote(f.folder)} | {sudo}tee /etc/ld.so.conf.d/{sh_quote(stem + '.conf')} && {sudo}ldconfig")
    if a == "set_env":
        if f.python:
            return f"{before[0].upper() + before[1:]}:  " + code(f'os.environ["{f.variable}"] = {py_str(f.value)}')
        if f.variable == "LD_LIBRARY_PATH" and f.bound and not f.folder and f.ahead_of:  # (a folder taken out: its
            # copy was taken ahead of another, and a symbol is undefined: rule_ld_library_path_shadows_a_runpath_copy)
            cmd = f"export LD_LIBRARY_PATH={sh_quote(f.value)}" if f.value else "unset LD_LIBRARY_PATH"
            return (f"Before starting the program:  {code(cmd)}  ({f.leaf} needs the symbol {f.lacks}, which no library "
                    f"loaded defines; {f.bound} was taken from LD_LIBRARY_PATH ahead of {f.ahead_of}: without that "
                    f"folder, ld.so takes that copy)")
        if f.variable == "LD_LIBRARY_PATH" and f.bound and not f.folder:  # (a folder taken out: its copy lacks a version)
            cmd = f"export LD_LIBRARY_PATH={sh_quote(f.value)}" if f.value else "unset LD_LIBRARY_PATH"
            return (f"Before starting the program:  {code(cmd)}  ({f.bound} lacks {f.lacks}; without its folder on "
                    f"LD_LIBRARY_PATH, ld.so takes the next copy of {f.name}, which has it)")
        if f.variable == "LD_LIBRARY_PATH" and f.folder:  # (Linux: bash, before the program in the same shell)
            return f"Before starting the program:  {code(sh_export_prepend(f.variable, f.folder))}"
        if f.variable.upper() == "PATH" and f.folder:
            return (f"Before starting the program: in cmd  {code(cmd_set_prepend('PATH', f.folder))}  or in PowerShell  "
                    f"{code(ps_set_prepend('PATH', f.folder))}")
        return f"Set {f.variable}={f.value} before starting the program"
    if a == "install_system_package":
        steps = system_package_steps(f)  # (the packages it needs next, each step's own next ones too: one command)
        names = " ".join(dict.fromkeys(sh_quote(x.package or "") for x in steps))  # (a package once: glib's ships two)
        libs = ", ".join(f"the plugins in {x.name}" if "/" in x.name else x.name for x in steps)  # (a folder: a
        # library's plugins, loader/linux/fixes.rule_library_needs_its_plugins)
        sudo = "" if f.value == "root" else "sudo "
        return f"{code(sudo + 'apt-get install ' + names)} (Debian, Ubuntu: the system's package{'s' if ' ' in names else ''} of {libs}, which no pip package ships)"
    if a == "install_package" and f.value == "embeddable":  # (no pip in python.org's embeddable Python)
        ver = "the same version"
        pkg = f.package or ""
        return (f"This embeddable Python has no pip: with the pip of a full Python of {ver}, install it into "
                f"{f.dest} (which the embeddable Python's ._pth must list): "
                + code(f'python -m pip install --target "{f.dest}" {pip_args(pkg, True)}')
                + f" (it puts {f.name} in {f.folder})")
    if a == "install_package" and f.value == "user_site":  # (a Store Python: pip installs into the user site)
        return (f"{pip_install(f, code)} (this Store Python's own folder cannot be written, so pip installs into your "
                f"user site, {f.dest}: it puts {f.name} in {f.folder})")
    if a == "install_package" and f.replaces:  # (analysis.rule_package_that_replaces_the_module)
        uninstall = pip_install(Fix(f.kind, f.action, exe=f.exe, package=f.replaces), code, "uninstall -y")
        return (f"{f.package} ships {f.name} (in {f.folder}) with its own module, which loads it from there, and replaces "
                f"{f.replaces}, which installs the same module: {uninstall}, then {pip_install(f, code)}")
    if a == "install_package":
        return f"{pip_install(f, code)} (it puts {f.name} in {f.folder})"
    if a == "change_flags":
        return f"Load {f.name} with flags {f.flags or 0:#x} ({flags_text(f.flags or 0)})"
    if a == "import_first":
        first = code("import " + f.module) if f.python else f"Load {f.module}"
        return (f"{first} before whatever loads {f.bound} (that copy of {f.name} is loaded first now, and "
                f"{f.leaf or 'the DLL'} binds to it)")
    if a == "activate_conda":
        return f"Activate the conda environment first ({code('conda activate ' + f.folder)}): it puts {f.folder}\\Library\\bin on PATH"
    if a == "package_mechanism":
        if f.folder:
            return (f"{before[0].upper() + before[1:]}:  {code(f.call)} (the package's own loader: its __init__.py adds "
                    f"{f.folder} to the DLL search, where {f.name} is)")
        return f"{before[0].upper() + before[1:]}:  {code(f.call)} (the package's own loader; it loads {f.name} by full path)"
    if a == "cpu_build":
        feat = f.lacks.upper()
        return (f"{f.name}'s initialization needs a CPU with {feat}, which this CPU lacks (nothing is missing): install "
                f"a build of the package made without {feat}, or run it on a CPU that has {feat}")
    raise ValueError(f"fix action {a!r} has no words")


# the NVIDIA driver's fix by why its library was not there (loader/linux/fixes.py rule_driver_state)
DRIVER_STATE_WORDS = {
    "no_gpu": "This machine has no NVIDIA GPU (none on its PCI bus): no driver or CUDA library makes a program use one "
              "here; CUDA needs a machine with an NVIDIA GPU",
    "no_kernel_driver": "Install the NVIDIA driver: this machine has an NVIDIA GPU, and no NVIDIA kernel driver is loaded "
                        "(after installing it, reboot or load the nvidia module)",
    "no_device_nodes": "Start the container with the GPU (docker run --gpus all, with the NVIDIA Container Toolkit "
                       "installed on the host): the host's NVIDIA driver {v} is loaded, but /dev/nvidiactl is not in "
                       "this container",
    "no_user_library": "Install the NVIDIA driver's libraries of the loaded kernel driver's version, {v} (its "
                       "libcuda.so.1 is not on this machine; in a container, the NVIDIA Container Toolkit mounts them)",
}

# the same on Windows (the traced Python read the machine's display adapters: trace/shim.py windows_gpu_fields)
WINDOWS_DRIVER_STATE_WORDS = {
    "no_gpu": "This machine has no NVIDIA GPU (no NVIDIA display adapter): no driver or CUDA library makes a program "
              "use one here; CUDA needs a machine with an NVIDIA GPU",
    "no_kernel_driver": "Install the NVIDIA driver: this machine has an NVIDIA GPU, and Windows runs it without "
                        "NVIDIA's driver, which puts {name} in System32",
    "no_user_library": "Reinstall the NVIDIA driver ({v} is installed, without {name} in System32)",
}


def code_parts(f: Fix) -> tuple[list[str], list[str]]:
    """A fix's words (fix_text) split at its code spans: (parts, codes), the odd parts the index in codes of the
    span there, the even ones the words between."""
    # (a name cannot forge it: it is drawn anew for each fix; os.urandom is what secrets.token_hex reads, without
    # importing secrets, hmac, hashlib and OpenSSL's libcrypto into every run and report)
    mark = f"\ue000{os.urandom(8).hex()}:"
    codes: list[str] = []

    def code(s: str) -> str:
        codes.append(s)
        return f"{mark}{len(codes) - 1}\ue001"

    return re.split(re.escape(mark) + "([0-9]+)\ue001", fix_text(f, code=code)), codes


def fix_markdown(f: Fix, typed: Callable[[str], str] = _plain) -> str:
    """A fix's words as Markdown: what is code to type a code span, the rest running text, each escaped for
    its place (escape_code_span, escape_prose: a name in the fix injects nothing); `typed` is applied to each
    piece first (explained.as_typed: a Python repr as the user types it)."""
    parts, codes = code_parts(f)
    return "".join(escape_code_span(typed(codes[int(p)])) if k % 2 else
                   escape_prose(typed(p), line_start=k == 0, line_end=k == len(parts) - 1) if p else ""
                   for k, p in enumerate(parts))


def fix_lines(f: Fix, typed: Callable[[str], str] = _plain) -> list[tuple[str, bool]]:
    """A fix's words as a terminal shows them, (line, is it a command): each command of the words (a code span:
    what fix_markdown puts in backticks) that begins them or follows two spaces ("Before the load:  os.add_dll_
    directory(...)", "apt-get install libodbc2 (Debian, ...)") is a line of its own, and what follows it ("  (it
    puts ...)", " (Debian, ...)", "  or in PowerShell  ") starts the next, so that a command's line pastes as it
    is into a shell or a Python prompt; a span inside a sentence ("first (`conda activate x`): ...") stays in it.
    `typed` is applied to each line (explained.as_typed)."""
    parts, codes = code_parts(f)
    lines: list[list] = [["", False]]  # (text, a command alone)
    for k, p in enumerate(parts):
        last = lines[-1]
        if k % 2:  # a command
            c = codes[int(p)]
            if not last[0].strip() or last[0].endswith("  "):
                if last[0].strip():
                    last[0] = last[0].rstrip()
                    lines.append([c, True])
                else:
                    last[0], last[1] = c, True
            else:  # (inside a sentence: as fix_text says it, `before` in backticks)
                last[0] += f"`{c}`" if f.before and c == f.before else c
                last[1] = False
        elif p:
            if last[1] and (p.startswith("  ") or p.startswith(" (")):
                lines.append([p.lstrip(), False])
            else:
                last[0] += p
                last[1] = last[1] and not p.strip()
    return [(typed(t.rstrip()), c) for t, c in lines if t.strip()]


def numbered_fix(i: int, x: Fix, note: str = "", lead: str = "") -> list[str]:
    """A fix's lines under "Fix": numbered i (`lead` instead: "then: "), each command of its words on a line of
    its own so that the line pastes as it is (fixwords.fix_lines), and `note` after the words (on a line of its
    own when they are more than one line or a command).""" 
    lead = lead or f"    {i}. "
    lines = fix_lines(x)
    out = [(lead if k == 0 else " " * len(lead)) + text for k, (text, _) in enumerate(lines)] or [lead.rstrip()]
    if note:
        if len(lines) > 1 or (lines and lines[-1][1]):
            out.append(" " * len(lead) + note)
        else:
            out[-1] += "  " + note
    return out


def relation_text(e: Elsewhere) -> str:
    """The relation in words ("on PATH (entry 2), which this load does not search"), and whose record lists
    a copy the trace never looked at ("; numpy 2.1.3's RECORD lists it")."""
    words = _relation_words(e)
    return f"{words}; {e.owner}'s RECORD lists it" if e.owner else words


def _relation_words(e: Elsewhere) -> str:
    if e.relation == "loaded_wins":
        return f"searched ({e.rule}), but the copy already loaded wins"
    if e.relation == "on_path":
        return f"on PATH (entry {e.path_entry})"
    if e.relation == "on_path_not_searched":
        return f"on PATH (entry {e.path_entry}), which this load does not search"
    if e.relation == "current_folder":
        return "the current folder"
    if e.relation == "searched":  # (another version's file: explain.rule_close_name_in_a_searched_folder)
        return f"in a folder this load searched ({e.rule})" if e.rule else "in a folder this load searched"
    return "in no folder the loader searches"
