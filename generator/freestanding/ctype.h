/* llama-bindgen freestanding <ctype.h>: nothing a public header's declarations use. */
#ifndef LLAMA_BINDGEN_CTYPE_H
#define LLAMA_BINDGEN_CTYPE_H
#endif
