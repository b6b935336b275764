/* dlltrace shim: records every DLL load, every file the loader probed and every result.
 *
 * Inline trampoline hooks (hook_x64.c) on kernelbase's LoadLibrary* / FreeLibrary / DLL-directory
 * APIs, ntdll's LdrLoadDll and the four ntdll file calls the loader probes with. Each event is one
 * JSON line, formatted into a per-thread buffer (no CRT heap: the probe hooks run under the loader
 * lock) and written to the trace with a single write (NtWriteFile) at a range reserved for it in the file
 * (jw_file_write, native/common/jsonw.c: an end-of-file counter shared by every process writing the
 * file, so no line of any process or thread overlaps another).
 * A CreateProcess hook puts the shim into the program's children too (native/common/inject.c).
 * The event format is docs/trace-format.md; keep the two in step.
 */
#define DLLTRACE_SHIM_BUILD
#define WIN32_LEAN_AND_MEAN
#include <windows.h>
#include <psapi.h>
#include "dlltrace_shim.h"
#include "hook.h"
#include "inject.h"
#include "jsonw.h"

/* ---- ntdll types, declared here to stay independent of the headers' winternl.h flavour ---------- */
ULONG WINAPI RtlNtStatusToDosError(LONG status); /* ntdll */
typedef struct { USHORT Length, MaximumLength; PWSTR Buffer; } USTR;
typedef struct { ULONG Length; HANDLE RootDirectory; USTR *ObjectName; ULONG Attributes; PVOID sd, sqos; } OBJATTR;

/* ---- per-thread state ----------------------------------------------------------------------
   One VirtualAlloc reservation per thread (no CRT heap: the probe hooks run under the loader lock):
   the state below, then a LINEBUF line buffer of which LINE_COMMIT bytes are committed; a longer line
   commits more as it grows (jsonw.c) and the buffer is decommitted back to LINE_COMMIT once no line is
   open. Strings from the system go through a WSMALL scratch; one that does not fit goes to a WTMP
   scratch allocated the first time a thread needs it (long paths, PATH, the env event). */
#define MAX_DEPTH 64
#define LINEBUF (256 * 1024)
#define LINE_COMMIT JSONW_COMMIT
#define WTMP 32767 /* UTF-16 units; x2 must fit the USHORT of a UNICODE_STRING */
#define WSMALL 1024
typedef enum {
    FRAME_IN_API = 1,    /* in the LoadLibrary* layers: a LoadLibrary* entered now is the same call */
    FRAME_IN_LOADER = 2, /* LdrLoadDll was entered: any load from now on is a nested one */
} frame_state_t;
typedef struct { LONG64 seq; frame_state_t state; LONG status; int have_status; } frame_t;
typedef struct {
    int guard;       /* inside the shim's own code: the file calls it makes are not probes */
    int depth;       /* loads in flight on this thread (nesting: a LoadLibrary inside DllMain) */
    int cfg_depth;   /* inside a recorded DLL-directory API (SetDllDirectoryA -> W is one call) */
    LONG64 ctx;      /* Python context (dlltrace_set_context) */
    size_t line_base; /* where the next line starts in buf: past a line still open (h_FreeLibrary) */
    size_t committed; /* bytes of buf committed */
    char *buf;        /* LINEBUF bytes reserved, right after this state */
    WCHAR *wbig;      /* WTMP units, or NULL until a string does not fit wsmall */
    frame_t stack[MAX_DEPTH];
    WCHAR wsmall[WSMALL];
} tstate_t;
#define TS_HEAD ((sizeof(tstate_t) + 4095) & ~(size_t)4095)

/* g_state: OFF -> STARTING (dlltrace_start) -> RUNNING (events recorded) -> STOPPED (the stats line
   was written at process exit; hooks pass through). SNAPSHOT: dlltrace_env_snapshot in a process
   that is not traced. Only RUNNING records anything. */
typedef enum { SHIM_OFF = 0, SHIM_STARTING, SHIM_RUNNING, SHIM_SNAPSHOT, SHIM_STOPPED } shim_state_t;

static HMODULE g_self;
static DWORD g_tls = TLS_OUT_OF_INDEXES;
static jw_file_t g_tf = {INVALID_HANDLE_VALUE, NULL, NULL}; /* the trace file (jsonw.h) */
static volatile LONG g_state; /* shim_state_t */
static volatile LONG64 g_seq;
static DWORD g_pid;
static WCHAR g_trace_path[WTMP], g_shim_path[WTMP]; /* passed to the children (spawn hook) */
/* No write lock: each line's range of the file is reserved with one atomic add on the shared end
   (jw_file_write), so threads and processes never wait for one another, and a thread that dies
   holding nothing leaves nothing held. The counters are interlocked. */
static volatile LONG64 g_written, g_lost, g_truncated, g_dropped; /* event lines written whole, not (or not whole), cut, dropped by the size cap (jsonw.h) */
static volatile LONG g_fail_writes; /* DLLTRACE_TEST_FAIL_WRITES (test only): the next N writes really fail */

static tstate_t *get_ts(int create) {
    DWORD le = GetLastError();
    tstate_t *ts = g_tls == TLS_OUT_OF_INDEXES ? NULL : (tstate_t *)TlsGetValue(g_tls);
    if (!ts && create && g_tls != TLS_OUT_OF_INDEXES) {
        char *m = (char *)VirtualAlloc(NULL, TS_HEAD + LINEBUF, MEM_RESERVE, PAGE_READWRITE);
        if (m && VirtualAlloc(m, TS_HEAD + LINE_COMMIT, MEM_COMMIT, PAGE_READWRITE)) {
            ts = (tstate_t *)m;
            ts->buf = m + TS_HEAD;
            ts->committed = LINE_COMMIT;
            TlsSetValue(g_tls, ts);
        } else if (m) VirtualFree(m, 0, MEM_RELEASE);
    }
    SetLastError(le);
    return ts;
}

static void free_ts(tstate_t *ts) {
    if (ts->wbig) VirtualFree(ts->wbig, 0, MEM_RELEASE);
    VirtualFree(ts, 0, MEM_RELEASE);
}

/* the WTMP scratch, allocated on first use (NULL when it cannot be) */
static WCHAR *wbig(tstate_t *ts) {
    if (!ts->wbig) ts->wbig = (WCHAR *)VirtualAlloc(NULL, WTMP * sizeof(WCHAR), MEM_COMMIT | MEM_RESERVE, PAGE_READWRITE);
    return ts->wbig;
}

/* ---- lines: JSON (native/common/jsonw.c) into the thread's buffer, one WriteFile each ------------ */
static LONG64 begin_line(jsonw_t *w, tstate_t *ts, const char *ev) {
    LONG64 seq = InterlockedIncrement64(&g_seq);
    jw_init(w, ts->buf + ts->line_base, ts->committed - ts->line_base, LINEBUF - ts->line_base);
    jw_event(w, ev, seq, g_pid, GetCurrentThreadId(), jw_now_ns());
    return seq;
}

/* what a line committed stays counted in ts->committed */
static void note_commit(tstate_t *ts, const jsonw_t *w) {
    size_t c = (size_t)(w->end - ts->buf);
    if (c > ts->committed) ts->committed = c;
}

/* One write per line, at the range reserved for it (jw_file_write): lines of every thread and
   process stay whole and none overwrites another. Every result is checked: a failed or short write
   counts as lost, and the count goes into the stats line at exit. */
static int test_fail_write(void) { /* DLLTRACE_TEST_FAIL_WRITES: take one of the N failures */
    for (LONG k = g_fail_writes; k > 0; k = g_fail_writes)
        if (InterlockedCompareExchange(&g_fail_writes, k - 1, k) == k) return 1;
    return 0;
}

static int write_line(const char *s, DWORD len, int truncated) {
    int ok;
    if (g_fail_writes > 0 && test_fail_write()) { /* test only: reserved, then the write fails (null handle) */
        jw_file_t bad = g_tf;
        bad.file = NULL;
        ok = jw_file_write(&bad, s, len);
    } else
        ok = jw_file_write(&g_tf, s, len);
    InterlockedIncrement64(ok == JW_DROPPED ? &g_dropped : ok ? &g_written : &g_lost);
    if (truncated) InterlockedIncrement64(&g_truncated);
    return ok;
}

static void emit(jsonw_t *w, tstate_t *ts) {
    DWORD le = GetLastError();
    DWORD len = jw_close(w);
    write_line(w->start, len, w->trunc);
    note_commit(ts, w);
    if (ts->line_base == 0 && ts->committed > LINE_COMMIT) { /* a long line: give its pages back */
        VirtualFree(ts->buf + LINE_COMMIT, ts->committed - LINE_COMMIT, MEM_DECOMMIT);
        ts->committed = LINE_COMMIT;
    }
    SetLastError(le);
}

