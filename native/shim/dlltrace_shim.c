/* dlltrace shim: records every DLL load, every file the loader probed and every result.
 *
 * Inline trampoline hooks (hook_x64.c) on kernelbase's LoadLibrary* / FreeLibrary / DLL-directory
 * APIs, ntdll's LdrLoadDll and the four ntdll file calls the loader probes with. Each event is one
 * JSON line, formatted into a per-thread buffer (no CRT heap: the probe hooks run under the loader
 * lock) and appended to the trace with a single WriteFile on a FILE_APPEND_DATA handle.
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

/* ---- ntdll types, declared here to stay independent of the headers' winternl.h flavour ---------- */
ULONG WINAPI RtlNtStatusToDosError(LONG status); /* ntdll */
typedef struct { USHORT Length, MaximumLength; PWSTR Buffer; } USTR;
typedef struct { ULONG Length; HANDLE RootDirectory; USTR *ObjectName; ULONG Attributes; PVOID sd, sqos; } OBJATTR;

/* ---- per-thread state ---------------------------------------------------------------------- */
#define MAX_DEPTH 64
#define LINEBUF (256 * 1024)
#define WTMP 32767 /* UTF-16 units; x2 must fit the USHORT of a UNICODE_STRING */
enum { ST_API = 1, ST_LDR = 2 };
typedef struct { LONG64 seq; int state; LONG status; int have_status; } frame_t;
typedef struct {
    int guard;       /* inside the shim's own code: the file calls it makes are not probes */
    int depth;       /* loads in flight on this thread (nesting: a LoadLibrary inside DllMain) */
    int cfg_depth;   /* inside a recorded DLL-directory API (SetDllDirectoryA -> W is one call) */
    LONG64 ctx;      /* Python context (dlltrace_set_context) */
    size_t line_base; /* where the next line starts in buf: past a line still open (h_FreeLibrary) */
    frame_t stack[MAX_DEPTH];
    WCHAR wtmp[WTMP];
    char buf[LINEBUF];
} tstate_t;

static HMODULE g_self;
static DWORD g_tls = TLS_OUT_OF_INDEXES;
static HANDLE g_file = INVALID_HANDLE_VALUE;
static volatile LONG g_started;
static volatile LONG64 g_seq;
static volatile LONG g_wlock;
static LARGE_INTEGER g_freq;
static DWORD g_pid;
static WCHAR g_trace_path[WTMP], g_shim_path[WTMP]; /* passed to the children (spawn hook) */

static tstate_t *get_ts(int create) {
    DWORD le = GetLastError();
    tstate_t *ts = g_tls == TLS_OUT_OF_INDEXES ? NULL : (tstate_t *)TlsGetValue(g_tls);
    if (!ts && create && g_tls != TLS_OUT_OF_INDEXES) {
        ts = (tstate_t *)VirtualAlloc(NULL, sizeof(tstate_t), MEM_COMMIT | MEM_RESERVE, PAGE_READWRITE);
        if (ts) TlsSetValue(g_tls, ts);
    }
    SetLastError(le);
    return ts;
}

static ULONGLONG now_ns(void) {
    LARGE_INTEGER c;
    QueryPerformanceCounter(&c);
    ULONGLONG f = (ULONGLONG)g_freq.QuadPart, v = (ULONGLONG)c.QuadPart;
    return v / f * 1000000000ULL + (v % f) * 1000000000ULL / f;
}

/* ---- line writer: JSON into a fixed buffer ------------------------------------------------- */
typedef struct { char *start, *p, *end; int trunc; } W;
#define RESERVE 1024 /* kept free for the closing members of a line */

