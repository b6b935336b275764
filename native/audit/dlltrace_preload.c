/* dlltrace's Linux recorder, part 2 (LD_PRELOAD, so in the program's own namespace):
 *  - a wrapper of dlerror() that copies the text of each failed dlopen/dlmopen as the program reads it
 *    ({"ev":"dlerror","text":...}) and returns it unchanged. dlopen itself is NOT wrapped: glibc takes
 *    the caller of dlopen from its return address (its DT_RUNPATH and DT_RPATH are searched), so a
 *    wrapper would become the caller and change the search; dlerror has no such dependence;
 *  - the five functions of native/shim/dlltrace_shim.h, so the Python bootstrap (trace/shim.py, with
 *    DLLTRACE_SHIM pointing here) writes its py_* events through it and sets each thread's context;
 *  - a copy of each line native code prints to stderr through stdio ({"ev":"stderr","text":...}: the
 *    loaders' own words), the calls themselves unchanged (below);
 *  - the process's event counter (dlltrace_linux_seq) and the per-thread context table
 *    (dlltrace_linux_ctx_table), which the LD_AUDIT library (another namespace) finds by symbol in
 *    la_objopen and uses: one seq numbering per process, and "ctx" on the native events of a thread
 *    whose Python code set one. The table is plain data keyed by thread id (no TLS, no call across
 *    namespaces). Lines: one write(2) each, O_APPEND, as in dlltrace_audit.c;
 *  - in a Python process (one that has Py_Initialize) whose PYTHONPATH lacks the bootstrap folder
 *    (DLLTRACE_BOOTSTRAP): that folder put first again, before CPython reads it. A wrapper that sets
 *    PYTHONPATH itself (`env PYTHONPATH=src python ...`, a script's `export PYTHONPATH=...`) took it off,
 *    and its Python ran with no Python context (no import, no exception recorded). */
#define _GNU_SOURCE
#include <stdarg.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <wchar.h>

#include "dlltrace_out.h"

atomic_long dlltrace_linux_seq; /* the audit library moves its count here when it finds it */

#define CTX_SLOTS 4096
struct dlltrace_ctx_slot { atomic_int tid; atomic_llong ctx; };
struct dlltrace_ctx_slot dlltrace_linux_ctx_table[CTX_SLOTS];

static char *(*real_dlerror)(void);

/* resolved when the library loads: a dlsym call made inside dlerror would clear the very error the
   program is asking for (dlsym resets the thread's dlerror state) */
static long long emit(const char *ev, const char *fields, const char *text);

static void forked_child(void) {
    atomic_store(&dlltrace_linux_seq, 0); /* a forked child numbers its events from 1 */
    for (unsigned i = 0; i < CTX_SLOTS; i++) atomic_store(&dlltrace_linux_ctx_table[i].tid, 0);
    /* (the forking thread's context is its own again when its Python code next sets one) */
    /* a fork starts no program, so the audit library writes no audit_start for it: this says whose copy
       the child is (the replay starts it as its parent's process: diagnosis/replay_linux.py) */
    char f[48];
    snprintf(f, sizeof f, "\"ppid\":%d", (int)getppid());
    emit("fork", f, NULL);
}

/* the stdio functions the stderr copy wraps (below), resolved when the library loads */
static size_t (*real_fwrite)(const void *, size_t, size_t, FILE *);
static int (*real_fputs)(const char *, FILE *);
static int (*real_vfprintf)(FILE *, const char *, va_list);
static int (*real___vfprintf_chk)(FILE *, int, const char *, va_list);
static int (*real_fputc)(int, FILE *);
static int (*real_putc)(int, FILE *);

static void resolve_stdio(void) {
    real_fwrite = (size_t (*)(const void *, size_t, size_t, FILE *))dlsym(RTLD_NEXT, "fwrite");
    real_fputs = (int (*)(const char *, FILE *))dlsym(RTLD_NEXT, "fputs");
    real_vfprintf = (int (*)(FILE *, const char *, va_list))dlsym(RTLD_NEXT, "vfprintf");
    real___vfprintf_chk = (int (*)(FILE *, int, const char *, va_list))dlsym(RTLD_NEXT, "__vfprintf_chk");
    real_fputc = (int (*)(int, FILE *))dlsym(RTLD_NEXT, "fputc");
    real_putc = (int (*)(int, FILE *))dlsym(RTLD_NEXT, "putc");
}

