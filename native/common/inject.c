/* Shim injection by entry-point patch; see inject.h. Used by the launcher (its child) and by the shim's
 * CreateProcess hook (the traced program's children).
 *
 * The child's machine is read from its exe's PE header (inject_process_machine), and the shim of that
 * machine is injected:
 *
 * x64 child (from an x64 injector): the exe's entry point (from the child's PEB and PE header) is
 * replaced by `mov rax, stub; jmp rax`. The stub, written into the child, puts the entry bytes back, calls
 * LoadLibraryW(shim) and dlltrace_start(trace, via), then jumps to the entry. kernel32/kernelbase are
 * mapped at the same address in every process (Windows: per boot; Wine: fixed), so the stub calls this
 * process's LoadLibraryW / GetProcAddress addresses (the code at those addresses in the child is the
 * original: hooks patch only the process that installed them).
 *
 * x86 child (32-bit, from an x64 injector (a WoW64 child) or an x86 one): the entry point is replaced by
 * `jmp rel32 stub` (a rel32 reaches anywhere in 32 bits). The image base comes from the child's PEB: an x64
 * injector reads the 64-bit PEB's ImageBaseAddress (Wine and Windows fill it for a WoW64 process too; under
 * Wine 8 the 32-bit PEB's address is not given out: ProcessWow64Information answers 1), and falls back on
 * the 32-bit PEB that ProcessWow64Information names on Windows; the header found there must be an I386
 * PE32 image. An x64 injector has no address of the 32-bit kernel32 (and in a child created suspended it is
 * not even mapped yet), so the x86 stub finds it itself when it runs at the entry point: it walks the PEB's
 * InLoadOrderModuleList for kernel32.dll, looks GetProcAddress up in its export table (a forwarded export:
 * no injection), and calls GetProcAddress(kernel32, "LoadLibraryW"), LoadLibraryW(shim),
 * GetProcAddress(shim, "dlltrace_start") and dlltrace_start(trace, via) (cdecl), then jumps to the entry with
 * every register as it found them. Anything not found: the program runs untraced.
 *
 * x64 child from an x86 injector (a 32-bit traced program starting a 64-bit one): a 32-bit process cannot
 * write the child's memory above 4 GB, where an x64 exe's entry point usually is, so dlltrace_launch64.exe
 * of the shim's folder does it (`--dlltrace-inject PID VIA SHIM64 TRACE`: the same inject_x64), and its exit
 * code is the result.
 *
 * Any other machine (arm64, ARM64EC, unknown): INJECT_UNSUPPORTED_MACHINE, nothing written.
 *
 * The exe's own static imports (resolved before the entry point runs) are not traced. Chosen over
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

typedef struct { PVOID r1, peb; ULONG_PTR r2[4]; } pbi_t;
typedef LONG(WINAPI * nqip_t)(HANDLE, int, PVOID, ULONG, PULONG);

const char *inject_machine_name(int machine) {
    switch (machine) {
    case INJ_MACHINE_X86: return "x86";
    case INJ_MACHINE_X64: return "x64";
    case INJ_MACHINE_ARM64: return "arm64";
    case INJ_MACHINE_ARM64EC: return "arm64ec";
    default: return "unknown";
    }
}

#ifndef IMAGE_FILE_MACHINE_ARM64
#define IMAGE_FILE_MACHINE_ARM64 0xAA64
#endif
#define MACHINE_ARM64EC 0xA641
#define LOAD_CONFIG_CHPE64 0xC8 /* IMAGE_LOAD_CONFIG_DIRECTORY64.CHPEMetadataPointer */

static int read_at(HANDLE f, DWORD off, void *buf, DWORD n) {
    DWORD got = 0;
    return SetFilePointer(f, (LONG)off, NULL, FILE_BEGIN) != INVALID_SET_FILE_POINTER && ReadFile(f, buf, n, &got, NULL) &&
           got == n;
}