/* An ANSI (CP_ACP) string, converted to UTF-16 in a scratch buffer first. */
static void w_astr(jsonw_t *w, tstate_t *ts, const char *s) {
    if (!s) { jw_raw(w, "null"); return; }
    int need = MultiByteToWideChar(CP_ACP, 0, s, -1, NULL, 0);
    WCHAR *buf = need <= WSMALL ? ts->wsmall : wbig(ts);
    int n = buf && need > 0 ? MultiByteToWideChar(CP_ACP, 0, s, -1, buf, need <= WSMALL ? WSMALL : WTMP) : 0;
    if (n <= 0) { jw_raw(w, "\"\""); return; }
    jw_wstr(w, buf, n - 1);
}

/* path of the module containing addr, or of module h; into a scratch buffer; NULL when unknown */
static const WCHAR *module_path(tstate_t *ts, HMODULE h, const void *addr) {
    /* a data-file / image-resource mapping is a tagged pointer (low bits set), not a module */
    if ((ULONG_PTR)h & 3) return NULL;
    if (!h && !GetModuleHandleExW(GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS | GET_MODULE_HANDLE_EX_FLAG_UNCHANGED_REFCOUNT,
                                  (LPCWSTR)addr, &h))
        return NULL;
    WCHAR *buf = ts->wsmall;
    DWORD n = GetModuleFileNameW(h, buf, WSMALL - 1);
    if (n >= WSMALL - 1) { /* cut: again with the big scratch */
        if (!(buf = wbig(ts))) return NULL;
        n = GetModuleFileNameW(h, buf, WTMP - 1);
    }
    if (!n || n >= WTMP - 1) return NULL;
    buf[n] = 0;
    return buf;
}

/* ---- loads ----------------------------------------------------------------------------------- */
/* Layered APIs (LoadLibraryA -> LoadLibraryExA -> LoadLibraryExW -> LdrLoadDll) are one load: a
   LoadLibrary* hook entered while the top frame is still in its API layers (FRAME_IN_API) passes through;
   once LdrLoadDll is entered the frame is FRAME_IN_LOADER, and any later LoadLibrary* or LdrLoadDll on this
   thread (from a DllMain, a forwarder...) is a nested load with its own frame. */
/* wname has wlen UTF-16 units (-1: NUL-terminated) */
static int load_enter(tstate_t *ts, const char *api, const WCHAR *wname, int wlen, const char *aname, int have_flags,
                      DWORD flags, void *ret, frame_state_t state) {
    if (g_state != SHIM_RUNNING || !ts || ts->guard || ts->depth >= MAX_DEPTH) return -1;
    if (ts->depth && ts->stack[ts->depth - 1].state == FRAME_IN_API) return -1;
    DWORD le = GetLastError();
    ts->guard++;
    jsonw_t w;
    frame_t *parent = ts->depth ? &ts->stack[ts->depth - 1] : NULL;
    LONG64 seq = begin_line(&w, ts, "load_begin");
    jw_key(&w, "api"); jw_str(&w, api);
    jw_key(&w, "name");
    if (aname) w_astr(&w, ts, aname); else jw_wstr(&w, wname, wlen);
    jw_key(&w, "flags"); if (have_flags) jw_u64(&w, flags); else jw_raw(&w, "null");
    jw_key(&w, "parent"); if (parent) jw_i64(&w, parent->seq); else jw_raw(&w, "null");
    jw_key(&w, "depth"); jw_u64(&w, ts->depth);
    jw_key(&w, "ctx"); if (ts->ctx) jw_i64(&w, ts->ctx); else jw_raw(&w, "null");
    jw_key(&w, "caller"); jw_wstr(&w, module_path(ts, NULL, ret), -1);
    emit(&w, ts);
    int i = ts->depth++;
    ts->stack[i].seq = seq; ts->stack[i].state = state; ts->stack[i].status = 0; ts->stack[i].have_status = 0;
    ts->guard--;
    SetLastError(le);
    return i;
}

/* err: the call's error (its last error for the LoadLibrary APIs); the caller's last error is kept */
static void load_leave(tstate_t *ts, int i, HMODULE r, DWORD err) {
    DWORD le = GetLastError();
    ts->guard++;
    frame_t f = ts->stack[i];
    ts->depth = i;
    jsonw_t w;
    begin_line(&w, ts, "load_end");
    jw_key(&w, "load"); jw_i64(&w, f.seq);
    jw_key(&w, "result"); if (r) jw_hexq(&w, (ULONGLONG)(ULONG_PTR)r); else jw_raw(&w, "null");
    jw_key(&w, "error"); jw_u64(&w, r ? 0 : err);
    jw_key(&w, "status"); if (f.have_status) jw_u64(&w, (ULONG)f.status); else jw_raw(&w, "null");
    jw_key(&w, "path"); jw_wstr(&w, r ? module_path(ts, r, NULL) : NULL, -1);
    emit(&w, ts);
    ts->guard--;
    SetLastError(le);
}

#ifdef _MSC_VER
#include <intrin.h>
#pragma intrinsic(_ReturnAddress)
#define RET _ReturnAddress()
#else
#define RET __builtin_return_address(0)
#endif

static HMODULE(WINAPI *o_LoadLibraryExW)(LPCWSTR, HANDLE, DWORD);
static HMODULE WINAPI h_LoadLibraryExW(LPCWSTR name, HANDLE file, DWORD flags) {
    tstate_t *ts = get_ts(1);
    int i = load_enter(ts, "LoadLibraryExW", name, -1, NULL, 1, flags, RET, FRAME_IN_API);
    HMODULE r = o_LoadLibraryExW(name, file, flags);
    if (i >= 0) load_leave(ts, i, r, GetLastError());
    return r;
}
static HMODULE(WINAPI *o_LoadLibraryExA)(LPCSTR, HANDLE, DWORD);
static HMODULE WINAPI h_LoadLibraryExA(LPCSTR name, HANDLE file, DWORD flags) {
    tstate_t *ts = get_ts(1);
    int i = load_enter(ts, "LoadLibraryExA", NULL, -1, name, 1, flags, RET, FRAME_IN_API);
    HMODULE r = o_LoadLibraryExA(name, file, flags);
    if (i >= 0) load_leave(ts, i, r, GetLastError());
    return r;
}
static HMODULE(WINAPI *o_LoadLibraryW)(LPCWSTR);
static HMODULE WINAPI h_LoadLibraryW(LPCWSTR name) {
    tstate_t *ts = get_ts(1);
    int i = load_enter(ts, "LoadLibraryW", name, -1, NULL, 1, 0, RET, FRAME_IN_API);
    HMODULE r = o_LoadLibraryW(name);
    if (i >= 0) load_leave(ts, i, r, GetLastError());
    return r;
}
static HMODULE(WINAPI *o_LoadLibraryA)(LPCSTR);
static HMODULE WINAPI h_LoadLibraryA(LPCSTR name) {
    tstate_t *ts = get_ts(1);
    int i = load_enter(ts, "LoadLibraryA", NULL, -1, name, 1, 0, RET, FRAME_IN_API);
    HMODULE r = o_LoadLibraryA(name);
    if (i >= 0) load_leave(ts, i, r, GetLastError());
    return r;
}
/* LdrLoadDll(path_or_search, flags/characteristics, name, &module): the first two arguments mean
   different things on Windows and Wine (LOADER.md 7), so only the name and the NTSTATUS are used. */
static LONG(WINAPI *o_LdrLoadDll)(void *, void *, const USTR *, HMODULE *);
static LONG WINAPI h_LdrLoadDll(void *a1, void *a2, const USTR *name, HMODULE *mod) {
    tstate_t *ts = get_ts(1);
    int i = -1;
    if (ts && ts->depth && !ts->guard && ts->stack[ts->depth - 1].state == FRAME_IN_API) {
        i = ts->depth - 1; /* the API layers of a recorded load reached the loader */
        ts->stack[i].state = FRAME_IN_LOADER;
        LONG st = o_LdrLoadDll(a1, a2, name, mod);
        ts->stack[i].status = st; ts->stack[i].have_status = 1;
        return st;
    }
    /* a direct LdrLoadDll: a load of its own (an NT API: the caller's last error is not changed) */
    if (ts && !ts->guard && name && name->Buffer)
        i = load_enter(ts, "LdrLoadDll", name->Buffer, name->Length / 2, NULL, 0, 0, RET, FRAME_IN_LOADER);
    LONG st = o_LdrLoadDll(a1, a2, name, mod);
    if (i >= 0) {
        ts->stack[i].status = st; ts->stack[i].have_status = 1;
        load_leave(ts, i, st >= 0 && mod ? *mod : NULL, RtlNtStatusToDosError(st));
    }
    return st;
}