/* the bootstrap folder first on PYTHONPATH again, in a Python process whose PYTHONPATH lacks it (above) */
static void python_bootstrap_first(void) {
    const char *boot = getenv("DLLTRACE_BOOTSTRAP");
    if (!boot || !*boot || !dlsym(RTLD_DEFAULT, "Py_Initialize")) return;
    const char *pp = getenv("PYTHONPATH");
    size_t bl = strlen(boot);
    for (const char *s = pp; s && *s;) {
        const char *e = strchr(s, ':');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        if (n == bl && strncmp(s, boot, n) == 0) return;
        if (!e) break;
        s = e + 1;
    }
    size_t n = bl + 2 + (pp ? strlen(pp) : 0);
    char *v = malloc(n);
    if (!v) return;
    if (pp && *pp) snprintf(v, n, "%s:%s", boot, pp);
    else snprintf(v, n, "%s", boot);
    setenv("PYTHONPATH", v, 1);
    free(v);
}

__attribute__((constructor)) static void init(void) {
    python_bootstrap_first();
    real_dlerror = (char *(*)(void))dlsym(RTLD_NEXT, "dlerror");
    resolve_stdio();
    pthread_atfork(0, 0, forked_child);
}

static char *jstr(char *o, char *end, const char *s) {
    *o++ = '"';
    for (; s && *s && o < end - 8; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') { *o++ = '\\'; *o++ = (char)c; }
        else if (c < 0x20 || c == 0x7f) o += snprintf(o, 8, "\\u%04x", c);
        else *o++ = (char)c;
    }
    *o++ = '"';
    return o;
}

/* one event line; `fields` is JSON object members (no braces) or NULL; returns its seq */
static long long emit_(const char *ev, const char *fields, const char *text);

/* the program's errno is left as it was (this runs inside its dlerror() and its Python code) */
static long long emit(const char *ev, const char *fields, const char *text) {
    int saved = errno;
    long long seq = emit_(ev, fields, text);
    errno = saved;
    return seq;
}

/* the trace (dlltrace_out.h: kept open, checked before each write) */
static struct trace_out out = TRACE_OUT_INIT;

static int out_fd(void) { return trace_out_fd(&out, 0, NULL); }

static long long emit_(const char *ev, const char *fields, const char *text) {
    const char *p = getenv("DLLTRACE_TRACE");
    if (!p || !*p) return 0;
    size_t flen = fields ? strlen(fields) : 0, tlen = text ? strlen(text) : 0;
    size_t cap = 512 + flen + 6 * tlen;
    char *buf = malloc(cap);
    if (!buf) return 0;
    char *o = buf, *end = buf + cap;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    long long seq = atomic_fetch_add(&dlltrace_linux_seq, 1) + 1;
    o += snprintf(o, 256, "{\"ev\":");
    o = jstr(o, end, ev);
    o += snprintf(o, 200, ",\"pid\":%d,\"tid\":%ld,\"seq\":%lld,\"t\":%lld", (int)getpid(), (long)syscall(SYS_gettid),
                  seq, (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec);
    if (text) { memcpy(o, ",\"text\":", 8); o += 8; o = jstr(o, end, text); }
    if (flen) { *o++ = ','; memcpy(o, fields, flen); o += flen; }
    *o++ = '}'; *o++ = '\n';
    int fd = out_fd();
    if (fd >= 0) {
        ssize_t n = write(fd, buf, (size_t)(o - buf));
        (void)n;
    }
    free(buf);
    return seq;
}

char *dlerror(void) {
    char *e = real_dlerror ? real_dlerror() : NULL;
    if (e) emit("dlerror", NULL, e);
    return e;
}

/* --- a copy of what native code prints to stderr -------------------------------------------------------
 * The loaders' own words (TensorFlow's "Could not load dynamic library 'libcudart.so.11.0'; dlerror: ...",
 * onnxruntime's "Failed to load library libonnxruntime_providers_cuda.so with error: ...") are printed by C and
 * C++ code through stdio: fprintf (TensorFlow's logging), fwrite and putc (libstdc++'s std::cerr, absl's log
 * sink), fputs, fputc. Each call on stderr goes through unchanged, and its text is also kept a line at a time per thread,
 * each whole line a {"ev":"stderr","text":...} event: at most STDERR_LINES a process, STDERR_LINE bytes a line.
 * Python's own writes to stderr (tracebacks, warnings) are write(2) calls, not stdio: not copied (the
 * bootstrap records its exceptions and warnings itself). DLLTRACE_NO_STDERR=1 turns the copy off. */
#define STDERR_LINES 2000
#define STDERR_LINE 1000
static atomic_int stderr_lines;
static __thread char line_buf[STDERR_LINE + 1];
static __thread size_t line_len;

static int is_stderr(FILE *s) {
    static int off = -1;
    if (off < 0) off = getenv("DLLTRACE_NO_STDERR") != NULL;
    return !off && s != NULL && (s == stderr || fileno_unlocked(s) == 2);
}

static void line_out(void) {
    line_buf[line_len] = 0;
    if (line_len && atomic_fetch_add(&stderr_lines, 1) < STDERR_LINES) emit("stderr", NULL, line_buf);
    line_len = 0;
}

static void copy_text(const char *p, size_t n) {
    int saved = errno;
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '\n') { line_out(); continue; }
        if (p[i] == '\r') continue;
        if (line_len < STDERR_LINE) line_buf[line_len++] = p[i];
        else line_out(), line_buf[line_len++] = p[i];
    }
    errno = saved;
}

