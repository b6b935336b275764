/* dlltrace's Linux recorder, part 2 (LD_PRELOAD): a wrapper of dlerror() that records the text of each
 * failed dlopen/dlmopen as the program reads it ({"ev":"dlerror","text":...}) and returns it unchanged.
 * dlopen itself is NOT wrapped: glibc takes the caller of dlopen from its return address (its DT_RUNPATH
 * and DT_RPATH are searched), so a wrapper would become the caller and change the search. dlerror has
 * no such dependence: calling the real one and returning its pointer is exactly what the program gets. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static void record(const char *text) {
    const char *p = getenv("DLLTRACE_TRACE");
    if (!p || !*p) return;
    int fd = open(p, O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd < 0) return;
    char buf[8192], *o = buf, *end = buf + sizeof buf - 16;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    o += snprintf(o, 200, "{\"ev\":\"dlerror\",\"pid\":%d,\"tid\":%ld,\"seq\":0,\"t\":%lld,\"text\":\"",
                  (int)getpid(), (long)syscall(SYS_gettid), (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec);
    for (const char *s = text; *s && o < end - 8; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') { *o++ = '\\'; *o++ = (char)c; }
        else if (c < 0x20 || c == 0x7f) o += snprintf(o, 8, "\\u%04x", c);
        else *o++ = (char)c;
    }
    *o++ = '"'; *o++ = '}'; *o++ = '\n';
    ssize_t n = write(fd, buf, (size_t)(o - buf));
    (void)n;
    close(fd);
}

static char *(*real)(void);

/* resolved when the library loads: a dlsym call made inside dlerror would clear the very error the
   program is asking for (dlsym resets the thread's dlerror state) */
__attribute__((constructor)) static void init(void) {
    real = (char *(*)(void))dlsym(RTLD_NEXT, "dlerror");
}

char *dlerror(void) {
    char *e = real ? real() : NULL;
    if (e) record(e);
    return e;
}
