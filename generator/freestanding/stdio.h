/* llama-bindgen freestanding <stdio.h>: public headers only pass FILE pointers around. */
#ifndef LLAMA_BINDGEN_STDIO_H
#define LLAMA_BINDGEN_STDIO_H
#include <stddef.h>
typedef struct __llama_bindgen_FILE FILE;
#endif
