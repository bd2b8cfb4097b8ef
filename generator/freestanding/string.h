/* llama-bindgen freestanding <string.h>: size_t and NULL; no functions. */
#ifndef LLAMA_BINDGEN_STRING_H
#define LLAMA_BINDGEN_STRING_H
#include <stddef.h>
#endif