static void w_raw(W *w, const char *s) { while (*s && w->p < w->end) *w->p++ = *s++; }
static void w_u64(W *w, ULONGLONG v) {
    char t[24]; int n = 0;
    do { t[n++] = (char)('0' + v % 10); v /= 10; } while (v);
    while (n && w->p < w->end) *w->p++ = t[--n];
}
static void w_i64(W *w, LONGLONG v) { if (v < 0) { w_raw(w, "-"); w_u64(w, (ULONGLONG)(-v)); } else w_u64(w, (ULONGLONG)v); }
static void w_hexq(W *w, ULONGLONG v) { /* "0x1a2b" as a JSON string */
    static const char hx[] = "0123456789abcdef";
    char t[20]; int n = 0;
    do { t[n++] = hx[v & 15]; v >>= 4; } while (v);
    w_raw(w, "\"0x");
    while (n && w->p < w->end) *w->p++ = t[--n];
    w_raw(w, "\"");
}
static void w_esc_u(W *w, unsigned c) {
    static const char hx[] = "0123456789abcdef";
    char t[7] = {'\\', 'u', hx[(c >> 12) & 15], hx[(c >> 8) & 15], hx[(c >> 4) & 15], hx[c & 15], 0};
    w_raw(w, t);
}
/* UTF-16 (len chars, or up to NUL when len < 0) -> JSON string in UTF-8; lone surrogates as \uXXXX. */
static void w_wstr(W *w, const WCHAR *s, int len) {
    if (!s) { w_raw(w, "null"); return; }
    w_raw(w, "\"");
    for (int i = 0; len < 0 ? s[i] != 0 : i < len; i++) {
        if (w->end - w->p < RESERVE) { w->trunc = 1; break; }
        unsigned c = s[i];
        if (c >= 0xD800 && c <= 0xDBFF && (len < 0 || i + 1 < len) && s[i + 1] >= 0xDC00 && s[i + 1] <= 0xDFFF) {
            c = 0x10000 + ((c - 0xD800) << 10) + (s[i + 1] - 0xDC00);
            i++;
        } else if (c >= 0xD800 && c <= 0xDFFF) { w_esc_u(w, c); continue; }
        if (c == '"') w_raw(w, "\\\"");
        else if (c == '\\') w_raw(w, "\\\\");
        else if (c == '\n') w_raw(w, "\\n");
        else if (c == '\r') w_raw(w, "\\r");
        else if (c == '\t') w_raw(w, "\\t");
        else if (c < 0x20) w_esc_u(w, c);
        else if (c < 0x80) *w->p++ = (char)c;
        else if (c < 0x800) { *w->p++ = (char)(0xC0 | (c >> 6)); *w->p++ = (char)(0x80 | (c & 63)); }
        else if (c < 0x10000) { *w->p++ = (char)(0xE0 | (c >> 12)); *w->p++ = (char)(0x80 | ((c >> 6) & 63)); *w->p++ = (char)(0x80 | (c & 63)); }
        else { *w->p++ = (char)(0xF0 | (c >> 18)); *w->p++ = (char)(0x80 | ((c >> 12) & 63)); *w->p++ = (char)(0x80 | ((c >> 6) & 63)); *w->p++ = (char)(0x80 | (c & 63)); }
    }
    w_raw(w, "\"");
}
/* An ANSI (CP_ACP) string, converted to UTF-16 in the thread's scratch buffer first. */
static void w_astr(W *w, tstate_t *ts, const char *s) {
    if (!s) { w_raw(w, "null"); return; }
    int n = MultiByteToWideChar(CP_ACP, 0, s, -1, ts->wtmp, WTMP);
    if (n <= 0) { w_raw(w, "\"\""); return; }
    w_wstr(w, ts->wtmp, n - 1);
}
static void w_key(W *w, const char *k) { w_raw(w, ",\""); w_raw(w, k); w_raw(w, "\":"); }

static LONG64 begin_line(W *w, tstate_t *ts, const char *ev) {
    LONG64 seq = InterlockedIncrement64(&g_seq);
    w->start = w->p = ts->buf + ts->line_base; w->end = ts->buf + LINEBUF - 2; w->trunc = 0;
    w_raw(w, "{\"ev\":\""); w_raw(w, ev); w_raw(w, "\"");
    w_key(w, "seq"); w_i64(w, seq);
    w_key(w, "pid"); w_u64(w, g_pid);
    w_key(w, "tid"); w_u64(w, GetCurrentThreadId());
    w_key(w, "t"); w_u64(w, now_ns());
    return seq;
}

static void emit(W *w, tstate_t *ts) {
    if (w->trunc) w_raw(w, ",\"truncated\":true");
    *w->p++ = '}';
    *w->p++ = '\n';
    DWORD n;
    /* One WriteFile per line on an append handle; the spin lock (ours alone, never held across a
       call that can wait for the loader) keeps threads of this process from interleaving. */
    while (InterlockedExchange(&g_wlock, 1)) YieldProcessor();
    WriteFile(g_file, w->start, (DWORD)(w->p - w->start), &n, NULL);
    InterlockedExchange(&g_wlock, 0);
}

/* path of the module containing addr, or of module h; into ts->wtmp; NULL when unknown */
static const WCHAR *module_path(tstate_t *ts, HMODULE h, const void *addr) {
    /* a data-file / image-resource mapping is a tagged pointer (low bits set), not a module */
    if ((ULONG_PTR)h & 3) return NULL;
    if (!h && !GetModuleHandleExW(GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS | GET_MODULE_HANDLE_EX_FLAG_UNCHANGED_REFCOUNT,
                                  (LPCWSTR)addr, &h))
        return NULL;
    DWORD n = GetModuleFileNameW(h, ts->wtmp, WTMP - 1);
    if (!n) return NULL;
    ts->wtmp[n] = 0;
    return ts->wtmp;
}

/* ---- loads ----------------------------------------------------------------------------------- */
/* Layered APIs (LoadLibraryA -> LoadLibraryExA -> LoadLibraryExW -> LdrLoadDll) are one load: a
   LoadLibrary* hook entered while the top frame is still in its API layers (ST_API) passes through;
   once LdrLoadDll is entered the frame is ST_LDR, and any later LoadLibrary* or LdrLoadDll on this
   thread (from a DllMain, a forwarder...) is a nested load with its own frame. */
