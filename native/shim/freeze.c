/* Freezing the other threads while a hook is patched in (hook_begin / hook_end), shared by hook_x64.c and
 * hook_x86.c: the two differ only in the name of the instruction pointer (Rip, Eip).
 *
 * A thread stopped inside the bytes being replaced would resume in the middle of the new jmp. So every other
 * thread of the process is suspended first, and one whose instruction pointer lies inside the bytes being
 * replaced (past their first byte: at offset 0 the new jmp starts where the old instruction did) is moved to
 * the same offset in the trampoline, which holds the same instructions followed by a jmp back
 * (hook_move_frozen). The thread list is VirtualAlloc'd: a suspended thread may hold the heap lock (or the
 * loader lock), so nothing between hook_begin and hook_end may use the heap or the loader. Threads created
 * after the snapshot are not frozen (hook_x64.c's one-store patch covers them where it fits). */
#define WIN32_LEAN_AND_MEAN
#include <windows.h>
#include <tlhelp32.h>
#include "hook.h"

#ifdef _WIN64
typedef DWORD64 ip_t;
#define IP(c) ((c).Rip)
#else
typedef DWORD ip_t;
#define IP(c) ((c).Eip)
#endif

typedef struct { HANDLE h; ip_t ip; } frozen_t;
static frozen_t *g_frozen;
static unsigned g_nfrozen, g_frozen_cap; /* g_frozen_cap: entries in the VirtualAlloc'd list */

static int frozen_add(HANDLE h, ip_t ip) {
    if (g_nfrozen == g_frozen_cap) {
        unsigned cap = g_frozen_cap ? g_frozen_cap * 2 : 4096 / sizeof(frozen_t);
        frozen_t *n = (frozen_t *)VirtualAlloc(NULL, cap * sizeof(frozen_t), MEM_COMMIT | MEM_RESERVE, PAGE_READWRITE);
        if (!n) return 0;
        for (unsigned i = 0; i < g_nfrozen; i++) n[i] = g_frozen[i];
        if (g_frozen) VirtualFree(g_frozen, 0, MEM_RELEASE);
        g_frozen = n;
        g_frozen_cap = cap;
    }
    g_frozen[g_nfrozen].h = h;
    g_frozen[g_nfrozen].ip = ip;
    g_nfrozen++;
    return 1;
}

int hook_begin(void) {
    DWORD self = GetCurrentThreadId(), pid = GetCurrentProcessId();
    hook_prepare(); /* (what the machine's hooks ask of the system, asked before any thread is frozen) */
    HANDLE snap = CreateToolhelp32Snapshot(TH32CS_SNAPTHREAD, 0);
    if (snap == INVALID_HANDLE_VALUE) return -1;
    THREADENTRY32 te;
    te.dwSize = sizeof(te);
    for (BOOL more = Thread32First(snap, &te); more; te.dwSize = sizeof(te), more = Thread32Next(snap, &te)) {
        if (te.dwSize < FIELD_OFFSET(THREADENTRY32, th32OwnerProcessID) + sizeof(DWORD)) continue;
        if (te.th32OwnerProcessID != pid || te.th32ThreadID == self) continue;
        HANDLE h = OpenThread(THREAD_SUSPEND_RESUME | THREAD_GET_CONTEXT | THREAD_SET_CONTEXT, FALSE, te.th32ThreadID);
        if (!h) continue; /* gone meanwhile */
        if (SuspendThread(h) == (DWORD)-1) { CloseHandle(h); continue; }
        /* SuspendThread may return before the thread has stopped; GetThreadContext waits for it */
        CONTEXT c;
        c.ContextFlags = CONTEXT_CONTROL;
        ip_t ip = GetThreadContext(h, &c) ? IP(c) : 0;
        if (!frozen_add(h, ip)) { ResumeThread(h); CloseHandle(h); break; }
    }
    CloseHandle(snap);
    return (int)g_nfrozen;
}

void hook_end(void) {
    for (unsigned i = 0; i < g_nfrozen; i++) {
        ResumeThread(g_frozen[i].h);
        CloseHandle(g_frozen[i].h);
    }
    g_nfrozen = 0;
}

void hook_move_frozen(unsigned char *t, int len, unsigned char *tramp) {
    for (unsigned i = 0; i < g_nfrozen; i++) {
        ip_t ip = g_frozen[i].ip;
        if (ip <= (ip_t)(ULONG_PTR)t || ip >= (ip_t)(ULONG_PTR)(t + len)) continue;
        CONTEXT c;
        c.ContextFlags = CONTEXT_CONTROL;
        if (!GetThreadContext(g_frozen[i].h, &c) || IP(c) != ip) continue;
        IP(c) = (ip_t)(ULONG_PTR)(tramp + (ip - (ip_t)(ULONG_PTR)t));
        if (SetThreadContext(g_frozen[i].h, &c)) g_frozen[i].ip = IP(c);
    }
}
