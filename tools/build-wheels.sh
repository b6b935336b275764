#!/usr/bin/env bash
# Build dlltrace's three artifacts into dist/ (or OUTDIR), on Linux:
#   dlltrace-V.tar.gz                   the sdist: the package and native/'s sources (no binaries)
#   dlltrace-V-py3-none-win_amd64.whl   with the shim and the launcher, x64 and x86, cross-built from native/ (mingw-w64)
#   dlltrace-V-py3-none-any.whl         everything but the Windows binaries, for other OSes
# Both wheels are built from the sdist, so the sdist is known to build either (setup.py: DLLTRACE_PLATFORM).
#   tools/build-wheels.sh [OUTDIR]      (PYTHON=...: the Python to build with; default .venv/bin/python)
# Installs what is missing: the venv (tools/setup.sh), gcc-mingw-w64-x86-64 and -i686-win32 (apt-get), the `build`
# frontend (pip). The builds are isolated: pip fetches setuptools from PyPI (then from its cache).
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "${1:-dist}")

if [ -z "${PYTHON:-}" ]; then
  [ -x .venv/bin/python ] || bash tools/setup.sh
  PYTHON=.venv/bin/python
fi
mingw=()
command -v "${CC64:-x86_64-w64-mingw32-gcc}" >/dev/null 2>&1 || mingw+=(gcc-mingw-w64-x86-64)
command -v "${CC32:-i686-w64-mingw32-gcc}" >/dev/null 2>&1 || mingw+=(gcc-mingw-w64-i686-win32)
if [ ${#mingw[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  echo "+ apt-get install ${mingw[*]}" >&2
  $SUDO apt-get update -qq || echo "apt-get update: some package lists failed to download (a mirror mid-sync?); going on with the lists apt has" >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${mingw[@]}" >/dev/null
fi
"$PYTHON" -c "import build" 2>/dev/null || "$PYTHON" -m pip install -q --disable-pip-version-check build

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/out"
"$PYTHON" -m build --sdist -o "$tmp/out" . >"$tmp/log" 2>&1 || { cat "$tmp/log" >&2; exit 1; }
sdist=$(ls "$tmp"/out/*.tar.gz)
for plat in win_amd64 any; do
  mkdir "$tmp/$plat"
  tar -xzf "$sdist" -C "$tmp/$plat"
  src=$(ls -d "$tmp/$plat"/*/)
  DLLTRACE_PLATFORM=$plat "$PYTHON" -m build --wheel -o "$tmp/out" "$src" >"$tmp/log" 2>&1 \
    || { cat "$tmp/log" >&2; echo "building the $plat wheel failed" >&2; exit 1; }
done
mkdir -p "$out"
for f in "$tmp"/out/*; do
  cp "$f" "$out/"
  echo "$out/$(basename "$f")"
done
