/* llama-bindgen freestanding <errno.h>: nothing a public header's declarations use. */
#ifndef LLAMA_BINDGEN_ERRNO_H
#define LLAMA_BINDGEN_ERRNO_H
#endif
