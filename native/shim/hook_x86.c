/* Inline trampoline hooks for x86 (32-bit; the shim's i686 build). The x64 build uses hook_x64.c.
 *
 * target:     jmp rel32 -> hook              (5 bytes; the rest of the displaced instructions: nop)
 * trampoline: <displaced instructions>; jmp rel32 -> target+len
 *
 * In a 32-bit address space a rel32 jump reaches every address (the displacement wraps), so there is no
 * relay and no need to allocate near the target: the trampolines live in 64 KB blocks allocated
 * anywhere. The hooks are stdcall (WINAPI) functions with the targets' own signatures, so a jmp to them
 * keeps the caller's stack as it is.
 *
 * The displaced instructions are decoded by a small length decoder that knows the prologues seen in
 * practice and refuses everything else (branches, calls and unknown opcodes cannot be copied; an
 * absolute [disp32] operand can, it does not depend on where the instruction is):
 *   hot-patch          8b ff 55 8b ec               mov edi,edi; push ebp; mov ebp,esp
 *                                                    (Wine's i386 kernelbase/ntdll exports; Windows' x86 DLLs)
 *   syscall stubs      b8 imm32 (ba imm32 ff d2)    mov eax,N (Wine's i386 ntdll Nt* functions)
 *   frames             push ebp/reg, mov ebp,esp (89 e5 / 8b ec), sub esp,imm, lea ecx,[esp+4],
 *                      and esp,-16, push imm, mov reg,[esp+x], mov eax,fs:[x], inc/dec reg, nop forms
 * A refused prologue makes the shim write the same `warning` event as on x64 (dlltrace_shim.c).
 * Only the Wine prologues are exercised by the tests (native/README.md).
 */
#define WIN32_LEAN_AND_MEAN
#include <windows.h>
#include "hook.h"

static int modrm_len(const unsigned char *p) {
    /* p at the ModRM byte; returns ModRM + SIB + displacement length (32-bit addressing) */
    unsigned m = p[0], mod = m >> 6, rm = m & 7;
    int n = 1;
    if (mod == 3) return n;
    if (rm == 4) {
        unsigned sib = p[1];
        n++;
        if (mod == 0 && (sib & 7) == 5) n += 4;
    } else if (mod == 0 && rm == 5) {
        return n + 4; /* [disp32]: an absolute address in 32-bit code, copied as it is */
    }
    if (mod == 1) n += 1;
    else if (mod == 2) n += 4;
    return n;
}

/* Length of the instruction at p, or 0 when it is not one this decoder may relocate
   (unknown opcode, any branch or call). */
static int hook_insn_len(const unsigned char *p) {
    int n = 0, opsize = 0;
    for (;; n++) { /* prefixes: operand size, fs/gs segment */
        if (p[n] == 0x66) opsize = 1;
        else if (p[n] != 0x64 && p[n] != 0x65) break;
    }
    if (n > 2) return 0;
    unsigned op = p[n++];
    if (op >= 0x40 && op <= 0x5F) return n;                   /* inc/dec/push/pop reg */
    if (op == 0x90) return n;                                  /* nop */
    if (op >= 0xB8 && op <= 0xBF) return n + (opsize ? 2 : 4); /* mov reg, imm */
    if (op == 0x6A) return n + 1;                              /* push imm8 */
    if (op == 0x68) return n + (opsize ? 2 : 4);               /* push imm32 */
    if (op >= 0xA0 && op <= 0xA3) return n + 4;                /* mov al/eax <-> [moffs32] (fs:[x] forms) */
    switch (op) {
    case 0x01: case 0x03: case 0x09: case 0x0B: case 0x21: case 0x23: case 0x29: case 0x2B:
    case 0x31: case 0x33: case 0x39: case 0x3B: case 0x84: case 0x85: case 0x88: case 0x89:
    case 0x8A: case 0x8B: case 0x8D:
        return n + modrm_len(p + n);
    case 0x80: case 0x83: case 0xC0: case 0xC1: case 0xC6:
        return n + modrm_len(p + n) + 1;
    case 0x81: case 0xC7:
        return n + modrm_len(p + n) + (opsize ? 2 : 4);
    case 0xF6: case 0xF7:
        if (((p[n] >> 3) & 7) != 0) return 0; /* only test r/m, imm */
        return n + modrm_len(p + n) + (op == 0xF6 ? 1 : opsize ? 2 : 4);
    case 0x0F:
        if (p[n] == 0x1F) return n + 1 + modrm_len(p + n + 1); /* nop r/m */
        return 0;
    default:
        return 0;
    }
}

/* Trampolines: 64 KB blocks anywhere, carved into 64-byte slots. */
static unsigned char *g_block;
static unsigned g_used;

static unsigned char *slot_alloc(void) {
    if (!g_block || g_used + 64 > 65536) {
        unsigned char *p = (unsigned char *)VirtualAlloc(NULL, 65536, MEM_RESERVE | MEM_COMMIT, PAGE_EXECUTE_READWRITE);
        if (!p) return NULL;
        g_block = p;
        g_used = 0;
    }
    unsigned char *r = g_block + g_used;
    g_used += 64;
    return r;
}

static void put_jmp(unsigned char *p, const void *dest) { /* jmp rel32 (reaches anywhere in 32 bits) */
    p[0] = 0xE9;
    *(LONG *)(p + 1) = (LONG)((ULONG_PTR)dest - (ULONG_PTR)(p + 5));
}

void hook_prepare(void) {} /* (nothing: trampolines are allocated anywhere) */

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
    unsigned char *tramp = slot_alloc();
    if (!tramp) return HOOK_NO_MEMORY;
    for (int i = 0; i < len; i++) tramp[i] = t[i];
    put_jmp(tramp + len, t + len);
    FlushInstructionCache(GetCurrentProcess(), tramp, 64);
    /* the patch: one locked 8-byte store (cmpxchg8b) when it fits in one aligned qword, padded with
       the bytes already there; else written bytewise (the other threads are frozen) */
    unsigned char *q = (unsigned char *)((ULONG_PTR)t & ~(ULONG_PTR)7);
    int one_store = t + len <= q + 8;
    unsigned char *pstart = one_store ? q : t;
    int plen = one_store ? 8 : len;
    DWORD old;
    if (!VirtualProtect(pstart, plen, PAGE_EXECUTE_READWRITE, &old)) return HOOK_PROTECT;
    unsigned char patch[24];
    for (int i = 0; i < plen; i++) patch[i] = pstart[i];
    unsigned char *at = patch + (t - pstart);
    at[0] = 0xE9;
    *(LONG *)(at + 1) = (LONG)((ULONG_PTR)hook - (ULONG_PTR)(t + 5));
    for (int i = 5; i < len; i++) at[i] = 0x90;
    hook_move_frozen(t, len, tramp);
    InterlockedExchangePointer(orig, tramp); /* set before the jmp can be taken (a full barrier) */
    if (one_store) {
        /* one store, so a thread that was not frozen never sees half a jmp */
        LONG64 want = *(LONG64 *)patch, cur = *(volatile LONG64 *)q;
        LONG64 prev;
        while ((prev = InterlockedCompareExchange64((volatile LONG64 *)q, want, cur)) != cur) cur = prev;
    } else {
        for (int i = 0; i < len; i++) t[i] = at[i];
    }
    VirtualProtect(pstart, plen, old, &old);
    FlushInstructionCache(GetCurrentProcess(), pstart, plen);
    return HOOK_OK;
}
