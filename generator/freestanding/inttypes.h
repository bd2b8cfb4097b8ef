/* llama-bindgen freestanding <inttypes.h>: the integer types only. */
#ifndef LLAMA_BINDGEN_INTTYPES_H
#define LLAMA_BINDGEN_INTTYPES_H
#include <stdint.h>
#endif
