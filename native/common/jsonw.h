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

/* ---- the trace file: whole lines from every process and thread of a run, none lost --------------
   Every writer (each traced process's shim, the launcher) opens the file with jw_file_open and
   writes each line with ONE jw_file_write. Lines never overlap: the file's end is a 64-bit counter
   in a small named shared memory block, one per file (named after the file's volume serial number
   and file index, so every process that opens the same file finds the same block), and a writer
   reserves [end, end + len) with one InterlockedExchangeAdd64 on it, then writes there (one
   NtWriteFile at that byte offset). No lock is taken, none can be left held by a killed process, and no call waits for
   another writer. Why not FILE_APPEND_DATA: Windows appends atomically, but Wine 8 turns a write
   on an append-only handle into fstat() + pwrite() at the size it read (dlls/ntdll/unix/file.c,
   NtWriteFile), so two processes writing at once wrote over each other's lines.
   A writer that dies between its reservation and its write (or whose write fails) leaves that
   range zero-filled when a later line lands after it: the reader skips the zero bytes (with a
   warning) and the line after them is whole. When the shared block cannot be made (f->end NULL), a
   write is an append at the end of the file (offset FILE_WRITE_TO_END_OF_FILE): atomic on Windows,
   not across processes under Wine. */
/* The size cap (`dlltrace run --max-size`, DLLTRACE_MAX_SIZE in bytes, read by the writer that sets the
   shared block up: the launcher, in a run). Past 90% of the cap the bulky lines (probe, dll_notify) are
   dropped, past the cap every line, except those written with jw_file_write_always (the launcher's
   `exit` and `capped` events); each dropped line is counted in the block by kind, with its bytes and the
   earliest "t" of any dropped line, which the launcher writes at the end as the `capped` event
   (docs/trace-format.md). A dropped line counts as written: it is accounted for, not lost silently. */
enum { JW_DROP_PROBE, JW_DROP_LOAD_BEGIN, JW_DROP_LOAD_END, JW_DROP_DLL_NOTIFY, JW_DROP_OTHER, JW_DROP_KINDS };
#define JW_BULKY_SHARE 10 /* the bulky lines stop at cap - cap / JW_BULKY_SHARE */

typedef struct {
    volatile LONG64 end; /* offset of the next reservation */
    volatile LONG state; /* 0 new, 1 being set up, 2 ready */
    volatile LONG pad;
    volatile LONG64 cap; /* 0: no cap */
    volatile LONG64 dropped[JW_DROP_KINDS];
    volatile LONG64 dropped_bytes;
    volatile LONG64 first_dropped_t; /* the smallest "t" of a dropped line; 0: none yet */
} jw_shared_end_t;

typedef struct {
    HANDLE file, map;     /* INVALID_HANDLE_VALUE / NULL when not open */
    jw_shared_end_t *end; /* the shared end, or NULL: append writes */
} jw_file_t;

/* open (create when missing) the trace file at path for writing, and its shared end; 0 or a Win32
   error (nothing open then). f->end NULL: the shared end could not be made (writes append). */
DWORD jw_file_open(jw_file_t *f, const WCHAR *path);
/* one whole line (or any bytes) in one write at a reserved range; 1 when all len bytes were written,
   JW_DROPPED when the line was dropped by the size cap (and counted), 0 when the write failed */
#define JW_DROPPED 2
int jw_file_write(jw_file_t *f, const char *s, DWORD len);
/* the same, past any cap (the launcher's last events) */
int jw_file_write_always(jw_file_t *f, const char *s, DWORD len);
/* what the cap dropped so far: 1 and the counts when lines were dropped, else 0 */
int jw_file_dropped(jw_file_t *f, LONG64 counts[JW_DROP_KINDS], LONG64 *bytes, LONG64 *cap, LONG64 *first_t);
/* s written at offset 0 if the file is still empty (nothing reserved yet): 1 written, 0 the file was
   not empty (nothing written), -1 the write failed */
int jw_file_write_first(jw_file_t *f, const char *s, DWORD len);
void jw_file_close(jw_file_t *f);

#endif