static void copy_format(const char *fmt, va_list ap) {
    char text[2 * STDERR_LINE];
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(text, sizeof text, fmt, again);
    va_end(again);
    if (n > 0) copy_text(text, (size_t)n < sizeof text ? (size_t)n : sizeof text - 1);
}

/* (libstdc++'s std::endl is a putc of the newline) */
int fputc(int c, FILE *s) {
    if (!real_fputc) resolve_stdio();
    if (is_stderr(s)) { char ch = (char)c; copy_text(&ch, 1); }
    return real_fputc(c, s);
}

int putc(int c, FILE *s) {
    if (!real_putc) resolve_stdio();
    if (is_stderr(s)) { char ch = (char)c; copy_text(&ch, 1); }
    return real_putc(c, s);
}

/* the main thread's last line, when the program ends without its newline */
__attribute__((destructor)) static void last_line(void) {
    if (line_len) line_out();
}

size_t fwrite(const void *ptr, size_t size, size_t n, FILE *s) {
    if (!real_fwrite) resolve_stdio();
    if (is_stderr(s) && size) copy_text((const char *)ptr, size * n);
    return real_fwrite(ptr, size, n, s);
}

int fputs(const char *str, FILE *s) {
    if (!real_fputs) resolve_stdio();
    if (is_stderr(s)) copy_text(str, strlen(str));
    return real_fputs(str, s);
}

int vfprintf(FILE *s, const char *fmt, va_list ap) {
    if (!real_vfprintf) resolve_stdio();
    if (is_stderr(s)) copy_format(fmt, ap);
    return real_vfprintf(s, fmt, ap);
}

int fprintf(FILE *s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int r = vfprintf(s, fmt, ap);
    va_end(ap);
    return r;
}

int __vfprintf_chk(FILE *s, int flag, const char *fmt, va_list ap) {
    if (!real___vfprintf_chk) resolve_stdio();
    if (is_stderr(s)) copy_format(fmt, ap);
    return real___vfprintf_chk(s, flag, fmt, ap);
}

int __fprintf_chk(FILE *s, int flag, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int r = __vfprintf_chk(s, flag, fmt, ap);
    va_end(ap);
    return r;
}

/* --- the shim's interface (native/shim/dlltrace_shim.h), for the Python bootstrap ------------------- */
int dlltrace_start(const wchar_t *trace_path, const char *via) {
    (void)trace_path; (void)via;
    return getenv("DLLTRACE_TRACE") ? 0 : 1;
}

long long dlltrace_write_event(const char *ev, const char *fields_json) {
    return emit(ev ? ev : "?", fields_json, NULL);
}

void dlltrace_set_context(long long ctx_seq) {
    int tid = (int)syscall(SYS_gettid);
    unsigned h = (unsigned)tid * 2654435761u;
    for (unsigned i = 0; i < CTX_SLOTS; i++) {
        struct dlltrace_ctx_slot *s = &dlltrace_linux_ctx_table[(h + i) % CTX_SLOTS];
        int cur = atomic_load(&s->tid);
        if (cur == tid || (cur == 0 && atomic_compare_exchange_strong(&s->tid, &cur, tid))) {
            atomic_store(&s->ctx, ctx_seq);
            return;
        }
    }
}

const char *dlltrace_version(void) { return "dlltrace-linux 0.1.0"; }

int dlltrace_env_snapshot(const wchar_t *trace_path, unsigned long pid, const wchar_t *exe) {
    (void)trace_path; (void)pid; (void)exe;
    return 0;
}

/* --- the audit hook's filter, in C (Linux only: trace/shim.py c_audit_filter) ------------------------------------
 * A Python audit hook (sys.addaudithook) is called for every audit event of the process: CPython makes the event's
 * name a str, looks up the hook's __cantrace__ and calls it, 57 000 times in `import scipy.stats, sklearn, pandas`
 * (46 000 of them builtins.id, the program's own), and 18 000 more for the f_code reads of the hook's own walk up
 * the stack; the hook keeps 1 600 of them (import, ctypes.dlopen, os.add_dll_directory). Installed instead with
 * PySys_AddAuditHook, this C hook hands the Python one those three events only, and subprocess.Popen (which
 * ctypes.util.find_library makes: shim.py watch_find_library) (every event while `all` is set:
 * the bootstrap asks for that until it has hooked the warnings module, at the first event after the program
 * imported it). The Python C API is looked up in the process (dlsym): this library is not linked to a Python.
 * Only in the main interpreter (the hook is a Python object of that interpreter). Hooks are never removed; CPython
 * clears them at its finalization. */
