/* llama-bindgen freestanding <time.h>: the time types a public header may pass around. */
#ifndef LLAMA_BINDGEN_TIME_H
#define LLAMA_BINDGEN_TIME_H
#include <stddef.h>
typedef long long time_t;
typedef long clock_t;
struct timespec { time_t tv_sec; long tv_nsec; };
#endif
