/* llama-bindgen freestanding <uchar.h>: the character types. */
#ifndef LLAMA_BINDGEN_UCHAR_H
#define LLAMA_BINDGEN_UCHAR_H
#include <stddef.h>
typedef __UINT_LEAST16_TYPE__ char16_t;
typedef __UINT_LEAST32_TYPE__ char32_t;
#endif
