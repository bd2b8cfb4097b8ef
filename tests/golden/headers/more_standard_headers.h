/* The rest of C11's standard headers parse with the bundled freestanding set: declarations
   using their types are bound where cffi knows the type and listed where it does not. */
#include <complex.h>
#include <ctype.h>
#include <fenv.h>
#include <iso646.h>
#include <locale.h>
#include <setjmp.h>
#include <signal.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdnoreturn.h>
#include <tgmath.h>
#include <threads.h>
#include <uchar.h>
#include <wchar.h>
#include <wctype.h>

struct text_unit {
    char16_t narrow;
    char32_t wide;
    wchar_t native;
};

int32_t count_units(const struct text_unit * units, size_t n);
void set_flag(atomic_int * flag);
noreturn void stop_here(void);
