/* One JSON line writer, shared by the shim and the launcher: UTF-16 -> UTF-8 and JSON escaping by hand
 * (no CRT heap, no locale: the shim formats events under the loader lock), into a caller's buffer.
 *
 * The buffer is [start, limit). Bytes up to `end` are writable now; a buffer reserved with
 * VirtualAlloc(MEM_RESERVE) and committed only in part (the shim's per-thread buffer) has end < limit,
 * and the writer commits more in JSONW_COMMIT steps as a line grows. A fixed buffer has end == limit.
 * A string that would leave less than JSONW_RESERVE bytes before limit is cut (trunc = 1), so the
 * closing members of a line always fit; the caller then adds "truncated":true (jw_close).
 */
#ifndef DLLTRACE_JSONW_H
#define DLLTRACE_JSONW_H
#include <windows.h>

#define JSONW_RESERVE 1024
#define JSONW_COMMIT (16 * 1024)

typedef struct {
    char *start, *p, *end, *limit;
    int trunc; /* a string was cut */
} jsonw_t;

/* a line at buf: [buf, buf + committed) writable, [buf, buf + cap) the whole buffer (cap > JSONW_RESERVE) */
void jw_init(jsonw_t *w, char *buf, size_t committed, size_t cap);
void jw_raw(jsonw_t *w, const char *s);          /* verbatim */
void jw_str(jsonw_t *w, const char *ascii);      /* "ascii" (a name of ours: no escaping needed) */
void jw_u64(jsonw_t *w, ULONGLONG v);
void jw_i64(jsonw_t *w, LONGLONG v);
void jw_hexq(jsonw_t *w, ULONGLONG v);           /* "0x1a2b" */
void jw_key(jsonw_t *w, const char *k);          /* ,"k": */
/* UTF-16 (len units, or up to NUL when len < 0; NULL -> null) as a JSON string in UTF-8; a lone
   surrogate is written as \uXXXX */
void jw_wstr(jsonw_t *w, const WCHAR *s, int len);
/* {"ev":"<ev>","seq":..,"pid":..,"tid":..,"t":..  (the line is left open) */
void jw_event(jsonw_t *w, const char *ev, LONGLONG seq, ULONG pid, ULONG tid, ULONGLONG t);
/* ,"truncated":true when a string was cut, then "}\n"; returns the line's length */
DWORD jw_close(jsonw_t *w);

/* The trace's header line (docs/trace-format.md), for a file that is still empty, left open like
   jw_event; tool is "dlltrace-shim 0.1.0" or the like; the platform is "wine" under Wine, else "windows".
   (`dlltrace run` writes its own header, with "created", in tracer/dlltrace/run.py.) */
void jw_header(jsonw_t *w, const char *tool);

/* monotonic nanoseconds (QueryPerformanceCounter), the clock of every event's "t" */
ULONGLONG jw_now_ns(void);

#endif
