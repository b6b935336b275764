/* dlltrace launcher: start a program with the shim in place, pass stdio through, return its exit code.
 *
 *   dlltrace_launch64.exe CMD ARGS...      (trace file: DLLTRACE_TRACE; shim: next to this exe, or DLLTRACE_SHIM)
 *
 * The child is created suspended. Its exe entry point is patched with a jump to a small stub written
 * into the child; the stub restores the entry bytes, calls LoadLibraryW(shim) and
 * dlltrace_start(NULL, "launcher"), then jumps to the entry point. So the shim is in place before the
 * program's first LoadLibrary; the exe's own static imports (resolved by the loader before the entry
 * point runs) are not traced. kernel32 is mapped at the same address in every process (Windows:
 * per boot; Wine: fixed), so the stub calls this process's LoadLibraryW / GetProcAddress addresses.
 * Chosen over CreateRemoteThread because it needs nothing from the child but memory writes, which
 * Wine and Windows do alike.
 *
 * The launcher appends an "exit" event (full 32-bit exit code) for the child, or a "launch_error"
 * event when the program could not be started (then it exits with 127).
 */
#define WIN32_LEAN_AND_MEAN
#include <windows.h>
#include <stdio.h>
#include <string.h>

#define EXIT_LAUNCH_FAILED 127

static HANDLE open_trace(void) {
    WCHAR path[32767];
    DWORD n = GetEnvironmentVariableW(L"DLLTRACE_TRACE", path, 32767);
    if (!n || n >= 32767) return INVALID_HANDLE_VALUE;
    return CreateFileW(path, FILE_APPEND_DATA | SYNCHRONIZE, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, NULL,
                       OPEN_ALWAYS, FILE_ATTRIBUTE_NORMAL, NULL);
}

static ULONGLONG now_ns(void) {
    LARGE_INTEGER c, f;
    QueryPerformanceCounter(&c);
    QueryPerformanceFrequency(&f);
    return (ULONGLONG)c.QuadPart / f.QuadPart * 1000000000ULL + ((ULONGLONG)c.QuadPart % f.QuadPart) * 1000000000ULL / f.QuadPart;
}

/* JSON string (UTF-8) of a wide string into out */
static void json_wstr(char *out, size_t cap, const WCHAR *s) {
    static char u8[3 * 32767 + 4];
    int n = WideCharToMultiByte(CP_UTF8, 0, s, -1, u8, sizeof(u8), NULL, NULL);
    if (n <= 0) u8[0] = 0;
    size_t o = 0;
    out[o++] = '"';
    for (const unsigned char *p = (const unsigned char *)u8; *p && o + 8 < cap; p++) {
        if (*p == '"' || *p == '\\') { out[o++] = '\\'; out[o++] = (char)*p; }
        else if (*p < 0x20) o += (size_t)snprintf(out + o, cap - o, "\\u%04x", *p);
        else out[o++] = (char)*p;
    }
    out[o++] = '"';
    out[o] = 0;
}

static void write_event(HANDLE f, const char *line) {
    DWORD n;
    if (f != INVALID_HANDLE_VALUE) WriteFile(f, line, (DWORD)strlen(line), &n, NULL);
}

static char g_line[4 * 32767 + 512], g_js[3 * 32767 * 2 + 16];

static void warn_event(HANDLE f, DWORD pid, const char *msg, DWORD err) {
    snprintf(g_line, sizeof(g_line),
             "{\"ev\":\"warning\",\"seq\":0,\"pid\":%lu,\"tid\":%lu,\"t\":%llu,\"message\":\"%s\",\"error\":%lu,\"by\":\"launcher\"}\n",
             (unsigned long)pid, (unsigned long)GetCurrentThreadId(), now_ns(), msg, (unsigned long)err);
    write_event(f, g_line);
}

