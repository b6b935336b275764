#!/usr/bin/env bash
# Cross-compile the shim and the launcher with mingw-w64 into tracer/dlltrace/bin/ (gitignored;
# shipped as package data), for x64 and for x86 (32-bit):
#   dlltrace_shim64.dll  dlltrace_launch64.exe    (x86_64-w64-mingw32-gcc, hook_x64.c)
#   dlltrace_shim32.dll  dlltrace_launch32.exe    (i686-w64-mingw32-gcc, hook_x86.c)
# Usage: native/build.sh [OUTDIR]
# Needs both compilers (Debian/Ubuntu: apt-get install gcc-mingw-w64-x86-64 gcc-mingw-w64-i686-win32);
# CC64 / CC32 name others.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-"$here/../tracer/dlltrace/bin"}
cc64=${CC64:-x86_64-w64-mingw32-gcc}
cc32=${CC32:-i686-w64-mingw32-gcc}
mkdir -p "$out"
flags=(-O2 -s -Wall -fno-stack-protector -fno-asynchronous-unwind-tables)
common=("$here/common/inject.c" "$here/common/jsonw.c")
build() { # CC BITS HOOK_SOURCE [extra flags...]
  local cc=$1 bits=$2 hook=$3
  shift 3
  "$cc" "${flags[@]}" "$@" -I"$here/common" -shared -o "$out/dlltrace_shim$bits.dll" \
      "$here/shim/dlltrace_shim.c" "$here/shim/$hook" "$here/shim/freeze.c" "${common[@]}" -ladvapi32 -lntdll
  "$cc" "${flags[@]}" "$@" -I"$here/common" -o "$out/dlltrace_launch$bits.exe" \
      "$here/launcher/dlltrace_launch.c" "${common[@]}"  # (no -lshell32: dlltrace_launch.c loads it when needed)
}
build "$cc64" 64 hook_x64.c
# (i686: the exports undecorated (cdecl ones are; --kill-at for any stdcall); libgcc linked in (64-bit
# arithmetic: no libgcc_s_dw2-1.dll beside the shim))
build "$cc32" 32 hook_x86.c -Wl,--kill-at -static-libgcc
echo "built $out/dlltrace_shim64.dll $out/dlltrace_launch64.exe $out/dlltrace_shim32.dll $out/dlltrace_launch32.exe"