/* ---- probes ---------------------------------------------------------------------------------- */
static void probe(const char *op, const OBJATTR *oa, LONG st, HANDLE h, HANDLE file) {
    tstate_t *ts = get_ts(0);
    if (!ts || ts->guard || !ts->depth) return;
    DWORD le = GetLastError();
    ts->guard++;
    jsonw_t w;
    begin_line(&w, ts, "probe");
    jw_key(&w, "load"); jw_i64(&w, ts->stack[ts->depth - 1].seq);
    jw_key(&w, "op"); jw_str(&w, op);
    if (oa) {
        jw_key(&w, "path");
        if (oa->ObjectName && oa->ObjectName->Buffer) jw_wstr(&w, oa->ObjectName->Buffer, oa->ObjectName->Length / 2);
        else jw_raw(&w, "null");
        if (oa->RootDirectory) { jw_key(&w, "root"); jw_hexq(&w, (ULONG_PTR)oa->RootDirectory); }
    }
    jw_key(&w, "status"); jw_u64(&w, (ULONG)st);
    if (h) { jw_key(&w, "handle"); jw_hexq(&w, (ULONG_PTR)h); }
    if (file) { jw_key(&w, "file"); jw_hexq(&w, (ULONG_PTR)file); }
    emit(&w, ts);
    ts->guard--;
    SetLastError(le);
}

static LONG(WINAPI *o_NtOpenFile)(PHANDLE, ACCESS_MASK, OBJATTR *, PVOID, ULONG, ULONG);
static LONG WINAPI h_NtOpenFile(PHANDLE h, ACCESS_MASK a, OBJATTR *oa, PVOID io, ULONG share, ULONG opts) {
    LONG st = o_NtOpenFile(h, a, oa, io, share, opts);
    probe("open", oa, st, st >= 0 && h ? *h : NULL, NULL);
    return st;
}
static LONG(WINAPI *o_NtCreateFile)(PHANDLE, ACCESS_MASK, OBJATTR *, PVOID, PLARGE_INTEGER, ULONG, ULONG, ULONG, ULONG, PVOID, ULONG);
static LONG WINAPI h_NtCreateFile(PHANDLE h, ACCESS_MASK a, OBJATTR *oa, PVOID io, PLARGE_INTEGER size, ULONG attr,
                                  ULONG share, ULONG disp, ULONG opts, PVOID ea, ULONG ealen) {
    LONG st = o_NtCreateFile(h, a, oa, io, size, attr, share, disp, opts, ea, ealen);
    probe("create", oa, st, st >= 0 && h ? *h : NULL, NULL);
    return st;
}
static LONG(WINAPI *o_NtQueryAttributesFile)(OBJATTR *, PVOID);
static LONG WINAPI h_NtQueryAttributesFile(OBJATTR *oa, PVOID info) {
    LONG st = o_NtQueryAttributesFile(oa, info);
    probe("query", oa, st, NULL, NULL);
    return st;
}
static LONG(WINAPI *o_NtCreateSection)(PHANDLE, ACCESS_MASK, OBJATTR *, PLARGE_INTEGER, ULONG, ULONG, HANDLE);
static LONG WINAPI h_NtCreateSection(PHANDLE h, ACCESS_MASK a, OBJATTR *oa, PLARGE_INTEGER size, ULONG prot, ULONG attrs,
                                     HANDLE file) {
    LONG st = o_NtCreateSection(h, a, oa, size, prot, attrs, file);
    if (file) probe("section", NULL, st, st >= 0 && h ? *h : NULL, file);
    return st;
}

/* ---- DLL-directory state and FreeLibrary --------------------------------------------------- */
/* cfg_begin/cfg_end bracket one recorded call; a call made inside it (A -> W) is not recorded. */
static int cfg_begin(tstate_t *ts) {
    if (g_state != SHIM_RUNNING || !ts || ts->guard || ts->cfg_depth) return 0;
    ts->cfg_depth++;
    return 1;
}
static void cfg_line(tstate_t *ts, jsonw_t *w, const char *ev, const char *api, void *ret) {
    begin_line(w, ts, ev);
    jw_key(w, "api"); jw_str(w, api);
    jw_key(w, "caller"); jw_wstr(w, module_path(ts, NULL, ret), -1);
}
static void cfg_result(jsonw_t *w, int ok, DWORD le) {
    jw_key(w, "ok"); jw_raw(w, ok ? "true" : "false");
    jw_key(w, "error"); jw_u64(w, ok ? 0 : le);
}
/* After the original call of a recorded configuration API: keep its last error, guard the
   shim's own work, and start the event line (the hook adds its fields, then cfg_close). */
static DWORD cfg_open(tstate_t *ts, jsonw_t *w, const char *ev, const char *api, void *ret) {
    DWORD le = GetLastError();
    ts->guard++;
    cfg_line(ts, w, ev, api, ret);
    return le;
}
/* The result fields, the single write, and the caller's last error restored. */
static void cfg_close(tstate_t *ts, jsonw_t *w, int ok, DWORD le) {
    cfg_result(w, ok, le);
    emit(w, ts);
    ts->guard--; ts->cfg_depth--;
    SetLastError(le);
}

static PVOID(WINAPI *o_AddDllDirectory)(PCWSTR);
static PVOID WINAPI h_AddDllDirectory(PCWSTR dir) {
    tstate_t *ts = get_ts(1);
    int rec = cfg_begin(ts);
    PVOID r = o_AddDllDirectory(dir);
    if (rec) {
        jsonw_t w;
        DWORD le = cfg_open(ts, &w, "adddir", "AddDllDirectory", RET);
        jw_key(&w, "path"); jw_wstr(&w, dir, -1);
        jw_key(&w, "cookie"); if (r) jw_hexq(&w, (ULONG_PTR)r); else jw_raw(&w, "null");
        cfg_close(ts, &w, r != NULL, le);
    }
    return r;
}
static BOOL(WINAPI *o_RemoveDllDirectory)(PVOID);
static BOOL WINAPI h_RemoveDllDirectory(PVOID cookie) {
    tstate_t *ts = get_ts(1);
    int rec = cfg_begin(ts);
    BOOL r = o_RemoveDllDirectory(cookie);
    if (rec) {
        jsonw_t w;
        DWORD le = cfg_open(ts, &w, "removedir", "RemoveDllDirectory", RET);
        jw_key(&w, "cookie"); jw_hexq(&w, (ULONG_PTR)cookie);
        cfg_close(ts, &w, r, le);
    }
    return r;
}
static BOOL(WINAPI *o_SetDllDirectoryW)(LPCWSTR);
static BOOL WINAPI h_SetDllDirectoryW(LPCWSTR dir) {
    tstate_t *ts = get_ts(1);
    int rec = cfg_begin(ts);
    BOOL r = o_SetDllDirectoryW(dir);
    if (rec) {
        jsonw_t w;
        DWORD le = cfg_open(ts, &w, "setdlldir", "SetDllDirectoryW", RET);
        jw_key(&w, "path"); jw_wstr(&w, dir, -1);
        cfg_close(ts, &w, r, le);
    }
    return r;
}
static BOOL(WINAPI *o_SetDllDirectoryA)(LPCSTR);
static BOOL WINAPI h_SetDllDirectoryA(LPCSTR dir) {
    tstate_t *ts = get_ts(1);
    int rec = cfg_begin(ts);
    BOOL r = o_SetDllDirectoryA(dir);
    if (rec) {
        jsonw_t w;
        DWORD le = cfg_open(ts, &w, "setdlldir", "SetDllDirectoryA", RET);
        jw_key(&w, "path"); w_astr(&w, ts, dir);
        cfg_close(ts, &w, r, le);
    }
    return r;
}
/* SetEnvironmentVariable: recorded only for PATH (the loader searches it; torch prepends its
   folders to it before retrying a failed load). Other variables are never recorded. */
static int is_path_var_w(LPCWSTR name) {
    return name && CompareStringOrdinal(name, -1, L"PATH", -1, TRUE) == CSTR_EQUAL;
}
static BOOL(WINAPI *o_SetEnvironmentVariableW)(LPCWSTR, LPCWSTR);
static BOOL WINAPI h_SetEnvironmentVariableW(LPCWSTR name, LPCWSTR value) {
    tstate_t *ts = is_path_var_w(name) ? get_ts(1) : NULL; /* no thread state for other variables */
    int rec = cfg_begin(ts);
    BOOL r = o_SetEnvironmentVariableW(name, value);
    if (rec) {
        jsonw_t w;
        DWORD le = cfg_open(ts, &w, "setenv", "SetEnvironmentVariableW", RET);
        jw_key(&w, "name"); jw_wstr(&w, name, -1);
        jw_key(&w, "value"); jw_wstr(&w, value, -1);
        cfg_close(ts, &w, r, le);
    }
    return r;
}
static BOOL(WINAPI *o_SetEnvironmentVariableA)(LPCSTR, LPCSTR);
static BOOL WINAPI h_SetEnvironmentVariableA(LPCSTR name, LPCSTR value) {
    tstate_t *ts = name && lstrcmpiA(name, "PATH") == 0 ? get_ts(1) : NULL;
    int rec = cfg_begin(ts);
    BOOL r = o_SetEnvironmentVariableA(name, value);
    if (rec) {
        jsonw_t w;
        DWORD le = cfg_open(ts, &w, "setenv", "SetEnvironmentVariableA", RET);
        jw_key(&w, "name"); w_astr(&w, ts, name);
        jw_key(&w, "value"); w_astr(&w, ts, value);
        cfg_close(ts, &w, r, le);
    }
    return r;
}
static BOOL(WINAPI *o_SetDefaultDllDirectories)(DWORD);
static BOOL WINAPI h_SetDefaultDllDirectories(DWORD flags) {
    tstate_t *ts = get_ts(1);
    int rec = cfg_begin(ts);
    BOOL r = o_SetDefaultDllDirectories(flags);
    if (rec) {
        jsonw_t w;
        DWORD le = cfg_open(ts, &w, "setdefault", "SetDefaultDllDirectories", RET);
        jw_key(&w, "flags"); jw_u64(&w, flags);
        cfg_close(ts, &w, r, le);
    }
    return r;
}
static BOOL(WINAPI *o_FreeLibrary)(HMODULE);
static BOOL WINAPI h_FreeLibrary(HMODULE h) {
    tstate_t *ts = get_ts(1);
    if (g_state != SHIM_RUNNING || !ts || ts->guard) return o_FreeLibrary(h);
    ts->guard++;
    jsonw_t w;
    cfg_line(ts, &w, "free", "FreeLibrary", RET);
    jw_key(&w, "handle"); jw_hexq(&w, (ULONG_PTR)h);
    jw_key(&w, "path"); jw_wstr(&w, h ? module_path(ts, h, NULL) : NULL, -1);
    ts->guard--;
    /* the path must be read before the module goes, and the line stays open across the call:
       a line written meanwhile (a DllMain's own FreeLibrary or LoadLibrary) goes after it in buf */
    size_t base = ts->line_base;
    note_commit(ts, &w);
    ts->line_base = (size_t)(w.p - ts->buf);
    BOOL r = o_FreeLibrary(h);
    DWORD le = GetLastError();
    ts->line_base = base;
    ts->guard++;
    cfg_result(&w, r, le);
    emit(&w, ts);
    ts->guard--;
    SetLastError(le);
    return r;
}

