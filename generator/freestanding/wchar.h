/* llama-bindgen freestanding <wchar.h>: wchar_t, wint_t and mbstate_t (opaque here); no functions. */
#ifndef LLAMA_BINDGEN_WCHAR_H
#define LLAMA_BINDGEN_WCHAR_H
#include <stddef.h>
typedef __WINT_TYPE__ wint_t;
typedef struct __llama_bindgen_mbstate mbstate_t;
#endif
