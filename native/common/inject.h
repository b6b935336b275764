/* Put the shim into a process created suspended (shared by the launcher and the shim's CreateProcess hook). */
#ifndef DLLTRACE_INJECT_H
#define DLLTRACE_INJECT_H
#include <windows.h>

/* ERROR_EXE_MACHINE_TYPE_MISMATCH (216): the child runs on a machine no shim of ours can enter (arm64,
   ARM64EC, an unknown one), or its image in memory is not what its exe file said. */
#define INJECT_UNSUPPORTED_MACHINE ERROR_EXE_MACHINE_TYPE_MISMATCH
#define INJECT_NOT_X64 INJECT_UNSUPPORTED_MACHINE /* (its older name) */

/* The machines a child can be, from its exe's PE header (inject_file_machine). */
enum { INJ_MACHINE_UNKNOWN = 0, INJ_MACHINE_X86, INJ_MACHINE_X64, INJ_MACHINE_ARM64, INJ_MACHINE_ARM64EC };

/* "x86", "x64", "arm64", "arm64ec" or "unknown": the trace's child_machine words (docs/trace-format.md). */
const char *inject_machine_name(int machine);

/* The machine of the PE file at path: IMAGE_FILE_MACHINE_I386 -> x86, AMD64 -> x64 (ARM64EC when its load
   config has CHPE metadata: an ARM64EC image carries the AMD64 machine), ARM64 -> arm64, ARM64EC -> arm64ec;
   anything else, or a file that is no PE or cannot be read, INJ_MACHINE_UNKNOWN. No CRT heap. */
int inject_file_machine(const WCHAR *path);

/* The machine of the process proc (its exe's header, QueryFullProcessImageNameW); when the file cannot be
   read, x86 for a WoW64 process, else this process's own machine. */
int inject_process_machine(HANDLE proc);

/* Patch the entry point of proc's exe (created suspended, not yet resumed) with a jump to a stub that
   restores the entry bytes, calls LoadLibraryW(shim) and dlltrace_start(trace, via) (trace NULL: the
   child reads DLLTRACE_TRACE), then jumps to the entry. via: at most 31 characters.
   shim: the shim of this process's own machine; the other machine's is the one of the same folder
   (dlltrace_shim32.dll / dlltrace_shim64.dll). The child's machine (inject_process_machine) picks it:
     x64 injector: an x64 child gets x64 code and shim; an x86 (WoW64) child x86 code and the x86 shim;
     x86 injector: an x86 child x86 code; an x64 child is injected by dlltrace_launch64.exe of the same
       folder (--dlltrace-inject: a 32-bit process cannot write above 4 GB), which this call runs and waits for;
     any other machine: INJECT_UNSUPPORTED_MACHINE, nothing written.
   *machine (may be NULL) receives the child's machine.
   Returns 0, or the Win32 error that stopped it; nothing in the child is changed before the final
   entry-point write, so on failure the child runs untraced. No CRT heap: callable from a hook. */
DWORD dlltrace_inject(HANDLE proc, const WCHAR *shim, const WCHAR *trace, const char *via, int *machine);

#endif