/* ---- children: CreateProcess ------------------------------------------------------------------ */
/* The child is created suspended (CREATE_SUSPENDED added), the shim is injected the way the launcher
   does it (native/common/inject.c; the trace path and this shim's path are passed to it, so a caller's
   own environment block does not matter), the spawn event is written, then the child is resumed unless
   the caller asked for CREATE_SUSPENDED itself. The guard is held throughout: the file calls of the
   process creation and of the injection are not probes, and a layered call (CreateProcessA ->
   CreateProcessInternalA -> CreateProcessInternalW) is recorded once. */
static const char *inject_reason(DWORD e, int machine) {
    switch (e) {
    case 0: return NULL;
    case INJECT_UNSUPPORTED_MACHINE:
        switch (machine) {
        case INJ_MACHINE_ARM64: return "an arm64 process: no dlltrace shim can enter it";
        case INJ_MACHINE_ARM64EC: return "an arm64ec process: no dlltrace shim can enter it";
        case INJ_MACHINE_UNKNOWN: return "a process of an unknown machine: no dlltrace shim can enter it";
        default: return "the child's image in memory is not the machine its exe file says";
        }
    case ERROR_BAD_EXE_FORMAT: return "the child's exe image could not be read as a PE with an entry point";
    default: return "the shim could not be injected";
    }
}

/* The post-mortem debugger a crashing process starts (AeDebug\Debugger: Wine's "winedbg --auto %ld %ld",
   run from UnhandledExceptionFilter) is not the program's child: it is neither suspended nor injected. */
static WCHAR g_debugger[64]; /* its program's base name without .exe; "" = none configured */

/* base name (no folder, no .exe) of a command line's program (whole = an application name, not split) */
static void prog_base(const WCHAR *s, int whole, WCHAR *out, int cap) {
    out[0] = 0;
    if (!s) return;
    while (!whole && (*s == ' ' || *s == '\t')) s++;
    WCHAR end = 0;
    if (!whole) { if (*s == '"') { s++; end = '"'; } else end = ' '; }
    const WCHAR *start = s, *q = s;
    for (; *q && *q != end && !(end == ' ' && *q == '\t'); q++)
        if (*q == '\\' || *q == '/') start = q + 1;
    int n = (int)(q - start);
    if (n >= 4 && CompareStringOrdinal(q - 4, 4, L".exe", 4, TRUE) == CSTR_EQUAL) n -= 4;
    if (n >= cap) n = cap - 1;
    for (int i = 0; i < n; i++) out[i] = start[i];
    out[n] = 0;
}

static void read_debugger(tstate_t *ts) {
    DWORD cb = (WTMP - 1) * sizeof(WCHAR);
    WCHAR *buf = wbig(ts);
    g_debugger[0] = 0;
    if (buf && RegGetValueW(HKEY_LOCAL_MACHINE, L"Software\\Microsoft\\Windows NT\\CurrentVersion\\AeDebug", L"Debugger",
                            RRF_RT_REG_SZ | RRF_RT_REG_EXPAND_SZ | RRF_NOEXPAND, NULL, buf, &cb) == ERROR_SUCCESS)
        prog_base(buf, 0, g_debugger, 64);
}

static int is_debugger(tstate_t *ts, const WCHAR *wapp, const WCHAR *wcmd, const char *aapp, const char *acmd) {
    if (!g_debugger[0]) return 0;
    WCHAR prog[64];
    if (aapp || acmd) {
        const char *a = aapp && *aapp ? aapp : acmd;
        int need = a ? MultiByteToWideChar(CP_ACP, 0, a, -1, NULL, 0) : 0;
        WCHAR *buf = need <= WSMALL ? ts->wsmall : wbig(ts);
        if (need <= 0 || !buf || MultiByteToWideChar(CP_ACP, 0, a, -1, buf, need <= WSMALL ? WSMALL : WTMP) <= 0) return 0;
        prog_base(buf, aapp && *aapp, prog, 64);
    } else prog_base(wapp ? wapp : wcmd, wapp != NULL, prog, 64);
    return CompareStringOrdinal(prog, -1, g_debugger, -1, TRUE) == CSTR_EQUAL;
}

static void spawn_event(tstate_t *ts, const char *api, const WCHAR *wapp, const WCHAR *wcmd, const char *aapp,
                        const char *acmd, DWORD flags, int follow, BOOL ok, DWORD le, PROCESS_INFORMATION *pi) {
    int machine = INJ_MACHINE_UNKNOWN;
    DWORD ie = ok && follow ? dlltrace_inject(pi->hProcess, g_shim_path, g_trace_path, "spawn", &machine) : 0;
    if (ok && !follow) machine = inject_process_machine(pi->hProcess);
    jsonw_t w;
    begin_line(&w, ts, "spawn");
    jw_key(&w, "api"); jw_str(&w, api);
    jw_key(&w, "app"); if (aapp) w_astr(&w, ts, aapp); else jw_wstr(&w, wapp, -1);
    jw_key(&w, "cmdline"); if (acmd) w_astr(&w, ts, acmd); else jw_wstr(&w, wcmd, -1);
    jw_key(&w, "flags"); jw_u64(&w, flags);
    jw_key(&w, "ok"); jw_raw(&w, ok ? "true" : "false");
    jw_key(&w, "error"); jw_u64(&w, ok ? 0 : le);
    jw_key(&w, "child_pid"); if (ok) jw_u64(&w, pi->dwProcessId); else jw_raw(&w, "null");
    jw_key(&w, "injected"); jw_raw(&w, ok && follow && !ie ? "true" : "false");
    jw_key(&w, "inject_error"); jw_u64(&w, ie);
    jw_key(&w, "child_machine"); if (ok) jw_str(&w, inject_machine_name(machine)); else jw_raw(&w, "null");
    const char *why = !ok ? "the process was not created"
                      : !follow ? "the post-mortem debugger (AeDebug) is not followed" : inject_reason(ie, machine);
    jw_key(&w, "reason"); if (why) { jw_str(&w, why); } else jw_raw(&w, "null");
    emit(&w, ts);
    if (ok && follow && !(flags & CREATE_SUSPENDED)) ResumeThread(pi->hThread);
}

typedef BOOL(WINAPI *cpiw_t)(HANDLE, LPCWSTR, LPWSTR, LPSECURITY_ATTRIBUTES, LPSECURITY_ATTRIBUTES, BOOL, DWORD, LPVOID,
                             LPCWSTR, LPSTARTUPINFOW, LPPROCESS_INFORMATION, PHANDLE);