typedef struct _object PyObjectT;
static PyObjectT *py_hook;
static atomic_int py_all_events;
static PyObjectT *(*py_call)(PyObjectT *, ...);
static PyObjectT *(*py_str)(const char *);
static void (*py_decref)(PyObjectT *);
static void (*py_err_clear)(void);
static void *(*py_interp)(void);
static void *(*py_main_interp)(void);

static int fast_import(PyObjectT *args);

/* Python code called from here runs unseen by the program's tracer or profiler (sys.settrace, sys.setprofile:
   a debugger, coverage), as CPython runs a hook added with sys.addaudithook: otherwise pdb's `step` on an import
   stops in trace/shim.py. PyThreadState_EnterTracing is 3.11+; before, nothing is done. */
static void *(*py_tstate)(void);
static void (*py_enter_tracing)(void *), (*py_leave_tracing)(void *);
static void *untraced_begin(void) {
    void *ts = py_tstate && py_enter_tracing && py_leave_tracing ? py_tstate() : 0;
    if (ts) py_enter_tracing(ts);
    return ts;
}
static void untraced_end(void *ts) {
    if (ts) py_leave_tracing(ts);
}
static __thread int fast_busy; /* fast_import is running on this thread (user code may run: a __name__ key's __eq__) */

/* Whether the error set is the program's own rather than the recorder's: not an Exception -- KeyboardInterrupt raised
   by Ctrl-C's handler, SystemExit by a signal handler's sys.exit(), run while the recorder's Python code ran (CPython
   runs pending signal handlers in whatever Python code runs). That one is left set and the hook returns -1, so the
   audited operation (an import) raises it, as it would raise a Python audit hook's: clearing it, as the recorder's own
   errors are, lost the Ctrl-C of a traced program that was importing. */
static int (*py_err_matches)(PyObjectT *);
static PyObjectT *(*py_err_occurred)(void);
static PyObjectT **py_exc_exception;

static int program_error(void) {
    if (!py_err_matches) {
        py_err_occurred = (PyObjectT *(*)(void))dlsym(RTLD_DEFAULT, "PyErr_Occurred");
        py_exc_exception = (PyObjectT **)dlsym(RTLD_DEFAULT, "PyExc_Exception");
        py_err_matches = (int (*)(PyObjectT *))dlsym(RTLD_DEFAULT, "PyErr_ExceptionMatches");
    }
    return py_err_matches && py_err_occurred && py_exc_exception && *py_exc_exception && py_err_occurred()
           && !py_err_matches(*py_exc_exception);
}

static int c_audit_filter(const char *event, PyObjectT *args, void *data) {
    (void)data;
    int all = atomic_load(&py_all_events);
    if (!all && strcmp(event, "import") != 0 && strcmp(event, "ctypes.dlopen") != 0
        && strcmp(event, "os.add_dll_directory") != 0 && strcmp(event, "subprocess.Popen") != 0)
        return 0;
    if (py_interp() != py_main_interp()) return 0;
    if (fast_busy) return 0; /* (an event made by what fast_import runs: none, as none while the hook runs) */
    if (!all && event[0] == 'i') {
        int fast = fast_import(args);
        if (fast) return fast < 0 ? -1 : 0; /* (-1: the program's own error, left set: program_error) */
    }
    PyObjectT *name = py_str(event);
    void *ts = untraced_begin();
    PyObjectT *r = name ? py_call(py_hook, name, args, (PyObjectT *)0) : 0;
    untraced_end(ts);
    if (name) py_decref(name);
    if (r) py_decref(r);
    else if (program_error()) return -1; /* (a Ctrl-C while it ran: the program's, raised by the import) */
    else py_err_clear(); /* (the hook never raises; never let anything stop the program) */
    return 0;
}

/* 0 when installed (the hook is kept: a reference of its own); else the Python hook is the caller's to add.
   Called with the GIL held (ctypes.PyDLL): PySys_AddAuditHook then tells the hooks already there, as
   sys.addaudithook does. */