/* Returns 0, or the Win32 error that stopped the injection (the child then runs untraced). */
static DWORD inject(HANDLE proc, const WCHAR *shim) {
    typedef struct { PVOID r1, peb; ULONG_PTR r2[4]; } pbi_t;
    typedef LONG(WINAPI * nqip_t)(HANDLE, int, PVOID, ULONG, PULONG);
    nqip_t nqip = (nqip_t)(void *)GetProcAddress(GetModuleHandleW(L"ntdll.dll"), "NtQueryInformationProcess");
    pbi_t pbi;
    if (!nqip || nqip(proc, 0, &pbi, sizeof(pbi), NULL) != 0) return ERROR_INVALID_FUNCTION;
    ULONG_PTR base = 0;
    SIZE_T got;
    if (!ReadProcessMemory(proc, (char *)pbi.peb + 0x10, &base, sizeof(base), &got)) return GetLastError();
    IMAGE_DOS_HEADER dos;
    IMAGE_NT_HEADERS64 nt;
    if (!ReadProcessMemory(proc, (void *)base, &dos, sizeof(dos), &got)) return GetLastError();
    if (!ReadProcessMemory(proc, (char *)base + dos.e_lfanew, &nt, sizeof(nt), &got)) return GetLastError();
    if (nt.FileHeader.Machine != IMAGE_FILE_MACHINE_AMD64) return ERROR_BAD_EXE_FORMAT;
    unsigned char *entry = (unsigned char *)base + nt.OptionalHeader.AddressOfEntryPoint;

    unsigned char orig[12];
    if (!ReadProcessMemory(proc, entry, orig, 12, &got)) return GetLastError();
    unsigned char *mem = VirtualAllocEx(proc, NULL, 65536, MEM_COMMIT | MEM_RESERVE, PAGE_EXECUTE_READWRITE);
    if (!mem) return GetLastError();
    /* layout: [0] stub, [1024] "dlltrace_start", [1056] "launcher", [2048] shim path (UTF-16) */
    unsigned char code[256];
    int n = 0;
#define B(x) (code[n++] = (unsigned char)(x))
#define Q(v) do { ULONGLONG q_ = (ULONGLONG)(v); memcpy(code + n, &q_, 8); n += 8; } while (0)
    HMODULE k32 = GetModuleHandleW(L"kernel32.dll");
    void *pLoad = (void *)GetProcAddress(k32, "LoadLibraryW"), *pGpa = (void *)GetProcAddress(k32, "GetProcAddress");
    ULONGLONG lo;
    DWORD hi;
    memcpy(&lo, orig, 8);
    memcpy(&hi, orig + 8, 4);
    B(0x51); B(0x52); B(0x41); B(0x50); B(0x41); B(0x51);   /* push rcx, rdx, r8, r9 */
    B(0x48); B(0x83); B(0xEC); B(0x28);                       /* sub rsp, 0x28 */
    B(0x48); B(0xB8); Q(entry);                               /* mov rax, entry */
    B(0x48); B(0xB9); Q(lo);                                  /* mov rcx, orig[0:8] */
    B(0x48); B(0x89); B(0x08);                                /* mov [rax], rcx */
    B(0xB9); memcpy(code + n, &hi, 4); n += 4;                /* mov ecx, orig[8:12] */
    B(0x89); B(0x48); B(0x08);                                /* mov [rax+8], ecx */
    B(0x48); B(0xB9); Q(mem + 2048);                          /* mov rcx, shim path */
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
    B(0x31); B(0xC9);                                         /* xor ecx, ecx  (path: DLLTRACE_TRACE) */
    B(0x48); B(0xBA); Q(mem + 1056);                          /* mov rdx, "launcher" */
    B(0xFF); B(0xD0);                                         /* call rax */
    int done = n;
    code[j1] = (unsigned char)(done - (j1 + 1));
    code[j2] = (unsigned char)(done - (j2 + 1));
    B(0x48); B(0x83); B(0xC4); B(0x28);                       /* add rsp, 0x28 */
    B(0x41); B(0x59); B(0x41); B(0x58); B(0x5A); B(0x59);   /* pop r9, r8, rdx, rcx */
    B(0x48); B(0xB8); Q(entry);                               /* mov rax, entry */
    B(0xFF); B(0xE0);                                         /* jmp rax */
    if (!WriteProcessMemory(proc, mem, code, n, &got)) return GetLastError();
    if (!WriteProcessMemory(proc, mem + 1024, "dlltrace_start", 15, &got)) return GetLastError();
    if (!WriteProcessMemory(proc, mem + 1056, "launcher", 9, &got)) return GetLastError();
    if (!WriteProcessMemory(proc, mem + 2048, shim, (lstrlenW(shim) + 1) * sizeof(WCHAR), &got)) return GetLastError();
    /* the entry page stays writable: the stub puts the original bytes back */
    DWORD old;
    if (!VirtualProtectEx(proc, entry, 12, PAGE_EXECUTE_READWRITE, &old)) return GetLastError();
    unsigned char patch[12] = {0x48, 0xB8};                   /* mov rax, stub; jmp rax */
    ULONGLONG stub = (ULONGLONG)mem;
    memcpy(patch + 2, &stub, 8);
    patch[10] = 0xFF; patch[11] = 0xE0;
    if (!WriteProcessMemory(proc, entry, patch, 12, &got)) return GetLastError();
    FlushInstructionCache(proc, entry, 12);
    return 0;
}

