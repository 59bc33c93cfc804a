/*
 * minimal_loop: the smallest honest timing loop, used by `ngcc-pipe bench fidelity` to
 * check kem-runner against. It dlopens one built object, installs getrandom(2) as the
 * random-byte source (as kem-runner does for timing), prepares inputs, and times
 * `iters` back-to-back calls of one operation with lfence-fenced rdtsc.
 *
 * usage: minimal_loop LIB NAMESPACE keygen|enc|dec ITERS PK SK CT SS
 * prints: cycles_per_op=<float>
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
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

typedef int (*keypair_fn)(uint8_t *, uint8_t *);
typedef int (*enc_fn)(uint8_t *, uint8_t *, const uint8_t *);
typedef int (*dec_fn)(uint8_t *, const uint8_t *, const uint8_t *);
typedef void (*set_rng_fn)(int (*)(uint8_t *, size_t));

static int os_random(uint8_t *buf, size_t n) {
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

static void *sym(void *lib, const char *ns, const char *name) {
    char full[512];
    snprintf(full, sizeof full, "%s%s", ns, name);
    void *p = dlsym(lib, full);
    if (!p) {
        fprintf(stderr, "minimal_loop: missing symbol %s\n", full);
        exit(2);
    }
    return p;
}

int main(int argc, char **argv) {
    if (argc != 9) {
        fprintf(stderr, "usage: minimal_loop LIB NAMESPACE keygen|enc|dec ITERS PK SK CT SS\n");
        return 2;
    }
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "minimal_loop: %s\n", dlerror());
        return 2;
    }
    const char *ns = argv[2];
    const char *op = argv[3];
    uint64_t iters = strtoull(argv[4], NULL, 10);
    size_t pkn = strtoul(argv[5], NULL, 10), skn = strtoul(argv[6], NULL, 10);
    size_t ctn = strtoul(argv[7], NULL, 10), ssn = strtoul(argv[8], NULL, 10);
    keypair_fn keypair = (keypair_fn)sym(lib, ns, "crypto_kem_keypair");
    enc_fn enc = (enc_fn)sym(lib, ns, "crypto_kem_enc");
    dec_fn dec = (dec_fn)sym(lib, ns, "crypto_kem_dec");
    set_rng_fn set_rng = (set_rng_fn)sym(lib, "", "ngcc_set_randombytes");
    set_rng(os_random);
    uint8_t *pk = malloc(pkn), *sk = malloc(skn), *ct = malloc(ctn), *ss = malloc(ssn);
    if (!pk || !sk || !ct || !ss || keypair(pk, sk) != 0 || enc(ct, ss, pk) != 0) {
        fprintf(stderr, "minimal_loop: setup failed\n");
        return 1;
    }
    int rc = 0;
    uint64_t t0 = 0, t1 = 0;
    if (strcmp(op, "keygen") == 0) {
        uint8_t *pk2 = malloc(pkn), *sk2 = malloc(skn);
        t0 = ticks();
        for (uint64_t i = 0; i < iters; i++) rc |= keypair(pk2, sk2);
        t1 = ticks();
    } else if (strcmp(op, "enc") == 0) {
        uint8_t *ct2 = malloc(ctn), *ss2 = malloc(ssn);
        t0 = ticks();
        for (uint64_t i = 0; i < iters; i++) rc |= enc(ct2, ss2, pk);
        t1 = ticks();
    } else if (strcmp(op, "dec") == 0) {
        uint8_t *ss2 = malloc(ssn);
        t0 = ticks();
        for (uint64_t i = 0; i < iters; i++) rc |= dec(ss2, ct, sk);
        t1 = ticks();
    } else {
        fprintf(stderr, "minimal_loop: unknown op %s\n", op);
        return 2;
    }
    if (rc != 0) {
        fprintf(stderr, "minimal_loop: an operation returned an error\n");
        return 1;
    }
    printf("cycles_per_op=%.3f\n", (double)(t1 - t0) / (double)iters);
    return 0;
}
