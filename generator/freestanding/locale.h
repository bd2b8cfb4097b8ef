/* llama-bindgen freestanding <locale.h>: struct lconv, opaque here; no functions. */
#ifndef LLAMA_BINDGEN_LOCALE_H
#define LLAMA_BINDGEN_LOCALE_H
#include <stddef.h>
struct lconv;
#endif
