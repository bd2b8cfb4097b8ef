/* Global variables: a static const integer with a value is bound as a constant; any other
   global is listed as not bound. */
#include <stddef.h>
#include <stdint.h>

struct sized { int32_t a; double b; };

static const size_t SIZED_SIZE = sizeof(struct sized);
static const int32_t NEG_LIMIT = -3;
static const uint64_t BIG_UNSIGNED = 0xFFFFFFFFFFFFFFF0u;
static const float RATIO = 1.5f;
static const char * const NAME = "name";
extern int32_t shared_counter;

size_t sized_count(const struct sized * items, size_t n);
