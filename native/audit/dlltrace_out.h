/* The trace file both recorder libraries write (dlltrace_audit.c, dlltrace_preload.c): opened once (O_APPEND) and
 * kept for the life of the process, out of the way of a program's low descriptor numbers, close-on-exec, and checked
 * (its pid, device and inode) before each write, so a forked child, or a program that closed the number and reuses
 * it, gets it opened again. (Opened and closed for each event, it was a fifth of the Python hook's time in
 * `import scipy.stats, sklearn, pandas`.) Included by both; each has its own state. */
#ifndef DLLTRACE_OUT_H
#define DLLTRACE_OUT_H

#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

struct trace_out { atomic_int fd; pid_t pid; dev_t dev; ino_t ino; };
#define TRACE_OUT_INIT { -1, 0, 0, 0 }

/* The descriptor of DLLTRACE_TRACE for this process, -1 when there is none. `flags`: more open(2) flags (O_CREAT: the
   file is made with mode 0644). `forked` (may be NULL): set to 1 when the file was opened again because the process is
   not the one that opened it (a forked child), else left as it was. */
static int trace_out_fd(struct trace_out *o, int flags, int *forked) {
    pid_t pid = getpid();
    int fd = atomic_load(&o->fd);
    struct stat st;
    if (fd >= 0 && o->pid == pid && fstat(fd, &st) == 0 && st.st_dev == o->dev && st.st_ino == o->ino)
        return fd;
    const char *p = getenv("DLLTRACE_TRACE");
    if (!p || !*p) return -1;
    int nfd = open(p, O_WRONLY | O_APPEND | O_CLOEXEC | flags, 0644);
    if (nfd < 0) return -1;
    int high = fcntl(nfd, F_DUPFD_CLOEXEC, 900); /* out of the way of a program's low numbers */
    if (high >= 0) { close(nfd); nfd = high; }
    if (fstat(nfd, &st) != 0) { close(nfd); return -1; }
    int expected = fd;
    if (!atomic_compare_exchange_strong(&o->fd, &expected, nfd)) { close(nfd); return atomic_load(&o->fd); }
    if (forked && o->pid != pid && o->pid != 0) *forked = 1;
    o->pid = pid;
    o->dev = st.st_dev;
    o->ino = st.st_ino;
    return nfd;
}

#endif
