/* dlltrace's Linux recorder: an LD_AUDIT library (rtld-audit(7)), built with the system gcc.
 *
 * Appends one JSON line per event to the file named by DLLTRACE_TRACE (docs/trace-format.md, "Linux
 * events"):
 *   audit_start  the process began (la_version): exe (/proc/self/exe), ppid, ld_library_path (and
 *                has_ld_library_path: set at all), ld_audit, ld_preload (as the environment had them), cwd
 *   objsearch    every name ld.so tries (la_objsearch): name, flag (LA_SER_ORIG for the name asked for,
 *                then LA_SER_RUNPATH / LA_SER_LIBPATH / LA_SER_CONFIG / LA_SER_DEFAULT for each file
 *                tried), by (the path of the object whose search it is; "" for the executable), cwd (the
 *                current folder, on a LA_SER_ORIG of a relative path only)
 *   objopen      every object mapped (la_objopen): path, lmid (the namespace), by
 *   activity     la_activity: LA_ACT_ADD before objects are added, LA_ACT_CONSISTENT after (a dlopen's
 *                end, failed or not), LA_ACT_DELETE
 * Lossless across processes and threads: each event is ONE write(2) of one whole line (< 8 KiB) to a
 * descriptor opened with O_APPEND. On Linux an O_APPEND write to a regular file moves the offset to the
 * end and writes under the inode's lock, as one step: two writers never interleave or overwrite
 * (tests/test_linux_trace.py hammers it with threads and processes and counts every line).
 * Never changes the program: la_objsearch returns the name unchanged, la_objopen asks for no symbol
 * binding audit (returns 0), the descriptor is close-on-exec and checked (fstat: device and inode)
 * before each write, so a program that closes it and reuses the number never gets our lines.
 * Python context: the LD_PRELOAD library (dlltrace_preload.c) holds the process's event counter and each
 * thread's context (the seq of the Python action running: py_import, py_dlopen); found by symbol when it
 * is mapped, they give every event of this library its seq and a "ctx" field.
 * Children: ld.so leaves LD_AUDIT and DLLTRACE_TRACE in the environment, so exec'd programs load the
 * recorder again; a forked child notices its new pid, reopens, and numbers its events from 1.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "dlltrace_out.h"

static atomic_long own_seq;
static atomic_long *seq = &own_seq; /* the preload library's counter once la_objopen finds it */
struct ctx_slot { atomic_int tid; atomic_llong ctx; };
static struct ctx_slot *ctx_table; /* the preload library's per-thread contexts (the Python action) */
#define CTX_SLOTS 4096
static struct trace_out out = TRACE_OUT_INIT; /* the trace (dlltrace_out.h: kept open, checked before each write) */

static int out_fd(void) {
    int forked = 0;
    int fd = trace_out_fd(&out, O_CREAT, &forked);
    if (forked && seq == &own_seq) atomic_store(seq, 0); /* a forked child (the preload's counter resets itself: pthread_atfork) */
    return fd;
}

/* a JSON string (escaped) at o; stops before end */
static char *str(char *o, char *end, const char *s) {
    *o++ = '"';
    for (; s && *s && o < end - 8; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') { *o++ = '\\'; *o++ = (char)c; }
        else if (c < 0x20 || c == 0x7f) o += snprintf(o, 8, "\\u%04x", c);
        else *o++ = (char)c; /* UTF-8 passes through; bytes that are not UTF-8 are the reader's to flag */
    }
    *o++ = '"';
    return o;
}

struct field { const char *key; const char *s; long n; int is_num; };

static void emit_(const char *kind, const struct field *f, int nf);

static void emit(const char *kind, const struct field *f, int nf) {
    int saved = errno; /* (this library's libc has its own errno; kept all the same) */
    emit_(kind, f, nf);
    errno = saved;
}

