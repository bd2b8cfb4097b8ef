/* llama-bindgen freestanding <wctype.h>: the two types. */
#ifndef LLAMA_BINDGEN_WCTYPE_H
#define LLAMA_BINDGEN_WCTYPE_H
#include <wchar.h>
typedef unsigned long wctype_t;
typedef const int * wctrans_t;
#endif
