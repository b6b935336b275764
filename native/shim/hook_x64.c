/* Inline trampoline hooks for x64.
 *
 * target:  jmp rel32 -> relay                (5 bytes; the rest of the displaced instructions: nop)
 * relay:   jmp [rip+0]; dq hook              (in a page allocated within +-2 GB of target)
 * trampoline: <displaced instructions>; jmp [rip+0]; dq target+len
 *
 * The displaced instructions are decoded by a small length decoder that knows the prologues seen
 * in practice and refuses everything else (RIP-relative operands and branches cannot be copied):
 *   Wine 8 hot-patch   48 8d a4 24 00 00 00 00        lea rsp,[rsp+0]
 *   syscall stubs      4c 8b d1 / b8 imm32            mov r10,rcx; mov eax,N  (Wine and Windows)
 *   common frames      push reg, sub rsp,imm, mov [rsp+x],reg, mov r11,rsp, ...
 * Only the Wine prologues are exercised by the tests (native/README.md).
 */
#define WIN32_LEAN_AND_MEAN
#include <windows.h>
#ifdef _MSC_VER
#include <intrin.h>
#endif
#include "hook.h"

static int modrm_len(const unsigned char *p, int *ok) {
    /* p at the ModRM byte; returns ModRM + SIB + displacement length */
    unsigned m = p[0], mod = m >> 6, rm = m & 7;
    int n = 1;
    if (mod == 3) return n;
    if (rm == 4) {
        unsigned sib = p[1];
        n++;
        if (mod == 0 && (sib & 7) == 5) n += 4;
    } else if (mod == 0 && rm == 5) {
        *ok = 0; /* RIP-relative: would need relocation */
        return 0;
    }
    if (mod == 1) n += 1;
    else if (mod == 2) n += 4;
    return n;
}

/* Length of the instruction at p, or 0 when it is not one this decoder may relocate
   (unknown opcode, RIP-relative operand, any branch). */
static int hook_insn_len(const unsigned char *p) {
    int n = 0, rexw = 0, opsize = 0, ok = 1;
    while (p[n] == 0x66) { opsize = 1; n++; }
    if ((p[n] & 0xF0) == 0x40) { rexw = (p[n] & 8) != 0; n++; }
    unsigned op = p[n++];
    if (op >= 0x50 && op <= 0x5F) return n;                   /* push/pop reg */
    if (op == 0x90) return n;                                  /* nop */
    if (op >= 0xB8 && op <= 0xBF) return n + (rexw ? 8 : opsize ? 2 : 4); /* mov reg, imm */
    if (op == 0x6A) return n + 1;                              /* push imm8 */
    if (op == 0x68) return n + 4;                              /* push imm32 */
    switch (op) {
    case 0x01: case 0x03: case 0x09: case 0x0B: case 0x21: case 0x23: case 0x29: case 0x2B:
    case 0x31: case 0x33: case 0x39: case 0x3B: case 0x84: case 0x85: case 0x88: case 0x89:
    case 0x8A: case 0x8B: case 0x8D: {
        int m = modrm_len(p + n, &ok);
        return ok ? n + m : 0;
    }
    case 0x80: case 0x83: case 0xC0: case 0xC1: case 0xC6: {
        int m = modrm_len(p + n, &ok);
        return ok ? n + m + 1 : 0;
    }
    case 0x81: case 0xC7: {
        int m = modrm_len(p + n, &ok);
        return ok ? n + m + (opsize ? 2 : 4) : 0;
    }
    case 0xF6: case 0xF7: {
        if (((p[n] >> 3) & 7) != 0) return 0; /* only test r/m, imm */
        int m = modrm_len(p + n, &ok);
        return ok ? n + m + (op == 0xF6 ? 1 : opsize ? 2 : 4) : 0;
    }
    case 0x0F:
        if (p[n] == 0x1F) { /* nop r/m */
            int m = modrm_len(p + n + 1, &ok);
            return ok ? n + 1 + m : 0;
        }
        return 0;
    default:
        return 0;
    }
}

/* A 64 KB block within +-2 GB of the target, carved into 64-byte slots. */
typedef struct { unsigned char *base; unsigned used; } near_block_t;
static near_block_t g_blocks[8];

static ULONG_PTR g_gran;
static ULONG_PTR granularity(void) { /* asked before any thread is frozen (hook_begin) */
    if (!g_gran) {
        SYSTEM_INFO si;
        GetSystemInfo(&si);
        g_gran = si.dwAllocationGranularity;
    }
    return g_gran;
}

