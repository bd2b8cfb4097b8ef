/*
 * llama_mtp.h: a plain C ABI over llama.cpp's speculative decoding (common/speculative):
 * multi-token prediction (MTP) first, and every other upstream strategy (a separate draft model,
 * the draftless n-gram strategies) alone or mixed.
 *
 * The wrapper owns a "sidecar" created against a target context: the strategies' state and, for a
 * draft-context strategy (draft-mtp, draft-simple, ...), its draft context. The caller keeps
 * decoding on the target as usual and mirrors every target decode into the sidecar; the sidecar
 * drafts tokens that the caller verifies on the target, then accepts a prefix of them.
 * llama_mtp_step() does a whole draft/verify/accept/rollback step in one call.
 *
 * Strategies: params.strategies lists one or more (none: draft-mtp alone, as in the first release).
 * At most one draft-context strategy, with any number of draftless n-gram ones. Each step asks
 * them in llama.cpp's order of preference (the n-gram strategies first, then the draft context)
 * and takes the first non-empty draft, as upstream's common_speculative_draft does.
 *
 * Rules of this ABI:
 *   - every function returns a status (enum llama_mtp_status) unless it is a pure getter;
 *     on an error, llama_mtp_last_error() returns a message for the calling thread;
 *   - no input aborts the process and no C++ exception leaves a function; a call that fails
 *     leaves the target context, the caller's sampler and the handle as they were, except where
 *     its comment says otherwise;
 *   - a handle that was freed or did not come from llama_mtp_create is refused
 *     (LLAMA_MTP_STATUS_INVALID_ARGUMENT) without being dereferenced;
 *   - token ids outside [0, llama_vocab_n_tokens) are refused (LLAMA_MTP_STATUS_INVALID_ARGUMENT);
 *   - parameter and statistics structs begin with `struct_size`: set it to sizeof the struct
 *     your header declares; the library reads and writes only that many bytes, so structs can
 *     grow at their end without breaking callers built against an older header.
 */
#ifndef LLAMA_MTP_H
#define LLAMA_MTP_H

#include <stdint.h>

#include "llama.h"

#if defined(_WIN32) || defined(__CYGWIN__)
#    ifdef LLAMA_MTP_BUILD
#        define LLAMA_MTP_API __declspec(dllexport)
#    else
#        define LLAMA_MTP_API __declspec(dllimport)
#    endif
#else
#    define LLAMA_MTP_API __attribute__((visibility("default")))
#endif

/* Bumped when a function's signature or a struct's existing fields change. */
#define LLAMA_MTP_ABI_VERSION 1

