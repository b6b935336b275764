/* The JSON line writer shared by the shim and the launcher; see jsonw.h. */
#define WIN32_LEAN_AND_MEAN
#include <windows.h>
#include "jsonw.h"

/* Invariant: p + 2 <= end, so jw_close's "}\n" always has committed room. */
void jw_init(jsonw_t *w, char *buf, size_t committed, size_t cap) {
    w->start = w->p = buf;
    w->limit = buf + cap - 2; /* the members end here: "}\n" always fits */
    w->end = buf + (committed < cap ? committed : cap);
    w->trunc = 0;
}

/* n more bytes writable at p (committing the next part of a reserved buffer if needed) */
static int room(jsonw_t *w, size_t n) {
    if ((size_t)(w->limit - w->p) < n) return 0;
    if ((size_t)(w->end - w->p) >= n + 2) return 1;
    ULONG_PTR from = (ULONG_PTR)w->end, to = (ULONG_PTR)(w->p + n + 2);
    to = (to + JSONW_COMMIT - 1) & ~(ULONG_PTR)(JSONW_COMMIT - 1);
    if (to > (ULONG_PTR)w->limit + 2) to = (ULONG_PTR)w->limit + 2;
    if (!VirtualAlloc((void *)from, to - from, MEM_COMMIT, PAGE_READWRITE)) return 0;
    w->end = (char *)to;
    return 1;
}

static void put(jsonw_t *w, char c) {
    if (room(w, 1)) *w->p++ = c;
}

void jw_raw(jsonw_t *w, const char *s) {
    while (*s) put(w, *s++);
}
void jw_str(jsonw_t *w, const char *s) { put(w, '"'); jw_raw(w, s); put(w, '"'); }
void jw_u64(jsonw_t *w, ULONGLONG v) {
    char t[24];
    int n = 0;
    do { t[n++] = (char)('0' + v % 10); v /= 10; } while (v);
    while (n) put(w, t[--n]);
}
void jw_i64(jsonw_t *w, LONGLONG v) {
    if (v < 0) { put(w, '-'); jw_u64(w, (ULONGLONG)0 - (ULONGLONG)v); } else jw_u64(w, (ULONGLONG)v);
}
static const char HEX[] = "0123456789abcdef";
void jw_hexq(jsonw_t *w, ULONGLONG v) {
    char t[20];
    int n = 0;
    do { t[n++] = HEX[v & 15]; v >>= 4; } while (v);
    jw_raw(w, "\"0x");
    while (n) put(w, t[--n]);
    put(w, '"');
}
static void esc_u(jsonw_t *w, unsigned c) {
    char t[7] = {'\\', 'u', HEX[(c >> 12) & 15], HEX[(c >> 8) & 15], HEX[(c >> 4) & 15], HEX[c & 15], 0};
    jw_raw(w, t);
}
void jw_key(jsonw_t *w, const char *k) { jw_raw(w, ",\""); jw_raw(w, k); jw_raw(w, "\":"); }

void jw_wstr(jsonw_t *w, const WCHAR *s, int len) {
    if (!s) { jw_raw(w, "null"); return; }
    put(w, '"');
    for (int i = 0; len < 0 ? s[i] != 0 : i < len; i++) {
        if (w->limit - w->p < JSONW_RESERVE || !room(w, 8)) { w->trunc = 1; break; }
        unsigned c = s[i];
        if (c >= 0xD800 && c <= 0xDBFF && (len < 0 || i + 1 < len) && s[i + 1] >= 0xDC00 && s[i + 1] <= 0xDFFF) {
            c = 0x10000 + ((c - 0xD800) << 10) + (s[i + 1] - 0xDC00);
            i++;
        } else if (c >= 0xD800 && c <= 0xDFFF) { esc_u(w, c); continue; }
        if (c == '"') jw_raw(w, "\\\"");
        else if (c == '\\') jw_raw(w, "\\\\");
        else if (c == '\n') jw_raw(w, "\\n");
        else if (c == '\r') jw_raw(w, "\\r");
        else if (c == '\t') jw_raw(w, "\\t");
        else if (c < 0x20) esc_u(w, c);
        else if (c < 0x80) *w->p++ = (char)c;
        else if (c < 0x800) { *w->p++ = (char)(0xC0 | (c >> 6)); *w->p++ = (char)(0x80 | (c & 63)); }
        else if (c < 0x10000) { *w->p++ = (char)(0xE0 | (c >> 12)); *w->p++ = (char)(0x80 | ((c >> 6) & 63)); *w->p++ = (char)(0x80 | (c & 63)); }
        else { *w->p++ = (char)(0xF0 | (c >> 18)); *w->p++ = (char)(0x80 | ((c >> 12) & 63)); *w->p++ = (char)(0x80 | ((c >> 6) & 63)); *w->p++ = (char)(0x80 | (c & 63)); }
    }
    put(w, '"');
}

