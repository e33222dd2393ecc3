/* The CPUID a patched OpenVINO library asks, answered without the vector extensions a smaller CPU
 * class lacks (bench/tools/cpu_class.py).
 *
 * cpu_class.py rewrites each `cpuid` instruction (0f a2) in a copy of OpenVINO's libraries as
 * `06 90`: 06 (PUSH ES) does not exist in 64-bit code, so the CPU raises SIGILL there, and no
 * compiler emits it, so a SIGILL at 06 90 is always one of ours. This handler, preloaded with
 * LD_PRELOAD, runs the real CPUID for the leaf asked, clears the bits the class lacks, writes the
 * four registers as CPUID would and resumes after the two bytes. Every other SIGILL is left to the
 * default action (the process dies, as it would have).
 *
 * SPEC_CPU_CLASS selects the class: "AVX2" (an AVX2-only CPU such as AMD Zen 3: no AVX-512, no
 * VNNI, no BF16, no AMX), "AVX2_VNNI" (the same with AVX-VNNI, as Intel's laptop CPUs since Alder
 * Lake: 8-bit dot products on 256-bit vectors) or "AVX512" (AVX-512 with VNNI and BF16, no AMX: a
 * Zen 4/5 or Cascade/Ice Lake-like CPU on an AMX Xeon).
 */
#define _GNU_SOURCE
#include <cpuid.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#define BIT(n) (1u << (n))

static int avx2_only;  /* 1: an AVX2 class; 0: the AVX-512 class (only AMX cleared) */
static int avx_vnni;  /* 1: AVX2 with AVX-VNNI kept (Intel's clients since Alder Lake) */

static void mask(uint32_t leaf, uint32_t sub, uint32_t *a, uint32_t *b, uint32_t *c, uint32_t *d) {
    (void)b;
    if (leaf == 7 && sub == 0) {
        /* EDX: AMX-BF16, AVX512-FP16, AMX-TILE, AMX-INT8 */
        *d &= ~(BIT(22) | BIT(23) | BIT(24) | BIT(25));
        if (avx2_only) {
            /* EBX: AVX512F, DQ, IFMA, PF, ER, CD, BW, VL */
            *b &= ~(BIT(16) | BIT(17) | BIT(21) | BIT(26) | BIT(27) | BIT(28) | BIT(30) | BIT(31));
            /* ECX: AVX512_VBMI, VBMI2, GFNI, VNNI, BITALG, VPOPCNTDQ */
            *c &= ~(BIT(1) | BIT(6) | BIT(8) | BIT(11) | BIT(12) | BIT(14));
            /* EDX: AVX512_4VNNIW, 4FMAPS, VP2INTERSECT */
            *d &= ~(BIT(2) | BIT(3) | BIT(8));
        }
    } else if (leaf == 7 && sub == 1) {
        /* EAX: AMX-FP16 (21); EDX: AMX-COMPLEX (8), AVX10 (19) */
        *a &= ~BIT(21);
        *d &= ~(BIT(8) | BIT(19));
        if (avx2_only) {
            /* EAX: AVX-VNNI (unless kept), AVX512_BF16, AVX-IFMA; EDX: AVX-VNNI-INT8, AVX-NE-CONVERT, AVX-VNNI-INT16 */
            *a &= ~((avx_vnni ? 0 : BIT(4)) | BIT(5) | BIT(23));
            *d &= ~(BIT(4) | BIT(5) | BIT(10));
        }
    } else if (leaf == 0xd && sub == 0) {
        /* XSAVE state components: AMX tile config and data (17, 18); AVX-512 (5, 6, 7) */
        *a &= ~(BIT(17) | BIT(18) | (avx2_only ? BIT(5) | BIT(6) | BIT(7) : 0));
    } else if (leaf == 0x1d || leaf == 0x1e || leaf == 0x24) {
        *a = *b = *c = *d = 0;  /* AMX's tile and TMUL leaves, AVX10's: nothing to describe */
    }
}

static void on_sigill(int signal_number, siginfo_t *info, void *context) {
    ucontext_t *uc = context;
    greg_t *r = uc->uc_mcontext.gregs;
    const unsigned char *ip = (const unsigned char *)r[REG_RIP];
    (void)info;
    if (ip[0] != 0x06 || ip[1] != 0x90) {  /* not a patched CPUID: die as without this handler */
        struct sigaction fallback;
        memset(&fallback, 0, sizeof fallback);
        fallback.sa_handler = SIG_DFL;
        sigaction(signal_number, &fallback, NULL);
        return;  /* the instruction runs again and the default action ends the process */
    }
    uint32_t leaf = (uint32_t)r[REG_RAX], sub = (uint32_t)r[REG_RCX], a, b, c, d;
    __cpuid_count(leaf, sub, a, b, c, d);
    mask(leaf, sub, &a, &b, &c, &d);
    r[REG_RAX] = a;  /* CPUID zero-extends its results into the 64-bit registers */
    r[REG_RBX] = b;
    r[REG_RCX] = c;
    r[REG_RDX] = d;
    r[REG_RIP] += 2;
}

__attribute__((constructor)) static void install(void) {
    const char *name = getenv("SPEC_CPU_CLASS");
    avx2_only = !(name && strcmp(name, "AVX512") == 0);
    avx_vnni = name && strcmp(name, "AVX2_VNNI") == 0;
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = on_sigill;
    action.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&action.sa_mask);
    sigaction(SIGILL, &action, NULL);
}
