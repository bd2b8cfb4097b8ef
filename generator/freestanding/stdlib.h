/* llama-bindgen freestanding <stdlib.h>: size_t, NULL and the exit codes; no functions. */
#ifndef LLAMA_BINDGEN_STDLIB_H
#define LLAMA_BINDGEN_STDLIB_H
#include <stddef.h>
#define EXIT_SUCCESS 0
#define EXIT_FAILURE 1
#endif
