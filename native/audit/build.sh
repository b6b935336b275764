#!/bin/sh
# Build the Linux recorder with the system gcc: libdlltrace_audit.so (LD_AUDIT) and
# libdlltrace_preload.so (LD_PRELOAD), into tracer/dlltrace/bin/linux/ (or $1).
set -e
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/../../tracer/dlltrace/bin/linux}
mkdir -p "$out"
gcc -O2 -shared -fPIC -Wall -Wextra -o "$out/libdlltrace_audit.so" "$here/dlltrace_audit.c"
gcc -O2 -shared -fPIC -Wall -Wextra -o "$out/libdlltrace_preload.so" "$here/dlltrace_preload.c" -ldl -lpthread -Wl,--hash-style=both
# what it was built from (trace/where.py recorder_sources_digest): a recorder built from other sources (an older
# dlltrace's, kept in ~/.cache/dlltrace/linux) is stale, and built again
cat "$here/dlltrace_audit.c" "$here/dlltrace_preload.c" "$here/dlltrace_out.h" | sha256sum | cut -d' ' -f1 > "$out/sources.sha256"