#ifdef __cplusplus
extern "C" {
#endif

enum llama_mtp_status {
    LLAMA_MTP_STATUS_OK                  = 0,
    LLAMA_MTP_STATUS_INVALID_ARGUMENT    = 1,  /* null pointer, out-of-range value */
    LLAMA_MTP_STATUS_UNSUPPORTED_VERSION = 2,  /* struct_size too small for this library */
    LLAMA_MTP_STATUS_NO_NEXTN_LAYERS     = 3,  /* the model has no NextN (MTP) layers */
    LLAMA_MTP_STATUS_MTP_NOT_LOADED      = 4,  /* the model was not loaded with load_mtp = true */
    LLAMA_MTP_STATUS_BAD_STATE           = 5,  /* call out of order (e.g. accept with no draft) */
    LLAMA_MTP_STATUS_ACCEPT_TOO_MANY     = 6,  /* accept more tokens than were drafted */
    LLAMA_MTP_STATUS_CONTEXT_FAILED      = 7,  /* llama.cpp refused to create the MTP context */
    LLAMA_MTP_STATUS_DECODE_FAILED       = 8,  /* a decode on the target or MTP context failed */
    LLAMA_MTP_STATUS_BUFFER_TOO_SMALL    = 9,  /* an output buffer cannot hold the result */
    LLAMA_MTP_STATUS_INTERNAL_ERROR      = 10, /* an unexpected failure inside the wrapper */
    /* Added after the first release: */
    LLAMA_MTP_STATUS_UNSUPPORTED_STRATEGY = 11, /* a strategy, or a mix, this library cannot run */
    LLAMA_MTP_STATUS_VOCAB_MISMATCH      = 12, /* the draft model's vocabulary is not the target's */
    LLAMA_MTP_STATUS_FILE_UNREADABLE     = 13, /* an n-gram cache file is missing or malformed */
    LLAMA_MTP_STATUS_NOT_IN_RELEASE      = 14, /* a strategy or feature the llama.cpp release this
                                                * library was built from does not have */
    LLAMA_MTP_STATUS_TEMPLATE_ERROR      = 15, /* a chat template that does not parse, or raised
                                                * while rendering (llama.cpp's message) */
    LLAMA_MTP_STATUS_SCHEMA_ERROR        = 16, /* a JSON schema that is invalid, or that llama.cpp
                                                * cannot turn into a grammar */
    LLAMA_MTP_STATUS_PARSE_ERROR         = 17, /* generated text the chat format's parser refuses */
    LLAMA_MTP_STATUS_DRAFT_MISMATCH      = 18  /* the draft model does not fit the strategy or the
                                                * target (architecture, width, target layers,
                                                * shared tensors); llama.cpp would abort */
};

/* Speculative strategies: upstream's COMMON_SPECULATIVE_TYPE_* with fixed values of our own. A
 * strategy's name (llama.cpp's --spec-type value, llama_mtp_strategy_name) is its enumerator's
 * suffix in lower case with '-' for '_' (LLAMA_MTP_STRATEGY_NGRAM_MAP_K4V: "ngram-map-k4v"). This
 * enum, the limits and masks below and the queries (llama_mtp_strategy_supported, _name) are the
 * contract's one home: llama-bindgen generates the bindings' values from them. */
enum llama_mtp_strategy_type {
    LLAMA_MTP_STRATEGY_DRAFT_SIMPLE  = 1,  /* a separate draft model (params.draft_model) */
    LLAMA_MTP_STRATEGY_DRAFT_EAGLE3  = 2,  /* an EAGLE-3 draft model */
    LLAMA_MTP_STRATEGY_DRAFT_MTP     = 3,  /* the target's own NextN (MTP) layers */
    LLAMA_MTP_STRATEGY_DRAFT_DFLASH  = 4,  /* a DFlash draft model */
    LLAMA_MTP_STRATEGY_DRAFT_DSPARK  = 5,  /* a DSpark draft model (DFlash + Markov head) */
    LLAMA_MTP_STRATEGY_NGRAM_SIMPLE  = 6,  /* draftless: the m-gram after the last match of an n-gram */
    LLAMA_MTP_STRATEGY_NGRAM_MAP_K   = 7,  /* draftless: n-gram keys */
    LLAMA_MTP_STRATEGY_NGRAM_MAP_K4V = 8,  /* draftless: n-gram keys with up to 4 m-gram values */
    LLAMA_MTP_STRATEGY_NGRAM_MOD     = 9,  /* draftless: hashed n-gram pool */
    LLAMA_MTP_STRATEGY_NGRAM_CACHE   = 10  /* draftless: 3-level n-gram cache, optional files */
};

/* The strategies that decode a draft context, one bit (1u << type) each: a sidecar runs at most
 * one of them, beside any number of the draftless (n-gram) ones. */
#define LLAMA_MTP_DRAFT_CONTEXT_STRATEGIES                                                        \
    ((1u << LLAMA_MTP_STRATEGY_DRAFT_SIMPLE) | (1u << LLAMA_MTP_STRATEGY_DRAFT_EAGLE3) |          \
     (1u << LLAMA_MTP_STRATEGY_DRAFT_MTP) | (1u << LLAMA_MTP_STRATEGY_DRAFT_DFLASH) |             \
     (1u << LLAMA_MTP_STRATEGY_DRAFT_DSPARK))

/* Bounds of the parameters: n-gram and m-gram lengths (size_n, size_m, min_hits, n_match,
 * mod_n_max), and tokens per draft (params.n_max). LLAMA_MTP_DRAFT_DEFAULT: params.n_max's
 * default (llama_mtp_default_params). Added after the first release: LLAMA_MTP_DRAFT_DEFAULT. */
#define LLAMA_MTP_NGRAM_MAX 1024
#define LLAMA_MTP_DRAFT_MAX 255
#define LLAMA_MTP_DRAFT_DEFAULT 3

/* Positions one embedding row can carry in llama_mtp_process_embd (M-RoPE sections). Added after
 * the first release, with llama_mtp_process_embd. */
#define LLAMA_MTP_MAX_POS_PER_ROW 4

/* One strategy and its parameters; fill with llama_mtp_default_strategy, then adjust. Fields a
 * strategy does not use are ignored. */
struct llama_mtp_strategy {
    uint32_t struct_size;      /* sizeof(struct llama_mtp_strategy) */
    int32_t  type;             /* enum llama_mtp_strategy_type */
    /* ngram-simple, ngram-map-k, ngram-map-k4v: */
    int32_t  size_n;           /* n-gram (key) length, [1, NGRAM_MAX] (default 12) */
    int32_t  size_m;           /* m-gram (draft) length, [1, NGRAM_MAX] (default 48); ngram-simple:
                                * >= size_n (it drafts nothing otherwise) */
    int32_t  min_hits;         /* hits before an m-gram is proposed, [1, NGRAM_MAX] (default 1) */
    /* ngram-mod: */
    int32_t  n_match;          /* n-gram length, [1, NGRAM_MAX] (default 24) */
    int32_t  mod_n_min;        /* shortest draft, [0, mod_n_max] (default 48) */
    int32_t  mod_n_max;        /* longest draft, [1, NGRAM_MAX] (default 64) */
    /* ngram-cache: files written by llama.cpp's llama-lookup-create (NULL or "": none) */
    const char * cache_static;
    const char * cache_dynamic;
};

/* Opaque handle: one MTP sidecar bound to one target context. */
struct llama_mtp;

struct llama_mtp_params {
    uint32_t struct_size;      /* sizeof(struct llama_mtp_params) */
    int32_t  n_max;            /* most tokens per draft, [1, DRAFT_MAX] (default DRAFT_DEFAULT) */
    int32_t  n_min;            /* drafts shorter than this are dropped, >= 0 (default 0) */
    float    p_min;            /* stop drafting below this top-token probability (default 0) */
    uint32_t n_seq;            /* sequences 0..n_seq-1 the sidecar serves (default 1) */
    int32_t  backend_sampling; /* 1: draft sampling on the backend when possible (default 1) */
    int32_t  n_threads;        /* MTP context threads, 0 = as the target (default 0) */
    int32_t  n_threads_batch;  /* MTP context batch threads, 0 = as the target (default 0) */
    /* Added after the first release (a caller whose struct_size ends before them gets draft-mtp
     * alone). n_max, n_min, p_min and backend_sampling above apply to the draft-context strategy;
     * n_max also caps every strategy's drafts. */
    const struct llama_mtp_strategy * strategies; /* n_strategies of them; NULL: draft-mtp */
    uint32_t n_strategies;
    int32_t  draft_n_ctx;      /* draft model context size, 0 = the target's (default 0) */
    struct llama_model * draft_model; /* draft-simple/eagle3/dflash/dspark: loaded by the caller,
                                       * same vocabulary as the target; NULL otherwise */
};

/* Counters of one strategy (llama_mtp_get_strategy_stats). */
struct llama_mtp_strategy_stats {
    uint32_t struct_size;      /* sizeof(struct llama_mtp_strategy_stats) */
    int32_t  type;             /* enum llama_mtp_strategy_type */
    uint64_t n_drafts;         /* drafts of this strategy that were verified */
    uint64_t n_drafted;        /* tokens it drafted */
    uint64_t n_accepted;       /* of them accepted */
};

struct llama_mtp_stats {
    uint32_t struct_size;      /* sizeof(struct llama_mtp_stats) */
    uint32_t reserved;
    uint64_t n_drafts;         /* drafts that produced at least one token */
    uint64_t n_drafted;        /* tokens drafted */
    uint64_t n_accepted;       /* drafted tokens accepted */
    uint64_t n_steps;          /* accepted verification steps (accept or step calls) */
    /* Drafts whose tokens the backend sampled (params.backend_sampling, and llama.cpp took the
     * draft sampler onto the draft context's output device): 0 when sampling ran on the CPU.
     * Added after the first release: a caller whose struct_size ends before it is not written. */
    uint64_t n_backend_sampled;
};

/* Version of this ABI (LLAMA_MTP_ABI_VERSION of the built library). */
LLAMA_MTP_API uint32_t llama_mtp_abi_version(void);

/* The llama.cpp commit (40 hex digits) the library was built from. */
LLAMA_MTP_API const char * llama_mtp_llama_commit(void);

/* Message of the last error on the calling thread ("" when none). */
LLAMA_MTP_API const char * llama_mtp_last_error(void);

/* Fill *params with defaults; params->struct_size must be set by the caller. */
LLAMA_MTP_API enum llama_mtp_status llama_mtp_default_params(struct llama_mtp_params * params);

/* Fill *strategy with this library's defaults for `type` (llama.cpp's own defaults);
 * strategy->struct_size must be set by the caller. */
LLAMA_MTP_API enum llama_mtp_status llama_mtp_default_strategy(
        int32_t type, struct llama_mtp_strategy * strategy);

/* LLAMA_MTP_STATUS_OK when this library can run `type` (with a suitable draft model where it needs
 * one); else LLAMA_MTP_STATUS_NOT_IN_RELEASE (a strategy the llama.cpp release this library was
 * built from lacks, or lacks what the wrapper needs to check its draft) or
 * LLAMA_MTP_STATUS_INVALID_ARGUMENT (not a strategy at all), and llama_mtp_last_error() says why.
 * (UNSUPPORTED_STRATEGY, for a strategy no release runs, is answered for none at present.) */
LLAMA_MTP_API enum llama_mtp_status llama_mtp_strategy_supported(int32_t type);

/* llama.cpp's name of a strategy ("draft-mtp", "ngram-mod", ...; the --spec-type value), or NULL
 * for a value that is not one. */
LLAMA_MTP_API const char * llama_mtp_strategy_name(int32_t type);

/* The name of a status: its enumerator's suffix in lower case (LLAMA_MTP_STATUS_NOT_IN_RELEASE:
 * "not_in_release"), or NULL for a value that is not one. Added after the first release. */
LLAMA_MTP_API const char * llama_mtp_status_name(int32_t status);

/* Number of NextN (MTP) layers of a model into *n_layers. */
LLAMA_MTP_API enum llama_mtp_status llama_mtp_model_n_nextn_layers(
        const struct llama_model * model, int32_t * n_layers);

/*
 * Create the sidecar for ctx_tgt with params' strategies (none listed: draft-mtp). Refused with a
 * status, before anything is created: an unknown type (INVALID_ARGUMENT), a strategy listed twice
 * or two draft-context strategies (UNSUPPORTED_STRATEGY), draft-simple without params.draft_model
 * (INVALID_ARGUMENT) or with one whose vocabulary differs from the target's (VOCAB_MISMATCH;
 * draft-eagle3/dflash/dspark need the same number of tokens too), draft-eagle3/dflash/dspark with
 * a draft that does not fit (DRAFT_MISMATCH: another architecture, an EAGLE-3 draft without
 * exactly one block and three target layers, target layer ids the target does not have or whose
 * inputs its architecture does not export, another width, tensors to share that the target lacks
 * or has in another shape, a DFlash/DSpark draft without a mask token or with a block size too
 * small, draft-dflash on a DSpark draft or the reverse) or of a kind not run yet (DFlash2
 * selectors, DeepSeek-V4 DSpark drafts: UNSUPPORTED_STRATEGY), draft-dspark with p_min > 0 and
 * no confidence head (INVALID_ARGUMENT), a strategy the
 * llama.cpp release lacks, or backend_sampling = 1 in a release without draft backend sampling
 * (NOT_IN_RELEASE), n-gram sizes out of range (INVALID_ARGUMENT), an n-gram cache file that cannot
 * be read or is malformed (FILE_UNREADABLE). With draft-mtp: the model must have NextN layers and
 * have been loaded with llama_model_params.load_mtp = true (checked: its NextN tensors must be
 * present, else LLAMA_MTP_STATUS_MTP_NOT_LOADED). Call before the first decode on ctx_tgt: it
 * switches the target to emitting the hidden states MTP needs. Recurrent or hybrid targets need
 * llama_context_params.n_rs_seq >= n_max, and the target needs room for 1 + n_max outputs in a
 * batch: llama_context_params.n_outputs_max 0 (n_batch) or >= 1 + n_max (checked, except against a
 * Windows libllama, which does not export the value). A model with more NextN layers than llama.cpp
 * builds its architecture's MTP graph for is refused.
 */
LLAMA_MTP_API enum llama_mtp_status llama_mtp_create(
        struct llama_context * ctx_tgt,
        const struct llama_mtp_params * params,
        struct llama_mtp ** out);

/* Free the sidecar and its MTP context, before freeing the target context (which stays the
 * caller's). NULL is a no-op; a handle that is not live (freed twice, foreign) is left alone and
 * llama_mtp_last_error() says so. */
LLAMA_MTP_API void llama_mtp_free(struct llama_mtp * mtp);

/* The MTP context the sidecar owns (NULL for a NULL handle). */
LLAMA_MTP_API struct llama_context * llama_mtp_get_context(struct llama_mtp * mtp);

/*
 * Mirror a batch that was just decoded on the target context (every prompt chunk and every
 * verification batch, in order). Tokens only; pos and seq_id arrays must be set, one seq each.
 */
LLAMA_MTP_API enum llama_mtp_status llama_mtp_process(
        struct llama_mtp * mtp, const struct llama_batch * batch);

/*
 * Mirror a batch of embedding rows just decoded on the target context: a multimodal (image or
 * audio) chunk as libmtmd decodes it. Pass what mtmd_helper_decode_image_chunk's post-decode
 * callback receives: n_tokens rows of n_embd floats at embd (n_embd = the target model's input
 * width, llama_model_n_embd_inp), their positions pos, section-major [n_pos][n_tokens] (n_pos 1,
 * or up to LLAMA_MTP_MAX_POS_PER_ROW for M-RoPE models; missing sections are 0), all in seq_id.
 * Each strategy takes the rows as its llama.cpp release does (a draft model of the same input
 * width decodes them; draft-mtp and the n-gram strategies skip them, so drafts after media may
 * be poorer, never wrong). Refused with LLAMA_MTP_STATUS_NOT_IN_RELEASE when the release's
 * speculative decoding takes token batches only (decode the media without speculation there),
 * and with LLAMA_MTP_STATUS_BAD_STATE while a draft of seq_id awaits verification. For the
 * prompt of llama_mtp_begin, pass the text tokens only.
 */
LLAMA_MTP_API enum llama_mtp_status llama_mtp_process_embd(
        struct llama_mtp * mtp,
        llama_seq_id seq_id,
        const float * embd,
        int32_t n_tokens,
        int32_t n_embd,
        const llama_pos * pos,
        int32_t n_pos);

/* Whether llama_mtp_process_embd can run in this build (the release's speculative decoding
 * takes embedding rows): 1 or 0 into *supported. */
LLAMA_MTP_API enum llama_mtp_status llama_mtp_embd_supported(int32_t * supported);

/* Start a generation on seq_id; prompt = the tokens already in the target context. */
LLAMA_MTP_API enum llama_mtp_status llama_mtp_begin(
        struct llama_mtp * mtp, llama_seq_id seq_id, const llama_token * prompt, int32_t n_prompt);

/*
 * Draft up to min(n_max, params.n_max) tokens following id_last, which sits at position pos0
 * (not yet decoded on the target, so pos0 is one past the sequence's last position there:
 * LLAMA_MTP_STATUS_BAD_STATE otherwise). Writes them to draft[0..*n_draft).
 */
LLAMA_MTP_API enum llama_mtp_status llama_mtp_draft(
        struct llama_mtp * mtp,
        llama_seq_id seq_id,
        llama_token  id_last,
        llama_pos    pos0,
        int32_t      n_max,
        llama_token * draft,
        int32_t      capacity,
        int32_t    * n_draft);

/*
 * Accept the first n_accepted tokens of the last draft of seq_id, after the verification batch
 * was decoded on the target and mirrored with llama_mtp_process. 0 <= n_accepted <= draft size.
 */
LLAMA_MTP_API enum llama_mtp_status llama_mtp_accept(
        struct llama_mtp * mtp, llama_seq_id seq_id, int32_t n_accepted);

/* Remove positions [p0, p1) of seq_id from the target and the MTP context (p1 < 0: to the end).
 * When llama.cpp refuses the removal from the target (recurrent memory keeps only a tail of
 * n_rs_seq positions to roll back), nothing is removed and LLAMA_MTP_STATUS_INVALID_ARGUMENT is
 * returned. Drops a draft not yet accepted. */
LLAMA_MTP_API enum llama_mtp_status llama_mtp_seq_rm(
        struct llama_mtp * mtp, llama_seq_id seq_id, llama_pos p0, llama_pos p1);

/*
 * One whole speculative step on seq_id: draft after id_last (at position n_past), decode
 * [id_last, draft...] on the target, sample each row with smpl (the caller's sampler, which also
 * accepts what it samples), accept the agreeing prefix, remove the rejected tail from both
 * contexts. Writes the accepted draft tokens plus the target's next token to tokens[0..*n_tokens);
 * the last of them is the new id_last and the new n_past is n_past + *n_tokens.
 * capacity >= 1; the draft is capped at capacity - 1 tokens. n_past must be one past the
 * sequence's last position in the target (LLAMA_MTP_STATUS_BAD_STATE otherwise, before anything
 * is decoded). A sampler that selects no token (an empty chain, say) on the first row fails with
 * LLAMA_MTP_STATUS_INVALID_ARGUMENT and the step is undone; on a later row, the rows before it
 * are returned. Stops after an end-of-generation token.
 */
LLAMA_MTP_API enum llama_mtp_status llama_mtp_step(
        struct llama_mtp * mtp,
        llama_seq_id seq_id,
        struct llama_sampler * smpl,
        llama_token  id_last,
        llama_pos    n_past,
        llama_token * tokens,
        int32_t      capacity,
        int32_t    * n_tokens);

/*
 * One sequence's part of llama_mtp_step_many (added after the first release). The caller sets
 * struct_size (sizeof this struct in its header), seq_id, smpl, id_last, n_past, tokens and
 * capacity as llama_mtp_step takes them; the library writes the rest.
 */
struct llama_mtp_step_item {
    uint32_t             struct_size;
    llama_seq_id         seq_id;
    struct llama_sampler * smpl;
    llama_token          id_last;
    llama_pos            n_past;
    llama_token        * tokens;       /* out: accepted draft tokens, then the target's own */
    int32_t              capacity;     /* >= 1; the draft is capped at capacity - 1 tokens */
    int32_t              n_tokens;     /* out: tokens written (0 when status is not OK) */
    int32_t              n_drafted;    /* out: the draft's size (0: none this step) */
    int32_t              strategy;     /* out: index of the strategy that drafted (-1: none) */
    int32_t              backend_sampled; /* out: 1 when the draft was sampled on the backend */
    int32_t              first_row;    /* out: its first row among the decode's outputs (the
                                        * logits of token i of tokens are row first_row + i); -1
                                        * when it failed or its rows are gone (see
                                        * llama_mtp_step_many_together) */
    int32_t              status;       /* out: this item's enum llama_mtp_status */
};

/*
 * llama_mtp_step for several sequences at once (added after the first release): each item's
 * sequence drafts as llama_mtp_step drafts, then ONE target decode verifies every sequence's
 * [id_last, draft...] rows, the batch is mirrored once, and each sequence samples with its own
 * sampler, accepts its agreeing prefix and rolls back its rejected tail, as llama_mtp_step does
 * alone. Each sequence's tokens are what llama_mtp_step gives it alone (with a batch-invariant
 * target: n_ubatch 1, or the same rows). items is an array of n_items structs, every one with the
 * same struct_size (the array's stride). Each item gets its own status: an item that is refused
 * (a NULL sampler or buffer, a seq_id out of range or given twice, a wrong n_past, a draft not
 * accepted, a sampler that selects no token) takes no part and leaves its sequence as it was,
 * while the others go on. All rows of one step must fit the target's batch and its output
 * limit (llama_n_batch; n_outputs_max where readable): each item's draft is capped at
 * limit / (items taking part) - 1 tokens. When the decode fails, every item taking part gets
 * LLAMA_MTP_STATUS_DECODE_FAILED and its step is undone. An item whose sampler selects no token on
 * its first row gets INVALID_ARGUMENT and nothing of its step stays in the target or the draft
 * context (its rows were shown to the strategies when other items' rows were mirrored with it).
 * Returns LLAMA_MTP_STATUS_OK when every item is OK, else the first failing item's status
 * (llama_mtp_last_error has its message); items that did not fail are complete either way.
 */
LLAMA_MTP_API enum llama_mtp_status llama_mtp_step_many(
        struct llama_mtp * mtp, struct llama_mtp_step_item * items, int32_t n_items);

/* 1 when llama_mtp_step_many verifies all its items in one decode; 0 when it verifies each in a
 * decode of its own (a draft that reads the target's layers: EAGLE-3, DFlash, DSpark, whose rows
 * llama.cpp hands back ubatch by ubatch), so that only the last item's rows are left in the
 * target's outputs (the others' first_row is -1); -1 for a handle that is not live. Added after
 * the first release. */
LLAMA_MTP_API int32_t llama_mtp_step_many_together(const struct llama_mtp * mtp);

/* Copy the counters into *stats; stats->struct_size must be set by the caller (at least up to
 * n_steps; fields past the caller's struct_size are not written). */
LLAMA_MTP_API enum llama_mtp_status llama_mtp_get_stats(
        const struct llama_mtp * mtp, struct llama_mtp_stats * stats);

/* Number of strategies the sidecar runs, in the order it asks them (llama.cpp's order of
 * preference); -1 for a handle that is not live. */
LLAMA_MTP_API int32_t llama_mtp_n_strategies(const struct llama_mtp * mtp);

/* Copy the counters of strategy `index` (0 .. llama_mtp_n_strategies - 1) into *stats;
 * stats->struct_size must be set by the caller. */
LLAMA_MTP_API enum llama_mtp_status llama_mtp_get_strategy_stats(
        const struct llama_mtp * mtp, int32_t index, struct llama_mtp_strategy_stats * stats);

/* Zero the counters (the strategies' too). */
LLAMA_MTP_API enum llama_mtp_status llama_mtp_reset_stats(struct llama_mtp * mtp);

/* ---- Chat: llama.cpp's own chat layer (common/chat, common/json-schema-to-grammar) ----------
 *
 * The model's template run by llama.cpp's Jinja engine, tools, reasoning and JSON schemas, as
 * llama.cpp's server of the same release renders and parses them. Strings in and out are UTF-8
 * JSON texts; a string the library returns is freed with llama_mtp_string_free. Added after the
 * first release; a library built from a release without the chat layer refuses every call below
 * with LLAMA_MTP_STATUS_NOT_IN_RELEASE. Handles follow the rules above (a freed or foreign one is
 * refused without being dereferenced). */

/* A model's chat templates (its default and named variants). */
struct llama_mtp_chat_templates;

/* One rendered request: what parsing its generated text needs. */
struct llama_mtp_chat;

/* LLAMA_MTP_STATUS_OK when this library has the chat layer, else NOT_IN_RELEASE. */
LLAMA_MTP_API enum llama_mtp_status llama_mtp_chat_supported(void);

/* The chat templates of `model` (its GGUF's tokenizer.chat_template and named variants), or
 * `template_text` (a Jinja template) instead when it is not NULL; `model` may be NULL with a
 * template_text (no BOS/EOS token text then). LLAMA_MTP_STATUS_TEMPLATE_ERROR: the template does
 * not parse. */
LLAMA_MTP_API enum llama_mtp_status llama_mtp_chat_templates_init(
        const struct llama_model * model, const char * template_text,
        struct llama_mtp_chat_templates ** out);

LLAMA_MTP_API void llama_mtp_chat_templates_free(struct llama_mtp_chat_templates * templates);

/* Facts of the templates as JSON into *info: {"source": the default template's text,
 * "caps": {capability: bool, ...} (llama.cpp's names), "supports_thinking": bool}. */
LLAMA_MTP_API enum llama_mtp_status llama_mtp_chat_templates_info(
        const struct llama_mtp_chat_templates * templates, char ** info);

/* Render a request. request_json is an object; every member but "messages" is optional:
 *   "messages": OpenAI chat messages (text parts, assistant tool calls, tool results); an image
 *   or audio item is a part {"type": "media_marker", "text": <libmtmd's marker>} (llama.cpp's
 *   server replaces each image_url or input_audio part so before rendering; so does the caller),
 *   "tools": OpenAI tools, "tool_choice": "auto" | "required" | "none",
 *   "parallel_tool_calls": bool, "reasoning_format": "none" | "auto" | "deepseek" |
 *   "deepseek-legacy", "enable_thinking": bool, "chat_template_kwargs": {name: any JSON},
 *   "json_schema": a JSON schema, "grammar": GBNF text, "add_generation_prompt": bool (true).
 * On OK: *chat a new handle (parse with it, then free it) and *result_json:
 *   {"prompt", "grammar", "grammar_lazy", "grammar_triggers": [{"type": "token" | "word" |
 *    "pattern" | "pattern_full", "value", "token"}], "preserved_tokens", "additional_stops",
 *    "format" (llama.cpp's name of the parse format), "generation_prompt", "supports_thinking"}.
 * LLAMA_MTP_STATUS_INVALID_ARGUMENT: the request is not valid JSON or not of this shape (an
 * unknown tool choice, a malformed message); TEMPLATE_ERROR: rendering raised (the template's
 * own raise_exception included); SCHEMA_ERROR: the schema cannot be a grammar. */
LLAMA_MTP_API enum llama_mtp_status llama_mtp_chat_apply(
        const struct llama_mtp_chat_templates * templates, const char * request_json,
        struct llama_mtp_chat ** chat, char ** result_json);

/* Parse generated text (all of it so far; is_partial non-zero while generation goes on) with the
 * request's format into *message_json: {"role": "assistant", "content", "reasoning_content",
 * "tool_calls": [{"id", "name", "arguments"}]}. LLAMA_MTP_STATUS_PARSE_ERROR: final text the
 * format's parser refuses. */
LLAMA_MTP_API enum llama_mtp_status llama_mtp_chat_parse(
        const struct llama_mtp_chat * chat, const char * text, int32_t is_partial,
        char ** message_json);

LLAMA_MTP_API void llama_mtp_chat_free(struct llama_mtp_chat * chat);

/* A JSON schema (text) as a GBNF grammar into *grammar (LLAMA_MTP_STATUS_SCHEMA_ERROR: invalid,
 * or one llama.cpp cannot turn into a grammar, with its message). */
LLAMA_MTP_API enum llama_mtp_status llama_mtp_json_schema_to_grammar(
        const char * schema_json, char ** grammar);

/* Free a string this library returned (NULL is ignored). */
LLAMA_MTP_API void llama_mtp_string_free(char * text);

#ifdef __cplusplus
}
#endif

#endif /* LLAMA_MTP_H */