void jw_event(jsonw_t *w, const char *ev, LONGLONG seq, ULONG pid, ULONG tid, ULONGLONG t) {
    jw_raw(w, "{\"ev\":"); jw_str(w, ev);
    jw_key(w, "seq"); jw_i64(w, seq);
    jw_key(w, "pid"); jw_u64(w, pid);
    jw_key(w, "tid"); jw_u64(w, tid);
    jw_key(w, "t"); jw_u64(w, t);
}

DWORD jw_close(jsonw_t *w) {
    if (w->trunc) jw_raw(w, ",\"truncated\":true");
    *w->p++ = '}';
    *w->p++ = '\n';
    return (DWORD)(w->p - w->start);
}

void jw_header(jsonw_t *w, const char *tool) {
    int wine = GetProcAddress(GetModuleHandleW(L"ntdll.dll"), "wine_get_version") != NULL;
    jw_raw(w, "{\"format\":\"dlltrace-trace\",\"version\":1,\"tool\":"); jw_str(w, tool);
    jw_raw(w, ",\"created\":null,\"platform\":"); jw_str(w, wine ? "wine" : "windows");
}

ULONGLONG jw_now_ns(void) {
    static LARGE_INTEGER freq; /* constant while the system runs */
    if (!freq.QuadPart) QueryPerformanceFrequency(&freq);
    LARGE_INTEGER c;
    QueryPerformanceCounter(&c);
    ULONGLONG f = (ULONGLONG)freq.QuadPart, v = (ULONGLONG)c.QuadPart;
    return v / f * 1000000000ULL + (v % f) * 1000000000ULL / f;
}

/* ---- the trace file (jsonw.h) ---------------------------------------------------------------- */
static WCHAR *hex_w(WCHAR *o, ULONGLONG v, int digits) {
    for (int i = digits - 1; i >= 0; i--) *o++ = (WCHAR)HEX[(v >> (4 * i)) & 15];
    return o;
}

/* DLLTRACE_MAX_SIZE: the cap in bytes (decimal); 0 (none) when unset, empty or not a number */
static LONG64 env_cap(void) {
    char v[32];
    DWORD n = GetEnvironmentVariableA("DLLTRACE_MAX_SIZE", v, sizeof(v));
    if (!n || n >= sizeof(v)) return 0;
    LONG64 cap = 0;
    for (DWORD i = 0; i < n; i++) {
        if (v[i] < '0' || v[i] > '9' || cap > (0x7fffffffffffffffLL - 9) / 10) return 0;
        cap = cap * 10 + (v[i] - '0');
    }
    return cap;
}

/* the kind of a line made by jw_event ({"ev":"<kind>",...), for the cap's counts */
static int line_kind(const char *s, DWORD len) {
    static const struct { const char *name; int kind; } kinds[] = {
        {"probe\"", JW_DROP_PROBE}, {"load_begin\"", JW_DROP_LOAD_BEGIN}, {"load_end\"", JW_DROP_LOAD_END},
        {"dll_notify\"", JW_DROP_DLL_NOTIFY}};
    if (len < 8 || s[0] != '{' || s[1] != '"' || s[2] != 'e' || s[3] != 'v' || s[4] != '"' || s[5] != ':' || s[6] != '"')
        return JW_DROP_OTHER;
    for (int k = 0; k < 4; k++) {
        const char *a = kinds[k].name, *b = s + 7;
        DWORD i = 7;
        while (*a && i < len && *a == *b) { a++; b++; i++; }
        if (!*a) return kinds[k].kind;
    }
    return JW_DROP_OTHER;
}

