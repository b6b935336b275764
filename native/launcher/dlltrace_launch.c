/* dlltrace launcher: start a program with the shim in place, pass stdio through, return its exit code.
 *
 *   dlltrace_launch64.exe CMD ARGS...      (trace file: DLLTRACE_TRACE; shim: next to this exe, or DLLTRACE_SHIM)
 *   dlltrace_launch32.exe CMD ARGS...      (the x86 build: the same, for a 32-bit Windows)
 *
 * The child's machine is read from its exe's PE header (inject.c): an x64 launcher injects the x64 shim into
 * an x64 child and the x86 shim (dlltrace_shim32.dll of the same folder) into a 32-bit one; a child of a
 * machine no shim can enter (arm64, ARM64EC, unknown) runs untraced, with a warning naming its machine.
 * The exit event (and launch_error, when the command's file was found) says the child's machine:
 * "child_machine". (`--dlltrace-inject PID VIA SHIM64 TRACE`: not for users; the x86 shim runs the x64
 * launcher so to inject an x64 child of a 32-bit program, see inject.c.)
 *
 * The child is created suspended and the shim is put in by native/common/inject.c (an entry-point patch:
 * the shim loads and dlltrace_start(<trace>, "launcher") runs before the program's entry point; the exe's
 * own static imports are not traced). The shim then follows the program's own children (its
 * CreateProcess hook uses the same injection).
 *
 * The launcher appends an "exit" event (full 32-bit exit code) for the child, or a "launch_error"
 * event when the program could not be started (then it exits with 127). The exit event's "ended" says
 * how: "exited", "interrupted" (a Ctrl-C reached the launcher while the child ran: the child got its
 * own, the launcher outlives it to write this event), or "not_windows" (Wine ran the command as a Unix
 * program: no Windows process, no exit code; the launcher then exits with EXIT_NOT_WINDOWS).
 * The child is held in a job object with JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE: when the launcher ends
 * (killed too), the child and the processes it started end with it. When the child ended with a
 * loader status before its entry point (a static import missing, ...: see STARTUP_STATUS), its shim
 * never started, so the launcher writes the child's "env" event itself (dlltrace_env_snapshot: the
 * child inherited the launcher's folder, PATH and DLL-search state), and the report replays the
 * static imports.
 */
#define WIN32_LEAN_AND_MEAN
#include <windows.h>
#include <stdio.h>
#include "inject.h"
#include "jsonw.h"

#define EXIT_LAUNCH_FAILED 127
#define EXIT_NOT_WINDOWS 126   /* Wine started the command as a Unix program (tracer/dlltrace/trace/launch.py) */
#define DLLTRACE_LAUNCH_VERSION "0.1.0"
#ifdef _WIN64
#define SHIM_NAME L"dlltrace_shim64.dll"
#define LAUNCHER_NAME "dlltrace_launch64.exe"
#else
#define SHIM_NAME L"dlltrace_shim32.dll"
#define LAUNCHER_NAME "dlltrace_launch32.exe"
#endif

static WCHAR g_trace[32767];
static jw_file_t g_tf; /* the trace file and its shared end (jsonw.h): lines of all processes stay whole */

/* opens the file named by DLLTRACE_TRACE; g_trace receives its full path (passed to the child's shim) */
static HANDLE open_trace(void) {
    WCHAR path[32767];
    DWORD n = GetEnvironmentVariableW(L"DLLTRACE_TRACE", path, 32767);
    if (!n || n >= 32767) return INVALID_HANDLE_VALUE;
    n = GetFullPathNameW(path, 32767, g_trace, NULL);
    if (!n || n >= 32767) lstrcpynW(g_trace, path, 32767);
    DWORD e = jw_file_open(&g_tf, path); /* held open to the end: the shared end lives while we do */
    if (e) SetLastError(e);
    return e ? INVALID_HANDLE_VALUE : g_tf.file;
}

