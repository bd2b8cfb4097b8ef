/* llama-bindgen freestanding <complex.h>: the C11 spellings; no functions. */
#ifndef LLAMA_BINDGEN_COMPLEX_H
#define LLAMA_BINDGEN_COMPLEX_H
#define complex _Complex
#define _Complex_I (__extension__ 1.0iF)
#define I _Complex_I
#endif
