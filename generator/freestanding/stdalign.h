/* llama-bindgen freestanding <stdalign.h>: the C11 spellings. */
#ifndef LLAMA_BINDGEN_STDALIGN_H
#define LLAMA_BINDGEN_STDALIGN_H
#define alignas _Alignas
#define alignof _Alignof
#define __alignas_is_defined 1
#define __alignof_is_defined 1
#endif