/* wname has wlen UTF-16 units (-1: NUL-terminated) */
static int load_enter(tstate_t *ts, const char *api, const WCHAR *wname, int wlen, const char *aname, int have_flags,
                      DWORD flags, void *ret, int state) {
    if (!g_started || !ts || ts->guard || ts->depth >= MAX_DEPTH) return -1;
    if (ts->depth && ts->stack[ts->depth - 1].state == ST_API) return -1;
    DWORD le = GetLastError();
    ts->guard++;
    W w;
    frame_t *parent = ts->depth ? &ts->stack[ts->depth - 1] : NULL;
    LONG64 seq = begin_line(&w, ts, "load_begin");
    w_key(&w, "api"); w_raw(&w, "\""); w_raw(&w, api); w_raw(&w, "\"");
    w_key(&w, "name");
    if (aname) w_astr(&w, ts, aname); else w_wstr(&w, wname, wlen);
    w_key(&w, "flags"); if (have_flags) w_u64(&w, flags); else w_raw(&w, "null");
    w_key(&w, "parent"); if (parent) w_i64(&w, parent->seq); else w_raw(&w, "null");
    w_key(&w, "depth"); w_u64(&w, ts->depth);
    w_key(&w, "ctx"); if (ts->ctx) w_i64(&w, ts->ctx); else w_raw(&w, "null");
    w_key(&w, "caller"); w_wstr(&w, module_path(ts, NULL, ret), -1);
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
    W w;
    begin_line(&w, ts, "load_end");
    w_key(&w, "load"); w_i64(&w, f.seq);
    w_key(&w, "result"); if (r) w_hexq(&w, (ULONGLONG)(ULONG_PTR)r); else w_raw(&w, "null");
    w_key(&w, "error"); w_u64(&w, r ? 0 : err);
    w_key(&w, "status"); if (f.have_status) w_u64(&w, (ULONG)f.status); else w_raw(&w, "null");
    w_key(&w, "path"); w_wstr(&w, r ? module_path(ts, r, NULL) : NULL, -1);
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
    int i = load_enter(ts, "LoadLibraryExW", name, -1, NULL, 1, flags, RET, ST_API);
    HMODULE r = o_LoadLibraryExW(name, file, flags);
    if (i >= 0) load_leave(ts, i, r, GetLastError());
    return r;
}
static HMODULE(WINAPI *o_LoadLibraryExA)(LPCSTR, HANDLE, DWORD);
static HMODULE WINAPI h_LoadLibraryExA(LPCSTR name, HANDLE file, DWORD flags) {
    tstate_t *ts = get_ts(1);
    int i = load_enter(ts, "LoadLibraryExA", NULL, -1, name, 1, flags, RET, ST_API);
    HMODULE r = o_LoadLibraryExA(name, file, flags);
    if (i >= 0) load_leave(ts, i, r, GetLastError());
    return r;
}
static HMODULE(WINAPI *o_LoadLibraryW)(LPCWSTR);
static HMODULE WINAPI h_LoadLibraryW(LPCWSTR name) {
    tstate_t *ts = get_ts(1);
    int i = load_enter(ts, "LoadLibraryW", name, -1, NULL, 1, 0, RET, ST_API);
    HMODULE r = o_LoadLibraryW(name);
    if (i >= 0) load_leave(ts, i, r, GetLastError());
    return r;
}
static HMODULE(WINAPI *o_LoadLibraryA)(LPCSTR);
static HMODULE WINAPI h_LoadLibraryA(LPCSTR name) {
    tstate_t *ts = get_ts(1);
    int i = load_enter(ts, "LoadLibraryA", NULL, -1, name, 1, 0, RET, ST_API);
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
    if (ts && ts->depth && !ts->guard && ts->stack[ts->depth - 1].state == ST_API) {
        i = ts->depth - 1; /* the API layers of a recorded load reached the loader */
        ts->stack[i].state = ST_LDR;
        LONG st = o_LdrLoadDll(a1, a2, name, mod);
        ts->stack[i].status = st; ts->stack[i].have_status = 1;
        return st;
    }
    /* a direct LdrLoadDll: a load of its own (an NT API: the caller's last error is not changed) */
    if (ts && !ts->guard && name && name->Buffer)
        i = load_enter(ts, "LdrLoadDll", name->Buffer, name->Length / 2, NULL, 0, 0, RET, ST_LDR);
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
    W w;
    begin_line(&w, ts, "probe");
    w_key(&w, "load"); w_i64(&w, ts->stack[ts->depth - 1].seq);
    w_key(&w, "op"); w_raw(&w, "\""); w_raw(&w, op); w_raw(&w, "\"");
    if (oa) {
        w_key(&w, "path");
        if (oa->ObjectName && oa->ObjectName->Buffer) w_wstr(&w, oa->ObjectName->Buffer, oa->ObjectName->Length / 2);
        else w_raw(&w, "null");
        if (oa->RootDirectory) { w_key(&w, "root"); w_hexq(&w, (ULONG_PTR)oa->RootDirectory); }
    }
    w_key(&w, "status"); w_u64(&w, (ULONG)st);
    if (h) { w_key(&w, "handle"); w_hexq(&w, (ULONG_PTR)h); }
    if (file) { w_key(&w, "file"); w_hexq(&w, (ULONG_PTR)file); }
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
    if (!g_started || !ts || ts->guard || ts->cfg_depth) return 0;
    ts->cfg_depth++;
    return 1;
}
static void cfg_line(tstate_t *ts, W *w, const char *ev, const char *api, void *ret) {
    begin_line(w, ts, ev);
    w_key(w, "api"); w_raw(w, "\""); w_raw(w, api); w_raw(w, "\"");
    w_key(w, "caller"); w_wstr(w, module_path(ts, NULL, ret), -1);
}
static void cfg_result(W *w, int ok, DWORD le) {
    w_key(w, "ok"); w_raw(w, ok ? "true" : "false");
    w_key(w, "error"); w_u64(w, ok ? 0 : le);
}
/* After the original call of a recorded configuration API: keep its last error, guard the
   shim's own work, and start the event line (the hook adds its fields, then cfg_close). */