/* NTSTATUS codes with which a process ends when its static imports fail before the entry point */
static int startup_status(DWORD code) {
    return code == 0xC0000135 /* DLL not found */ || code == 0xC0000139 /* entry point not found */ ||
           code == 0xC000007B /* invalid image format */ || code == 0xC0000142 /* DLL init failed */;
}

static int g_quiet;    /* DLLTRACE_RUN: dlltrace run reports for us */
static int g_write_failed;
static char g_line[4 * 32767 + 512];

/* one line (jsonw.c) written in one write at a range reserved for it (jw_file_write: the child's
   and its children's shims may still be writing); a failed or short write is reported once on stderr */
static void write_line(HANDLE f, jsonw_t *w) {
    DWORD len = jw_close(w);
    if (f == INVALID_HANDLE_VALUE) return;
    /* (the launcher's few lines pass any size cap: the `exit` and `capped` events must be there) */
    if (!jw_file_write_always(&g_tf, w->start, len) && !g_write_failed++ && !g_quiet)
        fprintf(stderr, "dlltrace-launch: could not write to the trace (error %lu); it is incomplete\n", GetLastError());
}

/* {"ev":<ev>,"seq":0,"pid":pid,"tid":tid,"t":..  (launcher events have seq 0) */
static void event(jsonw_t *w, const char *ev, DWORD pid, DWORD tid) {
    jw_init(w, g_line, sizeof(g_line), sizeof(g_line));
    jw_event(w, ev, 0, pid, tid, jw_now_ns());
}

static void warn_event(HANDLE f, DWORD pid, const char *msg, DWORD err) {
    jsonw_t w;
    event(&w, "warning", pid, GetCurrentThreadId());
    jw_key(&w, "message"); jw_str(&w, msg);
    jw_key(&w, "error"); jw_u64(&w, err);
    jw_key(&w, "by"); jw_str(&w, "launcher");
    write_line(f, &w);
}

/* the machine of the program a command line names (its first word, found as CreateProcess would with
   SearchPathW and .exe), or NULL when the file is not found */
static const char *command_machine(const WCHAR *cmd) {
    static WCHAR prog[32767], found[32767];
    int n = 0;
    if (*cmd == L'"') { for (cmd++; *cmd && *cmd != L'"' && n < 32766; ) prog[n++] = *cmd++; }
    else while (*cmd && *cmd != L' ' && *cmd != L'\t' && n < 32766) prog[n++] = *cmd++;
    prog[n] = 0;
    if (!n) return NULL;
    DWORD got = SearchPathW(NULL, prog, L".exe", 32767, found, NULL);
    if (!got || got >= 32767) return NULL;
    return inject_machine_name(inject_file_machine(found));
}

/* a machine no shim can enter: arm64, arm64ec, unknown */
static int unenterable(const char *machine) {
    return machine && lstrcmpA(machine, "x86") != 0 && lstrcmpA(machine, "x64") != 0;
}

/* the warning naming the machine of a child the shim could not enter */
static void machine_warning(HANDLE f, DWORD pid, const char *machine, DWORD err, int started) {
    static char msg[256];
    lstrcpyA(msg, started ? "child not traced: the shim cannot enter an " : "the command is an ");
    lstrcatA(msg, machine);
    lstrcatA(msg, started ? " process (no dlltrace shim for that machine)"
                          : " program, which this system could not start; dlltrace could not have traced it either (no shim for that machine)");
    warn_event(f, pid, msg, err);
}

/* `dlltrace_launch64.exe --dlltrace-inject PID VIA SHIM TRACE`: inject the shim into the suspended process
   PID (for the x86 shim, whose 32-bit process cannot write an x64 child's memory: inject.c). Exit code: the
   injection's result (0, or a Win32 error). */
