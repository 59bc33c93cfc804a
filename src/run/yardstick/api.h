/* The yardstick's sizes, in the NIST KEM API form kem-runner reads (see yardstick.c). */
#ifndef NGCC_YARDSTICK_API_H
#define NGCC_YARDSTICK_API_H

#define NGCC_YARDSTICK_CRYPTO_SECRETKEYBYTES 200
#define NGCC_YARDSTICK_CRYPTO_PUBLICKEYBYTES 200
#define NGCC_YARDSTICK_CRYPTO_CIPHERTEXTBYTES 200
#define NGCC_YARDSTICK_CRYPTO_BYTES 32
#define NGCC_YARDSTICK_CRYPTO_ALGNAME "ngcc-yardstick-1"

int NGCC_YARDSTICK_crypto_kem_keypair(unsigned char *pk, unsigned char *sk);
int NGCC_YARDSTICK_crypto_kem_enc(unsigned char *ct, unsigned char *ss, const unsigned char *pk);
int NGCC_YARDSTICK_crypto_kem_dec(unsigned char *ss, const unsigned char *ct, const unsigned char *sk);

#endif
