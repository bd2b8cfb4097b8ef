/* llama-bindgen freestanding <stdarg.h>. */
#ifndef LLAMA_BINDGEN_STDARG_H
#define LLAMA_BINDGEN_STDARG_H
typedef __builtin_va_list va_list;
#endif
