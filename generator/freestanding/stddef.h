/* llama-bindgen freestanding <stddef.h>: only what public headers use, built on clang's builtin macros. */
#ifndef LLAMA_BINDGEN_STDDEF_H
#define LLAMA_BINDGEN_STDDEF_H
typedef __SIZE_TYPE__ size_t;
typedef __PTRDIFF_TYPE__ ptrdiff_t;
typedef __WCHAR_TYPE__ wchar_t;
typedef struct { long long __ll; long double __ld; } max_align_t;
#define NULL ((void *)0)
#define offsetof(type, member) __builtin_offsetof(type, member)
#endif