static void emit_(const char *kind, const struct field *f, int nf) {
    int fd = out_fd();
    if (fd < 0) return;
    char buf[8192];
    char *end = buf + sizeof buf - 64;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    long s = atomic_fetch_add(seq, 1) + 1;
    long long ctx = 0;
    if (ctx_table) {
        int tid = (int)syscall(SYS_gettid);
        unsigned h = (unsigned)tid * 2654435761u;
        for (unsigned i = 0; i < CTX_SLOTS; i++) {
            struct ctx_slot *sl = &ctx_table[(h + i) % CTX_SLOTS];
            int cur = atomic_load(&sl->tid);
            if (cur == tid) { ctx = atomic_load(&sl->ctx); break; }
            if (cur == 0) break;
        }
    }
    char *o = buf + snprintf(buf, 200, "{\"ev\":\"%s\",\"pid\":%d,\"tid\":%ld,\"seq\":%ld,\"t\":%lld", kind,
                             (int)getpid(), (long)syscall(SYS_gettid), s,
                             (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec);
    if (ctx > 0) o += snprintf(o, 40, ",\"ctx\":%lld", ctx);
    for (int i = 0; i < nf && o < end - 64; i++) {
        o += snprintf(o, 64, ",\"%s\":", f[i].key);
        if (f[i].is_num) o += snprintf(o, 32, "%ld", f[i].n);
        else o = str(o, end, f[i].s);
    }
    *o++ = '}';
    *o++ = '\n';
    ssize_t n = write(fd, buf, (size_t)(o - buf));
    (void)n;
}

static const char *map_name(uintptr_t *cookie) {
    if (!cookie || !*cookie) return "";
    const struct link_map *m = (const struct link_map *)*cookie;
    return m->l_name ? m->l_name : "";
}

unsigned int la_version(unsigned int version) {
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = 0;
    const char *llp = getenv("LD_LIBRARY_PATH"), *aud = getenv("LD_AUDIT"), *pre = getenv("LD_PRELOAD");
    char cwd[4096];
    if (!getcwd(cwd, sizeof cwd)) cwd[0] = 0;
    struct field f[] = {{"exe", exe, 0, 0}, {"ppid", 0, (long)getppid(), 1}, {"la_version", 0, (long)version, 1},
                        {"ld_library_path", llp ? llp : "", 0, 0}, {"has_ld_library_path", 0, llp != 0, 1},
                        {"ld_audit", aud ? aud : "", 0, 0}, {"ld_preload", pre ? pre : "", 0, 0},
                        {"cwd", cwd, 0, 0}};
    emit("audit_start", f, 8);
    return version < LAV_CURRENT ? version : LAV_CURRENT;
}

static const char *ser_name(unsigned int flag) {
    switch (flag) {
    case LA_SER_ORIG: return "LA_SER_ORIG";
    case LA_SER_LIBPATH: return "LA_SER_LIBPATH";
    case LA_SER_RUNPATH: return "LA_SER_RUNPATH";
    case LA_SER_CONFIG: return "LA_SER_CONFIG";
    case LA_SER_DEFAULT: return "LA_SER_DEFAULT";
    case LA_SER_SECURE: return "LA_SER_SECURE";
    default: return "LA_SER_UNKNOWN";
    }
}

char *la_objsearch(const char *name, uintptr_t *cookie, unsigned int flag) {
    struct field f[] = {{"name", name, 0, 0}, {"flag", ser_name(flag), 0, 0}, {"by", map_name(cookie), 0, 0},
                        {"cwd", "", 0, 0}};
    char cwd[4096];
    int nf = 3;
    /* a relative path (a "/" in it, not first) is opened from the current folder, and the object's $ORIGIN
       is made from it (glibc _dl_get_origin): the folder of that moment, which os.chdir may have changed */
    if (flag == LA_SER_ORIG && name && name[0] != '/' && strchr(name, '/') && getcwd(cwd, sizeof cwd)) {
        f[3].s = cwd;
        nf = 4;
    }
    emit("objsearch", f, nf);
    return (char *)name;
}

/* a symbol's address in a mapped object, through its DT_HASH table (the preload library is linked with
   --hash-style=both for this) */
static void *find_symbol(const struct link_map *m, const char *want) {
    const ElfW(Sym) *symtab = 0;
    const char *strtab = 0;
    const ElfW(Word) *hash = 0;
    for (const ElfW(Dyn) *d = m->l_ld; d && d->d_tag != DT_NULL; d++) {
        ElfW(Addr) a = d->d_un.d_ptr;
        if (a < m->l_addr) a += m->l_addr; /* (not relocated in place on every architecture) */
        if (d->d_tag == DT_SYMTAB) symtab = (const void *)a;
        else if (d->d_tag == DT_STRTAB) strtab = (const void *)a;
        else if (d->d_tag == DT_HASH) hash = (const void *)a;
    }
    if (!symtab || !strtab || !hash) return 0;
    for (ElfW(Word) i = 0; i < hash[1]; i++)
        if (symtab[i].st_shndx != SHN_UNDEF && strcmp(strtab + symtab[i].st_name, want) == 0)
            return (void *)(m->l_addr + symtab[i].st_value);
    return 0;
}

static int ends_with(const char *s, const char *tail) {
    size_t a = strlen(s), b = strlen(tail);
    return a >= b && strcmp(s + a - b, tail) == 0;
}

unsigned int la_objopen(struct link_map *map, Lmid_t lmid, uintptr_t *cookie) {
    *cookie = (uintptr_t)map; /* la_objsearch's cookie names the object whose search it is */
    if (lmid == LM_ID_BASE && map->l_name && ends_with(map->l_name, "/libdlltrace_preload.so") && seq == &own_seq) {
        atomic_long *theirs = find_symbol(map, "dlltrace_linux_seq");
        if (theirs) { /* one numbering for the process from here on */
            atomic_store(theirs, atomic_load(&own_seq));
            seq = theirs;
        }
        ctx_table = find_symbol(map, "dlltrace_linux_ctx_table");
    }
    struct field f[] = {{"path", map->l_name ? map->l_name : "", 0, 0}, {"lmid", 0, (long)lmid, 1}};
    emit("objopen", f, 2);
    return 0;
}

void la_activity(uintptr_t *cookie, unsigned int flag) {
    (void)cookie;
    const char *what = flag == LA_ACT_ADD ? "LA_ACT_ADD" : flag == LA_ACT_DELETE ? "LA_ACT_DELETE" : "LA_ACT_CONSISTENT";
    struct field f[] = {{"flag", what, 0, 0}};
    emit("activity", f, 1);
}
