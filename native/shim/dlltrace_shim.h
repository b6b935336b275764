/* dlltrace shim: the small C API (also the cffi cdef in tracer/dlltrace/shim.py -- keep them in step). */
#ifndef DLLTRACE_SHIM_H
#define DLLTRACE_SHIM_H
#include <wchar.h>

#define DLLTRACE_SHIM_VERSION "0.1.0"

#ifdef DLLTRACE_SHIM_BUILD
#define DLLTRACE_API __declspec(dllexport)
#else
#define DLLTRACE_API __declspec(dllimport)
#endif

/* Open the trace (trace_path, or the DLLTRACE_TRACE environment variable when NULL), write the
   process and env events, install the hooks. `via` names who started it ("launcher", "python", ...;
   NULL = "api"). Idempotent: a second call returns 0 and does nothing.
   Returns 0, or a Win32 error code (the trace could not be opened; ERROR_ENVVAR_NOT_FOUND = 203). */
DLLTRACE_API int dlltrace_start(const wchar_t *trace_path, const char *via);

/* Append one event: {"ev":<ev>,"seq":..,"pid":..,"tid":..,"t":..,<fields_json>} where fields_json is
   UTF-8 JSON object members without braces ("" for none). Returns the event's seq, or 0 when not started. */
DLLTRACE_API long long dlltrace_write_event(const char *ev, const char *fields_json);

/* Set this thread's Python context: the seq of the Python event (import, ctypes.dlopen, ...) that
   later loads on this thread are attributed to (the "ctx" field of load_begin). 0 clears it. */
DLLTRACE_API void dlltrace_set_context(long long ctx_seq);

DLLTRACE_API const char *dlltrace_version(void);

/* Stop recording: the stats line is written, and the hooks pass every call through from then on; the
   shim stays loaded and cannot start again. Returns 0, or ERROR_NOT_READY (21) when it was not running.
   For the Python API (dlltrace.Trace). */
DLLTRACE_API int dlltrace_stop(void);

/* Append an "env" event for process `pid` with `exe` as its program, from this process's own
   state (cwd, PATH, DLL-search defaults, KnownDLLs, system folders) and "modules": null. For the
   launcher, whose child inherited that state but ended before its shim could start (a static
   import failed). Not for a traced process: returns ERROR_ALREADY_INITIALIZED (1247) there.
   Returns 0 or a Win32 error code. */
DLLTRACE_API int dlltrace_env_snapshot(const wchar_t *trace_path, unsigned long pid, const wchar_t *exe);

#endif
