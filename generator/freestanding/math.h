/* llama-bindgen freestanding <math.h>: the types and macros a public header may use; no functions. */
#ifndef LLAMA_BINDGEN_MATH_H
#define LLAMA_BINDGEN_MATH_H
typedef float float_t;
typedef double double_t;
#define HUGE_VAL (__builtin_huge_val())
#define HUGE_VALF (__builtin_huge_valf())
#define INFINITY (__builtin_inff())
#define NAN (__builtin_nanf(""))
#endif