static DWORD cfg_open(tstate_t *ts, W *w, const char *ev, const char *api, void *ret) {
    DWORD le = GetLastError();
    ts->guard++;
    cfg_line(ts, w, ev, api, ret);
    return le;
}
/* The result fields, the single write, and the caller's last error restored. */
static void cfg_close(tstate_t *ts, W *w, int ok, DWORD le) {
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
        W w;
        DWORD le = cfg_open(ts, &w, "adddir", "AddDllDirectory", RET);
        w_key(&w, "path"); w_wstr(&w, dir, -1);
        w_key(&w, "cookie"); if (r) w_hexq(&w, (ULONG_PTR)r); else w_raw(&w, "null");
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
        W w;
        DWORD le = cfg_open(ts, &w, "removedir", "RemoveDllDirectory", RET);
        w_key(&w, "cookie"); w_hexq(&w, (ULONG_PTR)cookie);
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
        W w;
        DWORD le = cfg_open(ts, &w, "setdlldir", "SetDllDirectoryW", RET);
        w_key(&w, "path"); w_wstr(&w, dir, -1);
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
        W w;
        DWORD le = cfg_open(ts, &w, "setdlldir", "SetDllDirectoryA", RET);
        w_key(&w, "path"); w_astr(&w, ts, dir);
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
        W w;
        DWORD le = cfg_open(ts, &w, "setenv", "SetEnvironmentVariableW", RET);
        w_key(&w, "name"); w_wstr(&w, name, -1);
        w_key(&w, "value"); w_wstr(&w, value, -1);
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
        W w;
        DWORD le = cfg_open(ts, &w, "setenv", "SetEnvironmentVariableA", RET);
        w_key(&w, "name"); w_astr(&w, ts, name);
        w_key(&w, "value"); w_astr(&w, ts, value);
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
        W w;
        DWORD le = cfg_open(ts, &w, "setdefault", "SetDefaultDllDirectories", RET);
        w_key(&w, "flags"); w_u64(&w, flags);
        cfg_close(ts, &w, r, le);
    }
    return r;
}
static BOOL(WINAPI *o_FreeLibrary)(HMODULE);
static BOOL WINAPI h_FreeLibrary(HMODULE h) {
    tstate_t *ts = get_ts(1);
    if (!g_started || !ts || ts->guard) return o_FreeLibrary(h);
    ts->guard++;
    W w;
    cfg_line(ts, &w, "free", "FreeLibrary", RET);
    w_key(&w, "handle"); w_hexq(&w, (ULONG_PTR)h);
    w_key(&w, "path"); w_wstr(&w, h ? module_path(ts, h, NULL) : NULL, -1);
    ts->guard--;
    /* the path must be read before the module goes, and the line stays open across the call:
       a line written meanwhile (a DllMain's own FreeLibrary or LoadLibrary) goes after it in buf */
    size_t base = ts->line_base;
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
static const char *inject_reason(DWORD e) {
    switch (e) {
    case 0: return NULL;
    case INJECT_NOT_X64: return "not an x64 process (32-bit child): the x64 shim cannot be loaded into it";
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
    g_debugger[0] = 0;
    if (RegGetValueW(HKEY_LOCAL_MACHINE, L"Software\\Microsoft\\Windows NT\\CurrentVersion\\AeDebug", L"Debugger",
                     RRF_RT_REG_SZ | RRF_RT_REG_EXPAND_SZ | RRF_NOEXPAND, NULL, ts->wtmp, &cb) == ERROR_SUCCESS)
        prog_base(ts->wtmp, 0, g_debugger, 64);
}

static int is_debugger(tstate_t *ts, const WCHAR *wapp, const WCHAR *wcmd, const char *aapp, const char *acmd) {
    if (!g_debugger[0]) return 0;
    WCHAR prog[64];
    if (aapp || acmd) {
        const char *a = aapp && *aapp ? aapp : acmd;
        if (!a || MultiByteToWideChar(CP_ACP, 0, a, -1, ts->wtmp, WTMP) <= 0) return 0;
        prog_base(ts->wtmp, aapp && *aapp, prog, 64);
    } else prog_base(wapp ? wapp : wcmd, wapp != NULL, prog, 64);
    return CompareStringOrdinal(prog, -1, g_debugger, -1, TRUE) == CSTR_EQUAL;
}

static void spawn_event(tstate_t *ts, const char *api, const WCHAR *wapp, const WCHAR *wcmd, const char *aapp,
                        const char *acmd, DWORD flags, int follow, BOOL ok, DWORD le, PROCESS_INFORMATION *pi) {
    DWORD ie = ok && follow ? dlltrace_inject(pi->hProcess, g_shim_path, g_trace_path, "spawn") : 0;
    W w;
    begin_line(&w, ts, "spawn");
    w_key(&w, "api"); w_raw(&w, "\""); w_raw(&w, api); w_raw(&w, "\"");
    w_key(&w, "app"); if (aapp) w_astr(&w, ts, aapp); else w_wstr(&w, wapp, -1);
    w_key(&w, "cmdline"); if (acmd) w_astr(&w, ts, acmd); else w_wstr(&w, wcmd, -1);
    w_key(&w, "flags"); w_u64(&w, flags);
    w_key(&w, "ok"); w_raw(&w, ok ? "true" : "false");
    w_key(&w, "error"); w_u64(&w, ok ? 0 : le);
    w_key(&w, "child_pid"); if (ok) w_u64(&w, pi->dwProcessId); else w_raw(&w, "null");
    w_key(&w, "injected"); w_raw(&w, ok && follow && !ie ? "true" : "false");
    w_key(&w, "inject_error"); w_u64(&w, ie);
    const char *why = !ok ? "the process was not created"
                      : !follow ? "the post-mortem debugger (AeDebug) is not followed" : inject_reason(ie);
    w_key(&w, "reason"); if (why) { w_raw(&w, "\""); w_raw(&w, why); w_raw(&w, "\""); } else w_raw(&w, "null");
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
    if (g_started != 1 || !ts || ts->guard || !pi)
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
    if (g_started != 1 || !ts || ts->guard || !pi) return o_CreateProcessW(app, cmd, pa, ta, inherit, flags, env, cwd, si, pi);
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
    if (g_started != 1 || !ts || ts->guard || !pi) return o_CreateProcessA(app, cmd, pa, ta, inherit, flags, env, cwd, si, pi);
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

static void w_env_var(W *w, tstate_t *ts, const WCHAR *name, int *first) {
    DWORD n = GetEnvironmentVariableW(name, ts->wtmp, WTMP);
    if (!n || n >= WTMP) return;
    w_raw(w, *first ? "" : ",");
    *first = 0;
    w_wstr(w, name, -1); w_raw(w, ":"); w_wstr(w, ts->wtmp, (int)n);
}

/* The PATH-like variables recorded (never the whole environment); CUDA_PATH_V* are found by scan. */
static const WCHAR *ENV_VARS[] = {L"PATH", L"PATHEXT", L"PYTHONPATH", L"PYTHONHOME", L"VIRTUAL_ENV", L"CONDA_PREFIX",
                                  L"CONDA_DLL_SEARCH_MODIFICATION_ENABLE", L"CUDA_PATH", NULL};

/* exe: NULL = this process's; modules: 0 = write null (the snapshot of another process, whose
   modules are not ours: see dlltrace_env_snapshot) */
static void write_env(tstate_t *ts, const WCHAR *exe, int modules) {
    W w;
    begin_line(&w, ts, "env");
    w_key(&w, "exe"); w_wstr(&w, exe ? exe : module_path(ts, GetModuleHandleW(NULL), NULL), -1);
    DWORD n = GetCurrentDirectoryW(WTMP, ts->wtmp);
    w_key(&w, "cwd"); w_wstr(&w, n && n < WTMP ? ts->wtmp : NULL, -1);
    w_key(&w, "vars"); w_raw(&w, "{");
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
    w_raw(&w, "}");
    /* DLL-search state: SetDllDirectory is readable; the AddDllDirectory list and the
       SetDefaultDllDirectories flags have no public getter (null = unknown). */
    n = GetDllDirectoryW(WTMP, ts->wtmp);
    w_key(&w, "dll_directory"); w_wstr(&w, n && n < WTMP ? ts->wtmp : NULL, -1);
    w_key(&w, "user_dirs"); w_raw(&w, "null");
    w_key(&w, "default_dirs"); w_raw(&w, "null");
    HKEY k;
    w_key(&w, "known_dlls");
    if (RegOpenKeyExW(HKEY_LOCAL_MACHINE, L"SYSTEM\\CurrentControlSet\\Control\\Session Manager\\KnownDLLs", 0, KEY_READ,
                      &k) == ERROR_SUCCESS) {
        w_raw(&w, "[");
        WCHAR vname[256];
        int firstk = 1;
        for (DWORD i = 0;; i++) {
            DWORD vn = 256, type, cb = (WTMP - 1) * sizeof(WCHAR);
            if (RegEnumValueW(k, i, vname, &vn, NULL, &type, (BYTE *)ts->wtmp, &cb) != ERROR_SUCCESS) break;
            if (type != REG_SZ && type != REG_EXPAND_SZ) continue;
            ts->wtmp[cb / 2] = 0;
            if (!firstk) w_raw(&w, ",");
            firstk = 0;
            w_wstr(&w, ts->wtmp, -1);
        }
        w_raw(&w, "]");
        RegCloseKey(k);
    } else w_raw(&w, "null");
    DWORD safe = 0, cb = sizeof(safe);
    w_key(&w, "safe_dll_search_mode");
    if (RegGetValueW(HKEY_LOCAL_MACHINE, L"SYSTEM\\CurrentControlSet\\Control\\Session Manager", L"SafeDllSearchMode",
                     RRF_RT_REG_DWORD, NULL, &safe, &cb) == ERROR_SUCCESS)
        w_u64(&w, safe);
    else w_raw(&w, "null");
    n = GetSystemDirectoryW(ts->wtmp, WTMP);
    w_key(&w, "system32"); w_wstr(&w, n ? ts->wtmp : NULL, -1);
    n = GetWindowsDirectoryW(ts->wtmp, WTMP);
    w_key(&w, "windows"); w_wstr(&w, n ? ts->wtmp : NULL, -1);
    HMODULE nt = GetModuleHandleW(L"ntdll.dll");
    typedef LONG(WINAPI * rgv_t)(OSVERSIONINFOW *);
    rgv_t rgv = (rgv_t)(void *)GetProcAddress(nt, "RtlGetVersion");
    OSVERSIONINFOW vi;
    vi.dwOSVersionInfoSize = sizeof(vi);
    w_key(&w, "windows_version");
    if (rgv && rgv(&vi) == 0) {
        w_raw(&w, "\""); w_u64(&w, vi.dwMajorVersion); w_raw(&w, "."); w_u64(&w, vi.dwMinorVersion);
        w_raw(&w, "."); w_u64(&w, vi.dwBuildNumber); w_raw(&w, "\"");
    } else w_raw(&w, "null");
    w_key(&w, "machine");
#ifdef _WIN64
    w_raw(&w, "\"x64\"");
#else
    w_raw(&w, "\"x86\"");
#endif
    typedef const char *(CDECL * wgv_t)(void);
    wgv_t wgv = (wgv_t)(void *)GetProcAddress(nt, "wine_get_version");
    w_key(&w, "wine");
    if (wgv) { w_raw(&w, "\""); w_raw(&w, wgv()); w_raw(&w, "\""); } else w_raw(&w, "null");
    /* The modules already loaded (in load order, the exe first, the shim left out): the
       loaded-module rule binds later loads to them by base name, so a replay needs them. */
    w_key(&w, "modules");
    HMODULE mods[1024];
    DWORD needed = 0;
    if (modules && K32EnumProcessModules(GetCurrentProcess(), mods, sizeof(mods), &needed)) {
        DWORD count = needed / sizeof(HMODULE);
        if (count > 1024) count = 1024;
        w_raw(&w, "[");
        int firstm = 1;
        for (DWORD i = 0; i < count; i++) {
            if (mods[i] == g_self) continue;
            DWORD len = GetModuleFileNameW(mods[i], ts->wtmp, WTMP);
            if (!len || len >= WTMP) continue;
            if (!firstm) w_raw(&w, ",");
            firstm = 0;
            w_wstr(&w, ts->wtmp, (int)len);
        }
        w_raw(&w, "]");
    } else w_raw(&w, "null");
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
#ifdef _WIN64
    __asm__("movq %%gs:0x60, %0" : "=r"(peb)); /* TEB.ProcessEnvironmentBlock */
    return *(const BYTE *const *)(peb + 0x68);  /* PEB.ApiSetMap */
#else
    __asm__("movl %%fs:0x30, %0" : "=r"(peb));
    return *(const BYTE *const *)(peb + 0x38);
#endif
}

/* [off, off + len) lies inside a map of `size` bytes */
static int apiset_in(ULONGLONG off, ULONGLONG len, ULONG size) { return off <= size && len <= size - off; }

static void w_apiset_str(W *w, const BYTE *base, ULONG size, ULONG off, ULONG len) {
    if (!apiset_in(off, len, size)) { w_raw(w, "\"\""); return; }
    w_wstr(w, (const WCHAR *)(base + off), (int)(len / sizeof(WCHAR)));
}

/* {"ev":"apisets","version":6,"sets":{"<contract>":"<host>" | {"host":..,"exceptions":{<importer>:<host>}}}} */
static void write_apisets(tstate_t *ts) {
    W w;
    const BYTE *base = apiset_map();
    begin_line(&w, ts, "apisets");
    w_key(&w, "version");
    if (!base) { w_raw(&w, "null"); w_key(&w, "sets"); w_raw(&w, "null"); emit(&w, ts); return; }
    const apiset_ns6_t *ns = (const apiset_ns6_t *)base;
    w_u64(&w, ns->Version);
    w_key(&w, "sets");
    if (ns->Version != APISET_SCHEMA_V6 ||
        !apiset_in(ns->EntryOffset, (ULONGLONG)ns->Count * sizeof(apiset_entry6_t), ns->Size)) {
        w_raw(&w, "null");
        emit(&w, ts);
        return;
    }
    ULONG size = ns->Size;
    const apiset_entry6_t *entries = (const apiset_entry6_t *)(base + ns->EntryOffset);
    w_raw(&w, "{");
    int first = 1;
    for (ULONG i = 0; i < ns->Count && !w.trunc; i++) {
        const apiset_entry6_t *e = &entries[i];
        if (!apiset_in(e->NameOffset, e->NameLength, size) ||
            !apiset_in(e->ValueOffset, (ULONGLONG)e->ValueCount * sizeof(apiset_value6_t), size))
            continue;
        const apiset_value6_t *v = (const apiset_value6_t *)(base + e->ValueOffset);
        if (!first) w_raw(&w, ",");
        first = 0;
        w_apiset_str(&w, base, size, e->NameOffset, e->NameLength);
        w_raw(&w, ":");
        if (e->ValueCount == 0) { w_raw(&w, "\"\""); continue; }
        if (e->ValueCount == 1) { w_apiset_str(&w, base, size, v[0].ValueOffset, v[0].ValueLength); continue; }
        w_raw(&w, "{\"host\":");
        w_apiset_str(&w, base, size, v[0].ValueOffset, v[0].ValueLength);
        w_raw(&w, ",\"exceptions\":{");
        for (ULONG j = 1; j < e->ValueCount; j++) {
            if (j > 1) w_raw(&w, ",");
            w_apiset_str(&w, base, size, v[j].NameOffset, v[j].NameLength);
            w_raw(&w, ":");
            w_apiset_str(&w, base, size, v[j].ValueOffset, v[j].ValueLength);
        }
        w_raw(&w, "}}");
    }
    w_raw(&w, "}");
    emit(&w, ts);
}

static void write_warning(tstate_t *ts, const char *what, const char *hook, const unsigned char *bytes) {
    static const char hx[] = "0123456789abcdef";
    W w;
    begin_line(&w, ts, "warning");
    w_key(&w, "message"); w_raw(&w, "\""); w_raw(&w, what); w_raw(&w, "\"");
    w_key(&w, "hook"); w_raw(&w, "\""); w_raw(&w, hook); w_raw(&w, "\"");
    if (bytes) {
        w_key(&w, "bytes"); w_raw(&w, "\"");
        for (int i = 0; i < 16; i++) { char t[3] = {hx[bytes[i] >> 4], hx[bytes[i] & 15], 0}; w_raw(&w, t); }
        w_raw(&w, "\"");
    }
    emit(&w, ts);
}

#define HOOK_SKIPPED 100
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

DLLTRACE_API int dlltrace_start(const wchar_t *trace_path, const char *via) {
    if (InterlockedCompareExchange(&g_started, 2, 0) != 0) return 0;
    tstate_t *ts = get_ts(1);
    if (!ts) { g_started = 0; return ERROR_OUTOFMEMORY; }
    ts->guard++;
    if (!trace_path) {
        DWORD n = GetEnvironmentVariableW(L"DLLTRACE_TRACE", ts->wtmp, WTMP);
        if (!n || n >= WTMP) { ts->guard--; g_started = 0; return ERROR_ENVVAR_NOT_FOUND; }
        trace_path = ts->wtmp;
    }
    g_file = CreateFileW(trace_path, FILE_APPEND_DATA | SYNCHRONIZE, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE,
                         NULL, OPEN_ALWAYS, FILE_ATTRIBUTE_NORMAL, NULL);
    if (g_file == INVALID_HANDLE_VALUE) { DWORD e = GetLastError(); ts->guard--; g_started = 0; return (int)e; }
    /* the full path (a child may start in another folder) and this DLL's path, for the children */
    DWORD fn = GetFullPathNameW(trace_path, WTMP, g_trace_path, NULL);
    if (!fn || fn >= WTMP) lstrcpynW(g_trace_path, trace_path, WTMP);
    fn = GetModuleFileNameW(g_self, g_shim_path, WTMP - 1);
    g_shim_path[fn < WTMP ? fn : 0] = 0;
    read_debugger(ts);
    QueryPerformanceFrequency(&g_freq);
    g_pid = GetCurrentProcessId();
    W w;
    LARGE_INTEGER size;
    if (GetFileSizeEx(g_file, &size) && size.QuadPart == 0) {
        /* used without `dlltrace run` (which writes the header first): make the file readable alone */
        w.start = w.p = ts->buf; w.end = ts->buf + LINEBUF - 2; w.trunc = 0;
        int wine = GetProcAddress(GetModuleHandleW(L"ntdll.dll"), "wine_get_version") != NULL;
        w_raw(&w, "{\"format\":\"dlltrace-trace\",\"version\":1,\"tool\":\"dlltrace-shim " DLLTRACE_SHIM_VERSION
                  "\",\"created\":null,\"platform\":\"");
        w_raw(&w, wine ? "wine\"" : "windows\"");
        emit(&w, ts);
    }
    /* process event, then hooks (their names go in it), then env */
    unsigned char before[NHOOKS][16];
    int ok[NHOOKS];
    /* DLLTRACE_SKIP_HOOKS=Name,Name: not installed (a warning each); lets the tests reach the fallbacks */
    char skip_list[512];
    DWORD sl = GetEnvironmentVariableA("DLLTRACE_SKIP_HOOKS", skip_list, sizeof(skip_list));
    if (!sl || sl >= sizeof(skip_list)) skip_list[0] = 0;
    for (unsigned i = 0; i < NHOOKS; i++) {
        if (skip_listed(skip_list, HOOKS[i].name)) { ok[i] = HOOK_SKIPPED; continue; }
        int skip = 0;
        for (unsigned j = 0; j < i && HOOKS[i].unless; j++)
            if (HOOKS[j].orig == HOOKS[i].unless && ok[j] == HOOK_OK) skip = 1;
        if (skip) { ok[i] = -1; continue; } /* a fallback that is not needed */
        HMODULE m = GetModuleHandleA(HOOKS[i].mod);
        void *target = m ? (void *)GetProcAddress(m, HOOKS[i].name) : NULL;
        if (!target && HOOKS[i].fallback && (m = GetModuleHandleA(HOOKS[i].fallback)))
            target = (void *)GetProcAddress(m, HOOKS[i].name);
        ok[i] = target ? hook_install(target, HOOKS[i].hook, HOOKS[i].orig, before[i]) : HOOK_NO_TARGET;
    }
    begin_line(&w, ts, "process");
    typedef struct { PVOID r1, peb; ULONG_PTR r2[2]; ULONG_PTR pid, ppid; } pbi_t;
    typedef LONG(WINAPI * nqip_t)(HANDLE, int, PVOID, ULONG, PULONG);
    nqip_t nqip = (nqip_t)(void *)GetProcAddress(GetModuleHandleW(L"ntdll.dll"), "NtQueryInformationProcess");
    pbi_t pbi;
    w_key(&w, "ppid");
    if (nqip && nqip(GetCurrentProcess(), 0, &pbi, sizeof(pbi), NULL) == 0) w_u64(&w, pbi.ppid); else w_raw(&w, "null");
    w_key(&w, "exe"); w_wstr(&w, module_path(ts, GetModuleHandleW(NULL), NULL), -1);
    w_key(&w, "cmdline"); w_wstr(&w, GetCommandLineW(), -1);
    w_key(&w, "shim"); w_wstr(&w, g_shim_path[0] ? g_shim_path : NULL, -1);
    w_key(&w, "shim_version"); w_raw(&w, "\"" DLLTRACE_SHIM_VERSION "\"");
    w_key(&w, "via"); w_raw(&w, "\""); w_raw(&w, via ? via : "api"); w_raw(&w, "\"");
    w_key(&w, "hooks"); w_raw(&w, "[");
    int first = 1;
    for (unsigned i = 0; i < NHOOKS; i++)
        if (ok[i] == HOOK_OK) { w_raw(&w, first ? "\"" : ",\""); w_raw(&w, HOOKS[i].name); w_raw(&w, "\""); first = 0; }
    w_raw(&w, "]");
    emit(&w, ts);
    for (unsigned i = 0; i < NHOOKS; i++) {
        if (ok[i] == HOOK_NO_TARGET) write_warning(ts, "function not found; not hooked", HOOKS[i].name, NULL);
        else if (ok[i] == HOOK_UNKNOWN_PROLOGUE) write_warning(ts, "unknown prologue; not hooked", HOOKS[i].name, before[i]);
        else if (ok[i] == HOOK_SKIPPED) write_warning(ts, "skipped (DLLTRACE_SKIP_HOOKS); not hooked", HOOKS[i].name, NULL);
        else if (ok[i] != HOOK_OK && ok[i] != -1) write_warning(ts, "hook could not be installed", HOOKS[i].name, before[i]);
    }
    write_env(ts, NULL, 1);
    write_apisets(ts);
    ts->guard--;
    g_started = 1;
    return 0;
}

DLLTRACE_API int dlltrace_env_snapshot(const wchar_t *trace_path, unsigned long pid, const wchar_t *exe) {
    /* Only in a process that is not traced itself (the launcher): the events below borrow the
       writer's globals for one line. */
    if (!trace_path || !exe) return ERROR_INVALID_PARAMETER;
    if (InterlockedCompareExchange(&g_started, 3, 0) != 0) return ERROR_ALREADY_INITIALIZED;
    tstate_t *ts = get_ts(1);
    if (!ts) { g_started = 0; return ERROR_OUTOFMEMORY; }
    HANDLE f = CreateFileW(trace_path, FILE_APPEND_DATA | SYNCHRONIZE, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE,
                           NULL, OPEN_ALWAYS, FILE_ATTRIBUTE_NORMAL, NULL);
    if (f == INVALID_HANDLE_VALUE) { DWORD e = GetLastError(); g_started = 0; return (int)e; }
    QueryPerformanceFrequency(&g_freq);
    g_file = f;
    g_pid = pid;
    ts->guard++;
    write_env(ts, exe, 0);
    write_apisets(ts);
    ts->guard--;
    g_file = INVALID_HANDLE_VALUE;
    g_pid = 0;
    CloseHandle(f);
    g_started = 0;
    return 0;
}

DLLTRACE_API long long dlltrace_write_event(const char *ev, const char *fields_json) {
    if (g_started != 1 || !ev) return 0;
    tstate_t *ts = get_ts(1);
    if (!ts) return 0;
    DWORD le = GetLastError();
    ts->guard++;
    W w;
    LONG64 seq = begin_line(&w, ts, ev);
    if (fields_json && *fields_json) {
        size_t n = lstrlenA(fields_json);
        if ((size_t)(w.end - w.p) > n + RESERVE) { w_raw(&w, ","); w_raw(&w, fields_json); } else w.trunc = 1;
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

BOOL WINAPI DllMain(HINSTANCE inst, DWORD reason, LPVOID reserved) {
    (void)reserved;
    if (reason == DLL_PROCESS_ATTACH) {
        g_self = inst;
        g_tls = TlsAlloc();
    } else if (reason == DLL_THREAD_DETACH && g_tls != TLS_OUT_OF_INDEXES) {
        tstate_t *ts = (tstate_t *)TlsGetValue(g_tls);
        if (ts) { TlsSetValue(g_tls, NULL); VirtualFree(ts, 0, MEM_RELEASE); }
    }
    return TRUE;
}
