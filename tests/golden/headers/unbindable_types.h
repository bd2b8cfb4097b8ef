/* Types cffi has no form for: each declaration using one is left out (GENERATION_REPORT.md lists
   it with the reason) and every other declaration of the header is bound. (__int128 exists on
   64-bit targets only, so headers guard it, as here.) */
#include <stdint.h>

typedef _Complex float cfloat_t;
typedef float float4 __attribute__((vector_size(16)));

#ifdef __SIZEOF_INT128__
typedef __int128 wide_t;
struct uses_wide {
    int before;
    __int128 wide;
};
__int128 wide_sum(__int128 x, __int128 y);
void takes_wide_record(struct uses_wide * p);
#endif

struct plain_pair {
    int32_t a;
    float b;
};

_Complex double complex_conj(_Complex double z);
float half_widen(const __fp16 * x);
float4 vector_add(float4 a, float4 b);

int32_t plain_add(int32_t a, int32_t b);
struct plain_pair plain_make(int32_t a, float b);
