/* Put the shim into a process created suspended (shared by the launcher and the shim's CreateProcess hook). */
#ifndef DLLTRACE_INJECT_H
#define DLLTRACE_INJECT_H
#include <windows.h>

/* ERROR_EXE_MACHINE_TYPE_MISMATCH (216): the child is not an x64 process (a 32-bit exe under WoW64):
   the x64 shim cannot be loaded into it. */
#define INJECT_NOT_X64 ERROR_EXE_MACHINE_TYPE_MISMATCH

/* Patch the entry point of proc's exe (created suspended, not yet resumed) with a jump to a stub that
   restores the entry bytes, calls LoadLibraryW(shim) and dlltrace_start(trace, via) (trace NULL: the
   child reads DLLTRACE_TRACE), then jumps to the entry. via: at most 31 characters.
   Returns 0, or the Win32 error that stopped it; nothing in the child is changed before the final
   entry-point write, so on failure the child runs untraced. No CRT heap: callable from a hook. */
DWORD dlltrace_inject(HANDLE proc, const WCHAR *shim, const WCHAR *trace, const char *via);

#endif