int dlltrace_linux_audit_install(PyObjectT *hook, int all_events) {
    int (*add)(int (*)(const char *, PyObjectT *, void *), void *) =
        (int (*)(int (*)(const char *, PyObjectT *, void *), void *))dlsym(RTLD_DEFAULT, "PySys_AddAuditHook");
    void (*incref)(PyObjectT *) = (void (*)(PyObjectT *))dlsym(RTLD_DEFAULT, "Py_IncRef");
    py_call = (PyObjectT *(*)(PyObjectT *, ...))dlsym(RTLD_DEFAULT, "PyObject_CallFunctionObjArgs");
    py_str = (PyObjectT *(*)(const char *))dlsym(RTLD_DEFAULT, "PyUnicode_FromString");
    py_decref = (void (*)(PyObjectT *))dlsym(RTLD_DEFAULT, "Py_DecRef");
    py_err_clear = (void (*)(void))dlsym(RTLD_DEFAULT, "PyErr_Clear");
    py_interp = (void *(*)(void))dlsym(RTLD_DEFAULT, "PyInterpreterState_Get");
    if (!py_interp) py_interp = (void *(*)(void))dlsym(RTLD_DEFAULT, "_PyInterpreterState_Get"); /* (3.8) */
    py_main_interp = (void *(*)(void))dlsym(RTLD_DEFAULT, "PyInterpreterState_Main");
    py_tstate = (void *(*)(void))dlsym(RTLD_DEFAULT, "PyThreadState_Get");
    py_enter_tracing = (void (*)(void *))dlsym(RTLD_DEFAULT, "PyThreadState_EnterTracing"); /* (3.11) */
    py_leave_tracing = (void (*)(void *))dlsym(RTLD_DEFAULT, "PyThreadState_LeaveTracing");
    if (!add || !incref || !py_call || !py_str || !py_decref || !py_err_clear || !py_interp || !py_main_interp
        || !hook || py_hook)
        return 1;
    incref(hook);
    py_hook = hook;
    atomic_store(&py_all_events, all_events != 0);
    if (add(c_audit_filter, 0) != 0) {
        py_err_clear();
        return 1; /* (an existing hook refused it: py_hook stays referenced, never called) */
    }
    return 0;
}

/* The walk up the stack of trace/shim.py frame_and_imports, from `frame` outwards, past the frames whose globals are
   `boot` or `external` (the import system's: five of the six frames of each nested import), with no Python step per
   frame nor a read of f_code (an audit event of its own). A new tuple (names, candidates), innermost first:
   names, the globals' __name__ of each frame running a module's code (co_name "<module>"; whatever object it is, or
   None: the caller keeps the names); candidates, the frames that may be the user's, as (code, globals, frame): those
   whose co_filename `known` (shim._LIBRARY_FILES, {file name: library file or not}) does not map to True -- the
   library files' frames, nearly all of them, never reach Python. NULL when the Python C API lacks a function
   (before 3.9) or on an error (set): the caller then walks in Python. Called with the GIL held (ctypes.PyDLL). */
static PyObjectT *(*py_list_new)(long);
static int (*py_list_append)(PyObjectT *, PyObjectT *);
static PyObjectT *(*py_tuple_pack)(long, ...);
static PyObjectT *(*py_frame_back)(PyObjectT *);
static PyObjectT *(*py_frame_code)(PyObjectT *);
static PyObjectT *(*py_frame_globals)(PyObjectT *);
static PyObjectT *(*py_getattr)(PyObjectT *, PyObjectT *);
static PyObjectT *(*py_getattr_str)(PyObjectT *, const char *);
static PyObjectT *(*py_dict_get)(PyObjectT *, PyObjectT *);
static PyObjectT *(*py_dict_get_str)(PyObjectT *, const char *);
static int (*py_str_eq_ascii)(PyObjectT *, const char *);
static PyObjectT *(*py_intern)(const char *);
static PyObjectT *(*py_type)(PyObjectT *);
static void (*py_incref)(PyObjectT *);
static PyObjectT *py_true, *py_none, *s_co_name, *s_co_filename;
static int frames_api = -1;