/* An AMD64 image whose load config has CHPE metadata is ARM64EC (or ARM64X's EC view). h: the first
   `got` bytes of the file, the NT headers at `at`. */
static int is_arm64ec(HANDLE f, const unsigned char *h, DWORD got, DWORD at) {
    WORD optsize, nsec;
    copy(&optsize, h + at + 20, 2);
    copy(&nsec, h + at + 6, 2);
    DWORD opt = at + 24;
    WORD magic;
    copy(&magic, h + opt, 2);
    if (magic != IMAGE_NT_OPTIONAL_HDR64_MAGIC || opt + 112 + 11 * 8 > got || optsize < 112 + 11 * 8) return 0;
    DWORD ndirs, rva, size;
    copy(&ndirs, h + opt + 108, 4);
    copy(&rva, h + opt + 112 + 10 * 8, 4);       /* IMAGE_DIRECTORY_ENTRY_LOAD_CONFIG */
    copy(&size, h + opt + 112 + 10 * 8 + 4, 4);
    if (ndirs <= 10 || !rva || size < LOAD_CONFIG_CHPE64 + 8) return 0;
    DWORD sec = opt + optsize;
    for (WORD i = 0; i < nsec && sec + (i + 1) * 40 <= got; i++) {
        const unsigned char *s = h + sec + i * 40;
        DWORD va, vsize, raw, rawsize;
        copy(&vsize, s + 8, 4); copy(&va, s + 12, 4); copy(&rawsize, s + 16, 4); copy(&raw, s + 20, 4);
        if (rva < va || rva - va >= (vsize > rawsize ? vsize : rawsize)) continue;
        unsigned char lc[LOAD_CONFIG_CHPE64 + 8];
        DWORD lcsize;
        if (!read_at(f, raw + (rva - va), lc, sizeof(lc))) return 0;
        copy(&lcsize, lc, 4);
        ULONGLONG chpe;
        copy(&chpe, lc + LOAD_CONFIG_CHPE64, 8);
        return lcsize >= sizeof(lc) && chpe != 0;
    }
    return 0;
}

int inject_file_machine(const WCHAR *path) {
    HANDLE f = CreateFileW(path, GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, NULL, OPEN_EXISTING,
                           FILE_ATTRIBUTE_NORMAL, NULL);
    if (f == INVALID_HANDLE_VALUE) return INJ_MACHINE_UNKNOWN;
    unsigned char h[4096];
    DWORD got = 0;
    int m = INJ_MACHINE_UNKNOWN;
    if (ReadFile(f, h, sizeof(h), &got, NULL) && got >= 0x40 && h[0] == 'M' && h[1] == 'Z') {
        DWORD at;
        copy(&at, h + 0x3C, 4);
        if (at < got && got - at >= 24 && h[at] == 'P' && h[at + 1] == 'E' && !h[at + 2] && !h[at + 3]) {
            WORD mach;
            copy(&mach, h + at + 4, 2);
            if (mach == IMAGE_FILE_MACHINE_I386) m = INJ_MACHINE_X86;
            else if (mach == IMAGE_FILE_MACHINE_AMD64) m = is_arm64ec(f, h, got, at) ? INJ_MACHINE_ARM64EC : INJ_MACHINE_X64;
            else if (mach == IMAGE_FILE_MACHINE_ARM64) m = INJ_MACHINE_ARM64;
            else if (mach == MACHINE_ARM64EC) m = INJ_MACHINE_ARM64EC;
        }
    }
    CloseHandle(f);
    return m;
}

int inject_process_machine(HANDLE proc) {
    WCHAR exe[MAX_PATH * 4];
    DWORD n = MAX_PATH * 4;
    if (QueryFullProcessImageNameW(proc, 0, exe, &n)) {
        int m = inject_file_machine(exe);
        if (m != INJ_MACHINE_UNKNOWN) return m;
    }
    typedef BOOL(WINAPI * iswow_t)(HANDLE, PBOOL);
    iswow_t iswow = (iswow_t)(void *)GetProcAddress(GetModuleHandleW(L"kernel32.dll"), "IsWow64Process");
    BOOL wow = FALSE;
    if (iswow && iswow(proc, &wow) && wow) return INJ_MACHINE_X86;
#ifdef _WIN64
    return INJ_MACHINE_X64;
#else
    return INJ_MACHINE_X86;
#endif
}

