/* llama-bindgen freestanding <fenv.h>: the two types, opaque here. */
#ifndef LLAMA_BINDGEN_FENV_H
#define LLAMA_BINDGEN_FENV_H
typedef struct __llama_bindgen_fenv fenv_t;
typedef unsigned short fexcept_t;
#endif
