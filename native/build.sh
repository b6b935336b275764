#!/usr/bin/env bash
# Cross-compile the shim and the launcher with mingw-w64 into tracer/dlltrace/bin/ (gitignored;
# shipped as package data). Usage: native/build.sh [OUTDIR]
# Needs x86_64-w64-mingw32-gcc (Debian/Ubuntu: apt-get install gcc-mingw-w64-x86-64).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-"$here/../tracer/dlltrace/bin"}
cc=${CC64:-x86_64-w64-mingw32-gcc}
mkdir -p "$out"
flags=(-O2 -s -Wall -fno-stack-protector -fno-asynchronous-unwind-tables)
"$cc" "${flags[@]}" -I"$here/common" -shared -o "$out/dlltrace_shim64.dll" \
    "$here/shim/dlltrace_shim.c" "$here/shim/hook_x64.c" "$here/common/inject.c" "$here/common/jsonw.c" -ladvapi32 -lntdll
"$cc" "${flags[@]}" -I"$here/common" -o "$out/dlltrace_launch64.exe" \
    "$here/launcher/dlltrace_launch.c" "$here/common/inject.c" "$here/common/jsonw.c"
echo "built $out/dlltrace_shim64.dll $out/dlltrace_launch64.exe"