/* the folder of `shim` (through its last \ or /) followed by `name`, into out (cap units); 0 when too long */
static int sibling(const WCHAR *shim, const WCHAR *name, WCHAR *out, int cap) {
    int n = lstrlenW(shim), k = lstrlenW(name);
    while (n && shim[n - 1] != L'\\' && shim[n - 1] != L'/') n--;
    if (n + k + 1 > cap) return 0;
    copy(out, shim, (SIZE_T)n * sizeof(WCHAR));
    copy(out + n, name, (SIZE_T)(k + 1) * sizeof(WCHAR));
    return 1;
}

/* ---- an x86 child ------------------------------------------------------------------------------ */
static int x86_header(HANDLE proc, ULONG_PTR base, IMAGE_NT_HEADERS32 *nt) {
    IMAGE_DOS_HEADER dos;
    SIZE_T got;
    return base && ReadProcessMemory(proc, (void *)base, &dos, sizeof(dos), &got) && dos.e_magic == IMAGE_DOS_SIGNATURE &&
           ReadProcessMemory(proc, (char *)base + dos.e_lfanew, nt, sizeof(*nt), &got) && nt->Signature == IMAGE_NT_SIGNATURE &&
           nt->FileHeader.Machine == IMAGE_FILE_MACHINE_I386 && nt->OptionalHeader.Magic == IMAGE_NT_OPTIONAL_HDR32_MAGIC;
}