static cpiw_t o_CreateProcessInternalW;
static BOOL WINAPI h_CreateProcessInternalW(HANDLE token, LPCWSTR app, LPWSTR cmd, LPSECURITY_ATTRIBUTES pa,
                                            LPSECURITY_ATTRIBUTES ta, BOOL inherit, DWORD flags, LPVOID env,
                                            LPCWSTR cwd, LPSTARTUPINFOW si, LPPROCESS_INFORMATION pi, PHANDLE newtok) {
    tstate_t *ts = get_ts(1);
    if (g_state != SHIM_RUNNING || !ts || ts->guard || !pi)
        return o_CreateProcessInternalW(token, app, cmd, pa, ta, inherit, flags, env, cwd, si, pi, newtok);
    ts->guard++;
    int follow = !is_debugger(ts, app, cmd, NULL, NULL);
    BOOL r = o_CreateProcessInternalW(token, app, cmd, pa, ta, inherit, follow ? flags | CREATE_SUSPENDED : flags, env, cwd,
                                      si, pi, newtok);
    DWORD le = GetLastError();
    spawn_event(ts, "CreateProcessInternalW", app, cmd, NULL, NULL, flags, follow, r, le, pi);
    ts->guard--;
    SetLastError(le);
    return r;
}
/* fallbacks, hooked only when CreateProcessInternalW is not (absent or an unknown prologue) */
static BOOL(WINAPI *o_CreateProcessW)(LPCWSTR, LPWSTR, LPSECURITY_ATTRIBUTES, LPSECURITY_ATTRIBUTES, BOOL, DWORD, LPVOID,
                                      LPCWSTR, LPSTARTUPINFOW, LPPROCESS_INFORMATION);
static BOOL WINAPI h_CreateProcessW(LPCWSTR app, LPWSTR cmd, LPSECURITY_ATTRIBUTES pa, LPSECURITY_ATTRIBUTES ta,
                                    BOOL inherit, DWORD flags, LPVOID env, LPCWSTR cwd, LPSTARTUPINFOW si,
                                    LPPROCESS_INFORMATION pi) {
    tstate_t *ts = get_ts(1);
    if (g_state != SHIM_RUNNING || !ts || ts->guard || !pi) return o_CreateProcessW(app, cmd, pa, ta, inherit, flags, env, cwd, si, pi);
    ts->guard++;
    int follow = !is_debugger(ts, app, cmd, NULL, NULL);
    BOOL r = o_CreateProcessW(app, cmd, pa, ta, inherit, follow ? flags | CREATE_SUSPENDED : flags, env, cwd, si, pi);
    DWORD le = GetLastError();
    spawn_event(ts, "CreateProcessW", app, cmd, NULL, NULL, flags, follow, r, le, pi);
    ts->guard--;
    SetLastError(le);
    return r;
}
static BOOL(WINAPI *o_CreateProcessA)(LPCSTR, LPSTR, LPSECURITY_ATTRIBUTES, LPSECURITY_ATTRIBUTES, BOOL, DWORD, LPVOID,
                                      LPCSTR, LPSTARTUPINFOA, LPPROCESS_INFORMATION);
static BOOL WINAPI h_CreateProcessA(LPCSTR app, LPSTR cmd, LPSECURITY_ATTRIBUTES pa, LPSECURITY_ATTRIBUTES ta,
                                    BOOL inherit, DWORD flags, LPVOID env, LPCSTR cwd, LPSTARTUPINFOA si,
                                    LPPROCESS_INFORMATION pi) {
    tstate_t *ts = get_ts(1);
    if (g_state != SHIM_RUNNING || !ts || ts->guard || !pi) return o_CreateProcessA(app, cmd, pa, ta, inherit, flags, env, cwd, si, pi);
    ts->guard++;
    int follow = !is_debugger(ts, NULL, NULL, app ? app : "", cmd ? cmd : "");
    BOOL r = o_CreateProcessA(app, cmd, pa, ta, inherit, follow ? flags | CREATE_SUSPENDED : flags, env, cwd, si, pi);
    DWORD le = GetLastError();
    spawn_event(ts, "CreateProcessA", NULL, NULL, app, cmd ? cmd : "", flags, follow, r, le, pi);
    ts->guard--;
    SetLastError(le);
    return r;
}

/* ---- start: process + env events, hooks ---------------------------------------------------- */
/* unless: a hook installed only when that other one's orig is still NULL (not hooked) */
typedef struct { const char *mod, *fallback, *name; void *hook; void **orig; void **unless; } hookdef_t;
static const hookdef_t HOOKS[] = {
    {"kernelbase.dll", "kernel32.dll", "LoadLibraryExW", (void *)h_LoadLibraryExW, (void **)&o_LoadLibraryExW},
    {"kernelbase.dll", "kernel32.dll", "LoadLibraryExA", (void *)h_LoadLibraryExA, (void **)&o_LoadLibraryExA},
    {"kernelbase.dll", "kernel32.dll", "LoadLibraryW", (void *)h_LoadLibraryW, (void **)&o_LoadLibraryW},
    {"kernelbase.dll", "kernel32.dll", "LoadLibraryA", (void *)h_LoadLibraryA, (void **)&o_LoadLibraryA},
    {"kernelbase.dll", "kernel32.dll", "AddDllDirectory", (void *)h_AddDllDirectory, (void **)&o_AddDllDirectory},
    {"kernelbase.dll", "kernel32.dll", "RemoveDllDirectory", (void *)h_RemoveDllDirectory, (void **)&o_RemoveDllDirectory},
    {"kernelbase.dll", "kernel32.dll", "SetDllDirectoryW", (void *)h_SetDllDirectoryW, (void **)&o_SetDllDirectoryW},
    {"kernelbase.dll", "kernel32.dll", "SetDllDirectoryA", (void *)h_SetDllDirectoryA, (void **)&o_SetDllDirectoryA},
    {"kernelbase.dll", "kernel32.dll", "SetDefaultDllDirectories", (void *)h_SetDefaultDllDirectories, (void **)&o_SetDefaultDllDirectories},
    {"kernelbase.dll", "kernel32.dll", "FreeLibrary", (void *)h_FreeLibrary, (void **)&o_FreeLibrary},
    {"kernelbase.dll", "kernel32.dll", "SetEnvironmentVariableW", (void *)h_SetEnvironmentVariableW, (void **)&o_SetEnvironmentVariableW},
    {"kernelbase.dll", "kernel32.dll", "SetEnvironmentVariableA", (void *)h_SetEnvironmentVariableA, (void **)&o_SetEnvironmentVariableA},
    {"ntdll.dll", NULL, "LdrLoadDll", (void *)h_LdrLoadDll, (void **)&o_LdrLoadDll},
    {"ntdll.dll", NULL, "NtOpenFile", (void *)h_NtOpenFile, (void **)&o_NtOpenFile},
    {"ntdll.dll", NULL, "NtCreateFile", (void *)h_NtCreateFile, (void **)&o_NtCreateFile},
    {"ntdll.dll", NULL, "NtQueryAttributesFile", (void *)h_NtQueryAttributesFile, (void **)&o_NtQueryAttributesFile},
    {"ntdll.dll", NULL, "NtCreateSection", (void *)h_NtCreateSection, (void **)&o_NtCreateSection},
    {"kernelbase.dll", "kernel32.dll", "CreateProcessInternalW", (void *)h_CreateProcessInternalW, (void **)&o_CreateProcessInternalW},
    {"kernelbase.dll", "kernel32.dll", "CreateProcessW", (void *)h_CreateProcessW, (void **)&o_CreateProcessW,
     (void **)&o_CreateProcessInternalW},
    {"kernelbase.dll", "kernel32.dll", "CreateProcessA", (void *)h_CreateProcessA, (void **)&o_CreateProcessA,
     (void **)&o_CreateProcessInternalW},
};
#define NHOOKS (sizeof(HOOKS) / sizeof(HOOKS[0]))

static void w_env_var(jsonw_t *w, tstate_t *ts, const WCHAR *name, int *first) {
    WCHAR *buf = ts->wsmall;
    DWORD n = GetEnvironmentVariableW(name, buf, WSMALL);
    if (n >= WSMALL && (buf = wbig(ts))) n = GetEnvironmentVariableW(name, buf, WTMP);
    if (!buf || !n || n >= WTMP) return;
    jw_raw(w, *first ? "" : ",");
    *first = 0;
    jw_wstr(w, name, -1); jw_raw(w, ":"); jw_wstr(w, buf, (int)n);
}

/* The PATH-like variables recorded (never the whole environment); CUDA_PATH_V* are found by scan. */
static const WCHAR *ENV_VARS[] = {L"PATH", L"PATHEXT", L"PYTHONPATH", L"PYTHONHOME", L"VIRTUAL_ENV", L"CONDA_PREFIX",
                                  L"CONDA_DLL_SEARCH_MODIFICATION_ENABLE", L"CUDA_PATH", NULL};

/* exe: NULL = this process's; modules: 0 = write null (the snapshot of another process, whose
   modules are not ours: see dlltrace_env_snapshot) */
