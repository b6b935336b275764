/* Shim injection by entry-point patch; see inject.h. Used by the launcher (its child) and by the shim's
 * CreateProcess hook (the traced program's children).
 *
 * The exe's entry point (from the child's PEB and PE header) is replaced by `mov rax, stub; jmp rax`. The
 * stub, written into the child, puts the entry bytes back, calls LoadLibraryW(shim) and
 * dlltrace_start(trace, via), then jumps to the entry. So the shim is in place before the program's first
 * LoadLibrary; the exe's own static imports (resolved before the entry point runs) are not traced.
 * kernel32/kernelbase are mapped at the same address in every process (Windows: per boot; Wine: fixed),
 * so the stub calls this process's LoadLibraryW / GetProcAddress addresses (the code at those addresses
 * in the child is the original: hooks patch only the process that installed them). Chosen over
 * CreateRemoteThread because it needs nothing from the child but memory writes, which Wine and Windows
 * do alike.
 */
#define WIN32_LEAN_AND_MEAN
#include <windows.h>
#include "inject.h"

static void copy(void *d, const void *s, SIZE_T n) {
    unsigned char *dd = (unsigned char *)d;
    const unsigned char *ss = (const unsigned char *)s;
    while (n--) *dd++ = *ss++;
}

DWORD dlltrace_inject(HANDLE proc, const WCHAR *shim, const WCHAR *trace, const char *via) {
    typedef struct { PVOID r1, peb; ULONG_PTR r2[4]; } pbi_t;
    typedef LONG(WINAPI * nqip_t)(HANDLE, int, PVOID, ULONG, PULONG);
    typedef BOOL(WINAPI * iswow_t)(HANDLE, PBOOL);
    HMODULE k32 = GetModuleHandleW(L"kernel32.dll");
    /* a 32-bit child of this 64-bit process: its PEB below is the 64-bit one, so ask first */
    iswow_t iswow = (iswow_t)(void *)GetProcAddress(k32, "IsWow64Process");
    BOOL wow = FALSE;
    if (iswow && iswow(proc, &wow) && wow) return INJECT_NOT_X64;
    nqip_t nqip = (nqip_t)(void *)GetProcAddress(GetModuleHandleW(L"ntdll.dll"), "NtQueryInformationProcess");
    pbi_t pbi;
    if (!nqip || nqip(proc, 0, &pbi, sizeof(pbi), NULL) != 0) return ERROR_INVALID_FUNCTION;
    ULONG_PTR base = 0;
    SIZE_T got;
    if (!ReadProcessMemory(proc, (char *)pbi.peb + 0x10, &base, sizeof(base), &got)) return GetLastError();
    IMAGE_DOS_HEADER dos;
    IMAGE_NT_HEADERS64 nt;
    if (!ReadProcessMemory(proc, (void *)base, &dos, sizeof(dos), &got)) return GetLastError();
    if (dos.e_magic != IMAGE_DOS_SIGNATURE) return ERROR_BAD_EXE_FORMAT;
    if (!ReadProcessMemory(proc, (char *)base + dos.e_lfanew, &nt, sizeof(nt), &got)) return GetLastError();
    if (nt.Signature != IMAGE_NT_SIGNATURE) return ERROR_BAD_EXE_FORMAT;
    if (nt.FileHeader.Machine != IMAGE_FILE_MACHINE_AMD64 || nt.OptionalHeader.Magic != IMAGE_NT_OPTIONAL_HDR64_MAGIC)
        return INJECT_NOT_X64;
    if (!nt.OptionalHeader.AddressOfEntryPoint) return ERROR_BAD_EXE_FORMAT;
    unsigned char *entry = (unsigned char *)base + nt.OptionalHeader.AddressOfEntryPoint;

    unsigned char orig[12];
    if (!ReadProcessMemory(proc, entry, orig, 12, &got)) return GetLastError();
    /* layout: [0] stub, [1024] "dlltrace_start", [1056] via, [4096] shim path, then the trace path (UTF-16) */
    SIZE_T shim_bytes = (SIZE_T)(lstrlenW(shim) + 1) * sizeof(WCHAR);
    SIZE_T trace_bytes = trace ? (SIZE_T)(lstrlenW(trace) + 1) * sizeof(WCHAR) : 0;
    SIZE_T trace_off = 4096 + ((shim_bytes + 15) & ~(SIZE_T)15);
    void *pLoad = (void *)GetProcAddress(k32, "LoadLibraryW"), *pGpa = (void *)GetProcAddress(k32, "GetProcAddress");
    if (!pLoad || !pGpa) return ERROR_PROC_NOT_FOUND;
    unsigned char *mem = VirtualAllocEx(proc, NULL, trace_off + trace_bytes, MEM_COMMIT | MEM_RESERVE, PAGE_EXECUTE_READWRITE);
    if (!mem) return GetLastError();
    unsigned char code[256];
    int n = 0;
#define B(x) (code[n++] = (unsigned char)(x))
#define Q(v) do { ULONGLONG q_ = (ULONGLONG)(v); copy(code + n, &q_, 8); n += 8; } while (0)
    ULONGLONG lo;
    DWORD hi;
    copy(&lo, orig, 8);
    copy(&hi, orig + 8, 4);
    B(0x51); B(0x52); B(0x41); B(0x50); B(0x41); B(0x51);   /* push rcx, rdx, r8, r9 */
    B(0x48); B(0x83); B(0xEC); B(0x28);                       /* sub rsp, 0x28 */
    B(0x48); B(0xB8); Q(entry);                               /* mov rax, entry */
    B(0x48); B(0xB9); Q(lo);                                  /* mov rcx, orig[0:8] */
    B(0x48); B(0x89); B(0x08);                                /* mov [rax], rcx */
    B(0xB9); copy(code + n, &hi, 4); n += 4;                  /* mov ecx, orig[8:12] */
    B(0x89); B(0x48); B(0x08);                                /* mov [rax+8], ecx */
    B(0x48); B(0xB9); Q(mem + 4096);                          /* mov rcx, shim path */
    B(0x48); B(0xB8); Q(pLoad);                               /* mov rax, LoadLibraryW */
    B(0xFF); B(0xD0);                                         /* call rax */
    B(0x48); B(0x85); B(0xC0);                                /* test rax, rax */
    B(0x74); int j1 = n; B(0);                                /* jz done */
    B(0x48); B(0x89); B(0xC1);                                /* mov rcx, rax */
    B(0x48); B(0xBA); Q(mem + 1024);                          /* mov rdx, "dlltrace_start" */
    B(0x48); B(0xB8); Q(pGpa);                                /* mov rax, GetProcAddress */
    B(0xFF); B(0xD0);                                         /* call rax */
    B(0x48); B(0x85); B(0xC0);                                /* test rax, rax */
    B(0x74); int j2 = n; B(0);                                /* jz done */
    B(0x48); B(0xB9); Q(trace ? mem + trace_off : NULL);      /* mov rcx, trace path (NULL: DLLTRACE_TRACE) */
    B(0x48); B(0xBA); Q(mem + 1056);                          /* mov rdx, via */
    B(0xFF); B(0xD0);                                         /* call rax */
    int done = n;
    code[j1] = (unsigned char)(done - (j1 + 1));
    code[j2] = (unsigned char)(done - (j2 + 1));
    B(0x48); B(0x83); B(0xC4); B(0x28);                       /* add rsp, 0x28 */
    B(0x41); B(0x59); B(0x41); B(0x58); B(0x5A); B(0x59);   /* pop r9, r8, rdx, rcx */
    B(0x48); B(0xB8); Q(entry);                               /* mov rax, entry */
    B(0xFF); B(0xE0);                                         /* jmp rax */
#undef B
#undef Q
    char via_buf[32];
    int k = 0;
    for (; via && via[k] && k < 31; k++) via_buf[k] = via[k];
    via_buf[k] = 0;
    DWORD old;
    unsigned char patch[12] = {0x48, 0xB8};                   /* mov rax, stub; jmp rax */
    ULONGLONG stub = (ULONGLONG)mem;
    copy(patch + 2, &stub, 8);
    patch[10] = 0xFF; patch[11] = 0xE0;
    if (!WriteProcessMemory(proc, mem, code, n, &got) ||
        !WriteProcessMemory(proc, mem + 1024, "dlltrace_start", 15, &got) ||
        !WriteProcessMemory(proc, mem + 1056, via_buf, (SIZE_T)k + 1, &got) ||
        !WriteProcessMemory(proc, mem + 4096, shim, shim_bytes, &got) ||
        (trace && !WriteProcessMemory(proc, mem + trace_off, trace, trace_bytes, &got)) ||
        /* the entry page stays writable: the stub puts the original bytes back */
        !VirtualProtectEx(proc, entry, 12, PAGE_EXECUTE_READWRITE, &old) ||
        !WriteProcessMemory(proc, entry, patch, 12, &got)) {
        DWORD err = GetLastError();
        VirtualFreeEx(proc, mem, 0, MEM_RELEASE);  /* the child runs untraced, without our block */
        return err ? err : ERROR_WRITE_FAULT;
    }
    FlushInstructionCache(proc, entry, 12);
    return 0;
}