/* the command line after our own argv[0], verbatim */
static WCHAR *rest_of_cmdline(void) {
    WCHAR *p = GetCommandLineW();
    if (*p == L'"') { p++; while (*p && *p != L'"') p++; if (*p) p++; }
    else while (*p && *p != L' ' && *p != L'\t') p++;
    while (*p == L' ' || *p == L'\t') p++;
    return p;
}

int main(void) {
    WCHAR *cmd = rest_of_cmdline();
    int quiet = GetEnvironmentVariableW(L"DLLTRACE_RUN", NULL, 0) != 0;
    if (!*cmd) {
        fprintf(stderr, "usage: dlltrace_launch64.exe CMD [ARGS...]  (trace file in DLLTRACE_TRACE)\n");
        return EXIT_LAUNCH_FAILED;
    }
    HANDLE trace = open_trace();
    if (trace == INVALID_HANDLE_VALUE) {
        fprintf(stderr, "dlltrace-launch: cannot open the trace file named by DLLTRACE_TRACE (error %lu)\n", GetLastError());
        return EXIT_LAUNCH_FAILED;
    }
    static WCHAR shim[32767];
    DWORD n = GetEnvironmentVariableW(L"DLLTRACE_SHIM", shim, 32767);
    if (!n || n >= 32767) {
        n = GetModuleFileNameW(NULL, shim, 32767 - 32);
        while (n && shim[n - 1] != L'\\' && shim[n - 1] != L'/') n--;
        lstrcpyW(shim + n, L"dlltrace_shim64.dll");
    }
    /* no crash dialogs or debugger for the traced program (the error mode is inherited) */
    SetErrorMode(SEM_FAILCRITICALERRORS | SEM_NOGPFAULTERRORBOX | SEM_NOOPENFILEERRORBOX);
    STARTUPINFOW si;
    PROCESS_INFORMATION pi;
    ZeroMemory(&si, sizeof(si));
    si.cb = sizeof(si);
    si.dwFlags = STARTF_USESTDHANDLES;
    si.hStdInput = GetStdHandle(STD_INPUT_HANDLE);
    si.hStdOutput = GetStdHandle(STD_OUTPUT_HANDLE);
    si.hStdError = GetStdHandle(STD_ERROR_HANDLE);
    static WCHAR cmdbuf[32767];
    lstrcpynW(cmdbuf, cmd, 32767);
    if (!CreateProcessW(NULL, cmdbuf, NULL, NULL, TRUE, CREATE_SUSPENDED, NULL, NULL, &si, &pi)) {
        DWORD e = GetLastError();
        json_wstr(g_js, sizeof(g_js), cmd);
        snprintf(g_line, sizeof(g_line),
                 "{\"ev\":\"launch_error\",\"seq\":0,\"pid\":%lu,\"tid\":%lu,\"t\":%llu,\"cmdline\":%s,\"error\":%lu}\n",
                 (unsigned long)GetCurrentProcessId(), (unsigned long)GetCurrentThreadId(), now_ns(), g_js, (unsigned long)e);
        write_event(trace, g_line);
        if (!quiet) fprintf(stderr, "dlltrace-launch: cannot start the command (error %lu)\n", e);
        return EXIT_LAUNCH_FAILED;
    }
    DWORD ie = inject(pi.hProcess, shim);
    if (ie) warn_event(trace, pi.dwProcessId, "child not traced: the shim could not be injected", ie);
    ResumeThread(pi.hThread);
    WaitForSingleObject(pi.hProcess, INFINITE);
    DWORD code = 0;
    GetExitCodeProcess(pi.hProcess, &code);
    snprintf(g_line, sizeof(g_line),
             "{\"ev\":\"exit\",\"seq\":0,\"pid\":%lu,\"tid\":0,\"t\":%llu,\"code\":%lu,\"by\":\"launcher\"}\n",
             (unsigned long)pi.dwProcessId, now_ns(), (unsigned long)code);
    write_event(trace, g_line);
    CloseHandle(trace);
    return (int)code;
}