/* the "t" of a line made by jw_event (,"t":<digits> in its first members); 0 when not found */
static LONG64 line_t(const char *s, DWORD len) {
    DWORD lim = len < 160 ? len : 160;
    for (DWORD i = 0; i + 5 < lim; i++) {
        if (s[i] == ',' && s[i + 1] == '"' && s[i + 2] == 't' && s[i + 3] == '"' && s[i + 4] == ':') {
            LONG64 t = 0;
            for (DWORD j = i + 5; j < lim && s[j] >= '0' && s[j] <= '9'; j++) t = t * 10 + (s[j] - '0');
            return t;
        }
    }
    return 0;
}

static void count_drop(jw_shared_end_t *sh, const char *s, DWORD len) {
    InterlockedIncrement64(&sh->dropped[line_kind(s, len)]);
    InterlockedExchangeAdd64(&sh->dropped_bytes, len);
    LONG64 t = line_t(s, len);
    if (!t) t = 1;
    for (LONG64 cur = sh->first_dropped_t; cur == 0 || t < cur; cur = sh->first_dropped_t)
        if (InterlockedCompareExchange64(&sh->first_dropped_t, t, cur) == cur) break;
}

/* the shared end of the file f->file, set up by the first process to open it (from the file's size) */
static void open_shared_end(jw_file_t *f) {
    BY_HANDLE_FILE_INFORMATION bi;
    if (!GetFileInformationByHandle(f->file, &bi)) return;
    WCHAR name[64], *o = name;
    const WCHAR *pre = L"Local\\dlltrace-trace-";
    while (*pre) *o++ = *pre++;
    o = hex_w(o, bi.dwVolumeSerialNumber, 8);
    *o++ = L'-';
    o = hex_w(o, ((ULONGLONG)bi.nFileIndexHigh << 32) | bi.nFileIndexLow, 16);
    *o = 0;
    f->map = CreateFileMappingW(INVALID_HANDLE_VALUE, NULL, PAGE_READWRITE, 0, 4096, name);
    if (!f->map) return;
    jw_shared_end_t *sh = (jw_shared_end_t *)MapViewOfFile(f->map, FILE_MAP_WRITE, 0, 0, sizeof(jw_shared_end_t));
    if (!sh) { CloseHandle(f->map); f->map = NULL; return; }
    LARGE_INTEGER size;
    if (!GetFileSizeEx(f->file, &size)) size.QuadPart = 0;
    if (InterlockedCompareExchange(&sh->state, 1, 0) == 0) { /* the first: the end is the file's size */
        sh->end = size.QuadPart;
        sh->cap = env_cap();
        InterlockedExchange(&sh->state, 2);
    } else {
        /* another process is setting it up (a few instructions): wait for it, at most ~2 s */
        for (int i = 0; sh->state != 2 && i < 2000; i++) Sleep(1);
        if (sh->state != 2) { UnmapViewOfFile(sh); CloseHandle(f->map); f->map = NULL; return; }
        /* bytes someone wrote without a reservation (not a dlltrace writer) are not overwritten */
        for (LONG64 cur = sh->end; cur < size.QuadPart; cur = sh->end)
            if (InterlockedCompareExchange64(&sh->end, size.QuadPart, cur) == cur) break;
    }
    f->end = sh;
}

DWORD jw_file_open(jw_file_t *f, const WCHAR *path) {
    f->map = NULL;
    f->end = NULL;
    /* FILE_WRITE_DATA (not FILE_APPEND_DATA alone): a write at an offset must go at that offset */
    f->file = CreateFileW(path, FILE_WRITE_DATA | FILE_READ_ATTRIBUTES | SYNCHRONIZE,
                          FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, NULL, OPEN_ALWAYS, FILE_ATTRIBUTE_NORMAL, NULL);
    if (f->file == INVALID_HANDLE_VALUE) return GetLastError();
    open_shared_end(f);
    return 0;
}

/* ntdll's NtWriteFile with a byte offset, no event, no APC, no completion: WriteFile with an OVERLAPPED
   would do the same, but under Wine 8 it also posts an I/O completion (a wineserver round trip: 10 to
   20 us a line instead of 2 to 3, measured) */