static void write_env(tstate_t *ts, const WCHAR *exe, int modules) {
    jsonw_t w;
    WCHAR *tmp = wbig(ts); /* once per process: the big scratch throughout */
    begin_line(&w, ts, "env");
    jw_key(&w, "exe"); jw_wstr(&w, exe ? exe : module_path(ts, GetModuleHandleW(NULL), NULL), -1);
    DWORD n = tmp ? GetCurrentDirectoryW(WTMP, tmp) : 0;
    jw_key(&w, "cwd"); jw_wstr(&w, n && n < WTMP ? tmp : NULL, -1);
    jw_key(&w, "vars"); jw_raw(&w, "{");
    int first = 1;
    for (int i = 0; ENV_VARS[i]; i++) w_env_var(&w, ts, ENV_VARS[i], &first);
    WCHAR *block = GetEnvironmentStringsW();
    for (WCHAR *e = block; e && *e; e += lstrlenW(e) + 1) {
        if (CompareStringOrdinal(e, 11, L"CUDA_PATH_V", 11, TRUE) == CSTR_EQUAL) {
            WCHAR nm[128]; int k = 0;
            while (e[k] && e[k] != L'=' && k < 127) { nm[k] = e[k]; k++; }
            nm[k] = 0;
            w_env_var(&w, ts, nm, &first);
        }
    }
    if (block) FreeEnvironmentStringsW(block);
    jw_raw(&w, "}");
    /* DLL-search state: SetDllDirectory is readable; the AddDllDirectory list and the
       SetDefaultDllDirectories flags have no public getter (null = unknown). */
    n = tmp ? GetDllDirectoryW(WTMP, tmp) : 0;
    jw_key(&w, "dll_directory"); jw_wstr(&w, n && n < WTMP ? tmp : NULL, -1);
    jw_key(&w, "user_dirs"); jw_raw(&w, "null");
    jw_key(&w, "default_dirs"); jw_raw(&w, "null");
    HKEY k;
    jw_key(&w, "known_dlls");
    if (tmp && RegOpenKeyExW(HKEY_LOCAL_MACHINE, L"SYSTEM\\CurrentControlSet\\Control\\Session Manager\\KnownDLLs", 0, KEY_READ,
                      &k) == ERROR_SUCCESS) {
        jw_raw(&w, "[");
        WCHAR vname[256];
        int firstk = 1;
        for (DWORD i = 0;; i++) {
            DWORD vn = 256, type, cb = (WTMP - 1) * sizeof(WCHAR);
            if (RegEnumValueW(k, i, vname, &vn, NULL, &type, (BYTE *)tmp, &cb) != ERROR_SUCCESS) break;
            if (type != REG_SZ && type != REG_EXPAND_SZ) continue;
            tmp[cb / 2] = 0;
            if (!firstk) jw_raw(&w, ",");
            firstk = 0;
            jw_wstr(&w, tmp, -1);
        }
        jw_raw(&w, "]");
        RegCloseKey(k);
    } else jw_raw(&w, "null");
    DWORD safe = 0, cb = sizeof(safe);
    jw_key(&w, "safe_dll_search_mode");
    if (RegGetValueW(HKEY_LOCAL_MACHINE, L"SYSTEM\\CurrentControlSet\\Control\\Session Manager", L"SafeDllSearchMode",
                     RRF_RT_REG_DWORD, NULL, &safe, &cb) == ERROR_SUCCESS)
        jw_u64(&w, safe);
    else jw_raw(&w, "null");
    n = tmp ? GetSystemDirectoryW(tmp, WTMP) : 0;
    jw_key(&w, "system32"); jw_wstr(&w, n ? tmp : NULL, -1);
    n = tmp ? GetWindowsDirectoryW(tmp, WTMP) : 0;
    jw_key(&w, "windows"); jw_wstr(&w, n ? tmp : NULL, -1);
    HMODULE nt = GetModuleHandleW(L"ntdll.dll");
    typedef LONG(WINAPI * rgv_t)(OSVERSIONINFOW *);
    rgv_t rgv = (rgv_t)(void *)GetProcAddress(nt, "RtlGetVersion");
    OSVERSIONINFOW vi;
    vi.dwOSVersionInfoSize = sizeof(vi);
    jw_key(&w, "windows_version");
    if (rgv && rgv(&vi) == 0) {
        jw_raw(&w, "\""); jw_u64(&w, vi.dwMajorVersion); jw_raw(&w, "."); jw_u64(&w, vi.dwMinorVersion);
        jw_raw(&w, "."); jw_u64(&w, vi.dwBuildNumber); jw_raw(&w, "\"");
    } else jw_raw(&w, "null");
    jw_key(&w, "machine");
    /* the snapshot of another process (the launcher's child that could not start): its exe's machine, not
       ours (an x64 launcher's 32-bit child is x86); else, or when that file says none of these, ours */
    int fm = exe ? inject_file_machine(exe) : INJ_MACHINE_UNKNOWN;
    if (fm == INJ_MACHINE_X86 || fm == INJ_MACHINE_X64 || fm == INJ_MACHINE_ARM64) {
        jw_str(&w, inject_machine_name(fm));
    } else {
#ifdef _WIN64
        jw_raw(&w, "\"x64\"");
#else
        jw_raw(&w, "\"x86\"");
#endif
    }
    typedef const char *(CDECL * wgv_t)(void);
    wgv_t wgv = (wgv_t)(void *)GetProcAddress(nt, "wine_get_version");
    jw_key(&w, "wine");
    if (wgv) { jw_raw(&w, "\""); jw_raw(&w, wgv()); jw_raw(&w, "\""); } else jw_raw(&w, "null");
    /* The modules already loaded (in load order, the exe first, the shim left out): the
       loaded-module rule binds later loads to them by base name, so a replay needs them. */
    jw_key(&w, "modules");
    HMODULE mods[1024];
    DWORD needed = 0;
    if (modules && tmp && K32EnumProcessModules(GetCurrentProcess(), mods, sizeof(mods), &needed)) {
        DWORD count = needed / sizeof(HMODULE);
        if (count > 1024) count = 1024;
        jw_raw(&w, "[");
        int firstm = 1;
        for (DWORD i = 0; i < count; i++) {
            if (mods[i] == g_self) continue;
            DWORD len = GetModuleFileNameW(mods[i], tmp, WTMP);
            if (!len || len >= WTMP) continue;
            if (!firstm) jw_raw(&w, ",");
            firstm = 0;
            jw_wstr(&w, tmp, (int)len);
        }
        jw_raw(&w, "]");
    } else jw_raw(&w, "null");
    emit(&w, ts);
}

/* ---- the API-set schema ----------------------------------------------------------------------
   The loader resolves api-ms-* / ext-ms-* names through the schema the PEB points to (ApiSetMap),
   never through a file. Layout: API_SET_NAMESPACE version 6 (Windows 10/11, and Wine, which builds
   the same structure), every offset relative to the map's start. One entry per contract: its name
   (no ".dll"), then its values: value 0 is the default host, any later value names an importing
   module for which another host is used. Other versions (2 = Windows 7, 4 = 8.1) are recorded as
   version only ("sets": null); the replay then uses its built-in table. */
typedef struct { ULONG Version, Size, Flags, Count, EntryOffset, HashOffset, HashFactor; } apiset_ns6_t;
typedef struct { ULONG Flags, NameOffset, NameLength, HashedLength, ValueOffset, ValueCount; } apiset_entry6_t;
typedef struct { ULONG Flags, NameOffset, NameLength, ValueOffset, ValueLength; } apiset_value6_t;
#define APISET_SCHEMA_V6 6

static const BYTE *apiset_map(void) {
    const BYTE *peb;
    /* (inline asm, not NtCurrentTeb(): gcc 12 warns a false -Warray-bounds on mingw's __readgsqword) */
#if defined(_MSC_VER) && defined(_WIN64)
    peb = (const BYTE *)__readgsqword(0x60); /* TEB.ProcessEnvironmentBlock */
    return *(const BYTE *const *)(peb + 0x68);
#elif defined(_MSC_VER)
    peb = (const BYTE *)__readfsdword(0x30);
    return *(const BYTE *const *)(peb + 0x38);
#elif defined(_WIN64)
    __asm__("movq %%gs:0x60, %0" : "=r"(peb)); /* TEB.ProcessEnvironmentBlock */
    return *(const BYTE *const *)(peb + 0x68);  /* PEB.ApiSetMap */
#else
    __asm__("movl %%fs:0x30, %0" : "=r"(peb));
    return *(const BYTE *const *)(peb + 0x38);
#endif
}

/* [off, off + len) lies inside a map of `size` bytes */
static int apiset_in(ULONGLONG off, ULONGLONG len, ULONG size) { return off <= size && len <= size - off; }

static void w_apiset_str(jsonw_t *w, const BYTE *base, ULONG size, ULONG off, ULONG len) {
    if (!apiset_in(off, len, size)) { jw_raw(w, "\"\""); return; }
    jw_wstr(w, (const WCHAR *)(base + off), (int)(len / sizeof(WCHAR)));
}

