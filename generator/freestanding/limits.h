/* llama-bindgen freestanding <limits.h>. */
#ifndef LLAMA_BINDGEN_LIMITS_H
#define LLAMA_BINDGEN_LIMITS_H
#define CHAR_BIT __CHAR_BIT__
#define INT_MAX __INT_MAX__
#define INT_MIN (-INT_MAX - 1)
#define LONG_MAX __LONG_MAX__
#define LLONG_MAX __LONG_LONG_MAX__
#define UINT_MAX (INT_MAX * 2U + 1U)
#endif
