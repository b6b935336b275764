/* Inline trampoline hooks: hook_x64.c in the x64 build, hook_x86.c in the x86 one (the same interface). */
#ifndef DLLTRACE_HOOK_H
#define DLLTRACE_HOOK_H

enum { HOOK_OK = 0, HOOK_NO_TARGET = 1, HOOK_UNKNOWN_PROLOGUE = 2, HOOK_NO_MEMORY = 3, HOOK_PROTECT = 4 };

/* Patch target with a jmp to hook; *orig receives a trampoline that runs the displaced
   instructions and continues in target. before (16 bytes) receives the original prologue. */
int hook_install(void *target, void *hook, void **orig, unsigned char before[16]);

/* Suspend every other thread of the process (returns how many, or -1 when they could not be listed);
   hook_install between hook_begin and hook_end moves a frozen thread's instruction pointer out of the
   bytes it replaces. Between the two: no heap, no loader calls (a frozen thread may hold their locks). */
int hook_begin(void);
void hook_end(void);

/* (freeze.c, for the hook files) a frozen thread stopped at t+1 .. t+len-1 continues at the same offset in the
   trampoline; hook_prepare: what the machine's hooks ask of the system before any thread is frozen */
void hook_move_frozen(unsigned char *t, int len, unsigned char *tramp);
void hook_prepare(void);

#endif
