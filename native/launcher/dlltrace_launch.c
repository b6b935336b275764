/* dlltrace launcher: start a program with the shim in place, pass stdio through, return its exit code.
 *
 *   dlltrace_launch64.exe CMD ARGS...      (trace file: DLLTRACE_TRACE; shim: next to this exe, or DLLTRACE_SHIM)
 *
 * The child is created suspended and the shim is put in by native/common/inject.c (an entry-point patch:
 * the shim loads and dlltrace_start(<trace>, "launcher") runs before the program's entry point; the exe's
 * own static imports are not traced). The shim then follows the program's own children (its
 * CreateProcess hook uses the same injection).
 *
 * The launcher appends an "exit" event (full 32-bit exit code) for the child, or a "launch_error"
 * event when the program could not be started (then it exits with 127). When the child ended with a
 * loader status before its entry point (a static import missing, ...: see STARTUP_STATUS), its shim
 * never started, so the launcher writes the child's "env" event itself (dlltrace_env_snapshot: the
 * child inherited the launcher's folder, PATH and DLL-search state), and the report replays the
 * static imports.
 */
#define WIN32_LEAN_AND_MEAN
#include <windows.h>
#include <stdio.h>
#include <string.h>
#include "inject.h"

#define EXIT_LAUNCH_FAILED 127
#define DLLTRACE_LAUNCH_VERSION "0.1.0"

static WCHAR g_trace[32767];

/* opens the file named by DLLTRACE_TRACE; g_trace receives its full path (passed to the child's shim) */
static HANDLE open_trace(void) {
    WCHAR path[32767];
    DWORD n = GetEnvironmentVariableW(L"DLLTRACE_TRACE", path, 32767);
    if (!n || n >= 32767) return INVALID_HANDLE_VALUE;
    n = GetFullPathNameW(path, 32767, g_trace, NULL);
    if (!n || n >= 32767) lstrcpynW(g_trace, path, 32767);
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

/* NTSTATUS codes with which a process ends when its static imports fail before the entry point */
static int startup_status(DWORD code) {
    return code == 0xC0000135 /* DLL not found */ || code == 0xC0000139 /* entry point not found */ ||
           code == 0xC000007B /* invalid image format */ || code == 0xC0000142 /* DLL init failed */;
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
    LARGE_INTEGER size;
    if (GetFileSizeEx(trace, &size) && size.QuadPart == 0) {
        /* used without `dlltrace run` (which writes the header first): the file must be readable
           even when the child's shim never starts (it could not start, or could not be injected) */
        int wine = GetProcAddress(GetModuleHandleW(L"ntdll.dll"), "wine_get_version") != NULL;
        snprintf(g_line, sizeof(g_line),
                 "{\"format\":\"dlltrace-trace\",\"version\":1,\"tool\":\"dlltrace-launch " DLLTRACE_LAUNCH_VERSION
                 "\",\"created\":null,\"platform\":\"%s\"}\n", wine ? "wine" : "windows");
        write_event(trace, g_line);
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
    static WCHAR child_exe[32767];
    DWORD ce = 32767;
    if (!QueryFullProcessImageNameW(pi.hProcess, 0, child_exe, &ce)) child_exe[0] = 0;
    DWORD ie = dlltrace_inject(pi.hProcess, shim, g_trace, "launcher");
    if (ie) warn_event(trace, pi.dwProcessId, "child not traced: the shim could not be injected", ie);
    ResumeThread(pi.hThread);
    WaitForSingleObject(pi.hProcess, INFINITE);
    DWORD code = 0;
    GetExitCodeProcess(pi.hProcess, &code);
    if (startup_status(code) && child_exe[0]) {
        typedef int (*snap_t)(const WCHAR *, unsigned long, const WCHAR *);
        HMODULE s = LoadLibraryW(shim);
        snap_t snap = s ? (snap_t)(void *)GetProcAddress(s, "dlltrace_env_snapshot") : NULL;
        int se = snap ? snap(g_trace, pi.dwProcessId, child_exe) : (int)GetLastError();
        if (se) warn_event(trace, pi.dwProcessId, "the environment of the child that could not start was not recorded", (DWORD)se);
    }
    snprintf(g_line, sizeof(g_line),
             "{\"ev\":\"exit\",\"seq\":0,\"pid\":%lu,\"tid\":0,\"t\":%llu,\"code\":%lu,\"by\":\"launcher\"}\n",
             (unsigned long)pi.dwProcessId, now_ns(), (unsigned long)code);
    write_event(trace, g_line);
    CloseHandle(trace);
    return (int)code;
}