static int frames_api_ready(void) {
    if (frames_api < 0) {
        py_list_new = (PyObjectT *(*)(long))dlsym(RTLD_DEFAULT, "PyList_New");
        py_list_append = (int (*)(PyObjectT *, PyObjectT *))dlsym(RTLD_DEFAULT, "PyList_Append");
        py_tuple_pack = (PyObjectT *(*)(long, ...))dlsym(RTLD_DEFAULT, "PyTuple_Pack");
        py_frame_back = (PyObjectT *(*)(PyObjectT *))dlsym(RTLD_DEFAULT, "PyFrame_GetBack");
        py_frame_code = (PyObjectT *(*)(PyObjectT *))dlsym(RTLD_DEFAULT, "PyFrame_GetCode");
        py_frame_globals = (PyObjectT *(*)(PyObjectT *))dlsym(RTLD_DEFAULT, "PyFrame_GetGlobals"); /* (3.11) */
        py_getattr = (PyObjectT *(*)(PyObjectT *, PyObjectT *))dlsym(RTLD_DEFAULT, "PyObject_GetAttr");
        py_getattr_str = (PyObjectT *(*)(PyObjectT *, const char *))dlsym(RTLD_DEFAULT, "PyObject_GetAttrString");
        py_dict_get = (PyObjectT *(*)(PyObjectT *, PyObjectT *))dlsym(RTLD_DEFAULT, "PyDict_GetItem");
        py_dict_get_str = (PyObjectT *(*)(PyObjectT *, const char *))dlsym(RTLD_DEFAULT, "PyDict_GetItemString");
        py_str_eq_ascii = (int (*)(PyObjectT *, const char *))dlsym(RTLD_DEFAULT, "PyUnicode_CompareWithASCIIString");
        py_intern = (PyObjectT *(*)(const char *))dlsym(RTLD_DEFAULT, "PyUnicode_InternFromString");
        py_type = (PyObjectT *(*)(PyObjectT *))dlsym(RTLD_DEFAULT, "PyObject_Type");
        py_incref = (void (*)(PyObjectT *))dlsym(RTLD_DEFAULT, "Py_IncRef");
        py_decref = (void (*)(PyObjectT *))dlsym(RTLD_DEFAULT, "Py_DecRef");
        py_true = (PyObjectT *)dlsym(RTLD_DEFAULT, "_Py_TrueStruct");
        py_none = (PyObjectT *)dlsym(RTLD_DEFAULT, "_Py_NoneStruct");
        frames_api = py_list_new && py_list_append && py_tuple_pack && py_frame_back && py_frame_code && py_getattr
                     && py_getattr_str && py_dict_get && py_dict_get_str && py_str_eq_ascii && py_intern && py_type && py_incref
                     && py_decref && py_true && py_none;
        if (frames_api) {
            s_co_name = py_intern("co_name");
            s_co_filename = py_intern("co_filename");
            frames_api = s_co_name && s_co_filename;
        }
    }
    return frames_api;
}

/* 0: `code` runs a module's code (co_name "<module>"); 1: not; -1: an error (set) */
static int not_module_code(PyObjectT *code) {
    PyObjectT *name = py_getattr(code, s_co_name);
    if (!name) return -1;
    int r = py_str_eq_ascii(name, "<module>") != 0;
    py_decref(name);
    return r;
}

/* 1 when `known` maps the code's file name to True (a library file's frame, never the user's); 0 when not; -1 on
   an error (set) */
static int known_library(PyObjectT *code, PyObjectT *known) {
    PyObjectT *file = py_getattr(code, s_co_filename);
    if (!file) return -1;
    PyObjectT *v = py_dict_get(known, file); /* (borrowed; NULL when absent) */
    py_decref(file);
    return v == py_true;
}

/* the object's type is exactly `type` (1; 0 when not: a subclass, or an object whose __class__ says so) */
static int exact_type(PyObjectT *o, PyObjectT *type) {
    PyObjectT *t = py_type(o); /* (new reference; never NULL for an object) */
    if (t) py_decref(t);
    return t == type;
}

/* NULL with an error set: ctypes' py_object restype dereferences a NULL returned with none (Py_DECREF(NULL) in
   GetResult, every CPython to 3.13 at least): a crash of the program, where frame_and_imports would walk in Python */
static PyObjectT *no_stack(void) {
    void (*set)(PyObjectT *, const char *) = (void (*)(PyObjectT *, const char *))dlsym(RTLD_DEFAULT, "PyErr_SetString");
    PyObjectT **exc = (PyObjectT **)dlsym(RTLD_DEFAULT, "PyExc_RuntimeError");
    if (set && exc && *exc) set(*exc, "dlltrace_linux_stack: no such Python C API here");
    return 0;
}

PyObjectT *dlltrace_linux_stack(PyObjectT *frame, PyObjectT *boot, PyObjectT *external, PyObjectT *known) {
    if (!frames_api_ready() || !frame || !known) return no_stack();
    PyObjectT *names = py_list_new(0), *candidates = py_list_new(0), *out = 0;
    if (!names || !candidates) goto done;
    py_incref(frame);
    PyObjectT *f = frame;
    while (f) {
        PyObjectT *g = py_frame_globals ? py_frame_globals(f) : py_getattr_str(f, "f_globals"); /* (new references) */
        if (!g) goto fail;
        if (g != boot && g != external) {
            PyObjectT *code = py_frame_code(f);
            int ok = code != 0;
            int other = ok ? not_module_code(code) : -1;
            if (other == 0) {
                PyObjectT *name = py_dict_get_str(g, "__name__"); /* (borrowed) */
                ok = py_list_append(names, name ? name : py_none) == 0;
            } else if (other < 0) ok = 0;
            int lib = ok ? known_library(code, known) : -1;
            if (lib == 0) {
                PyObjectT *item = py_tuple_pack(3, code, g, f);
                ok = item && py_list_append(candidates, item) == 0;
                if (item) py_decref(item);
            } else if (lib < 0) ok = 0;
            if (code) py_decref(code);
            if (!ok) {
                py_decref(g);
                goto fail;
            }
        }
        py_decref(g);
        PyObjectT *back = py_frame_back(f);
        py_decref(f);
        f = back;
    }
    out = py_tuple_pack(2, names, candidates);
    goto done;
fail:
    py_decref(f);
done:
    if (names) py_decref(names);
    if (candidates) py_decref(candidates);
    return out;
}

