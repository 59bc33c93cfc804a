/*
 * ngcc-pipe's yardstick: a fixed workload timed in every round of a timing session beside
 * the KEMs, so that a change in how fast the host runs (another guest on the core, a lower
 * clock, shared caches) can be told apart from a change in the code. It is not a KEM: it
 * takes the shape of one only so that kem-runner can time it like one (only keygen is
 * timed). Its work is what KEMs spend their time on: 24 Keccak-f[1600] permutations
 * (SHA-3's permutation, FIPS 202), then a schoolbook multiplication of two 64-coefficient
 * polynomials modulo 3329 with a 1 KiB table walk. No input depends on randomness; the
 * output goes to the buffers so that nothing is optimized away.
 *
 * Changing this file changes the yardstick: bump NGCC_YARDSTICK_CRYPTO_ALGNAME (api.h) so
 * that records of different yardsticks are never compared.
 */
#include <stdint.h>
#include <string.h>

#include "api.h"

#define ROUNDS 24
#define PERMUTATIONS 24
#define N 64
#define Q 3329

static const uint64_t RC[ROUNDS] = {
    0x0000000000000001ULL, 0x0000000000008082ULL, 0x800000000000808aULL,
    0x8000000080008000ULL, 0x000000000000808bULL, 0x0000000080000001ULL,
    0x8000000080008081ULL, 0x8000000000008009ULL, 0x000000000000008aULL,
    0x0000000000000088ULL, 0x0000000080008009ULL, 0x000000008000000aULL,
    0x000000008000808bULL, 0x800000000000008bULL, 0x8000000000008089ULL,
    0x8000000000008003ULL, 0x8000000000008002ULL, 0x8000000000000080ULL,
    0x000000000000800aULL, 0x800000008000000aULL, 0x8000000080008081ULL,
    0x8000000000008080ULL, 0x0000000080000001ULL, 0x8000000080008008ULL,
};

/* rho offsets and pi's lane order, walked from lane 1 (FIPS 202, 3.2.2 and 3.2.3). */
static const unsigned RHO[24] = {
    1, 3, 6, 10, 15, 21, 28, 36, 45, 55, 2, 14, 27, 41, 56, 8, 25, 43, 62, 18, 39, 61, 20, 44,
};
static const unsigned PI[24] = {
    10, 7, 11, 17, 18, 3, 5, 16, 8, 21, 24, 4, 15, 23, 19, 13, 12, 2, 20, 14, 22, 9, 6, 1,
};
/* x mod 5 for x < 10, without a division. */
static const unsigned M5[10] = {0, 1, 2, 3, 4, 0, 1, 2, 3, 4};

static uint64_t rol(uint64_t x, unsigned n) {
    return (x << n) | (x >> (64 - n));
}

/* Keccak-f[1600] on a[x + 5y]: theta, rho and pi, chi, iota. */
static void keccak_f1600(uint64_t a[25]) {
    uint64_t c[5], t, u;
    for (int r = 0; r < ROUNDS; r++) {
        for (unsigned x = 0; x < 5; x++) {
            c[x] = a[x] ^ a[x + 5] ^ a[x + 10] ^ a[x + 15] ^ a[x + 20];
        }
        for (unsigned x = 0; x < 5; x++) {
            t = c[M5[x + 4]] ^ rol(c[M5[x + 1]], 1);
            for (unsigned y = 0; y < 25; y += 5) {
                a[x + y] ^= t;
            }
        }
        t = a[1];
        for (unsigned i = 0; i < 24; i++) {
            u = a[PI[i]];
            a[PI[i]] = rol(t, RHO[i]);
            t = u;
        }
        for (unsigned y = 0; y < 25; y += 5) {
            for (unsigned x = 0; x < 5; x++) {
                c[x] = a[y + x];
            }
            for (unsigned x = 0; x < 5; x++) {
                a[y + x] = c[x] ^ (~c[M5[x + 1]] & c[M5[x + 2]]);
            }
        }
        a[0] ^= RC[r];
    }
}

static uint16_t table[512];

/* c = a * b in Z_Q[x]/(x^N + 1), schoolbook, with a table lookup per product row. */
static void polymul(uint16_t c[N], const uint16_t a[N], const uint16_t b[N]) {
    uint32_t acc[2 * N] = {0};
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < N; j++) {
            acc[i + j] += (uint32_t)a[i] * b[j] % Q;
        }
        acc[i] += table[(a[i] + i) & 511];
    }
    for (int i = 0; i < N; i++) {
        c[i] = (uint16_t)((acc[i] + Q * 64 - acc[i + N] % Q) % Q);
    }
}

int NGCC_YARDSTICK_crypto_kem_keypair(unsigned char *pk, unsigned char *sk) {
    uint64_t s[25];
    uint16_t a[N], b[N], c[N];
    memset(s, 0, sizeof s);
    s[0] = 0x6e676363; /* "ngcc" */
    for (int i = 0; i < PERMUTATIONS; i++) {
        keccak_f1600(s);
    }
    for (int i = 0; i < N; i++) {
        a[i] = (uint16_t)((s[i % 25] >> (i % 48)) % Q);
        b[i] = (uint16_t)((s[(i + 7) % 25] >> (i % 40)) % Q);
    }
    for (int i = 0; i < 512; i++) {
        table[i] = (uint16_t)((i * 1753u + s[i % 25]) % Q);
    }
    polymul(c, a, b);
    memcpy(pk, s, 200);
    memcpy(sk, c, 2 * N);
    memset(sk + 2 * N, 0, 200 - 2 * N);
    return 0;
}

/* enc and dec copy: the yardstick times keygen only. */
int NGCC_YARDSTICK_crypto_kem_enc(unsigned char *ct, unsigned char *ss, const unsigned char *pk) {
    memcpy(ct, pk, 200);
    memcpy(ss, pk, 32);
    return 0;
}

int NGCC_YARDSTICK_crypto_kem_dec(unsigned char *ss, const unsigned char *ct, const unsigned char *sk) {
    (void)sk;
    memcpy(ss, ct, 32);
    return 0;
}

/* kem-runner hands every object its randomness source through this function (the engine's
 * shim for KEMs); the yardstick uses none. */
void ngcc_set_randombytes(void *f) {
    (void)f;
}
