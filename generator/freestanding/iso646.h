/* llama-bindgen freestanding <iso646.h>: the operator spellings. */
#ifndef LLAMA_BINDGEN_ISO646_H
#define LLAMA_BINDGEN_ISO646_H
#define and &&
#define and_eq &=
#define bitand &
#define bitor |
#define compl ~
#define not !
#define not_eq !=
#define or ||
#define or_eq |=
#define xor ^
#define xor_eq ^=
#endif
