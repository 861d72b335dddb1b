/*
 * crc32c.c — CRC-32C with an SSE4.2 path and a slicing-by-8 table fallback.
 *
 * The crc32 instruction has a latency of 3 cycles and a throughput of 1, so one chain runs at a
 * third of the speed the core allows. Buffers of at least 3 * LANE bytes are done in three
 * interleaved chains over consecutive LANE-byte blocks, then combined: the CRC register is
 * linear, so crc(A|B|C) = shift(crc(A), 2 LANE) ^ shift(crc0(B), LANE) ^ crc0(C), where crc0
 * starts from 0 and shift(c, n) multiplies by x^(8n) modulo the polynomial, done with four
 * byte tables per distance built once at start.
 */
#include "base/crc32c.h"

#include <pthread.h>
#include <stdbool.h>
#include <string.h>

#define POLY 0x82f63b78u /* reflected Castagnoli polynomial */

#define LANE 256 /* bytes per chain and round of the three-way path */

static uint32_t st_crc_table[8][256];
static uint32_t shift1[4][256], shift2[4][256]; /* multiply by x^(8 LANE), x^(16 LANE) */
static pthread_once_t st_crc_once = PTHREAD_ONCE_INIT;
static bool st_crc_hw;

/* a * b modulo the polynomial, both in the reflected representation (bit 31 is x^0). */
static uint32_t mul_mod(uint32_t a, uint32_t b)
{
    uint32_t p = 0;
    for (uint32_t m = 1u << 31; m; m >>= 1) {
        if (a & m)
            p ^= b;
        b = b & 1 ? (b >> 1) ^ POLY : b >> 1;
    }
    return p;
}

/* Tables for c -> c * x^(8 n) mod P, one per byte of c. */
static void shift_tables(uint32_t t[4][256], size_t n)
{
    uint32_t x = 1u << 31; /* x^0 */
    for (size_t i = 0; i < n; i++)
        x = mul_mod(x, 1u << 23); /* * x^8 */
    for (int k = 0; k < 4; k++)
        for (uint32_t b = 0; b < 256; b++)
            t[k][b] = mul_mod(x, b << (8 * k));
}

static uint32_t shift(const uint32_t t[4][256], uint32_t c)
{
    return t[0][c & 0xff] ^ t[1][(c >> 8) & 0xff] ^ t[2][(c >> 16) & 0xff] ^ t[3][c >> 24];
}

static void st_crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ POLY : c >> 1;
        st_crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            st_crc_table[t][i] =
                (st_crc_table[t - 1][i] >> 8) ^ st_crc_table[0][st_crc_table[t - 1][i] & 0xff];
    shift_tables(shift1, LANE);
    shift_tables(shift2, 2 * LANE);
#if defined(__x86_64__)
    __builtin_cpu_init();
    st_crc_hw = __builtin_cpu_supports("sse4.2");
#endif
}

uint32_t st_crc32c_sw(uint32_t crc, const void *data, size_t n)
{
    pthread_once(&st_crc_once, st_crc_init);
    const uint8_t *p = data;
    crc = ~crc;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        w ^= crc;
        crc = st_crc_table[7][w & 0xff] ^ st_crc_table[6][(w >> 8) & 0xff] ^
              st_crc_table[5][(w >> 16) & 0xff] ^ st_crc_table[4][(w >> 24) & 0xff] ^
              st_crc_table[3][(w >> 32) & 0xff] ^ st_crc_table[2][(w >> 40) & 0xff] ^
              st_crc_table[1][(w >> 48) & 0xff] ^ st_crc_table[0][w >> 56];
        p += 8;
        n -= 8;
    }
    while (n--)
        crc = (crc >> 8) ^ st_crc_table[0][(crc ^ *p++) & 0xff];
    return ~crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t st_crc32c_hw(uint32_t crc, const void *data,
                                                               size_t n)
{
    const uint8_t *p = data;
    uint64_t c = ~crc;
    while (n >= 3 * LANE) {
        uint64_t c1 = 0, c2 = 0;
        for (size_t i = 0; i < LANE; i += 8) {
            uint64_t w0, w1, w2;
            memcpy(&w0, p + i, 8);
            memcpy(&w1, p + LANE + i, 8);
            memcpy(&w2, p + 2 * LANE + i, 8);
            c = __builtin_ia32_crc32di(c, w0);
            c1 = __builtin_ia32_crc32di(c1, w1);
            c2 = __builtin_ia32_crc32di(c2, w2);
        }
        c = shift(shift2, (uint32_t)c) ^ shift(shift1, (uint32_t)c1) ^ (uint32_t)c2;
        p += 3 * LANE;
        n -= 3 * LANE;
    }
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c = __builtin_ia32_crc32di(c, w);
        p += 8;
        n -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (n--)
        c32 = __builtin_ia32_crc32qi(c32, *p++);
    return ~c32;
}
#endif

uint32_t st_crc32c(uint32_t crc, const void *data, size_t n)
{
    pthread_once(&st_crc_once, st_crc_init);
#if defined(__x86_64__)
    if (st_crc_hw)
        return st_crc32c_hw(crc, data, n);
#endif
    return st_crc32c_sw(crc, data, n);
}