/* {"ev":"apisets","version":6,"sets":{"<contract>":"<host>" | {"host":..,"exceptions":{<importer>:<host>}}}} */
static void write_apisets(tstate_t *ts) {
    jsonw_t w;
    const BYTE *base = apiset_map();
    begin_line(&w, ts, "apisets");
    jw_key(&w, "version");
    if (!base) { jw_raw(&w, "null"); jw_key(&w, "sets"); jw_raw(&w, "null"); emit(&w, ts); return; }
    const apiset_ns6_t *ns = (const apiset_ns6_t *)base;
    jw_u64(&w, ns->Version);
    jw_key(&w, "sets");
    if (ns->Version != APISET_SCHEMA_V6 ||
        !apiset_in(ns->EntryOffset, (ULONGLONG)ns->Count * sizeof(apiset_entry6_t), ns->Size)) {
        jw_raw(&w, "null");
        emit(&w, ts);
        return;
    }
    ULONG size = ns->Size;
    const apiset_entry6_t *entries = (const apiset_entry6_t *)(base + ns->EntryOffset);
    jw_raw(&w, "{");
    int first = 1;
    for (ULONG i = 0; i < ns->Count && !w.trunc; i++) {
        const apiset_entry6_t *e = &entries[i];
        if (!apiset_in(e->NameOffset, e->NameLength, size) ||
            !apiset_in(e->ValueOffset, (ULONGLONG)e->ValueCount * sizeof(apiset_value6_t), size))
            continue;
        const apiset_value6_t *v = (const apiset_value6_t *)(base + e->ValueOffset);
        if (!first) jw_raw(&w, ",");
        first = 0;
        w_apiset_str(&w, base, size, e->NameOffset, e->NameLength);
        jw_raw(&w, ":");
        if (e->ValueCount == 0) { jw_raw(&w, "\"\""); continue; }
        if (e->ValueCount == 1) { w_apiset_str(&w, base, size, v[0].ValueOffset, v[0].ValueLength); continue; }
        jw_raw(&w, "{\"host\":");
        w_apiset_str(&w, base, size, v[0].ValueOffset, v[0].ValueLength);
        jw_raw(&w, ",\"exceptions\":{");
        for (ULONG j = 1; j < e->ValueCount && !w.trunc; j++) {
            if (j > 1) jw_raw(&w, ",");
            w_apiset_str(&w, base, size, v[j].NameOffset, v[j].NameLength);
            jw_raw(&w, ":");
            w_apiset_str(&w, base, size, v[j].ValueOffset, v[j].ValueLength);
        }
        jw_raw(&w, "}}");
    }
    jw_raw(&w, "}");
    emit(&w, ts);
}

static void write_warning(tstate_t *ts, const char *what, const char *hook, const unsigned char *bytes) {
    static const char hx[] = "0123456789abcdef";
    jsonw_t w;
    begin_line(&w, ts, "warning");
    jw_key(&w, "message"); jw_str(&w, what);
    jw_key(&w, "hook"); jw_str(&w, hook);
    if (bytes) {
        jw_key(&w, "bytes"); jw_raw(&w, "\"");
        for (int i = 0; i < 16; i++) { char t[3] = {hx[bytes[i] >> 4], hx[bytes[i] & 15], 0}; jw_raw(&w, t); }
        jw_raw(&w, "\"");
    }
    emit(&w, ts);
}

/* what became of each hook at start: HOOK_OK or another hook_install result, or one of these */
enum { HOOK_SKIPPED = 100 /* named in DLLTRACE_SKIP_HOOKS */, HOOK_NOT_NEEDED = 101 /* a fallback, not needed */ };
static int skip_listed(const char *list, const char *name) { /* name is an item of the comma-separated list */
    for (const char *p = list; *p;) {
        const char *a = name;
        while (*p && *p != ',' && *a && *p == *a) { p++; a++; }
        if (!*a && (!*p || *p == ',')) return 1;
        while (*p && *p != ',') p++;
        if (*p == ',') p++;
    }
    return 0;
}

/* the stats line: how many event lines this process wrote whole, lost (a failed or short write) and
   cut. At process exit (DLL_PROCESS_DETACH from ExitProcess) the other threads have already been
   terminated, so the counts are final (no lock: nothing can have been left held). */
static void write_stats(void) {
    if (InterlockedCompareExchange(&g_state, SHIM_STOPPED, SHIM_RUNNING) != SHIM_RUNNING) return;
    static char line[512];
    jsonw_t w;
    jw_init(&w, line, sizeof(line), sizeof(line));
    jw_event(&w, "stats", InterlockedIncrement64(&g_seq), g_pid, GetCurrentThreadId(), jw_now_ns());
    jw_key(&w, "written"); jw_u64(&w, (ULONGLONG)g_written);
    jw_key(&w, "lost"); jw_u64(&w, (ULONGLONG)g_lost);
    jw_key(&w, "cut"); jw_u64(&w, (ULONGLONG)g_truncated);
    jw_key(&w, "dropped"); jw_u64(&w, (ULONGLONG)g_dropped);
    DWORD len = jw_close(&w);
    /* the last line, past any size cap (it says how the process ended); a failure here has nowhere to
       be counted */
    jw_file_write_always(&g_tf, line, len);
}

/* ---- the loader's DLL notifications (LdrRegisterDllNotification) ----------------------------------
   One dll_notify line per notification while a load is in flight on the thread. The loader notifies
   "loaded" right before it calls a module's DllMain and, when that DllMain fails, "unloaded" right
   after it (Wine dlls/ntdll/loader.c, process_attach): that is how a replay tells WHICH module's
   DllMain failed in a load that ended with 1114 (replay.init_failed_module). Windows documents the
   notifications, not their order relative to DllMain. */
typedef struct { ULONG Flags; const USTR *FullDllName; const USTR *BaseDllName; PVOID DllBase; ULONG SizeOfImage; }
    dll_notification_data_t;
typedef VOID(CALLBACK *dll_notification_fn)(ULONG, const dll_notification_data_t *, PVOID);
typedef LONG(NTAPI *ldr_register_dll_notification_t)(ULONG, dll_notification_fn, PVOID, PVOID *);
#define LDR_DLL_NOTIFICATION_REASON_LOADED 1
#define LDR_DLL_NOTIFICATION_REASON_UNLOADED 2
static PVOID g_notify_cookie;

static VOID CALLBACK on_dll_notification(ULONG reason, const dll_notification_data_t *d, PVOID ctx) {
    (void)ctx;
    if (g_state != SHIM_RUNNING || !d) return;
    if (reason != LDR_DLL_NOTIFICATION_REASON_LOADED && reason != LDR_DLL_NOTIFICATION_REASON_UNLOADED) return;
    tstate_t *ts = get_ts(0);
    if (!ts || ts->guard || !ts->depth) return; /* only inside a recorded load */
    DWORD le = GetLastError();
    ts->guard++;
    jsonw_t w;
    begin_line(&w, ts, "dll_notify");
    jw_key(&w, "load"); jw_i64(&w, ts->stack[ts->depth - 1].seq);
    jw_key(&w, "reason"); jw_str(&w, reason == LDR_DLL_NOTIFICATION_REASON_LOADED ? "loaded" : "unloaded");
    jw_key(&w, "path");
    if (d->FullDllName && d->FullDllName->Buffer) jw_wstr(&w, d->FullDllName->Buffer, d->FullDllName->Length / sizeof(WCHAR));
    else jw_raw(&w, "null");
    jw_key(&w, "base"); jw_hexq(&w, (ULONGLONG)(ULONG_PTR)d->DllBase);
    emit(&w, ts);
    ts->guard--;
    SetLastError(le);
}

/* a warning when the loader has no notifications (the trace then cannot say whose DllMain failed) */
static void watch_dll_notifications(tstate_t *ts) {
    ldr_register_dll_notification_t reg =
        (ldr_register_dll_notification_t)(void *)GetProcAddress(GetModuleHandleW(L"ntdll.dll"), "LdrRegisterDllNotification");
    if (!reg || reg(0, on_dll_notification, NULL, &g_notify_cookie) != 0)
        write_warning(ts, "no DLL notifications; a failed DllMain is pinned on the loaded module", "LdrRegisterDllNotification", NULL);
}

static int fail_start(tstate_t *ts, DWORD e) {
    jw_file_close(&g_tf);
    ts->guard--;
    g_state = SHIM_OFF;
    return (int)e;
}

