/* Forward-declared structs that are never defined, used only through pointers. */
#pragma once
#include <stdint.h>

/// An opaque handle, declared by its tag only.
struct golden_model;

/// An opaque handle named by a typedef of an undefined tag.
typedef struct golden_context golden_context;

/// A typedef'd pointer to an opaque struct.
typedef struct golden_sampler * golden_sampler_t;

/// Creates a context for a model.
golden_context * golden_context_new(struct golden_model * model);

/// Frees it; NULL is allowed.
void golden_context_free(golden_context * ctx);

/// A sampler, by its pointer typedef.
golden_sampler_t golden_sampler_for(const golden_context * ctx);

/// A struct holding opaque pointers is itself complete.
struct golden_session {
    struct golden_model * model; ///< borrowed
    golden_context * ctx;        ///< owned
};
