/* llama-bindgen freestanding <float.h>: clang's own limits of the target's floating types. */
#ifndef LLAMA_BINDGEN_FLOAT_H
#define LLAMA_BINDGEN_FLOAT_H
#define FLT_MAX __FLT_MAX__
#define FLT_MIN __FLT_MIN__
#define FLT_EPSILON __FLT_EPSILON__
#define DBL_MAX __DBL_MAX__
#define DBL_MIN __DBL_MIN__
#define DBL_EPSILON __DBL_EPSILON__
#endif