/* --- py_import written here, without the Python hook (trace/shim.py c_audit_filter: fast_import) ---------------------
 * The Python hook's steps for an `import` event (its stack walked, its JSON made, two ctypes calls into this library)
 * were most of the recorder's cost in `import scipy.stats, sklearn, pandas` (1 600 imports). Once the bootstrap has
 * given it shim.user_frame_json (the one Python step left: which frame is the user's, for the frames whose file
 * _LIBRARY_FILES does not know for a library's) and the warnings module is hooked (the hook no longer needs every
 * event), an import event is written here: the same fields, in the same order, as the hook writes ("module", "frame",
 * "imports"), and its seq made the thread's context. Anything out of the common case (a name that is not a str, or
 * that JSON would escape, a Python error) gives the event to the Python hook, which writes it as before. */
static PyObjectT *fast_user, *fast_known, *fast_boot, *fast_external, *fast_str;
static PyObjectT *(*py_eval_frame)(void);
static const char *(*py_utf8)(PyObjectT *, long *);
static int (*py_isinstance)(PyObjectT *, PyObjectT *);
static PyObjectT *(*py_call3)(PyObjectT *, ...);
static PyObjectT *(*py_tuple_item)(PyObjectT *, long);
static atomic_long fast_written; /* py_import events written here (dlltrace_linux_fast_count: for the tests) */

long dlltrace_linux_fast_count(void) { return atomic_load(&fast_written); }

#define FAST_IMPORTS_LIMIT 64 /* trace/shim.py IMPORTS_LIMIT: the outermost modules of the stack kept */

/* the UTF-8 of a str JSON takes as it is (no quote, backslash or control character); NULL otherwise (error cleared) */
static const char *plain_utf8(PyObjectT *o, long *n) {
    const char *u = py_utf8(o, n);
    if (!u) { py_err_clear(); return 0; }
    for (long i = 0; i < *n; i++) {
        unsigned char c = (unsigned char)u[i];
        if (c < 0x20 || c == 0x7f || c == '"' || c == '\\') return 0;
    }
    return u;
}

int dlltrace_linux_fast_import(PyObjectT *user_fn, PyObjectT *known, PyObjectT *boot, PyObjectT *external,
                               PyObjectT *str_type) {
    if (!frames_api_ready() || !user_fn || !known || !boot || !external || !str_type || fast_user) return 1;
    py_eval_frame = (PyObjectT *(*)(void))dlsym(RTLD_DEFAULT, "PyEval_GetFrame");
    py_utf8 = (const char *(*)(PyObjectT *, long *))dlsym(RTLD_DEFAULT, "PyUnicode_AsUTF8AndSize");
    py_isinstance = (int (*)(PyObjectT *, PyObjectT *))dlsym(RTLD_DEFAULT, "PyObject_IsInstance");
    py_call3 = (PyObjectT *(*)(PyObjectT *, ...))dlsym(RTLD_DEFAULT, "PyObject_CallFunctionObjArgs");
    py_tuple_item = (PyObjectT *(*)(PyObjectT *, long))dlsym(RTLD_DEFAULT, "PyTuple_GetItem");
    if (!py_eval_frame || !py_utf8 || !py_isinstance || !py_call3 || !py_tuple_item || !py_err_clear) return 1;
    PyObjectT *keep[] = {user_fn, known, boot, external, str_type};
    for (int i = 0; i < 5; i++) py_incref(keep[i]);
    fast_known = known, fast_boot = boot, fast_external = external, fast_str = str_type;
    fast_user = user_fn; /* (last: the filter takes the path once this is set) */
    return 0;
}

struct text { char *p; size_t n, cap; };

static int text_add(struct text *t, const char *s, size_t n) {
    if (t->n + n + 1 > t->cap) {
        size_t cap = (t->cap ? t->cap * 2 : 1024);
        while (cap < t->n + n + 1) cap *= 2;
        char *p = realloc(t->p, cap);
        if (!p) return 0;
        t->p = p, t->cap = cap;
    }
    memcpy(t->p + t->n, s, n);
    t->n += n;
    t->p[t->n] = 0;
    return 1;
}

/* 1 when the event was written here; 0: the Python hook is to have it (nothing written); -1: the program's own error (a
   Ctrl-C while user_frame_json ran) is left set, for the import to raise (program_error) */
