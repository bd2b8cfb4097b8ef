/* Standard headers beyond the first freestanding set (math.h, string.h, stdlib.h, time.h,
   float.h, assert.h, errno.h) parse; a va_list parameter leaves its function out with the
   reason, and the rest is bound. */
#include <assert.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct timed {
    time_t when;
    double_t value;
};

void log_args(const char * format, va_list args);
int32_t timed_count(const struct timed * items, size_t n);
