/* An enum declared (enum name;) but never defined: listed as not bound, with every declaration
   that uses it; one declared first and defined later is bound. */
#include <stdint.h>

enum golden_never_defined;
enum golden_defined_later;
enum golden_defined_later { GOLDEN_LATER_A = 1, GOLDEN_LATER_B = 2 };

struct golden_holds_incomplete {
    enum golden_never_defined * which;
    int32_t n;
};

void golden_incomplete_pointer(enum golden_never_defined * which);
enum golden_never_defined golden_incomplete_result(void);
void golden_defined_later_param(enum golden_defined_later value);
