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