static DWORD inject_x86(HANDLE proc, const WCHAR *shim, const WCHAR *trace, const char *via) {
    if (GetFileAttributesW(shim) == INVALID_FILE_ATTRIBUTES) return ERROR_FILE_NOT_FOUND; /* (no x86 shim beside ours) */
    nqip_t nqip = (nqip_t)(void *)GetProcAddress(GetModuleHandleW(L"ntdll.dll"), "NtQueryInformationProcess");
    pbi_t pbi;
    if (!nqip || nqip(proc, 0, &pbi, sizeof(pbi), NULL) != 0) return ERROR_INVALID_FUNCTION;
    SIZE_T got;
    ULONG_PTR base = 0;
    IMAGE_NT_HEADERS32 nt;
#ifdef _WIN64
    /* the 64-bit PEB's ImageBaseAddress (+0x10), else the 32-bit PEB's (+8) named by ProcessWow64Information (26) */
    if (!ReadProcessMemory(proc, (char *)pbi.peb + 0x10, &base, sizeof(base), &got) || !x86_header(proc, base, &nt)) {
        ULONG_PTR peb32 = 0;
        DWORD b32 = 0;
        if (nqip(proc, 26, &peb32, sizeof(peb32), NULL) != 0 || peb32 <= 1 ||
            !ReadProcessMemory(proc, (char *)peb32 + 8, &b32, 4, &got))
            return INJECT_UNSUPPORTED_MACHINE;
        base = b32;
        if (!x86_header(proc, base, &nt)) return INJECT_UNSUPPORTED_MACHINE;
    }
#else
    if (!ReadProcessMemory(proc, (char *)pbi.peb + 8, &base, sizeof(base), &got)) return GetLastError();
    if (!x86_header(proc, base, &nt)) return INJECT_UNSUPPORTED_MACHINE;
#endif
    if (!nt.OptionalHeader.AddressOfEntryPoint) return ERROR_BAD_EXE_FORMAT;
    DWORD entry = (DWORD)base + nt.OptionalHeader.AddressOfEntryPoint;
    unsigned char orig[5];
    if (!ReadProcessMemory(proc, (void *)(ULONG_PTR)entry, orig, 5, &got)) return GetLastError();
    /* layout: [0] stub, [768] L"kernel32.dll", [800] "GetProcAddress", [832] "LoadLibraryW",
       [864] "dlltrace_start", [896] via, [4096] shim path, then the trace path (UTF-16) */
    SIZE_T shim_bytes = (SIZE_T)(lstrlenW(shim) + 1) * sizeof(WCHAR);
    SIZE_T trace_bytes = trace ? (SIZE_T)(lstrlenW(trace) + 1) * sizeof(WCHAR) : 0;
    SIZE_T trace_off = 4096 + ((shim_bytes + 15) & ~(SIZE_T)15);
    unsigned char *mem = VirtualAllocEx(proc, NULL, trace_off + trace_bytes, MEM_COMMIT | MEM_RESERVE, PAGE_EXECUTE_READWRITE);
    if (!mem) return GetLastError();
    if ((ULONGLONG)(ULONG_PTR)mem + trace_off + trace_bytes > 0xFFFFFFFFULL) { /* (a 32-bit process's memory is below 4 GB) */
        VirtualFreeEx(proc, mem, 0, MEM_RELEASE);
        return ERROR_NOT_ENOUGH_MEMORY;
    }
    DWORD M = (DWORD)(ULONG_PTR)mem;
    unsigned char code[256];
    int n = 0;
#define B(x) (code[n++] = (unsigned char)(x))
#define D(v) do { DWORD d_ = (DWORD)(v); copy(code + n, &d_, 4); n += 4; } while (0)
#define J8() (code[n] = 0, n++)                            /* a rel8 to fix: its offset */
#define AT8(j) (code[j] = (unsigned char)(n - ((j) + 1)))  /* the rel8 at j jumps here */
#define TO8(label) do { int t_ = (label) - (n + 1); B(t_); } while (0) /* a rel8 back to label */
    DWORD lo;
    copy(&lo, orig, 4);
    B(0x60);                                          /* pushad */
    B(0x9C);                                          /* pushfd */
    B(0xFC);                                          /* cld */
    B(0xBF); D(entry);                                /* mov edi, entry */
    B(0xC7); B(0x07); D(lo);                          /* mov dword [edi], orig[0:4] */
    B(0xC6); B(0x47); B(0x04); B(orig[4]);            /* mov byte [edi+4], orig[4] */
    B(0x64); B(0xA1); D(0x30);                        /* mov eax, fs:[0x30]       PEB */
    B(0x8B); B(0x40); B(0x0C);                        /* mov eax, [eax+0x0c]      PEB.Ldr */
    B(0x8D); B(0x50); B(0x0C);                        /* lea edx, [eax+0x0c]      &Ldr.InLoadOrderModuleList */
    B(0x8B); B(0x32);                                 /* mov esi, [edx]           first entry */
    int next = n;
    B(0x39); B(0xD6);                                 /* next: cmp esi, edx       back at the head: not found */
    B(0x0F); B(0x84); int jdone = n; D(0);            /* je done */
    B(0x66); B(0x83); B(0x7E); B(0x2C); B(24);        /* cmp word [esi+0x2c], 24  BaseDllName.Length */
    B(0x75); int jadv1 = J8();                        /* jne advance */
    B(0x8B); B(0x5E); B(0x30);                        /* mov ebx, [esi+0x30]      BaseDllName.Buffer */
    B(0x31); B(0xC9);                                 /* xor ecx, ecx */
    int cmploop = n;
    B(0x0F); B(0xB7); B(0x04); B(0x4B);               /* cmploop: movzx eax, word [ebx+ecx*2] */
    B(0x83); B(0xC8); B(0x20);                        /* or eax, 0x20             lower case */
    B(0x66); B(0x3B); B(0x04); B(0x4D); D(M + 768);   /* cmp ax, [ecx*2 + L"kernel32.dll"] */
    B(0x75); int jadv2 = J8();                        /* jne advance */
    B(0x41);                                          /* inc ecx */
    B(0x83); B(0xF9); B(12);                          /* cmp ecx, 12 */
    B(0x75); TO8(cmploop);                            /* jne cmploop */
    B(0x8B); B(0x5E); B(0x18);                        /* mov ebx, [esi+0x18]      DllBase: kernel32 */
    B(0xEB); int jfound = J8();                       /* jmp found */
    AT8(jadv1); AT8(jadv2);
    B(0x8B); B(0x36);                                 /* advance: mov esi, [esi]  Flink */
    B(0xEB); TO8(next);                               /* jmp next */
    AT8(jfound);
    B(0x8B); B(0x43); B(0x3C);                        /* found: mov eax, [ebx+0x3c]   e_lfanew */
    B(0x8B); B(0x6C); B(0x03); B(0x78);               /* mov ebp, [ebx+eax+0x78]  export directory RVA */
    B(0xFF); B(0x74); B(0x03); B(0x7C);               /* push dword [ebx+eax+0x7c] its size: [esp] */
    B(0x8D); B(0x3C); B(0x2B);                        /* lea edi, [ebx+ebp]       the export directory */
    B(0x8B); B(0x4F); B(0x18);                        /* mov ecx, [edi+0x18]      NumberOfNames */
    B(0x8B); B(0x57); B(0x20);                        /* mov edx, [edi+0x20]      AddressOfNames */
    B(0x01); B(0xDA);                                 /* add edx, ebx */
    int nameloop = n;
    B(0x49);                                          /* nameloop: dec ecx */
    B(0x78); int jfail1 = J8();                       /* js fail */
    B(0x8B); B(0x34); B(0x8A);                        /* mov esi, [edx+ecx*4] */
    B(0x01); B(0xDE);                                 /* add esi, ebx             the name */
    B(0x57);                                          /* push edi */
    B(0x51);                                          /* push ecx */
    B(0xBF); D(M + 800);                              /* mov edi, "GetProcAddress" */
    B(0xB9); D(15);                                   /* mov ecx, 15              with its NUL */
    B(0xF3); B(0xA6);                                 /* repe cmpsb */
    B(0x59);                                          /* pop ecx */
    B(0x5F);                                          /* pop edi */
    B(0x75); TO8(nameloop);                           /* jne nameloop */
    B(0x8B); B(0x57); B(0x24);                        /* mov edx, [edi+0x24]      AddressOfNameOrdinals */
    B(0x01); B(0xDA);                                 /* add edx, ebx */
    B(0x0F); B(0xB7); B(0x0C); B(0x4A);               /* movzx ecx, word [edx+ecx*2] */
    B(0x8B); B(0x57); B(0x1C);                        /* mov edx, [edi+0x1c]      AddressOfFunctions */
    B(0x01); B(0xDA);                                 /* add edx, ebx */
    B(0x8B); B(0x34); B(0x8A);                        /* mov esi, [edx+ecx*4]     GetProcAddress's RVA */
    B(0x89); B(0xF0);                                 /* mov eax, esi */
    B(0x29); B(0xE8);                                 /* sub eax, ebp */
    B(0x3B); B(0x04); B(0x24);                        /* cmp eax, [esp] */
    B(0x72); int jfail2 = J8();                       /* jb fail                  inside the directory: a forwarder */
    B(0x01); B(0xDE);                                 /* add esi, ebx             esi = GetProcAddress */
    B(0x68); D(M + 832);                              /* push "LoadLibraryW" */
    B(0x53);                                          /* push ebx */
    B(0xFF); B(0xD6);                                 /* call esi */
    B(0x85); B(0xC0);                                 /* test eax, eax */
    B(0x74); int jfail3 = J8();                       /* jz fail */
    B(0x68); D(M + 4096);                             /* push shim path */
    B(0xFF); B(0xD0);                                 /* call eax                 LoadLibraryW */
    B(0x85); B(0xC0);                                 /* test eax, eax */
    B(0x74); int jfail4 = J8();                       /* jz fail */
    B(0x68); D(M + 864);                              /* push "dlltrace_start" */
    B(0x50);                                          /* push eax */
    B(0xFF); B(0xD6);                                 /* call esi                 GetProcAddress */
    B(0x85); B(0xC0);                                 /* test eax, eax */
    B(0x74); int jfail5 = J8();                       /* jz fail */
    B(0x68); D(M + 896);                              /* push via */
    B(0x68); D(trace ? M + (DWORD)trace_off : 0);     /* push trace path (0: DLLTRACE_TRACE) */
    B(0xFF); B(0xD0);                                 /* call eax                 dlltrace_start (cdecl) */
    B(0x83); B(0xC4); B(0x08);                        /* add esp, 8 */
    AT8(jfail1); AT8(jfail2); AT8(jfail3); AT8(jfail4); AT8(jfail5);
    B(0x58);                                          /* fail: pop eax            the size slot */
    { LONG rel = n - (jdone + 4); copy(code + jdone, &rel, 4); }
    B(0x9D);                                          /* done: popfd */
    B(0x61);                                          /* popad */
    B(0x68); D(entry);                                /* push entry */
    B(0xC3);                                          /* ret */
#undef B
#undef D
#undef J8
#undef AT8
#undef TO8
    char via_buf[32];
    int k = 0;
    for (; via && via[k] && k < 31; k++) via_buf[k] = via[k];
    via_buf[k] = 0;
    static const WCHAR k32[] = L"kernel32.dll";
    unsigned char patch[5] = {0xE9};                  /* jmp rel32 stub */
    LONG rel = (LONG)(M - (entry + 5));
    copy(patch + 1, &rel, 4);
    DWORD old;
    if (!WriteProcessMemory(proc, mem, code, n, &got) ||
        !WriteProcessMemory(proc, mem + 768, k32, sizeof(k32), &got) ||
        !WriteProcessMemory(proc, mem + 800, "GetProcAddress", 15, &got) ||
        !WriteProcessMemory(proc, mem + 832, "LoadLibraryW", 13, &got) ||
        !WriteProcessMemory(proc, mem + 864, "dlltrace_start", 15, &got) ||
        !WriteProcessMemory(proc, mem + 896, via_buf, (SIZE_T)k + 1, &got) ||
        !WriteProcessMemory(proc, mem + 4096, shim, shim_bytes, &got) ||
        (trace && !WriteProcessMemory(proc, mem + trace_off, trace, trace_bytes, &got)) ||
        /* the entry page stays writable: the stub puts the original bytes back */
        !VirtualProtectEx(proc, (void *)(ULONG_PTR)entry, 5, PAGE_EXECUTE_READWRITE, &old) ||
        !WriteProcessMemory(proc, (void *)(ULONG_PTR)entry, patch, 5, &got)) {
        DWORD err = GetLastError();
        VirtualFreeEx(proc, mem, 0, MEM_RELEASE);  /* the child runs untraced, without our block */
        return err ? err : ERROR_WRITE_FAULT;
    }
    FlushInstructionCache(proc, (void *)(ULONG_PTR)entry, 5);
    return 0;
}

