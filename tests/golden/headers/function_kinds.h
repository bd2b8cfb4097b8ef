/* Functions cffi cannot call as declared: one without a parameter list (its parameters are
   unknown; (void) would be a guess) and one with another calling convention than the
   platform's. An ordinary function beside them is bound. */
#include <stdint.h>

int32_t unprototyped();
int32_t prototyped(void);
int32_t __attribute__((ms_abi)) windows_convention(int32_t a, int32_t b);
int32_t __attribute__((sysv_abi)) default_convention(int32_t a);
