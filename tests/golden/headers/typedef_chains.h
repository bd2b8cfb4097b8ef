/* Typedef chains: of an integer, of a struct tag, of a pointer, each through several names. */
#pragma once
#include <stdint.h>

/// The first link: an integer typedef.
typedef int32_t golden_id;
/// The second link: a typedef of a typedef.
typedef golden_id golden_token;
/// The third link.
typedef golden_token golden_token_id;

/// A tagged struct.
struct golden_pair {
    golden_token_id first;  ///< through three typedefs
    golden_token second;    ///< through two
};
/// A typedef of the struct tag.
typedef struct golden_pair golden_pair_t;
/// A typedef of that typedef.
typedef golden_pair_t golden_pair_alias;
/// A pointer typedef over the chain.
typedef golden_pair_alias * golden_pair_ptr;
/// A const pointer typedef.
typedef const golden_pair_t * golden_pair_cptr;

/// Uses the ends of the chains.
golden_token_id golden_pair_sum(golden_pair_cptr pair, golden_pair_ptr out);

/// By value, through the chain.
golden_pair_alias golden_pair_make(golden_id a, golden_token b);
