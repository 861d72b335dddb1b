/* crc32c.c — CRC-32C with an SSE4.2 path and a slicing-by-8 table fallback. */
#include "base/crc32c.h"

#include <pthread.h>
#include <stdbool.h>
#include <string.h>

#define POLY 0x82f63b78u /* reflected Castagnoli polynomial */

static uint32_t st_crc_table[8][256];
static pthread_once_t st_crc_once = PTHREAD_ONCE_INIT;
static bool st_crc_hw;

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