#ifndef _WIN64
/* ---- an x64 child of an x86 injector: dlltrace_launch64.exe --dlltrace-inject ------------------------ */
static WCHAR *put(WCHAR *p, const WCHAR *s) { while (*s) *p++ = *s++; return p; }

static DWORD inject_by_helper(HANDLE proc, const WCHAR *shim, const WCHAR *trace, const char *via) {
    SIZE_T cap = 3 * 32768 + 256;
    WCHAR *buf = (WCHAR *)VirtualAlloc(NULL, cap * sizeof(WCHAR), MEM_COMMIT | MEM_RESERVE, PAGE_READWRITE);
    if (!buf) return ERROR_OUTOFMEMORY;
    WCHAR *exe = buf, *shim64 = buf + 32768, *cmd = buf + 2 * 32768;
    DWORD err = 0;
    if (!sibling(shim, L"dlltrace_launch64.exe", exe, 32768) || !sibling(shim, L"dlltrace_shim64.dll", shim64, 32768) ||
        lstrlenW(exe) + lstrlenW(shim64) + (trace ? lstrlenW(trace) : 0) + 128 > 32768 + 256) {
        err = ERROR_FILENAME_EXCED_RANGE;
    } else if (GetFileAttributesW(exe) == INVALID_FILE_ATTRIBUTES || GetFileAttributesW(shim64) == INVALID_FILE_ATTRIBUTES) {
        err = ERROR_FILE_NOT_FOUND; /* (no x64 launcher and shim beside the x86 shim) */
    } else {
        WCHAR num[16], *q = num + 15;
        DWORD pid = GetProcessId(proc);
        *q = 0;
        do { *--q = (WCHAR)(L'0' + pid % 10); pid /= 10; } while (pid);
        WCHAR *p = cmd;
        p = put(p, L"\""); p = put(p, exe); p = put(p, L"\" --dlltrace-inject "); p = put(p, q); p = put(p, L" \"");
        for (int k = 0; via && via[k] && k < 31; k++) *p++ = (WCHAR)(unsigned char)via[k];
        p = put(p, L"\" \""); p = put(p, shim64); p = put(p, L"\" \""); if (trace) p = put(p, trace); p = put(p, L"\"");
        *p = 0;
        STARTUPINFOW si;
        PROCESS_INFORMATION pi;
        for (SIZE_T i = 0; i < sizeof(si); i++) ((unsigned char *)&si)[i] = 0;
        si.cb = sizeof(si);
        if (!CreateProcessW(exe, cmd, NULL, NULL, FALSE, CREATE_NO_WINDOW, NULL, NULL, &si, &pi)) {
            err = GetLastError();
        } else {
            DWORD code = 0;
            if (WaitForSingleObject(pi.hProcess, 60000) != WAIT_OBJECT_0) {
                TerminateProcess(pi.hProcess, WAIT_TIMEOUT);
                err = WAIT_TIMEOUT;
            } else if (!GetExitCodeProcess(pi.hProcess, &code)) err = GetLastError();
            else err = code;
            CloseHandle(pi.hThread);
            CloseHandle(pi.hProcess);
        }
    }
    VirtualFree(buf, 0, MEM_RELEASE);
    return err;
}
#endif