typedef struct { union { LONG Status; PVOID Pointer; } u; ULONG_PTR Information; } jw_iosb_t;
typedef LONG(WINAPI *jw_ntwrite_t)(HANDLE, HANDLE, PVOID, PVOID, jw_iosb_t *, const void *, ULONG, PLARGE_INTEGER, PULONG);
static jw_ntwrite_t g_ntwrite;

static int write_at(jw_file_t *f, const char *s, DWORD len, ULONGLONG off) {
    jw_ntwrite_t nt = g_ntwrite;
    if (!nt) g_ntwrite = nt = (jw_ntwrite_t)(void *)GetProcAddress(GetModuleHandleW(L"ntdll.dll"), "NtWriteFile");
    if (!nt) { /* (not reached: every ntdll has it) */
        OVERLAPPED o;
        ZeroMemory(&o, sizeof(o));
        o.Offset = (DWORD)off;
        o.OffsetHigh = (DWORD)(off >> 32);
        DWORD n = 0;
        return WriteFile(f->file, s, len, &n, &o) && n == len;
    }
    jw_iosb_t io;
    io.Information = 0;
    LARGE_INTEGER at;
    at.QuadPart = (LONGLONG)off; /* ~0: FILE_WRITE_TO_END_OF_FILE */
    LONG st = nt(f->file, NULL, NULL, NULL, &io, s, len, &at, NULL);
    if (st < 0) { SetLastError(ERROR_WRITE_FAULT); return 0; }
    return io.Information == len;
}

int jw_file_write_always(jw_file_t *f, const char *s, DWORD len) {
    /* (a write that fails after its reservation, as with a bad handle, leaves its range unwritten) */
    /* no shared end: 0xFFFFFFFF:0xFFFFFFFF is FILE_WRITE_TO_END_OF_FILE */
    ULONGLONG off = f->end ? (ULONGLONG)InterlockedExchangeAdd64(&f->end->end, len) : ~0ULL;
    return write_at(f, s, len, off);
}

int jw_file_write(jw_file_t *f, const char *s, DWORD len) {
    jw_shared_end_t *sh = f->end;
    if (!sh || !sh->cap) return jw_file_write_always(f, s, len);
    int kind = line_kind(s, len);
    LONG64 limit = sh->cap;
    if (kind == JW_DROP_PROBE || kind == JW_DROP_DLL_NOTIFY) limit -= sh->cap / JW_BULKY_SHARE;
    for (;;) { /* reserve [cur, cur + len) only while it ends within the limit */
        LONG64 cur = sh->end;
        if (cur + (LONG64)len > limit) {
            count_drop(sh, s, len);
            return JW_DROPPED;
        }
        if (InterlockedCompareExchange64(&sh->end, cur + len, cur) == cur) return write_at(f, s, len, (ULONGLONG)cur);
    }
}

int jw_file_dropped(jw_file_t *f, LONG64 counts[JW_DROP_KINDS], LONG64 *bytes, LONG64 *cap, LONG64 *first_t) {
    jw_shared_end_t *sh = f->end;
    LONG64 any = 0;
    for (int k = 0; k < JW_DROP_KINDS; k++) any += counts[k] = sh ? sh->dropped[k] : 0;
    *bytes = sh ? sh->dropped_bytes : 0;
    *cap = sh ? sh->cap : 0;
    *first_t = sh ? sh->first_dropped_t : 0;
    return any != 0;
}

int jw_file_write_first(jw_file_t *f, const char *s, DWORD len) {
    if (f->end) {
        if (InterlockedCompareExchange64(&f->end->end, len, 0) != 0) return 0;
        return write_at(f, s, len, 0) ? 1 : -1;
    }
    LARGE_INTEGER size;
    if (!GetFileSizeEx(f->file, &size) || size.QuadPart != 0) return 0;
    return write_at(f, s, len, ~0ULL) ? 1 : -1;
}

void jw_file_close(jw_file_t *f) {
    if (f->end) UnmapViewOfFile((void *)f->end);
    if (f->map) CloseHandle(f->map);
    if (f->file != INVALID_HANDLE_VALUE && f->file) CloseHandle(f->file);
    f->file = INVALID_HANDLE_VALUE;
    f->map = NULL;
    f->end = NULL;
}
