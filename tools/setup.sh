#!/usr/bin/env bash
# Set up dlltrace in ./.venv on a fresh Debian machine.
#   tools/setup.sh            the package (Python venv, pip install)
#   tools/setup.sh --tests    also what the tests need: wine64 and mingw (apt), test extras, the native shim
# Installs only what is missing, so running it again is cheap.
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
fi
if [ ${#need[@]} -gt 0 ]; then
  echo "+ apt-get install ${need[*]}" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

[ -x .venv/bin/python ] || python3 -m venv .venv
pip=(.venv/bin/python -m pip install -q --disable-pip-version-check)
if [ $tests = 1 ]; then
  "${pip[@]}" -e '.[test]'
  bash native/build.sh >&2
else
  "${pip[@]}" -e .
fi