#ifdef _WIN64
/* an x64 child: x64 code (the first design; unchanged) */
static DWORD inject_x64(HANDLE proc, const WCHAR *shim, const WCHAR *trace, const char *via) {
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
#endif

DWORD dlltrace_inject(HANDLE proc, const WCHAR *shim, const WCHAR *trace, const char *via, int *machine) {
    int m = inject_process_machine(proc);
    if (machine) *machine = m;
#ifdef _WIN64
    if (m == INJ_MACHINE_X64) return inject_x64(proc, shim, trace, via);
    if (m == INJ_MACHINE_X86) { /* the x86 shim of the same folder */
        WCHAR *shim32 = (WCHAR *)VirtualAlloc(NULL, 32768 * sizeof(WCHAR), MEM_COMMIT | MEM_RESERVE, PAGE_READWRITE);
        if (!shim32) return ERROR_OUTOFMEMORY;
        DWORD e = sibling(shim, L"dlltrace_shim32.dll", shim32, 32768) ? inject_x86(proc, shim32, trace, via)
                                                                         : ERROR_FILENAME_EXCED_RANGE;
        VirtualFree(shim32, 0, MEM_RELEASE);
        return e;
    }
#else
    if (m == INJ_MACHINE_X86) return inject_x86(proc, shim, trace, via);
    if (m == INJ_MACHINE_X64) return inject_by_helper(proc, shim, trace, via);
#endif
    return INJECT_UNSUPPORTED_MACHINE;
}
