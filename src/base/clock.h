/* clock.h — monotonic and wall clocks. Any thread. */
#ifndef ST_BASE_CLOCK_H
#define ST_BASE_CLOCK_H

#include <stdint.h>

/* Monotonic nanoseconds, for durations and deadlines. */
int64_t st_mono_ns(void);
/* Monotonic milliseconds. */
int64_t st_mono_ms(void);
/* Wall-clock milliseconds since the Unix epoch, for record timestamps. */
int64_t st_wall_ms(void);

#endif