static int fast_import(PyObjectT *args) {
    if (!fast_user || fast_busy) return 0;
    PyObjectT *module = py_tuple_item(args, 0); /* (borrowed) */
    if (!module) { py_err_clear(); return 0; }
    if (!exact_type(module, fast_str)) return 0; /* (a subclass: its str() is the hook's) */
    long mlen;
    const char *mod = plain_utf8(module, &mlen);
    if (!mod) return 0;
    PyObjectT *frame = py_eval_frame(); /* (borrowed) */
    if (!frame) return 0;
    fast_busy = 1;
    int done = 0;
    struct text out = {0};
    PyObjectT **stack = 0; /* the module names, innermost first (references) */
    long depth = 0, cap = 0;
    PyObjectT *user = 0; /* shim.user_frame_json's text of the user's frame (a reference) */
    int fail = 0;
    py_incref(frame);
    PyObjectT *f = frame;
    while (f && !fail) {
        PyObjectT *g = py_frame_globals ? py_frame_globals(f) : py_getattr_str(f, "f_globals");
        if (!g) { fail = 1; break; }
        if (g != fast_boot && g != fast_external) {
            PyObjectT *code = py_frame_code(f);
            int other = code ? not_module_code(code) : -1;
            if (other < 0) fail = 1;
            else if (other == 0) {
                PyObjectT *name = py_dict_get_str(g, "__name__"); /* (borrowed) */
                /* exactly a str, or not one at all: anything else (a str subclass, whose != may be its own; an
                   object whose __class__ says str, which PyUnicode_CompareWithASCIIString would read as a str's
                   memory) is the Python hook's */
                int is_str = !name ? 0 : exact_type(name, fast_str) ? 1 : py_isinstance(name, fast_str) == 0 ? 0 : -1;
                if (is_str < 0) fail = 1;
                else if (is_str == 1 && py_str_eq_ascii(name, "__main__") != 0) {
                    if (depth == cap) {
                        long ncap = cap ? cap * 2 : 32;
                        PyObjectT **ns = realloc(stack, (size_t)ncap * sizeof *ns);
                        if (!ns) fail = 1;
                        else stack = ns, cap = ncap;
                    }
                    if (!fail) { py_incref(name); stack[depth++] = name; }
                }
            }
            if (!fail && !user) {
                int lib = known_library(code, fast_known);
                if (lib < 0) fail = 1;
                else if (lib == 0) {
                    void *ts = untraced_begin();
                    PyObjectT *r = py_call3(fast_user, code, g, f, (PyObjectT *)0);
                    untraced_end(ts);
                    if (!r) fail = 1;
                    else if (r == py_none) py_decref(r);
                    else user = r;
                }
            }
            if (code) py_decref(code);
        }
        py_decref(g);
        if (fail) break;
        PyObjectT *back = py_frame_back(f);
        py_decref(f);
        f = back;
    }
    if (f) py_decref(f);
    if (fail) {
        if (program_error()) done = -1; /* (left set: the program's Ctrl-C) */
        else py_err_clear();
        goto done;
    }
    /* "module":..,"frame":..,"imports":[outermost first, at most FAST_IMPORTS_LIMIT] */
    long ulen = 0;
    const char *utext = user ? py_utf8(user, &ulen) : "null";
    if (!utext) { py_err_clear(); goto done; }
    if (!user) ulen = 4;
    if (!text_add(&out, "\"module\":\"", 10) || !text_add(&out, mod, (size_t)mlen) || !text_add(&out, "\",\"frame\":", 10)
        || !text_add(&out, utext, (size_t)ulen) || !text_add(&out, ",\"imports\":[", 12))
        goto done;
    long kept = depth < FAST_IMPORTS_LIMIT ? depth : FAST_IMPORTS_LIMIT;
    for (long i = 0; i < kept; i++) {
        long nlen;
        const char *n = plain_utf8(stack[depth - 1 - i], &nlen);
        if (!n) goto done;
        if ((i && !text_add(&out, ",", 1)) || !text_add(&out, "\"", 1) || !text_add(&out, n, (size_t)nlen)
            || !text_add(&out, "\"", 1))
            goto done;
    }
    if (!text_add(&out, "]", 1)) goto done;
    long long seq = emit("py_import", out.p, NULL);
    if (seq) dlltrace_set_context(seq);
    atomic_fetch_add(&fast_written, 1);
    done = 1;
done:
    for (long i = 0; i < depth; i++) py_decref(stack[i]);
    free(stack);
    free(out.p);
    if (user) py_decref(user);
    fast_busy = 0;
    return done;
}

/* the events the Python hook gets: every one (1), or the three it records (0) */
void dlltrace_linux_audit_all(int all_events) { atomic_store(&py_all_events, all_events != 0); }

/* (the Windows shim's stop, for dlltrace.Trace; the Linux recorder records from process start to exit) */
int dlltrace_stop(void) { return 21; /* ERROR_NOT_READY */ }
