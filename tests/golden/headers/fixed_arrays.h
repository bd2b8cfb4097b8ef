/* Fixed-size arrays: 1-D, 2-D, of structs, of pointers, and array parameters. */
#pragma once
#include <stdint.h>

/// A point, used as an array element.
struct golden_point {
    float x; ///< x coordinate
    float y; ///< y coordinate
};

/// Arrays as struct fields.
struct golden_grid {
    char name[16];                 ///< a fixed char buffer
    float matrix[3][4];            ///< 2-D: 3 rows of 4
    struct golden_point corners[4]; ///< array of structs
    const char * labels[2];        ///< array of pointers
    uint8_t cube[2][3][4];         ///< 3-D
};

/// An array type behind a typedef.
typedef float golden_vec4[4];

/// Array parameters decay to pointers.
float golden_grid_trace(const struct golden_grid * grid, const float weights[4]);

/// A typedef'd array parameter.
void golden_vec4_scale(golden_vec4 v, float by);
