/* llama-bindgen freestanding <tgmath.h>: what <math.h> and <complex.h> give here. */
#ifndef LLAMA_BINDGEN_TGMATH_H
#define LLAMA_BINDGEN_TGMATH_H
#include <math.h>
#include <complex.h>
#endif
