/* llama-bindgen freestanding <stdnoreturn.h>: the C11 spelling. */
#ifndef LLAMA_BINDGEN_STDNORETURN_H
#define LLAMA_BINDGEN_STDNORETURN_H
#define noreturn _Noreturn
#endif