DLLTRACE_API int dlltrace_start(const wchar_t *trace_path, const char *via) {
    if (InterlockedCompareExchange(&g_state, SHIM_STARTING, SHIM_OFF) != SHIM_OFF) return 0;
    tstate_t *ts = get_ts(1);
    if (!ts) { g_state = SHIM_OFF; return ERROR_OUTOFMEMORY; }
    ts->guard++;
    if (!trace_path) {
        WCHAR *buf = wbig(ts);
        DWORD n = buf ? GetEnvironmentVariableW(L"DLLTRACE_TRACE", buf, WTMP) : 0;
        if (!n || n >= WTMP) return fail_start(ts, ERROR_ENVVAR_NOT_FOUND);
        trace_path = buf;
    }
    DWORD oe = jw_file_open(&g_tf, trace_path);
    if (oe) return fail_start(ts, oe);
    /* the full path (a child may start in another folder) and this DLL's path, for the children */
    DWORD fn = GetFullPathNameW(trace_path, WTMP, g_trace_path, NULL);
    if (!fn || fn >= WTMP) lstrcpynW(g_trace_path, trace_path, WTMP);
    fn = GetModuleFileNameW(g_self, g_shim_path, WTMP - 1);
    g_shim_path[fn < WTMP ? fn : 0] = 0;
    read_debugger(ts);
    g_pid = GetCurrentProcessId();
    jsonw_t w;
    /* used without `dlltrace run` (which writes the header first): make the file readable alone */
    jw_init(&w, ts->buf, ts->committed, LINEBUF);
    jw_header(&w, "dlltrace-shim " DLLTRACE_SHIM_VERSION);
    DWORD hlen = jw_close(&w);
    if (jw_file_write_first(&g_tf, w.start, hlen) < 0) return fail_start(ts, GetLastError() ? GetLastError() : ERROR_WRITE_FAULT);
    /* hooks installed, the shim must stay: a FreeLibrary of it would leave jumps into freed code */
    HMODULE pin;
    GetModuleHandleExW(GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS | GET_MODULE_HANDLE_EX_FLAG_PIN, (LPCWSTR)(void *)dlltrace_start, &pin);
    /* process event, then hooks (their names go in it), then env */
    unsigned char before[NHOOKS][16];
    int ok[NHOOKS];
    void *target[NHOOKS];
    /* DLLTRACE_SKIP_HOOKS=Name,Name: not installed (a warning each); lets the tests reach the fallbacks */
    char skip_list[512];
    DWORD sl = GetEnvironmentVariableA("DLLTRACE_SKIP_HOOKS", skip_list, sizeof(skip_list));
    if (!sl || sl >= sizeof(skip_list)) skip_list[0] = 0;
    /* the targets first: GetModuleHandle/GetProcAddress take the loader's lock, which a frozen thread may hold */
    for (unsigned i = 0; i < NHOOKS; i++) {
        HMODULE m = GetModuleHandleA(HOOKS[i].mod);
        target[i] = m ? (void *)GetProcAddress(m, HOOKS[i].name) : NULL;
        if (!target[i] && HOOKS[i].fallback && (m = GetModuleHandleA(HOOKS[i].fallback)))
            target[i] = (void *)GetProcAddress(m, HOOKS[i].name);
    }
    /* all hooks in one window with the other threads suspended (hook_x64.c) */
    hook_begin();
    for (unsigned i = 0; i < NHOOKS; i++) {
        if (skip_listed(skip_list, HOOKS[i].name)) { ok[i] = HOOK_SKIPPED; continue; }
        int skip = 0;
        for (unsigned j = 0; j < i && HOOKS[i].unless; j++)
            if (HOOKS[j].orig == HOOKS[i].unless && ok[j] == HOOK_OK) skip = 1;
        if (skip) { ok[i] = HOOK_NOT_NEEDED; continue; }
        ok[i] = target[i] ? hook_install(target[i], HOOKS[i].hook, HOOKS[i].orig, before[i]) : HOOK_NO_TARGET;
    }
    hook_end();
    begin_line(&w, ts, "process");
    typedef struct { PVOID r1, peb; ULONG_PTR r2[2]; ULONG_PTR pid, ppid; } pbi_t;
    typedef LONG(WINAPI * nqip_t)(HANDLE, int, PVOID, ULONG, PULONG);
    nqip_t nqip = (nqip_t)(void *)GetProcAddress(GetModuleHandleW(L"ntdll.dll"), "NtQueryInformationProcess");
    pbi_t pbi;
    jw_key(&w, "ppid");
    if (nqip && nqip(GetCurrentProcess(), 0, &pbi, sizeof(pbi), NULL) == 0) jw_u64(&w, pbi.ppid); else jw_raw(&w, "null");
    jw_key(&w, "exe"); jw_wstr(&w, module_path(ts, GetModuleHandleW(NULL), NULL), -1);
    jw_key(&w, "cmdline"); jw_wstr(&w, GetCommandLineW(), -1);
    jw_key(&w, "shim"); jw_wstr(&w, g_shim_path[0] ? g_shim_path : NULL, -1);
    jw_key(&w, "shim_version"); jw_str(&w, DLLTRACE_SHIM_VERSION);
    jw_key(&w, "via"); jw_str(&w, via ? via : "api");
    jw_key(&w, "hooks"); jw_raw(&w, "[");
    int first = 1;
    for (unsigned i = 0; i < NHOOKS; i++)
        if (ok[i] == HOOK_OK) { jw_raw(&w, first ? "" : ","); jw_str(&w, HOOKS[i].name); first = 0; }
    jw_raw(&w, "]");
    emit(&w, ts);
    for (unsigned i = 0; i < NHOOKS; i++) {
        if (ok[i] == HOOK_NO_TARGET) write_warning(ts, "function not found; not hooked", HOOKS[i].name, NULL);
        else if (ok[i] == HOOK_UNKNOWN_PROLOGUE) write_warning(ts, "unknown prologue; not hooked", HOOKS[i].name, before[i]);
        else if (ok[i] == HOOK_SKIPPED) write_warning(ts, "skipped (DLLTRACE_SKIP_HOOKS); not hooked", HOOKS[i].name, NULL);
        else if (ok[i] != HOOK_OK && ok[i] != HOOK_NOT_NEEDED) write_warning(ts, "hook could not be installed", HOOKS[i].name, before[i]);
    }
    write_env(ts, NULL, 1);
    write_apisets(ts);
    watch_dll_notifications(ts);
    /* DLLTRACE_TEST_FAIL_WRITES=N (test only; inherited by children): the N event writes after these
       really fail (their ranges reserved, then written to a null handle), to test the lost count of
       the stats line and the reader's skipping of the unwritten ranges */
    char fw[16];
    DWORD fl = GetEnvironmentVariableA("DLLTRACE_TEST_FAIL_WRITES", fw, sizeof(fw));
    if (fl && fl < sizeof(fw)) {
        LONG v = 0;
        for (char *c = fw; *c >= '0' && *c <= '9' && v < 1000000; c++) v = v * 10 + (*c - '0');
        InterlockedExchange(&g_fail_writes, v);
    }
    ts->guard--;
    g_state = SHIM_RUNNING;
    return 0;
}

DLLTRACE_API int dlltrace_env_snapshot(const wchar_t *trace_path, unsigned long pid, const wchar_t *exe) {
    /* Only in a process that is not traced itself (the launcher): the events below borrow the
       writer's globals for one line. */
    if (!trace_path || !exe) return ERROR_INVALID_PARAMETER;
    if (InterlockedCompareExchange(&g_state, SHIM_SNAPSHOT, SHIM_OFF) != SHIM_OFF) return ERROR_ALREADY_INITIALIZED;
    tstate_t *ts = get_ts(1);
    if (!ts) { g_state = SHIM_OFF; return ERROR_OUTOFMEMORY; }
    DWORD oe = jw_file_open(&g_tf, trace_path);
    if (oe) { g_state = SHIM_OFF; return (int)oe; }
    g_pid = pid;
    LONG64 lost = g_lost;
    ts->guard++;
    write_env(ts, exe, 0);
    write_apisets(ts);
    ts->guard--;
    int e = g_lost != lost ? ERROR_WRITE_FAULT : 0;
    jw_file_close(&g_tf);
    g_pid = 0;
    g_state = SHIM_OFF;
    return e;
}

DLLTRACE_API long long dlltrace_write_event(const char *ev, const char *fields_json) {
    if (g_state != SHIM_RUNNING || !ev) return 0;
    tstate_t *ts = get_ts(1);
    if (!ts) return 0;
    DWORD le = GetLastError();
    ts->guard++;
    jsonw_t w;
    LONG64 seq = begin_line(&w, ts, ev);
    if (fields_json && *fields_json) {
        size_t n = lstrlenA(fields_json);
        if ((size_t)(w.limit - w.p) > n + JSONW_RESERVE) { jw_raw(&w, ","); jw_raw(&w, fields_json); } else w.trunc = 1;
    }
    emit(&w, ts);
    ts->guard--;
    SetLastError(le);
    return seq;
}

DLLTRACE_API void dlltrace_set_context(long long ctx_seq) {
    tstate_t *ts = get_ts(1);
    if (ts) ts->ctx = ctx_seq;
}

DLLTRACE_API const char *dlltrace_version(void) { return DLLTRACE_SHIM_VERSION; }

/* Stop recording (dlltrace.Trace's exit, in the Python API): the stats line is written now, as at process
   exit, and from then on every hook only passes its call through. The shim stays loaded (it is pinned)
   and cannot start again in this process. Returns 0, or ERROR_NOT_READY (21) when it was not running. */
DLLTRACE_API int dlltrace_stop(void) {
    if (g_state != SHIM_RUNNING) return ERROR_NOT_READY;
    write_stats();
    return 0;
}

BOOL WINAPI DllMain(HINSTANCE inst, DWORD reason, LPVOID reserved) {
    if (reason == DLL_PROCESS_ATTACH) {
        g_self = inst;
        g_tls = TlsAlloc();
    } else if (reason == DLL_THREAD_DETACH && g_tls != TLS_OUT_OF_INDEXES) {
        tstate_t *ts = (tstate_t *)TlsGetValue(g_tls);
        if (ts) { TlsSetValue(g_tls, NULL); free_ts(ts); }
    } else if (reason == DLL_PROCESS_DETACH) {
        /* reserved != NULL: the process is exiting (ExitProcess); the shim is pinned, so that is the
           only way here once started */
        write_stats();
    }
    return TRUE;
}
