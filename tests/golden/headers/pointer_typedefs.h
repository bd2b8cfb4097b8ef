/* Typedefs of pointers to unnamed types and a compiler builtin type: a pointer to an unnamed
   enum has the enum's integer type; a pointer to an unnamed struct and __builtin_va_list are
   listed as not bound, with the functions that use them. */
#include <stdint.h>
typedef enum { T_A, T_B } ** enum_ptr_ptr;
typedef enum named_e { N_A } * named_ptr;
void takes_builtin_va(const char * fmt, __builtin_va_list ap);
int32_t uses_ptr(enum_ptr_ptr p, named_ptr q);
typedef struct { int32_t a; } * unnamed_struct_ptr;
int32_t uses_struct_ptr(unnamed_struct_ptr p);