static unsigned char *near_alloc(unsigned char *target) {
    for (int i = 0; i < 8; i++) {
        near_block_t *b = &g_blocks[i];
        if (b->base && b->used + 64 <= 65536 && llabs((LONGLONG)(b->base - target)) < 0x70000000LL) {
            unsigned char *r = b->base + b->used;
            b->used += 64;
            return r;
        }
    }
    int slot = -1;
    for (int i = 0; i < 8; i++) if (!g_blocks[i].base) { slot = i; break; }
    if (slot < 0) return NULL;
    ULONG_PTR gran = granularity();
    ULONG_PTR t = (ULONG_PTR)target & ~(gran - 1);
    /* probe outwards from the target, below then above */
    for (ULONG_PTR dist = gran; dist < 0x70000000ULL; dist += gran) {
        for (int dir = 0; dir < 2; dir++) {
            ULONG_PTR a = dir ? t + dist : t - dist;
            if (!dir && dist > t) continue;
            MEMORY_BASIC_INFORMATION mbi;
            if (!VirtualQuery((void *)a, &mbi, sizeof(mbi)) || mbi.State != MEM_FREE) continue;
            void *p = VirtualAlloc((void *)a, 65536, MEM_RESERVE | MEM_COMMIT, PAGE_EXECUTE_READWRITE);
            if (p) {
                g_blocks[slot].base = (unsigned char *)p;
                g_blocks[slot].used = 64;
                return (unsigned char *)p;
            }
        }
    }
    return NULL;
}

static void put_absjmp(unsigned char *p, void *dest) {
    p[0] = 0xFF; p[1] = 0x25; p[2] = p[3] = p[4] = p[5] = 0; /* jmp [rip+0] */
    *(void **)(p + 6) = dest;
}

/* ---- freezing the other threads (hook_begin / hook_end): freeze.c, shared with hook_x86.c -------- */
/* 16 bytes at a 16-aligned dst in one locked cmpxchg16b */
static void store16(unsigned char *dst, const unsigned char *src) {
    ULONGLONG lo = *(const ULONGLONG *)src, hi = *(const ULONGLONG *)(src + 8);
#ifdef _MSC_VER
    LONG64 cmp[2] = {((volatile LONG64 *)dst)[0], ((volatile LONG64 *)dst)[1]};
    while (!_InterlockedCompareExchange128((volatile LONG64 *)dst, (LONG64)hi, (LONG64)lo, cmp))
        ;
#else
    ULONGLONG olo = ((volatile ULONGLONG *)dst)[0], ohi = ((volatile ULONGLONG *)dst)[1];
    unsigned char done;
    do { /* on failure rdx:rax receive the current value, and the next try compares with it */
        __asm__ __volatile__("lock cmpxchg16b %1\n\tsete %0"
                             : "=q"(done), "+m"(*(volatile ULONGLONG(*)[2])dst), "+a"(olo), "+d"(ohi)
                             : "b"(lo), "c"(hi)
                             : "memory", "cc");
    } while (!done);
#endif
}

void hook_prepare(void) { granularity(); }

int hook_install(void *target, void *hook, void **orig, unsigned char before[16]) {
    unsigned char *t = (unsigned char *)target;
    for (int i = 0; i < 16; i++) before[i] = t[i];
    int len = 0;
    while (len < 5) {
        int n = hook_insn_len(t + len);
        if (!n) return HOOK_UNKNOWN_PROLOGUE;
        len += n;
    }
    if (len > 24) return HOOK_UNKNOWN_PROLOGUE;
    unsigned char *slot = near_alloc(t);
    if (!slot) return HOOK_NO_MEMORY;
    unsigned char *relay = slot, *tramp = slot + 16;
    put_absjmp(relay, hook);
    for (int i = 0; i < len; i++) tramp[i] = t[i];
    put_absjmp(tramp + len, t + len);
    FlushInstructionCache(GetCurrentProcess(), slot, 64);
    /* the patch, padded to a whole 8 or 16 aligned bytes with the bytes already there when it fits */
    ULONG_PTR a = (ULONG_PTR)t;
    int plen = len <= 8 && !(a & 7) ? 8 : len <= 16 && !(a & 15) ? 16 : len;
    DWORD old;
    if (!VirtualProtect(t, plen, PAGE_EXECUTE_READWRITE, &old)) return HOOK_PROTECT;
    unsigned char patch[24];
    LONG rel = (LONG)((LONGLONG)relay - (LONGLONG)(t + 5));
    patch[0] = 0xE9;
    *(LONG *)(patch + 1) = rel;
    for (int i = 5; i < len; i++) patch[i] = 0x90;
    for (int i = len; i < plen; i++) patch[i] = t[i];
    hook_move_frozen(t, len, tramp);
    InterlockedExchangePointer(orig, tramp); /* set before the jmp can be taken (a full barrier) */
    /* one store, so a thread that was not frozen never sees half a jmp */
    if (plen == 8) {
        InterlockedExchange64((volatile LONG64 *)t, *(LONG64 *)patch);
    } else if (plen == 16) {
        store16(t, patch);
    } else {
        for (int i = 0; i < len; i++) t[i] = patch[i];
    }
    VirtualProtect(t, plen, old, &old);
    FlushInstructionCache(GetCurrentProcess(), t, plen);
    return HOOK_OK;
}
