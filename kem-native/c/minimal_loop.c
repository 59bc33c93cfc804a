/*
 * minimal_loop: the independent reference `ngcc-pipe bench fidelity` checks kem-runner
 * against. It is compiled together with the instance's own sources and the provided
 * primitives, with the same flags, and linked statically (`gcc -static`): no shared object,
 * no PLT, no dlopen, nothing of kem-runner. It times `iters` back-to-back calls of one
 * operation between two lfence-fenced rdtsc reads, after a short warm-up.
 *
 * The build names the KEM with macros:
 *   NGCC_KEYPAIR, NGCC_ENC, NGCC_DEC   the namespaced crypto_kem_* functions
 *   NGCC_DRNG                          the random-byte function the scheme calls
 *   NGCC_PK, NGCC_SK, NGCC_CT, NGCC_SS the buffer sizes of api.h
 * Randomness: NGCC_DRNG is defined here as getrandom(2) on every call, the source
 * kem-runner uses with `--rng os` (bench fidelity runs it so).
 *
 * usage: minimal_loop keygen|enc|dec ITERS
 * prints: cycles_per_op=<float>
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/types.h>
#if defined(__x86_64__)
#include <x86intrin.h>
static inline uint64_t ticks(void) {
    _mm_lfence();
    uint64_t t = __rdtsc();
    _mm_lfence();
    return t;
}
#else
#include <time.h>
static inline uint64_t ticks(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
#endif

int NGCC_KEYPAIR(uint8_t *pk, uint8_t *sk);
int NGCC_ENC(uint8_t *ct, uint8_t *ss, const uint8_t *pk);
int NGCC_DEC(uint8_t *ss, const uint8_t *ct, const uint8_t *sk);
int NGCC_DRNG(uint8_t *buf, size_t n);

int NGCC_DRNG(uint8_t *buf, size_t n) {
    while (n > 0) {
        ssize_t got = getrandom(buf, n, 0);
        if (got < 0) {
            return -1;
        }
        buf += got;
        n -= (size_t)got;
    }
    return 0;
}

static uint8_t pk[NGCC_PK], sk[NGCC_SK], ct[NGCC_CT], ss[NGCC_SS];
static uint8_t pk2[NGCC_PK], sk2[NGCC_SK], ct2[NGCC_CT], ss2[NGCC_SS];

/* `n` back-to-back calls of operation `which` (0 keygen, 1 enc, 2 dec); OR of return codes. */
static inline __attribute__((always_inline)) int run(int which, uint64_t n) {
    int rc = 0;
    if (which == 0) {
        for (uint64_t i = 0; i < n; i++) rc |= NGCC_KEYPAIR(pk2, sk2);
    } else if (which == 1) {
        for (uint64_t i = 0; i < n; i++) rc |= NGCC_ENC(ct2, ss2, pk);
    } else {
        for (uint64_t i = 0; i < n; i++) rc |= NGCC_DEC(ss2, ct, sk);
    }
    return rc;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: minimal_loop keygen|enc|dec ITERS\n");
        return 2;
    }
    const char *op = argv[1];
    uint64_t iters = strtoull(argv[2], NULL, 10);
    if (iters == 0 || NGCC_KEYPAIR(pk, sk) != 0 || NGCC_ENC(ct, ss, pk) != 0) {
        fprintf(stderr, "minimal_loop: setup failed\n");
        return 1;
    }
    int which = strcmp(op, "keygen") == 0 ? 0 : strcmp(op, "enc") == 0 ? 1 : strcmp(op, "dec") == 0 ? 2 : -1;
    if (which < 0) {
        fprintf(stderr, "minimal_loop: unknown op %s\n", op);
        return 2;
    }
    /* Warm-up, as kem-runner: a twentieth of the timed calls, at least 2. */
    int rc = run(which, iters / 20 + 2);
    uint64_t t0 = ticks();
    rc |= run(which, iters);
    uint64_t t1 = ticks();
    if (rc != 0) {
        fprintf(stderr, "minimal_loop: an operation returned an error\n");
        return 1;
    }
    printf("cycles_per_op=%.3f\n", (double)(t1 - t0) / (double)iters);
    return 0;
}
