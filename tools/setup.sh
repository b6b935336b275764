#!/usr/bin/env bash
# Set up dlltrace in ./.venv on a fresh Debian machine (README.md, "Installs", says what each installs).
#   tools/setup.sh            the package (Python venv, pip install); with mingw-w64 on the machine also
#                             the native shim (native/build.sh), for `dlltrace run --wine`; without it one
#                             line says what `run --wine` would need (simulate and report need nothing more)
#   tools/setup.sh --tests    also what the tests need: wine64 and 32-bit Wine (wine32:i386), mingw-w64 and gcc
#                             (apt), test extras, the shim
# Installs only what is missing, and rebuilds the shim only when native/ changed: running it again is cheap.
set -euo pipefail
cd "$(dirname "$0")/.."
tests=0
[ "${1:-}" = "--tests" ] && tests=1

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

need=()
python3 -m venv --help >/dev/null 2>&1 && python3 -c "import ensurepip" >/dev/null 2>&1 || need+=(python3-venv)
if [ $tests = 1 ]; then
  # Wine (the only real Windows loader here) and mingw (the shim, hosts and fixture DLLs).
  [ -x /usr/lib/wine/wine64 ] || command -v wine64 >/dev/null 2>&1 || need+=(wine64)
  command -v x86_64-w64-mingw32-gcc >/dev/null 2>&1 || need+=(gcc-mingw-w64-x86-64)
  command -v i686-w64-mingw32-gcc >/dev/null 2>&1 || need+=(gcc-mingw-w64-i686-win32)
  # 32-bit Wine (tests/test_shim32.py: 32-bit programs traced; tests/test_wine_diff_x86.py: the loader wine64
  # hands a 32-bit program to, and the prefix then has SysWOW64): Debian's wine32 is an i386 package
  if ! dpkg -s wine32:i386 >/dev/null 2>&1 && [ ! -f /usr/lib/i386-linux-gnu/wine/i386-windows/ntdll.dll ]; then
    if ! dpkg --print-foreign-architectures | grep -qx i386; then
      echo "+ dpkg --add-architecture i386" >&2
      $SUDO dpkg --add-architecture i386
    fi
    need+=(wine32:i386)
  fi
  command -v gcc >/dev/null 2>&1 || need+=(gcc)  # (tests/test_bootstrap.py: a fake shim for Linux)
  # the Linux side: patchelf (a fix test_linux_trace.py applies for real), setpriv (ld.so's secure mode)
  command -v patchelf >/dev/null 2>&1 || need+=(patchelf)
  command -v setpriv >/dev/null 2>&1 || need+=(util-linux)
  # a virtual X server: the PySide6 situation runs its first fix for real (tests/test_real_situations.py)
  command -v Xvfb >/dev/null 2>&1 || need+=(xvfb)
  # the Linux dependency tree checked against pax-utils' lddtree, on a system library with several levels
  # (libxml2: libicuuc, libstdc++, libm, libc; tests/test_linux_tree.py)
  command -v lddtree >/dev/null 2>&1 || need+=(pax-utils)
  [ -e /usr/lib/x86_64-linux-gnu/libxml2.so.2 ] || [ "$(uname -m)" != x86_64 ] || need+=(libxml2)
  # a real terminal: tests/test_terminal.py drives `dlltrace report` in tmux (Ctrl-C, the cursor, the colours)
  command -v tmux >/dev/null 2>&1 || need+=(tmux)
  # two real Linux situations (tests/test_real_situations.py) use Debian's own: PyGObject with PackageKit's typelib
  # (its library then hidden in a private mount namespace), and the system's libpython3.11 put ahead of pyenv's
  for p in python3-gi gir1.2-packagekitglib-1.0 libpackagekit-glib2-18 libpython3.11; do
    dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
  done
fi
# apt-get update exits non-zero when any one index fails, e.g. a mirror caught mid-sync ("File has unexpected
# size ... Mirror sync in progress?", seen on bookworm-security's i386 list): try three times, then go on with the
# lists apt has; the install after it fails (and stops this script) only if a package it needs is really missing.
apt_update() {
  local try
  for try in 1 2 3; do
    $SUDO apt-get update -qq && return 0
    [ $try = 3 ] || { echo "apt-get update failed (try $try of 3); again in $((try * 10)) s" >&2; sleep $((try * 10)); }
  done
  echo "apt-get update: some package lists failed to download; going on with the lists apt has" >&2
}
if [ ${#need[@]} -gt 0 ]; then
  echo "+ apt-get install ${need[*]}" >&2
  apt_update
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
elif [ $tests = 1 ] && ! apt-cache show libodbc2 >/dev/null 2>&1; then
  # apt's package lists: the Linux fixes name Debian packages from them, and tests/test_real_situations.py
  # downloads those packages (a machine whose lists were removed has none)
  echo "+ apt-get update" >&2
  apt_update
fi

[ -x .venv/bin/python ] || python3 -m venv .venv
pip=(.venv/bin/python -m pip install -q --disable-pip-version-check)
if [ $tests = 1 ]; then
  "${pip[@]}" -e '.[test]'
else
  "${pip[@]}" -e .
fi

# The native shim and launcher (tracer/dlltrace/bin/, gitignored), built when missing or older than native/.
bin=tracer/dlltrace/bin
natives=($bin/dlltrace_shim64.dll $bin/dlltrace_launch64.exe $bin/dlltrace_shim32.dll $bin/dlltrace_launch32.exe)
built() { for f in "${natives[@]}"; do [ -f "$f" ] || return 1; done; }
newer_sources() { for f in "${natives[@]}"; do find native -type f -newer "$f" | head -1; done; }
have_wine() { [ -x /usr/lib/wine/wine64 ] || command -v wine64 >/dev/null 2>&1; }
if command -v "${CC64:-x86_64-w64-mingw32-gcc}" >/dev/null 2>&1 && command -v "${CC32:-i686-w64-mingw32-gcc}" >/dev/null 2>&1; then
  if ! built || [ -n "$(newer_sources)" ]; then
    bash native/build.sh >&2
  fi
fi
# The Linux recorder (native/audit: LD_AUDIT + LD_PRELOAD libraries, tracer/dlltrace/bin/linux/), with the system gcc.
if [ "$(uname -s)" = Linux ] && command -v gcc >/dev/null 2>&1; then
  if [ ! -f $bin/linux/libdlltrace_audit.so ] || [ -n "$(find native/audit -type f -newer $bin/linux/libdlltrace_audit.so | head -1)" ]; then
    sh native/audit/build.sh "$bin/linux" >&2
  fi
fi
if ! built; then
  echo "dlltrace: simulate and report are ready; \`dlltrace run --wine\` would need the native shim, built with mingw-w64, and wine64 (sudo apt-get install gcc-mingw-w64-x86-64 gcc-mingw-w64-i686-win32 wine64, then bash tools/setup.sh again)" >&2
elif ! have_wine; then
  echo "dlltrace: the native shim is built; \`dlltrace run --wine\` also needs wine64 (sudo apt-get install wine64)" >&2
fi
