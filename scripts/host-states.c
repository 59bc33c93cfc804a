/*
 * Probe for scripts/host-states.sh: how the host's speed changes from one 20 ms batch to the
 * next, and how much of that a yardstick timed *inside* each batch would explain. Loads the
 * yardstick object and some KEM objects of a built campaign (dlopen), pins itself to a CPU,
 * and in each round times one batch of every KEM's keygen in a shuffled order; a batch is
 * four blocks of the KEM (~4.5 ms each) with a ~0.4 ms block of the yardstick before each
 * block and after the last. One CSV line per batch: round, KEM, position in the round, the
 * KEM's ticks per call, the yardstick's ticks per call in that batch, and the yardstick's in
 * its own batch at the start of the round (the engine's session today).
 *
 * usage: host-states CPU ROUNDS YARDSTICK.so [KEM.so KEYPAIR_SYMBOL]...
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <x86intrin.h>

typedef int (*keypair_fn)(unsigned char *, unsigned char *);

static uint64_t xs = 88172645463325252ULL;
static int fill(uint8_t *b, size_t n) {
    for (size_t i = 0; i < n; i++) {
        xs ^= xs << 13;
        xs ^= xs >> 7;
        xs ^= xs << 17;
        b[i] = (uint8_t)xs;
    }
    return 0;
}

static inline uint64_t ticks(void) {
    _mm_lfence();
    return __rdtsc();
}

/* Large enough for every bundled KEM's keys (Classic McEliece's public key is 261 KiB). */
static unsigned char pk[1 << 20], sk[1 << 20];

static keypair_fn load(const char *so, const char *sym) {
    void *h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "host-states: %s\n", dlerror());
        exit(1);
    }
    void (*set)(int (*)(uint8_t *, size_t)) = (void (*)(int (*)(uint8_t *, size_t)))dlsym(h, "ngcc_set_randombytes");
    if (set)
        set(fill);
    keypair_fn f = (keypair_fn)dlsym(h, sym);
    if (!f) {
        fprintf(stderr, "host-states: %s has no %s\n", so, sym);
        exit(1);
    }
    return f;
}

static uint64_t run(keypair_fn f, uint64_t n) {
    uint64_t a = ticks();
    for (uint64_t i = 0; i < n; i++)
        f(pk, sk);
    return ticks() - a;
}

int main(int argc, char **argv) {
    if (argc < 6 || (argc - 4) % 2) {
        fprintf(stderr, "usage: host-states CPU ROUNDS YARDSTICK.so [KEM.so KEYPAIR_SYMBOL]...\n");
        return 2;
    }
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(atoi(argv[1]), &set);
    if (sched_setaffinity(0, sizeof set, &set)) {
        perror("host-states: sched_setaffinity");
        return 1;
    }
    int rounds = atoi(argv[2]);
    keypair_fn yard = load(argv[3], "NGCC_YARDSTICK_crypto_kem_keypair");
    int n = (argc - 4) / 2;
    keypair_fn *kem = calloc(n, sizeof *kem);
    uint64_t *iters = calloc(n, sizeof *iters);
    int *order = calloc(n, sizeof *order);
    struct timespec tenth = {0, 100000000};
    uint64_t a = ticks();
    nanosleep(&tenth, 0);
    uint64_t hz = (ticks() - a) * 10;
    for (int i = 0; i < n; i++) {
        kem[i] = load(argv[4 + 2 * i], argv[5 + 2 * i]);
        run(kem[i], 3);
        uint64_t per = run(kem[i], 5) / 5;
        iters[i] = hz / 50 / 4 / per + 1; /* four blocks of ~5 ms: a 20 ms batch */
        order[i] = i;
    }
    run(yard, 20);
    uint64_t ypi = hz / 2500 / (run(yard, 20) / 20) + 1; /* ~0.4 ms a block */
    srand(1);
    printf("round,kem,position,kem_ticks,yardstick_in_batch,yardstick_of_round\n");
    for (int r = 0; r < rounds; r++) {
        for (int i = n - 1; i > 0; i--) {
            int j = rand() % (i + 1), t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
        double of_round = (double)run(yard, 5 * ypi) / (5 * ypi);
        for (int p = 0; p < n; p++) {
            int k = order[p];
            uint64_t kt = 0, yt = 0;
            for (int b = 0; b < 4; b++) {
                yt += run(yard, ypi);
                kt += run(kem[k], iters[k]);
            }
            yt += run(yard, ypi);
            printf("%d,%s,%d,%.1f,%.1f,%.1f\n", r, argv[5 + 2 * k], p, (double)kt / (4 * iters[k]),
                   (double)yt / (5 * ypi), of_round);
        }
    }
    return 0;
}