static int inject_helper(void) {
    int argc = 0;
    /* shell32 is loaded here, for this helper alone: linked in, it loads user32 and gdi32 into every
       launcher, whose start under Wine then costs ~20-40 ms more (bench/wine_run.py) */
    typedef LPWSTR *(WINAPI *argv_t)(LPCWSTR, int *);
    HMODULE sh = LoadLibraryW(L"shell32.dll");
    argv_t to_argv = sh ? (argv_t)(void *)GetProcAddress(sh, "CommandLineToArgvW") : NULL;
    if (!to_argv) return (int)GetLastError();
    WCHAR **argv = to_argv(GetCommandLineW(), &argc);
    if (!argv || argc != 6) return ERROR_INVALID_PARAMETER;
    DWORD pid = 0;
    for (const WCHAR *c = argv[2]; *c >= L'0' && *c <= L'9'; c++) pid = pid * 10 + (DWORD)(*c - L'0');
    char via[32];
    int k = 0;
    for (; argv[3][k] && k < 31; k++) via[k] = (char)argv[3][k];
    via[k] = 0;
    HANDLE proc = OpenProcess(PROCESS_QUERY_INFORMATION | PROCESS_QUERY_LIMITED_INFORMATION | PROCESS_VM_OPERATION |
                              PROCESS_VM_READ | PROCESS_VM_WRITE, FALSE, pid);
    if (!proc) return (int)GetLastError();
    DWORD e = dlltrace_inject(proc, argv[4], argv[5][0] ? argv[5] : NULL, via, NULL);
    CloseHandle(proc);
    return (int)e;
}

static volatile LONG g_interrupted; /* a Ctrl-C or Ctrl-Break reached us while the child ran */

/* Ctrl-C / Ctrl-Break: the child got its own (same console, or under Wine the same Unix process
   group); the launcher stays to record how the child ended. (A handler, not SetConsoleCtrlHandler(NULL,
   TRUE): that flag would be inherited, and the child would ignore Ctrl-C.) */
static BOOL WINAPI on_ctrl(DWORD type) {
    if (type == CTRL_C_EVENT || type == CTRL_BREAK_EVENT) {
        InterlockedExchange(&g_interrupted, 1);
        return TRUE;
    }
    return FALSE;
}

/* a job that kills its processes when its last handle closes (the launcher ending, however) */
static HANDLE kill_on_close_job(HANDLE child, DWORD *err) {
    HANDLE job = CreateJobObjectW(NULL, NULL);
    JOBOBJECT_EXTENDED_LIMIT_INFORMATION li;
    ZeroMemory(&li, sizeof(li));
    li.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE;
    *err = 0;
    if (!job || !SetInformationJobObject(job, JobObjectExtendedLimitInformation, &li, sizeof(li)) ||
        !AssignProcessToJobObject(job, child)) {
        *err = GetLastError();
        if (job) CloseHandle(job);
        return NULL;
    }
    return job;
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
    if (CompareStringOrdinal(cmd, 18, L"--dlltrace-inject ", 18, FALSE) == CSTR_EQUAL) return inject_helper();
    g_quiet = GetEnvironmentVariableW(L"DLLTRACE_RUN", NULL, 0) != 0;
    if (!*cmd) {
        fprintf(stderr, "usage: " LAUNCHER_NAME " CMD [ARGS...]  (trace file in DLLTRACE_TRACE)\n");
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
        jsonw_t w;
        jw_init(&w, g_line, sizeof(g_line), sizeof(g_line));
        jw_header(&w, "dlltrace-launch " DLLTRACE_LAUNCH_VERSION);
        write_line(trace, &w);
    }
    static WCHAR shim[32767];
    DWORD n = GetEnvironmentVariableW(L"DLLTRACE_SHIM", shim, 32767);
    if (!n || n >= 32767) {
        n = GetModuleFileNameW(NULL, shim, 32767 - 32);
        while (n && shim[n - 1] != L'\\' && shim[n - 1] != L'/') n--;
        lstrcpyW(shim + n, SHIM_NAME);
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
        const char *machine = command_machine(cmd);
        jsonw_t w;
        event(&w, "launch_error", GetCurrentProcessId(), GetCurrentThreadId());
        jw_key(&w, "cmdline"); jw_wstr(&w, cmd, -1);
        jw_key(&w, "error"); jw_u64(&w, e);
        jw_key(&w, "child_machine"); if (machine) jw_str(&w, machine); else jw_raw(&w, "null");
        write_line(trace, &w);
        if (unenterable(machine)) machine_warning(trace, GetCurrentProcessId(), machine, e, 0);
        if (!g_quiet) fprintf(stderr, "dlltrace-launch: cannot start the command (error %lu)\n", e);
        return EXIT_LAUNCH_FAILED;
    }
    if (!pi.dwProcessId || !pi.hProcess) {
        /* Wine found no Windows program and ran the command as a Unix program (a shell script, an ELF
           file): it runs outside Windows, untraced, and its exit code does not reach us */
        jsonw_t w;
        event(&w, "exit", 0, 0);
        jw_key(&w, "code"); jw_raw(&w, "null");
        jw_key(&w, "by"); jw_str(&w, "launcher");
        jw_key(&w, "ended"); jw_str(&w, "not_windows");
        jw_key(&w, "child_machine"); jw_raw(&w, "null");
        write_line(trace, &w);
        if (!g_quiet) fprintf(stderr, "dlltrace-launch: not a Windows program; Wine ran it as a Unix program, untraced\n");
        return EXIT_NOT_WINDOWS;
    }
    DWORD je;
    HANDLE job = kill_on_close_job(pi.hProcess, &je);
    if (!job) warn_event(trace, pi.dwProcessId, "the child is not in a kill-on-close job: it may outlive the launcher", je);
    SetConsoleCtrlHandler(on_ctrl, TRUE);
    static WCHAR child_exe[32767];
    DWORD ce = 32767;
    if (!QueryFullProcessImageNameW(pi.hProcess, 0, child_exe, &ce)) child_exe[0] = 0;
    int cm = INJ_MACHINE_UNKNOWN;
    DWORD ie = dlltrace_inject(pi.hProcess, shim, g_trace, "launcher", &cm);
    const char *child_machine = inject_machine_name(cm);
    if (ie && unenterable(child_machine)) machine_warning(trace, pi.dwProcessId, child_machine, ie, 1);
    else if (ie) warn_event(trace, pi.dwProcessId, "child not traced: the shim could not be injected", ie);
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
    jsonw_t w;
    LONG64 dropped[JW_DROP_KINDS], dropped_bytes, cap, first_t;
    if (jw_file_dropped(&g_tf, dropped, &dropped_bytes, &cap, &first_t)) {
        /* the size cap dropped lines (jsonw.h): what, so that the report can say it. (Lines the program's
           own children drop after this are not counted: they end with the launcher, its job closing.) */
        static const char *names[JW_DROP_KINDS] = {"probe", "load_begin", "load_end", "dll_notify", "other"};
        event(&w, "capped", pi.dwProcessId, 0);
        jw_key(&w, "max_size"); jw_u64(&w, (ULONGLONG)cap);
        jw_key(&w, "dropped"); jw_raw(&w, "{");
        for (int k = 0; k < JW_DROP_KINDS; k++) {
            if (k) jw_raw(&w, ",");
            jw_str(&w, names[k]); jw_raw(&w, ":"); jw_u64(&w, (ULONGLONG)dropped[k]);
        }
        jw_raw(&w, "}");
        jw_key(&w, "dropped_bytes"); jw_u64(&w, (ULONGLONG)dropped_bytes);
        jw_key(&w, "first_t"); jw_u64(&w, (ULONGLONG)first_t);
        write_line(trace, &w);
    }
    event(&w, "exit", pi.dwProcessId, 0);
    jw_key(&w, "code"); jw_u64(&w, code);
    jw_key(&w, "by"); jw_str(&w, "launcher");
    jw_key(&w, "ended"); jw_str(&w, g_interrupted ? "interrupted" : "exited");
    jw_key(&w, "child_machine"); jw_str(&w, child_machine);
    write_line(trace, &w);
    CloseHandle(trace);
    return (int)code;
}
