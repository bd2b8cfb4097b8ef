// Implementation of llama_mtp.h over llama.cpp's common/speculative.
//
// Every entry point checks the preconditions that upstream enforces with GGML_ASSERT (which
// aborts the process) and returns a status instead, and catches every C++ exception.
//
// Strategies: each configured strategy gets a common_speculative of its own (one implementation
// each), asked in upstream's order of preference; the first non-empty draft is verified. Keeping
// them apart is what lets the wrapper count drafts and acceptance per strategy (upstream keeps its
// per-implementation counters private). Upstream's accept() tells the other implementations how
// many tokens were accepted (is_other); of those, only the draft-context ones use it (draft-mtp
// picks the hidden-state row to continue from), so the wrapper forwards the count to the
// draft-context strategy once it has drafted for the sequence.

#include "llama_mtp.h"

#include "common.h"
#include "ngram-cache.h"  // LLAMA_NGRAM_MAX: the n-gram cache file's record layout
#include "speculative.h"

#include "llama-ext.h"  // llama_get_embeddings_nextn (staging API, used to validate mirrors)
#if !defined(_WIN32)
#    include "llama-context.h"  // llama_context::get_cparams (exported from ELF/Mach-O libllama only)
#endif

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#ifndef LLAMA_MTP_LLAMA_COMMIT
#    define LLAMA_MTP_LLAMA_COMMIT "unknown"
#endif

// Architectures whose MTP graph asserts exactly one NextN layer in this tree, comma-separated
// (the build reads them from src/models/; see generator/build/nextn_archs.py).
#ifndef LLAMA_MTP_SINGLE_NEXTN_ARCHS
#    define LLAMA_MTP_SINGLE_NEXTN_ARCHS ""
#endif

// Exported by libllama (src/llama-model.h, "for internal test use"): the model's loaded tensors.
// Tensors skipped at load time (the NextN block when load_mtp = false) are not in it.
const std::vector<std::pair<std::string, ggml_tensor *>> & llama_internal_get_tensor_map(
    const llama_model * model);

namespace {

constexpr int32_t k_max_draft = 255;  // upstream counts accepted tokens in a uint16_t
constexpr int32_t k_max_ngram = 1024;  // our bound on n-gram and m-gram lengths
constexpr int32_t k_vocab_max_size_difference = 128;  // upstream's SPEC_VOCAB_MAX_SIZE_DIFFERENCE
constexpr int32_t k_vocab_check_start_token = 5;      // upstream's SPEC_VOCAB_CHECK_START_TOKEN_ID

thread_local std::string g_last_error;

struct seq_state {
    int32_t pending = -1;      // size of the last draft not yet accepted; -1: none
    int32_t winner = -1;       // strategy index whose draft is pending; -1: none (empty draft)
    bool verified = false;     // a batch for this sequence was mirrored after that draft
    llama_tokens prompt;       // what upstream's draft slot points at
    llama_tokens draft;        // upstream writes the draft here
};

llama_mtp_status fail(llama_mtp_status status, const std::string & message) {
    g_last_error = message;
    return status;
}

llama_mtp_status ok() {
    g_last_error.clear();
    return LLAMA_MTP_STATUS_OK;
}

// Live handles: a freed or foreign pointer is refused without being dereferenced.
std::mutex g_handles_mutex;
std::unordered_set<const llama_mtp *> g_handles;

void register_handle(const llama_mtp * h) {
    std::lock_guard<std::mutex> lock(g_handles_mutex);
    g_handles.insert(h);
}

bool unregister_handle(const llama_mtp * h) {
    std::lock_guard<std::mutex> lock(g_handles_mutex);
    return g_handles.erase(h) == 1;
}

bool is_live(const llama_mtp * h) {
    std::lock_guard<std::mutex> lock(g_handles_mutex);
    return g_handles.count(h) == 1;
}

llama_mtp_status check_handle(const llama_mtp * h, const char * where) {
    if (h == nullptr) {
        return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT, std::string(where) + ": handle is NULL");
    }
    if (!is_live(h)) {
        return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                    std::string(where) + ": handle is not a live llama_mtp (already freed, or not "
                                         "returned by llama_mtp_create)");
    }
    return LLAMA_MTP_STATUS_OK;
}

bool in_list(const std::string & list, const std::string & name) {
    size_t start = 0;
    while (start <= list.size()) {
        const size_t end = std::min(list.find(',', start), list.size());
        if (list.compare(start, end - start, name) == 0) {
            return true;
        }
        start = end + 1;
    }
    return false;
}

template <typename F>
llama_mtp_status guarded(const char * where, F && body) noexcept {
    try {
        return body();
    } catch (const std::bad_alloc &) {
        return fail(LLAMA_MTP_STATUS_INTERNAL_ERROR, std::string(where) + ": out of memory");
    } catch (const std::exception & e) {
        return fail(LLAMA_MTP_STATUS_INTERNAL_ERROR, std::string(where) + ": " + e.what());
    } catch (...) {
        return fail(LLAMA_MTP_STATUS_INTERNAL_ERROR, std::string(where) + ": unknown exception");
    }
}

void params_defaults(llama_mtp_params & p) {
    std::memset(&p, 0, sizeof(p));
    p.struct_size = sizeof(p);
    p.n_max = 3;
    p.n_min = 0;
    p.p_min = 0.0f;
    p.n_seq = 1;
    p.backend_sampling = 1;
    p.n_threads = 0;
    p.n_threads_batch = 0;
    p.strategies = nullptr;
    p.n_strategies = 0;
    p.draft_n_ctx = 0;
    p.draft_model = nullptr;
}

struct strategy_info {
    int32_t type;
    const char * name;  // upstream's --spec-type name
    bool draft_context;
    bool runs;          // run by this wrapper (else refused with the reason below)
    const char * why_not;
};

// Which of upstream's strategy types this tree's common/common.h has (the CMake file looks).
#define LLAMA_MTP_LACKS(name) "this llama.cpp release has no COMMON_SPECULATIVE_TYPE_" name
#ifndef LLAMA_MTP_HAVE_DRAFT_SIMPLE
#    define LLAMA_MTP_HAVE_DRAFT_SIMPLE 1
#endif
#ifndef LLAMA_MTP_HAVE_NGRAM_SIMPLE
#    define LLAMA_MTP_HAVE_NGRAM_SIMPLE 1
#endif
#ifndef LLAMA_MTP_HAVE_NGRAM_MAP_K
#    define LLAMA_MTP_HAVE_NGRAM_MAP_K 1
#endif
#ifndef LLAMA_MTP_HAVE_NGRAM_MAP_K4V
#    define LLAMA_MTP_HAVE_NGRAM_MAP_K4V 1
#endif
#ifndef LLAMA_MTP_HAVE_NGRAM_MOD
#    define LLAMA_MTP_HAVE_NGRAM_MOD 1
#endif
#ifndef LLAMA_MTP_HAVE_NGRAM_CACHE
#    define LLAMA_MTP_HAVE_NGRAM_CACHE 1
#endif

// In upstream's order of preference (common_speculative_init): draftless first.
const strategy_info k_strategies[] = {
    {LLAMA_MTP_STRATEGY_NGRAM_SIMPLE, "ngram-simple", false, LLAMA_MTP_HAVE_NGRAM_SIMPLE != 0,
     LLAMA_MTP_LACKS("NGRAM_SIMPLE")},
    {LLAMA_MTP_STRATEGY_NGRAM_MAP_K, "ngram-map-k", false, LLAMA_MTP_HAVE_NGRAM_MAP_K != 0,
     LLAMA_MTP_LACKS("NGRAM_MAP_K")},
    {LLAMA_MTP_STRATEGY_NGRAM_MAP_K4V, "ngram-map-k4v", false, LLAMA_MTP_HAVE_NGRAM_MAP_K4V != 0,
     LLAMA_MTP_LACKS("NGRAM_MAP_K4V")},
    {LLAMA_MTP_STRATEGY_NGRAM_MOD, "ngram-mod", false, LLAMA_MTP_HAVE_NGRAM_MOD != 0,
     LLAMA_MTP_LACKS("NGRAM_MOD")},
    {LLAMA_MTP_STRATEGY_NGRAM_CACHE, "ngram-cache", false, LLAMA_MTP_HAVE_NGRAM_CACHE != 0,
     LLAMA_MTP_LACKS("NGRAM_CACHE")},
    {LLAMA_MTP_STRATEGY_DRAFT_SIMPLE, "draft-simple", true, LLAMA_MTP_HAVE_DRAFT_SIMPLE != 0,
     LLAMA_MTP_LACKS("DRAFT_SIMPLE")},
    {LLAMA_MTP_STRATEGY_DRAFT_EAGLE3, "draft-eagle3", true, false,
     "draft-eagle3 needs an EAGLE-3 draft model, which upstream checks with GGML_ASSERT (a "
     "process abort); the wrapper does not run it until it can check such a model itself"},
    {LLAMA_MTP_STRATEGY_DRAFT_MTP, "draft-mtp", true, true, ""},
    {LLAMA_MTP_STRATEGY_DRAFT_DFLASH, "draft-dflash", true, false,
     "draft-dflash needs a DFlash draft model, which upstream checks with GGML_ASSERT (a process "
     "abort); the wrapper does not run it until it can check such a model itself"},
    {LLAMA_MTP_STRATEGY_DRAFT_DSPARK, "draft-dspark", true, false,
     "draft-dspark needs a DSpark draft model, which upstream checks with GGML_ASSERT (a process "
     "abort); the wrapper does not run it until it can check such a model itself"},
};

const strategy_info * find_strategy(int32_t type) {
    for (const auto & info : k_strategies) {
        if (info.type == type) {
            return &info;
        }
    }
    return nullptr;
}

common_speculative_type upstream_type(int32_t type) {
    switch (type) {
        case LLAMA_MTP_STRATEGY_DRAFT_MTP:     return COMMON_SPECULATIVE_TYPE_DRAFT_MTP;
#if LLAMA_MTP_HAVE_DRAFT_SIMPLE
        case LLAMA_MTP_STRATEGY_DRAFT_SIMPLE:  return COMMON_SPECULATIVE_TYPE_DRAFT_SIMPLE;
#endif
#if LLAMA_MTP_HAVE_NGRAM_SIMPLE
        case LLAMA_MTP_STRATEGY_NGRAM_SIMPLE:  return COMMON_SPECULATIVE_TYPE_NGRAM_SIMPLE;
#endif
#if LLAMA_MTP_HAVE_NGRAM_MAP_K
        case LLAMA_MTP_STRATEGY_NGRAM_MAP_K:   return COMMON_SPECULATIVE_TYPE_NGRAM_MAP_K;
#endif
#if LLAMA_MTP_HAVE_NGRAM_MAP_K4V
        case LLAMA_MTP_STRATEGY_NGRAM_MAP_K4V: return COMMON_SPECULATIVE_TYPE_NGRAM_MAP_K4V;
#endif
#if LLAMA_MTP_HAVE_NGRAM_MOD
        case LLAMA_MTP_STRATEGY_NGRAM_MOD:     return COMMON_SPECULATIVE_TYPE_NGRAM_MOD;
#endif
#if LLAMA_MTP_HAVE_NGRAM_CACHE
        case LLAMA_MTP_STRATEGY_NGRAM_CACHE:   return COMMON_SPECULATIVE_TYPE_NGRAM_CACHE;
#endif
        default:                               return COMMON_SPECULATIVE_TYPE_NONE;
    }
}

llama_mtp_status strategy_support(int32_t type, const std::string & where) {
    const strategy_info * info = find_strategy(type);
    if (info == nullptr) {
        return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                    where + ": " + std::to_string(type) + " is not a llama_mtp_strategy_type");
    }
    if (!info->runs) {
        return fail(LLAMA_MTP_STATUS_UNSUPPORTED_STRATEGY, where + ": " + info->why_not);
    }
    return LLAMA_MTP_STATUS_OK;
}

void strategy_defaults(int32_t type, llama_mtp_strategy & s) {
    const common_params_speculative up;  // llama.cpp's defaults for this release
    const common_params_speculative_ngram_map & map =
        type == LLAMA_MTP_STRATEGY_NGRAM_MAP_K     ? up.ngram_map_k
        : type == LLAMA_MTP_STRATEGY_NGRAM_MAP_K4V ? up.ngram_map_k4v
                                                   : up.ngram_simple;
    std::memset(&s, 0, sizeof(s));
    s.struct_size = sizeof(s);
    s.type = type;
    s.size_n = map.size_n;
    s.size_m = map.size_m;
    s.min_hits = map.min_hits;
    s.n_match = up.ngram_mod.n_match;
    s.mod_n_min = up.ngram_mod.n_min;
    s.mod_n_max = up.ngram_mod.n_max;
    s.cache_static = nullptr;
    s.cache_dynamic = nullptr;
}

llama_mtp_status check_range(int32_t value, int32_t lo, int32_t hi, const std::string & what) {
    if (value < lo || value > hi) {
        return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                    what + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                        "], got " + std::to_string(value));
    }
    return LLAMA_MTP_STATUS_OK;
}

// An n-gram cache file as llama.cpp writes it (common_ngram_cache_save): records of an n-gram of
// LLAMA_NGRAM_MAX tokens, an int32 count n > 0, then n (token, int32 count > 0) pairs. Upstream's
// loader aborts on anything else, so the file is read through here first.
llama_mtp_status check_ngram_cache_file(const std::string & path, const std::string & what) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        return fail(LLAMA_MTP_STATUS_FILE_UNREADABLE, what + ": cannot open '" + path + "'");
    }
    const std::streamsize ngram_bytes = (std::streamsize) sizeof(llama_token) * LLAMA_NGRAM_MAX;
    std::vector<char> ngram((size_t) ngram_bytes);
    uint64_t offset = 0;
    while (true) {
        in.read(ngram.data(), ngram_bytes);
        const std::streamsize got = in.gcount();
        if (got == 0 && in.eof()) {
            return LLAMA_MTP_STATUS_OK;
        }
        auto malformed = [&](const std::string & detail) {
            return fail(LLAMA_MTP_STATUS_FILE_UNREADABLE,
                        what + ": '" + path + "' is not an n-gram cache file (" + detail +
                            " at byte " + std::to_string(offset) + ")");
        };
        if (got != ngram_bytes) {
            return malformed("a truncated n-gram");
        }
        offset += (uint64_t) ngram_bytes;
        int32_t n = 0;
        if (!in.read(reinterpret_cast<char *>(&n), sizeof(n))) {
            return malformed("a missing token count");
        }
        if (n <= 0) {
            return malformed("a token count of " + std::to_string(n));
        }
        offset += sizeof(n);
        for (int32_t i = 0; i < n; ++i) {
            llama_token token = 0;
            int32_t count = 0;
            if (!in.read(reinterpret_cast<char *>(&token), sizeof(token)) ||
                !in.read(reinterpret_cast<char *>(&count), sizeof(count))) {
                return malformed("a truncated token entry");
            }
            if (count <= 0) {
                return malformed("a token seen " + std::to_string(count) + " times");
            }
            offset += sizeof(token) + sizeof(count);
        }
    }
}

llama_mtp_status check_strategy(const llama_mtp_strategy & s, const std::string & where) {
    llama_mtp_status st = strategy_support(s.type, where);
    if (st != LLAMA_MTP_STATUS_OK) {
        return st;
    }
    const std::string name = std::string(where) + ": " + find_strategy(s.type)->name;
    switch (s.type) {
        case LLAMA_MTP_STRATEGY_NGRAM_SIMPLE:
        case LLAMA_MTP_STRATEGY_NGRAM_MAP_K:
        case LLAMA_MTP_STRATEGY_NGRAM_MAP_K4V:
            if ((st = check_range(s.size_n, 1, k_max_ngram, name + " size_n")) != LLAMA_MTP_STATUS_OK ||
                (st = check_range(s.size_m, 1, k_max_ngram, name + " size_m")) != LLAMA_MTP_STATUS_OK ||
                (st = check_range(s.min_hits, 1, k_max_ngram, name + " min_hits")) != LLAMA_MTP_STATUS_OK) {
                return st;
            }
            if (s.type == LLAMA_MTP_STRATEGY_NGRAM_SIMPLE && s.size_m < s.size_n) {
                return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                            name + " size_m " + std::to_string(s.size_m) + " < size_n " +
                                std::to_string(s.size_n) +
                                ": it would never draft (llama.cpp's ngram-simple drafts only an "
                                "m-gram at least as long as the n-gram)");
            }
            break;
        case LLAMA_MTP_STRATEGY_NGRAM_MOD:
            if ((st = check_range(s.n_match, 1, k_max_ngram, name + " n_match")) != LLAMA_MTP_STATUS_OK ||
                (st = check_range(s.mod_n_max, 1, k_max_ngram, name + " mod_n_max")) != LLAMA_MTP_STATUS_OK ||
                (st = check_range(s.mod_n_min, 0, s.mod_n_max, name + " mod_n_min")) != LLAMA_MTP_STATUS_OK) {
                return st;
            }
            break;
        case LLAMA_MTP_STRATEGY_NGRAM_CACHE:
            for (const char * file : {s.cache_static, s.cache_dynamic}) {
                if (file != nullptr && file[0] != '\0' &&
                    (st = check_ngram_cache_file(file, name)) != LLAMA_MTP_STATUS_OK) {
                    return st;
                }
            }
            break;
        default:
            break;
    }
    return LLAMA_MTP_STATUS_OK;
}

// The draft model must tokenize as the target does (upstream's common_speculative_are_compatible,
// which throws; checked here first so that a mismatch is a status with the reason).
llama_mtp_status check_vocab(const llama_model * tgt, const llama_model * dft, const std::string & where) {
    const llama_vocab * vt = llama_model_get_vocab(tgt);
    const llama_vocab * vd = llama_model_get_vocab(dft);
    auto mismatch = [&](const std::string & what) {
        return fail(LLAMA_MTP_STATUS_VOCAB_MISMATCH,
                    where + ": the draft model's vocabulary is not the target's (" + what + ")");
    };
    if (llama_vocab_type(vt) != llama_vocab_type(vd)) {
        return mismatch("vocabulary types " + std::to_string((int) llama_vocab_type(vd)) + " and " +
                        std::to_string((int) llama_vocab_type(vt)));
    }
    if (llama_vocab_get_add_bos(vt) != llama_vocab_get_add_bos(vd) ||
        (llama_vocab_get_add_bos(vt) && llama_vocab_bos(vt) != llama_vocab_bos(vd))) {
        return mismatch("different BOS tokens");
    }
    if (llama_vocab_get_add_eos(vt) != llama_vocab_get_add_eos(vd) ||
        (llama_vocab_get_add_eos(vt) && llama_vocab_eos(vt) != llama_vocab_eos(vd))) {
        return mismatch("different EOS tokens");
    }
    const int32_t nt = llama_vocab_n_tokens(vt);
    const int32_t nd = llama_vocab_n_tokens(vd);
    if (std::abs(nt - nd) > k_vocab_max_size_difference) {
        return mismatch(std::to_string(nd) + " tokens against " + std::to_string(nt));
    }
    for (int32_t i = k_vocab_check_start_token; i < std::min(nt, nd); ++i) {
        if (std::strcmp(llama_vocab_get_text(vt, i), llama_vocab_get_text(vd, i)) != 0) {
            return mismatch("token " + std::to_string(i) + " differs");
        }
    }
    return LLAMA_MTP_STATUS_OK;
}

// Every architecture with an MTP graph gives its NextN block an eh_proj tensor.
bool has_nextn_tensors(const llama_model * model) {
    for (const auto & entry : llama_internal_get_tensor_map(model)) {
        if (entry.second != nullptr && entry.first.find(".nextn.eh_proj") != std::string::npos) {
            return true;
        }
    }
    return false;
}

// Smallest struct_size this library accepts (every field of the first release).
constexpr uint32_t k_params_min_size = offsetof(llama_mtp_params, strategies);
constexpr uint32_t k_strategy_min_size = sizeof(llama_mtp_strategy);
constexpr uint32_t k_strategy_stats_min_size = sizeof(llama_mtp_strategy_stats);
// The first release's llama_mtp_stats ended after n_steps; later fields are written only to
// callers whose struct_size covers them.
constexpr uint32_t k_stats_min_size = offsetof(llama_mtp_stats, n_backend_sampled);

}  // namespace

// One configured strategy: its own common_speculative (one implementation) and counters.
struct strategy_slot {
    const strategy_info * info = nullptr;
    common_speculative * spec = nullptr;
    std::vector<bool> drafted;  // per sequence: upstream has recorded a draft of it (impl_last)
    llama_mtp_strategy_stats stats{};
};

struct llama_mtp {
    llama_context * ctx_tgt = nullptr;
    llama_context * ctx_dft = nullptr;  // the draft-context strategy's context, if any
    std::vector<strategy_slot> slots;   // in upstream's order of preference
    bool has_mtp = false;
    llama_mtp_params params{};
    std::vector<seq_state> seqs;
    std::unique_ptr<common_batch> batch_tgt;  // used by llama_mtp_step
    std::vector<llama_token_data> candidates;  // llama_mtp_step's sampling buffer
    const llama_sampler * checked_sampler = nullptr;  // last sampler seen to select a token
    int32_t n_vocab = 0;
    llama_mtp_stats stats{};

    ~llama_mtp() {
        for (auto & slot : slots) {
            common_speculative_free(slot.spec);
        }
        if (ctx_dft != nullptr) {
            llama_free(ctx_dft);
        }
    }
};

namespace {

llama_mtp_status check_seq(const llama_mtp * mtp, llama_seq_id seq_id) {
    if (seq_id < 0 || (uint32_t) seq_id >= mtp->params.n_seq) {
        return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                    "seq_id " + std::to_string(seq_id) + " is outside [0, " +
                        std::to_string(mtp->params.n_seq) + ")");
    }
    return LLAMA_MTP_STATUS_OK;
}

llama_mtp_status check_token(const llama_mtp * mtp, llama_token token, const std::string & what) {
    if (token < 0 || token >= mtp->n_vocab) {
        return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                    what + " " + std::to_string(token) + " is outside the vocabulary [0, " +
                        std::to_string(mtp->n_vocab) + ")");
    }
    return LLAMA_MTP_STATUS_OK;
}

// id_last goes at `pos`, right after what the target holds for the sequence.
llama_mtp_status check_next_pos(const llama_mtp * mtp, llama_seq_id seq_id, llama_pos pos,
                                const std::string & what) {
    const llama_pos pos_max = llama_memory_seq_pos_max(llama_get_memory(mtp->ctx_tgt), seq_id);
    if (pos != pos_max + 1) {
        return fail(LLAMA_MTP_STATUS_BAD_STATE,
                    what + " " + std::to_string(pos) + " is not the next position of seq " +
                        std::to_string(seq_id) + " (the target holds positions up to " +
                        std::to_string(pos_max) + ", so it must be " + std::to_string(pos_max + 1) +
                        ")");
    }
    return LLAMA_MTP_STATUS_OK;
}

void remove_range(llama_mtp * mtp, llama_seq_id seq_id, llama_pos p0, llama_pos p1) {
    llama_memory_seq_rm(llama_get_memory(mtp->ctx_tgt), seq_id, p0, p1);
    if (mtp->ctx_dft != nullptr) {
        llama_memory_seq_rm(llama_get_memory(mtp->ctx_dft), seq_id, p0, p1);
    }
}

// Sample row `idx` of the target's last decode with the caller's sampler, as llama_sampler_sample
// does, but report a sampler that selects no token instead of aborting. Accepts the token.
llama_mtp_status sample_row(llama_mtp * mtp, llama_sampler * smpl, int32_t idx, llama_token & out) {
    llama_context * ctx = mtp->ctx_tgt;
    const llama_token backend_token = llama_get_sampled_token_ith(ctx, idx);
    if (backend_token != LLAMA_TOKEN_NULL) {
        llama_sampler_accept(smpl, backend_token);
        out = backend_token;
        return LLAMA_MTP_STATUS_OK;
    }
    auto & cand = mtp->candidates;
    const float * probs = llama_get_sampled_probs_ith(ctx, idx);
    const float * logits = llama_get_sampled_logits_ith(ctx, idx);
    const llama_token * ids = llama_get_sampled_candidates_ith(ctx, idx);
    if (probs != nullptr && ids != nullptr) {
        cand.resize(llama_get_sampled_probs_count_ith(ctx, idx));
        for (size_t k = 0; k < cand.size(); ++k) {
            cand[k] = llama_token_data{ids[k], logits != nullptr ? logits[k] : 0.0f, probs[k]};
        }
    } else if (logits != nullptr && ids != nullptr) {
        cand.resize(llama_get_sampled_logits_count_ith(ctx, idx));
        for (size_t k = 0; k < cand.size(); ++k) {
            cand[k] = llama_token_data{ids[k], logits[k], 0.0f};
        }
    } else {
        const float * row = llama_get_logits_ith(ctx, idx);
        if (row == nullptr) {
            return fail(LLAMA_MTP_STATUS_INTERNAL_ERROR,
                        "llama_mtp_step: the target has no logits for row " + std::to_string(idx));
        }
        cand.resize((size_t) mtp->n_vocab);
        for (llama_token t = 0; t < mtp->n_vocab; ++t) {
            cand[(size_t) t] = llama_token_data{t, row[t], 0.0f};
        }
    }
    llama_token_data_array arr{cand.data(), cand.size(), -1, false};
    llama_sampler_apply(smpl, &arr);
    if (arr.selected < 0 || (size_t) arr.selected >= arr.size) {
        return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                    "llama_mtp_step: the sampler selected no token (selected = " +
                        std::to_string(arr.selected) + " of " + std::to_string(arr.size) +
                        " candidates); end the sampler chain with a selecting sampler such as "
                        "greedy or dist");
    }
    out = arr.data[arr.selected].id;
    llama_sampler_accept(smpl, out);
    return LLAMA_MTP_STATUS_OK;
}

// Before a step decodes anything: does the sampler select a token at all? A copy of it is applied
// to the target's last logits (or flat ones), so that a chain without a selecting sampler fails
// while the step can still be refused whole (a recurrent target cannot roll back 1 + n_max
// tokens). Checked once per sampler; a sampler without clone support is not checked here.
llama_mtp_status preflight_sampler(llama_mtp * mtp, llama_sampler * smpl) {
    if (mtp->checked_sampler == smpl) {
        return LLAMA_MTP_STATUS_OK;
    }
    llama_sampler * probe = llama_sampler_clone(smpl);
    if (probe == nullptr) {
        return LLAMA_MTP_STATUS_OK;
    }
    const float * row = llama_get_logits_ith(mtp->ctx_tgt, -1);
    std::vector<llama_token_data> cand((size_t) mtp->n_vocab);
    for (llama_token t = 0; t < mtp->n_vocab; ++t) {
        cand[(size_t) t] = llama_token_data{t, row != nullptr ? row[t] : 0.0f, 0.0f};
    }
    llama_token_data_array arr{cand.data(), cand.size(), -1, false};
    llama_sampler_apply(probe, &arr);
    llama_sampler_free(probe);
    if (arr.selected < 0 || (size_t) arr.selected >= arr.size) {
        return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                    "llama_mtp_step: the sampler selects no token (an empty chain, or one without a "
                    "selecting sampler such as greedy or dist at its end); nothing was decoded");
    }
    mtp->checked_sampler = smpl;
    return LLAMA_MTP_STATUS_OK;
}

llama_mtp_status do_draft(llama_mtp * mtp, llama_seq_id seq_id, llama_token id_last,
                          llama_pos pos0, int32_t n_max) {
    seq_state & st = mtp->seqs[seq_id];
    if (st.pending > 0) {
        return fail(LLAMA_MTP_STATUS_BAD_STATE,
                    "llama_mtp_draft: the previous draft of seq " + std::to_string(seq_id) +
                        " was not accepted yet (call llama_mtp_accept, 0 if none matched)");
    }
    if (pos0 < 0) {
        return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT, "llama_mtp_draft: pos0 must be >= 0");
    }
    const int32_t limit = std::min(n_max, mtp->params.n_max);
    auto ask = [&](strategy_slot & slot) {
        st.draft.clear();
        auto & dp = common_speculative_get_draft_params(slot.spec, seq_id);
        dp.drafting = true;
        dp.n_max = limit;
        dp.pos0 = pos0;
        dp.id_last = id_last;
        dp.prompt = &st.prompt;
        dp.result = &st.draft;
        common_speculative_draft(slot.spec);
        dp.drafting = false;
        // A draft model's vocabulary may be a little larger than the target's: cut the draft
        // before a token the target does not have.
        for (size_t i = 0; i < st.draft.size(); ++i) {
            if (st.draft[i] < 0 || st.draft[i] >= mtp->n_vocab) {
                st.draft.resize(i);
                break;
            }
        }
        if (!st.draft.empty()) {
            slot.drafted[(size_t) seq_id] = true;
        }
        return !st.draft.empty();
    };
    st.winner = -1;
    bool backend_sampled = false;
    for (size_t i = 0; i < mtp->slots.size(); ++i) {
        if (ask(mtp->slots[i])) {
            st.winner = (int32_t) i;
            // The draft context's last decode was the draft's own: when llama.cpp sampled it on
            // the backend (backend_sampling, and the chain could be offloaded), it kept the
            // candidates there.
            backend_sampled = mtp->slots[i].info->draft_context &&
                              llama_get_sampled_candidates_count_ith(mtp->ctx_dft, -1) > 0;
            break;
        }
    }
    // A draft-context strategy hears of accepted tokens only once upstream has recorded a draft
    // of it for the sequence (accepting otherwise asserts): when a draftless strategy drafts
    // first, the draft-context one drafts once as well, its draft discarded.
    for (auto & slot : mtp->slots) {
        if (st.winner >= 0 && slot.info->draft_context && !slot.drafted[(size_t) seq_id]) {
            const llama_tokens winning = st.draft;
            ask(slot);
            st.draft = winning;
        }
    }

    // The draft context now holds KV for [pos0, ...) written while drafting; the verification
    // batch will be mirrored there, so drop it.
    if (mtp->ctx_dft != nullptr) {
        llama_memory_seq_rm(llama_get_memory(mtp->ctx_dft), seq_id, pos0, -1);
    }

    st.pending = (int32_t) st.draft.size();
    st.verified = false;
    if (st.pending > 0) {
        mtp->stats.n_drafts += 1;
        mtp->stats.n_drafted += (uint64_t) st.pending;
        mtp->stats.n_backend_sampled += backend_sampled ? 1 : 0;
        mtp->slots[(size_t) st.winner].stats.n_drafted += (uint64_t) st.pending;
    }
    return LLAMA_MTP_STATUS_OK;
}

llama_mtp_status do_accept(llama_mtp * mtp, llama_seq_id seq_id, int32_t n_accepted,
                           const char * where) {
    seq_state & st = mtp->seqs[seq_id];
    if (st.pending < 0) {
        return fail(LLAMA_MTP_STATUS_BAD_STATE,
                    std::string(where) + ": nothing was drafted for seq " + std::to_string(seq_id));
    }
    if (n_accepted < 0) {
        return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                    std::string(where) + ": n_accepted must be >= 0");
    }
    if (n_accepted > st.pending) {
        return fail(LLAMA_MTP_STATUS_ACCEPT_TOO_MANY,
                    std::string(where) + ": cannot accept " + std::to_string(n_accepted) +
                        " tokens, only " + std::to_string(st.pending) + " were drafted");
    }
    if (!st.verified) {
        return fail(LLAMA_MTP_STATUS_BAD_STATE,
                    std::string(where) + ": mirror the verification batch with llama_mtp_process "
                                         "before accepting");
    }
    // The strategy that drafted accepts; a draft-context strategy that did not is told too (it
    // continues from the hidden state of the last accepted token). Draftless strategies ignore
    // other strategies' drafts upstream (is_other), so they are not told.
    for (size_t i = 0; i < mtp->slots.size(); ++i) {
        strategy_slot & slot = mtp->slots[i];
        const bool won = (int32_t) i == st.winner;
        if (won || (slot.info->draft_context && slot.drafted[(size_t) seq_id])) {
            common_speculative_accept(slot.spec, seq_id, (uint16_t) n_accepted);
        }
        if (won) {
            slot.stats.n_drafts += 1;
            slot.stats.n_accepted += (uint64_t) n_accepted;
        }
    }
    st.pending = -1;
    st.winner = -1;
    st.verified = false;
    mtp->stats.n_accepted += (uint64_t) n_accepted;
    mtp->stats.n_steps += 1;
    return LLAMA_MTP_STATUS_OK;
}

// Feed a batch just decoded on the target to the MTP state; marks drafted sequences verified.
llama_mtp_status mirror(llama_mtp * mtp, const common_batch & batch) {
    for (auto & slot : mtp->slots) {
        if (!common_speculative_process(slot.spec, batch)) {
            return fail(LLAMA_MTP_STATUS_DECODE_FAILED,
                        std::string("llama_mtp_process: the ") + slot.info->name +
                            " draft context's decode failed");
        }
    }
    std::vector<bool> seen(mtp->params.n_seq, false);
    for (const auto & t : batch.tokens) {
        seen[(size_t) t.seq_id] = true;
    }
    for (size_t s = 0; s < seen.size(); ++s) {
        if (seen[s] && mtp->seqs[s].pending >= 0) {
            mtp->seqs[s].verified = true;
        }
    }
    return LLAMA_MTP_STATUS_OK;
}


// draft-mtp: the model must have NextN layers, loaded, and not more of them than its MTP graph takes.
llama_mtp_status check_mtp_model(const llama_model * model, const std::string & where) {
    const int32_t n_nextn = llama_model_n_layer_nextn(model);
    if (n_nextn <= 0) {
        return fail(LLAMA_MTP_STATUS_NO_NEXTN_LAYERS, where + ": the model has no NextN (MTP) layers");
    }
    char arch[128] = {0};
    if (n_nextn > 1 && llama_model_meta_val_str(model, "general.architecture", arch, sizeof(arch)) > 0 &&
        in_list(LLAMA_MTP_SINGLE_NEXTN_ARCHS, arch)) {
        return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                    where + ": the model has " + std::to_string(n_nextn) +
                        " NextN layers, but llama.cpp " + LLAMA_MTP_LLAMA_COMMIT + " builds the " +
                        arch + " MTP graph for exactly one (it aborts otherwise)");
    }
    if (!has_nextn_tensors(model)) {
        return fail(LLAMA_MTP_STATUS_MTP_NOT_LOADED,
                    where + ": the model's NextN tensors are not loaded; load it with "
                            "llama_model_params.load_mtp = true (llama.cpp aborts when it builds "
                            "the MTP graph without them)");
    }
    return LLAMA_MTP_STATUS_OK;
}

// Any strategy: the target is still empty, and it can verify and roll back a whole draft.
llama_mtp_status check_target(llama_context * ctx_tgt, const llama_model * model,
                              const llama_mtp_params & p, const std::string & where) {
    llama_memory_t mem = llama_get_memory(ctx_tgt);
    if (mem == nullptr) {
        return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT, where + ": target context has no memory");
    }
    const uint32_t n_seq_max = llama_n_seq_max(ctx_tgt);
    for (uint32_t s = 0; s < n_seq_max; ++s) {
        if (llama_memory_seq_pos_max(mem, (llama_seq_id) s) >= 0) {
            return fail(LLAMA_MTP_STATUS_BAD_STATE,
                        where + ": the target context was already decoded (seq " + std::to_string(s) +
                            " is not empty); create the sidecar first");
        }
    }
    if ((llama_model_is_recurrent(model) || llama_model_is_hybrid(model)) &&
        llama_n_rs_seq(ctx_tgt) < (uint32_t) p.n_max) {
        return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                    where + ": the target has recurrent layers and n_rs_seq " +
                        std::to_string(llama_n_rs_seq(ctx_tgt)) + " < n_max " +
                        std::to_string(p.n_max) + ": rejected drafts could not be rolled back");
    }
#if !defined(_WIN32)
    // A step decodes 1 + n_max outputs at once; llama.cpp aborts when that exceeds the target's
    // n_outputs_max. (Not readable from a Windows libllama, which exports only llama.h.)
    const uint32_t n_outputs_max = ctx_tgt->get_cparams().n_outputs_max;
    if (n_outputs_max < (uint32_t) p.n_max + 1) {
        return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                    where + ": the target takes at most " + std::to_string(n_outputs_max) +
                        " outputs per batch, fewer than 1 + n_max = " + std::to_string(p.n_max + 1) +
                        "; create it with llama_context_params.n_outputs_max = 0 (n_batch) or >= 1 + "
                        "n_max, or lower n_max");
    }
#endif
    return LLAMA_MTP_STATUS_OK;
}

llama_context_params draft_context_params(llama_context * ctx_tgt, const llama_mtp_params & p) {
    llama_context_params cparams = llama_context_default_params();
    cparams.n_ctx = llama_n_ctx(ctx_tgt);
    cparams.n_batch = llama_n_batch(ctx_tgt);
    cparams.n_ubatch = llama_n_ubatch(ctx_tgt);
    cparams.n_threads = p.n_threads > 0 ? p.n_threads : llama_n_threads(ctx_tgt);
    cparams.n_threads_batch = p.n_threads_batch > 0 ? p.n_threads_batch : llama_n_threads_batch(ctx_tgt);
    return cparams;
}

llama_context * create_mtp_context(llama_context * ctx_tgt, const llama_model * model,
                                   const llama_mtp_params & p) {
    llama_context_params cparams = draft_context_params(ctx_tgt, p);
    cparams.ctx_type = LLAMA_CONTEXT_TYPE_MTP;
    cparams.n_seq_max = llama_n_seq_max(ctx_tgt);
    cparams.n_rs_seq = 0;
    cparams.ctx_other = ctx_tgt;
    return llama_init_from_model(const_cast<llama_model *>(model), cparams);
}

// draft-simple: the caller's draft model, with as many sequences as the sidecar serves (upstream
// requires it) and room to roll back a rejected draft when the draft model is recurrent.
llama_context * create_draft_context(llama_context * ctx_tgt, const llama_mtp_params & p) {
    llama_context_params cparams = draft_context_params(ctx_tgt, p);
    if (p.draft_n_ctx > 0) {
        cparams.n_ctx = (uint32_t) p.draft_n_ctx;
    }
    cparams.n_seq_max = p.n_seq;
    cparams.n_rs_seq = (uint32_t) p.n_max;
    return llama_init_from_model(p.draft_model, cparams);
}

common_speculative * init_strategy(const llama_mtp_strategy & s, llama_context * ctx_tgt,
                                   llama_context * ctx_dft, const llama_mtp_params & p) {
    common_params_speculative sp;
    sp.types = {upstream_type(s.type)};
    sp.draft.n_max = p.n_max;
    sp.draft.n_min = p.n_min;
    sp.draft.p_min = p.p_min;
    sp.draft.backend_sampling = p.backend_sampling != 0;
    sp.draft.ctx_tgt = ctx_tgt;
    sp.draft.ctx_dft = ctx_dft;
    common_params_speculative_ngram_map map;
    map.size_n = (uint16_t) s.size_n;
    map.size_m = (uint16_t) s.size_m;
    map.min_hits = (uint16_t) s.min_hits;
    sp.ngram_simple = map;
    sp.ngram_map_k = map;
    sp.ngram_map_k4v = map;
    sp.ngram_mod.n_match = s.n_match;
    sp.ngram_mod.n_min = s.mod_n_min;
    sp.ngram_mod.n_max = s.mod_n_max;
    sp.ngram_cache.lookup_cache_static = s.cache_static != nullptr ? s.cache_static : "";
    sp.ngram_cache.lookup_cache_dynamic = s.cache_dynamic != nullptr ? s.cache_dynamic : "";
    return common_speculative_init(sp, p.n_seq);
}

// The caller's params, checked and completed with the defaults into p.
llama_mtp_status read_params(llama_context * ctx_tgt, const llama_mtp_params * params,
                             llama_mtp_params & p, const std::string & where) {
    if (params->struct_size < k_params_min_size) {
        return fail(LLAMA_MTP_STATUS_UNSUPPORTED_VERSION,
                    where + ": params.struct_size " + std::to_string(params->struct_size) +
                        " is smaller than " + std::to_string(k_params_min_size));
    }
    params_defaults(p);
    // A struct_size short of this header's struct is a first-release caller: its fields only.
    std::memcpy(&p, params, params->struct_size >= sizeof(p) ? sizeof(p) : k_params_min_size);
    p.struct_size = sizeof(p);

    if (p.n_max <= 0 || p.n_max > k_max_draft) {
        return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                    where + ": n_max must be in [1, " + std::to_string(k_max_draft) + "], got " +
                        std::to_string(p.n_max) + " (upstream reads 0 as unlimited)");
    }
    if (p.n_min < 0 || p.n_min > p.n_max) {
        return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                    where + ": n_min must be in [0, n_max], got " + std::to_string(p.n_min));
    }
    if (!(p.p_min >= 0.0f && p.p_min <= 1.0f)) {
        return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT, where + ": p_min must be in [0, 1]");
    }
    const uint32_t n_seq_max = llama_n_seq_max(ctx_tgt);
    if (p.n_seq == 0 || p.n_seq > n_seq_max) {
        return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                    where + ": n_seq must be in [1, " + std::to_string(n_seq_max) +
                        "] (the target's n_seq_max), got " + std::to_string(p.n_seq));
    }
    if (p.n_threads < 0 || p.n_threads_batch < 0) {
        return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT, where + ": thread counts must be >= 0");
    }
    if (p.draft_n_ctx < 0) {
        return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT, where + ": draft_n_ctx must be >= 0");
    }
    return LLAMA_MTP_STATUS_OK;
}

// The strategies, checked one by one and as a mix; draft_type: the draft-context one (0: none).
llama_mtp_status read_strategies(const llama_mtp_params & p, std::vector<llama_mtp_strategy> & list,
                                 int32_t & draft_type, const std::string & where) {
    if (p.strategies == nullptr || p.n_strategies == 0) {
        if (p.strategies == nullptr && p.n_strategies > 0) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                        where + ": strategies is NULL but n_strategies is " +
                            std::to_string(p.n_strategies));
        }
        list.emplace_back();
        strategy_defaults(LLAMA_MTP_STRATEGY_DRAFT_MTP, list.back());
    } else {
        if (p.n_strategies > sizeof(k_strategies) / sizeof(k_strategies[0])) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                        where + ": n_strategies " + std::to_string(p.n_strategies) +
                            " is more than there are strategies");
        }
        for (uint32_t i = 0; i < p.n_strategies; ++i) {
            const llama_mtp_strategy & given = p.strategies[i];
            const std::string what = where + ": strategies[" + std::to_string(i) + "]";
            if (given.struct_size < k_strategy_min_size) {
                return fail(LLAMA_MTP_STATUS_UNSUPPORTED_VERSION,
                            what + ".struct_size " + std::to_string(given.struct_size) +
                                " is smaller than " + std::to_string(k_strategy_min_size));
            }
            llama_mtp_strategy copy;
            strategy_defaults(given.type, copy);
            std::memcpy(&copy, &given, std::min<size_t>(given.struct_size, sizeof(copy)));
            copy.struct_size = sizeof(copy);
            const llama_mtp_status st = check_strategy(copy, what);
            if (st != LLAMA_MTP_STATUS_OK) {
                return st;
            }
            for (const auto & earlier : list) {
                if (earlier.type == copy.type) {
                    return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                                what + ": " + find_strategy(copy.type)->name + " is listed twice");
                }
            }
            list.push_back(copy);
        }
    }
    draft_type = 0;
    for (const auto & s : list) {
        if (!find_strategy(s.type)->draft_context) {
            continue;
        }
        if (draft_type != 0) {
            return fail(LLAMA_MTP_STATUS_UNSUPPORTED_STRATEGY,
                        where + ": " + find_strategy(draft_type)->name + " and " +
                            find_strategy(s.type)->name +
                            " both need a draft context; llama.cpp mixes n-gram strategies with "
                            "at most one of them");
        }
        draft_type = s.type;
    }
    const bool wants_draft_model = draft_type != 0 && draft_type != LLAMA_MTP_STRATEGY_DRAFT_MTP;
    if (wants_draft_model && p.draft_model == nullptr) {
        return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                    where + ": " + find_strategy(draft_type)->name +
                        " needs a draft model (params.draft_model)");
    }
    if (!wants_draft_model && p.draft_model != nullptr) {
        return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                    where + ": params.draft_model is set, but no strategy listed uses a draft "
                            "model (draft-simple does)");
    }
    return LLAMA_MTP_STATUS_OK;
}

// The target (and the draft model) can run the strategies.
llama_mtp_status check_models(llama_context * ctx_tgt, const llama_mtp_params & p, int32_t draft_type,
                              const std::string & where) {
    const llama_model * model = llama_get_model(ctx_tgt);
    if (model == nullptr) {
        return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT, where + ": target context has no model");
    }
    llama_mtp_status st = LLAMA_MTP_STATUS_OK;
    if (draft_type == LLAMA_MTP_STRATEGY_DRAFT_MTP) {
        st = check_mtp_model(model, where);
    } else if (p.draft_model != nullptr) {
        st = check_vocab(model, p.draft_model, where);
    }
    return st != LLAMA_MTP_STATUS_OK ? st : check_target(ctx_tgt, model, p, where);
}

// The draft context and one common_speculative per strategy, in upstream's order.
llama_mtp_status build_sidecar(llama_mtp & sidecar, const std::vector<llama_mtp_strategy> & list,
                               int32_t draft_type, const std::string & where) {
    const llama_mtp_params & p = sidecar.params;
    const llama_model * model = llama_get_model(sidecar.ctx_tgt);
    sidecar.has_mtp = draft_type == LLAMA_MTP_STRATEGY_DRAFT_MTP;
    sidecar.stats.struct_size = sizeof(sidecar.stats);
    if (draft_type != 0) {
        sidecar.ctx_dft = sidecar.has_mtp ? create_mtp_context(sidecar.ctx_tgt, model, p)
                                          : create_draft_context(sidecar.ctx_tgt, p);
        if (sidecar.ctx_dft == nullptr) {
            return fail(LLAMA_MTP_STATUS_CONTEXT_FAILED,
                        where + ": llama_init_from_model refused the " +
                            find_strategy(draft_type)->name + " draft context");
        }
    }
    for (const auto & info : k_strategies) {
        for (const auto & s : list) {
            if (s.type != info.type) {
                continue;
            }
            strategy_slot slot;
            slot.info = &info;
            slot.drafted.assign(p.n_seq, false);
            slot.stats.struct_size = sizeof(slot.stats);
            slot.stats.type = info.type;
            slot.spec = init_strategy(s, sidecar.ctx_tgt, sidecar.ctx_dft, p);
            sidecar.slots.push_back(slot);
            if (slot.spec == nullptr) {
                return fail(LLAMA_MTP_STATUS_CONTEXT_FAILED,
                            where + ": the " + info.name + " speculative state could not be initialised");
            }
        }
    }
    sidecar.seqs.resize(p.n_seq);
    sidecar.n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    return LLAMA_MTP_STATUS_OK;
}

}  // namespace

extern "C" {

uint32_t llama_mtp_abi_version(void) {
    return LLAMA_MTP_ABI_VERSION;
}

const char * llama_mtp_llama_commit(void) {
    return LLAMA_MTP_LLAMA_COMMIT;
}

const char * llama_mtp_last_error(void) {
    return g_last_error.c_str();
}

llama_mtp_status llama_mtp_default_params(llama_mtp_params * params) {
    return guarded("llama_mtp_default_params", [&]() {
        if (params == nullptr) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT, "llama_mtp_default_params: params is NULL");
        }
        const uint32_t size = params->struct_size;
        if (size < k_params_min_size) {
            return fail(LLAMA_MTP_STATUS_UNSUPPORTED_VERSION,
                        "llama_mtp_default_params: struct_size " + std::to_string(size) +
                            " is smaller than " + std::to_string(k_params_min_size));
        }
        llama_mtp_params defaults;
        params_defaults(defaults);
        std::memcpy(params, &defaults, size >= sizeof(defaults) ? sizeof(defaults) : k_params_min_size);
        params->struct_size = size;
        return ok();
    });
}

llama_mtp_status llama_mtp_model_n_nextn_layers(const llama_model * model, int32_t * n_layers) {
    return guarded("llama_mtp_model_n_nextn_layers", [&]() {
        if (model == nullptr || n_layers == nullptr) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                        "llama_mtp_model_n_nextn_layers: model and n_layers must not be NULL");
        }
        *n_layers = llama_model_n_layer_nextn(model);
        return ok();
    });
}

llama_mtp_status llama_mtp_create(llama_context * ctx_tgt, const llama_mtp_params * params,
                                  llama_mtp ** out) {
    return guarded("llama_mtp_create", [&]() {
        const std::string where = "llama_mtp_create";
        if (out == nullptr) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT, where + ": out is NULL");
        }
        *out = nullptr;
        if (ctx_tgt == nullptr) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT, where + ": target context is NULL");
        }
        if (params == nullptr) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT, where + ": params is NULL");
        }
        llama_mtp_params p;
        std::vector<llama_mtp_strategy> list;
        int32_t draft_type = 0;
        llama_mtp_status st = read_params(ctx_tgt, params, p, where);
        if (st == LLAMA_MTP_STATUS_OK) {
            st = read_strategies(p, list, draft_type, where);
        }
        if (st == LLAMA_MTP_STATUS_OK) {
            st = check_models(ctx_tgt, p, draft_type, where);
        }
        if (st != LLAMA_MTP_STATUS_OK) {
            return st;
        }
        auto mtp = std::make_unique<llama_mtp>();
        mtp->ctx_tgt = ctx_tgt;
        mtp->params = p;
        mtp->params.strategies = nullptr;  // the caller's array is not kept
        st = build_sidecar(*mtp, list, draft_type, where);
        if (st != LLAMA_MTP_STATUS_OK) {
            return st;
        }
        *out = mtp.release();
        register_handle(*out);
        return ok();
    });
}

void llama_mtp_free(llama_mtp * mtp) {
    try {
        if (mtp == nullptr) {
            return;
        }
        if (!unregister_handle(mtp)) {
            g_last_error = "llama_mtp_free: handle is not a live llama_mtp (already freed, or not "
                           "returned by llama_mtp_create); nothing was freed";
            return;
        }
        delete mtp;
    } catch (...) {
        g_last_error = "llama_mtp_free: exception while freeing";
    }
}

llama_context * llama_mtp_get_context(llama_mtp * mtp) {
    return mtp != nullptr && is_live(mtp) ? mtp->ctx_dft : nullptr;
}

llama_mtp_status llama_mtp_process(llama_mtp * mtp, const llama_batch * batch) {
    return guarded("llama_mtp_process", [&]() {
        const std::string where = "llama_mtp_process";
        llama_mtp_status hs = check_handle(mtp, "llama_mtp_process");
        if (hs != LLAMA_MTP_STATUS_OK) {
            return hs;
        }
        if (batch == nullptr) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT, where + ": batch is NULL");
        }
        const int32_t n = batch->n_tokens;
        if (n <= 0) {
            return ok();
        }
        if (batch->token == nullptr) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                        where + ": only token batches can be mirrored (token is NULL)");
        }
        if (batch->pos == nullptr) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                        where + ": batch.pos must be set (positions are not inferred)");
        }
        for (int32_t i = 0; i < n; ++i) {
            hs = check_token(mtp, batch->token[i], where + ": batch.token[" + std::to_string(i) + "]");
            if (hs != LLAMA_MTP_STATUS_OK) {
                return hs;
            }
        }
        if (mtp->ctx_dft != nullptr && (uint32_t) n > llama_n_batch(mtp->ctx_dft)) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                        where + ": batch of " + std::to_string(n) + " tokens exceeds the draft "
                                "context's n_batch " + std::to_string(llama_n_batch(mtp->ctx_dft)));
        }
        if ((uint32_t) n > llama_n_batch(mtp->ctx_tgt)) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                        where + ": batch of " + std::to_string(n) + " tokens exceeds n_batch " +
                            std::to_string(llama_n_batch(mtp->ctx_tgt)));
        }
        if (mtp->has_mtp && (llama_get_embeddings_nextn(mtp->ctx_tgt) == nullptr ||
                             llama_get_embeddings_nextn_ith(mtp->ctx_tgt, n - 1) == nullptr)) {
            return fail(LLAMA_MTP_STATUS_BAD_STATE,
                        where + ": the target's last decode has fewer than " + std::to_string(n) +
                            " rows; mirror exactly the batch just decoded on the target");
        }
        llama_memory_t mem_tgt = llama_get_memory(mtp->ctx_tgt);
        common_batch cb;
        std::vector<int8_t> finished(mtp->params.n_seq, 0);
        llama_seq_id prev = -1;
        for (int32_t i = 0; i < n; ++i) {
            llama_seq_id s = 0;
            if (batch->seq_id != nullptr) {
                if (batch->n_seq_id != nullptr && batch->n_seq_id[i] != 1) {
                    return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                                where + ": each token must belong to exactly one sequence");
                }
                if (batch->seq_id[i] == nullptr) {
                    return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT, where + ": batch.seq_id[i] is NULL");
                }
                s = batch->seq_id[i][0];
            }
            const llama_mtp_status st = check_seq(mtp, s);
            if (st != LLAMA_MTP_STATUS_OK) {
                return st;
            }
            if (s != prev) {
                if (finished[(size_t) s]) {
                    return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                                where + ": the tokens of each sequence must be contiguous in the batch");
                }
                if (prev >= 0) {
                    finished[(size_t) prev] = 1;
                }
                prev = s;
            }
            const llama_pos pos_max = llama_memory_seq_pos_max(mem_tgt, s);
            if (batch->pos[i] < 0 || batch->pos[i] > pos_max) {
                return fail(LLAMA_MTP_STATUS_BAD_STATE,
                            where + ": position " + std::to_string(batch->pos[i]) + " of seq " +
                                std::to_string(s) + " is not in the target context (last: " +
                                std::to_string(pos_max) +
                                "); decode the batch on the target before mirroring it");
            }
            const bool output = batch->logits == nullptr ? (i == n - 1) : batch->logits[i] != 0;
            cb.add(batch->token[i], batch->pos[i], s, output);
        }
        const llama_mtp_status st = mirror(mtp, cb);
        return st == LLAMA_MTP_STATUS_OK ? ok() : st;
    });
}

llama_mtp_status llama_mtp_begin(llama_mtp * mtp, llama_seq_id seq_id, const llama_token * prompt,
                                 int32_t n_prompt) {
    return guarded("llama_mtp_begin", [&]() {
        llama_mtp_status st = check_handle(mtp, "llama_mtp_begin");
        if (st != LLAMA_MTP_STATUS_OK) {
            return st;
        }
        st = check_seq(mtp, seq_id);
        if (st != LLAMA_MTP_STATUS_OK) {
            return st;
        }
        if (n_prompt < 0 || (n_prompt > 0 && prompt == nullptr)) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                        "llama_mtp_begin: prompt is NULL or n_prompt < 0");
        }
        for (int32_t i = 0; i < n_prompt; ++i) {
            st = check_token(mtp, prompt[i], "llama_mtp_begin: prompt[" + std::to_string(i) + "]");
            if (st != LLAMA_MTP_STATUS_OK) {
                return st;
            }
        }
        seq_state & s = mtp->seqs[seq_id];
        s.prompt.assign(prompt, prompt + n_prompt);
        s.pending = -1;
        s.verified = false;
        s.winner = -1;
        for (auto & slot : mtp->slots) {
            common_speculative_begin(slot.spec, seq_id, s.prompt);
        }
        return ok();
    });
}

llama_mtp_status llama_mtp_draft(llama_mtp * mtp, llama_seq_id seq_id, llama_token id_last,
                                 llama_pos pos0, int32_t n_max, llama_token * draft,
                                 int32_t capacity, int32_t * n_draft) {
    return guarded("llama_mtp_draft", [&]() {
        llama_mtp_status st = check_handle(mtp, "llama_mtp_draft");
        if (st != LLAMA_MTP_STATUS_OK) {
            return st;
        }
        if (n_draft == nullptr) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT, "llama_mtp_draft: n_draft is NULL");
        }
        *n_draft = 0;
        st = check_seq(mtp, seq_id);
        if (st != LLAMA_MTP_STATUS_OK) {
            return st;
        }
        if (n_max <= 0) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                        "llama_mtp_draft: n_max must be >= 1 (upstream reads 0 as unlimited)");
        }
        if (capacity < 0 || (capacity > 0 && draft == nullptr)) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                        "llama_mtp_draft: draft is NULL or capacity < 0");
        }
        if (capacity < std::min(n_max, mtp->params.n_max)) {
            return fail(LLAMA_MTP_STATUS_BUFFER_TOO_SMALL,
                        "llama_mtp_draft: capacity " + std::to_string(capacity) +
                            " < min(n_max, params.n_max)");
        }
        st = check_token(mtp, id_last, "llama_mtp_draft: id_last");
        if (st != LLAMA_MTP_STATUS_OK) {
            return st;
        }
        if (pos0 >= 0 && mtp->seqs[seq_id].pending <= 0) {
            st = check_next_pos(mtp, seq_id, pos0, "llama_mtp_draft: pos0");
            if (st != LLAMA_MTP_STATUS_OK) {
                return st;
            }
        }
        st = do_draft(mtp, seq_id, id_last, pos0, n_max);
        if (st != LLAMA_MTP_STATUS_OK) {
            return st;
        }
        const auto & d = mtp->seqs[seq_id].draft;
        std::copy(d.begin(), d.end(), draft);
        *n_draft = (int32_t) d.size();
        return ok();
    });
}

llama_mtp_status llama_mtp_accept(llama_mtp * mtp, llama_seq_id seq_id, int32_t n_accepted) {
    return guarded("llama_mtp_accept", [&]() {
        llama_mtp_status st = check_handle(mtp, "llama_mtp_accept");
        if (st != LLAMA_MTP_STATUS_OK) {
            return st;
        }
        st = check_seq(mtp, seq_id);
        if (st != LLAMA_MTP_STATUS_OK) {
            return st;
        }
        const llama_mtp_status r = do_accept(mtp, seq_id, n_accepted, "llama_mtp_accept");
        return r == LLAMA_MTP_STATUS_OK ? ok() : r;
    });
}

llama_mtp_status llama_mtp_seq_rm(llama_mtp * mtp, llama_seq_id seq_id, llama_pos p0, llama_pos p1) {
    return guarded("llama_mtp_seq_rm", [&]() {
        llama_mtp_status st = check_handle(mtp, "llama_mtp_seq_rm");
        if (st != LLAMA_MTP_STATUS_OK) {
            return st;
        }
        st = check_seq(mtp, seq_id);
        if (st != LLAMA_MTP_STATUS_OK) {
            return st;
        }
        if (p0 < 0 || (p1 >= 0 && p1 < p0)) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                        "llama_mtp_seq_rm: need 0 <= p0 and (p1 < 0 or p0 <= p1)");
        }
        const std::string range = "[" + std::to_string(p0) + ", " +
                                  (p1 < 0 ? std::string("end") : std::to_string(p1)) + ") of seq " +
                                  std::to_string(seq_id);
        if (!llama_memory_seq_rm(llama_get_memory(mtp->ctx_tgt), seq_id, p0, p1)) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                        "llama_mtp_seq_rm: llama.cpp refused to remove " + range +
                            " from the target (recurrent memory drops only a sequence's tail, "
                            "within n_rs_seq positions, or the whole sequence); nothing was removed");
        }
        if (mtp->ctx_dft != nullptr &&
            !llama_memory_seq_rm(llama_get_memory(mtp->ctx_dft), seq_id, p0, p1)) {
            return fail(LLAMA_MTP_STATUS_INTERNAL_ERROR,
                        "llama_mtp_seq_rm: removed " + range +
                            " from the target, but the MTP context refused; call llama_mtp_begin "
                            "again for this sequence");
        }
        mtp->seqs[seq_id].pending = -1;
        mtp->seqs[seq_id].winner = -1;
        mtp->seqs[seq_id].verified = false;
        return ok();
    });
}

llama_mtp_status llama_mtp_step(llama_mtp * mtp, llama_seq_id seq_id, llama_sampler * smpl,
                                llama_token id_last, llama_pos n_past, llama_token * tokens,
                                int32_t capacity, int32_t * n_tokens) {
    return guarded("llama_mtp_step", [&]() {
        const std::string where = "llama_mtp_step";
        llama_mtp_status st = check_handle(mtp, "llama_mtp_step");
        if (st != LLAMA_MTP_STATUS_OK) {
            return st;
        }
        if (smpl == nullptr || tokens == nullptr || n_tokens == nullptr) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                        where + ": sampler, tokens and n_tokens must not be NULL");
        }
        *n_tokens = 0;
        st = check_seq(mtp, seq_id);
        if (st != LLAMA_MTP_STATUS_OK) {
            return st;
        }
        if (capacity < 1) {
            return fail(LLAMA_MTP_STATUS_BUFFER_TOO_SMALL, where + ": capacity must be >= 1");
        }
        if (n_past < 0) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT, where + ": n_past must be >= 0");
        }
        st = check_token(mtp, id_last, where + ": id_last");
        if (st != LLAMA_MTP_STATUS_OK) {
            return st;
        }
        seq_state & ss = mtp->seqs[seq_id];
        if (ss.pending > 0) {
            return fail(LLAMA_MTP_STATUS_BAD_STATE,
                        where + ": a draft of seq " + std::to_string(seq_id) +
                            " from llama_mtp_draft was not accepted yet (call llama_mtp_accept)");
        }
        // Checked before anything is decoded: a wrong n_past must not reach the rollback below,
        // which would remove cells the caller decoded.
        st = check_next_pos(mtp, seq_id, n_past, where + ": n_past");
        if (st != LLAMA_MTP_STATUS_OK) {
            return st;
        }
        st = preflight_sampler(mtp, smpl);
        if (st != LLAMA_MTP_STATUS_OK) {
            return st;
        }
        const int64_t room = (int64_t) llama_n_ctx(mtp->ctx_tgt) - n_past - 1;
        if (room < 0) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT, where + ": the target context is full");
        }
        int64_t n_max = std::min<int64_t>({(int64_t) mtp->params.n_max, (int64_t) capacity - 1, room,
                                           (int64_t) llama_n_batch(mtp->ctx_tgt) - 1});
        ss.draft.clear();
        if (n_max > 0) {
            st = do_draft(mtp, seq_id, id_last, n_past, (int32_t) n_max);
            if (st != LLAMA_MTP_STATUS_OK) {
                return st;
            }
        } else {
            ss.pending = 0;
            ss.winner = -1;
            ss.verified = false;
        }
        const llama_tokens draft = ss.draft;
        // Undo this step: the target and MTP cells from n_past on are the step's own.
        // A recurrent target rolls back at most n_rs_seq tokens; say so when it cannot.
        auto roll_back = [&]() {
            const bool undone =
                llama_memory_seq_rm(llama_get_memory(mtp->ctx_tgt), seq_id, n_past, -1);
            if (mtp->ctx_dft != nullptr) {
                llama_memory_seq_rm(llama_get_memory(mtp->ctx_dft), seq_id, n_past, -1);
            }
            ss.pending = -1;
            ss.winner = -1;
            ss.verified = false;
            if (!undone) {
                g_last_error += "; the target could not be rolled back (n_rs_seq < 1 + n_max): seq " +
                                std::to_string(seq_id) + " keeps this step's tokens from position " +
                                std::to_string(n_past) + ", clear it with llama_mtp_seq_rm";
            }
        };

        if (!mtp->batch_tgt) {
            mtp->batch_tgt = std::make_unique<common_batch>(mtp->ctx_tgt);
        }
        common_batch & b = *mtp->batch_tgt;
        b.clear();
        b.add(id_last, n_past, seq_id, true);
        for (size_t i = 0; i < draft.size(); ++i) {
            b.add(draft[i], n_past + 1 + (llama_pos) i, seq_id, true);
        }
        const int32_t rc = llama_process(mtp->ctx_tgt, LLAMA_PROCESS_TYPE_DECODE, b.get());
        if (rc != 0) {
            fail(LLAMA_MTP_STATUS_DECODE_FAILED,
                 where + ": target decode failed with " + std::to_string(rc));
            roll_back();
            return LLAMA_MTP_STATUS_DECODE_FAILED;
        }

        // Sample before mirroring, so that a sampler failing on the first row leaves the MTP
        // state as it was: the step is then undone as if it had not been called.
        const llama_vocab * vocab = llama_model_get_vocab(llama_get_model(mtp->ctx_tgt));
        std::vector<llama_token> out;
        out.reserve(draft.size() + 1);
        for (size_t i = 0; i <= draft.size(); ++i) {
            llama_token id = LLAMA_TOKEN_NULL;
            st = sample_row(mtp, smpl, (int32_t) i, id);
            if (st != LLAMA_MTP_STATUS_OK) {
                if (out.empty()) {
                    roll_back();
                    return st;
                }
                // Rows before this one matched the draft and were accepted by the sampler: keep
                // them, the last as the target's next token.
                break;
            }
            out.push_back(id);
            if (i == draft.size() || id != draft[i] || llama_vocab_is_eog(vocab, id)) {
                break;
            }
        }
        st = mirror(mtp, b);
        if (st != LLAMA_MTP_STATUS_OK) {
            roll_back();
            return st;
        }
        const int32_t n_accepted = (int32_t) out.size() - 1;
        st = do_accept(mtp, seq_id, n_accepted, where.c_str());
        if (st != LLAMA_MTP_STATUS_OK) {
            return st;
        }
        remove_range(mtp, seq_id, n_past + 1 + n_accepted, -1);

        ss.prompt.push_back(id_last);
        ss.prompt.insert(ss.prompt.end(), out.begin(), out.end() - 1);
        std::copy(out.begin(), out.end(), tokens);
        *n_tokens = (int32_t) out.size();
        return ok();
    });
}

llama_mtp_status llama_mtp_get_stats(const llama_mtp * mtp, llama_mtp_stats * stats) {
    return guarded("llama_mtp_get_stats", [&]() {
        const llama_mtp_status hs = check_handle(mtp, "llama_mtp_get_stats");
        if (hs != LLAMA_MTP_STATUS_OK) {
            return hs;
        }
        if (stats == nullptr) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT, "llama_mtp_get_stats: stats is NULL");
        }
        const uint32_t size = stats->struct_size;
        if (size < k_stats_min_size) {
            return fail(LLAMA_MTP_STATUS_UNSUPPORTED_VERSION,
                        "llama_mtp_get_stats: struct_size " + std::to_string(size) +
                            " is smaller than " + std::to_string(k_stats_min_size));
        }
        std::memcpy(stats, &mtp->stats, std::min<size_t>(size, sizeof(mtp->stats)));
        stats->struct_size = size;
        return ok();
    });
}

llama_mtp_status llama_mtp_reset_stats(llama_mtp * mtp) {
    return guarded("llama_mtp_reset_stats", [&]() {
        const llama_mtp_status hs = check_handle(mtp, "llama_mtp_reset_stats");
        if (hs != LLAMA_MTP_STATUS_OK) {
            return hs;
        }
        mtp->stats = llama_mtp_stats{};
        mtp->stats.struct_size = sizeof(mtp->stats);
        for (auto & slot : mtp->slots) {
            slot.stats = llama_mtp_strategy_stats{};
            slot.stats.struct_size = sizeof(slot.stats);
            slot.stats.type = slot.info->type;
        }
        return ok();
    });
}

int32_t llama_mtp_n_strategies(const llama_mtp * mtp) {
    return mtp != nullptr && is_live(mtp) ? (int32_t) mtp->slots.size() : -1;
}

llama_mtp_status llama_mtp_get_strategy_stats(const llama_mtp * mtp, int32_t index,
                                              llama_mtp_strategy_stats * stats) {
    return guarded("llama_mtp_get_strategy_stats", [&]() {
        const std::string where = "llama_mtp_get_strategy_stats";
        const llama_mtp_status hs = check_handle(mtp, "llama_mtp_get_strategy_stats");
        if (hs != LLAMA_MTP_STATUS_OK) {
            return hs;
        }
        if (stats == nullptr) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT, where + ": stats is NULL");
        }
        if (index < 0 || (size_t) index >= mtp->slots.size()) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                        where + ": index " + std::to_string(index) + " is outside [0, " +
                            std::to_string(mtp->slots.size()) + ")");
        }
        const uint32_t size = stats->struct_size;
        if (size < k_strategy_stats_min_size) {
            return fail(LLAMA_MTP_STATUS_UNSUPPORTED_VERSION,
                        where + ": struct_size " + std::to_string(size) + " is smaller than " +
                            std::to_string(k_strategy_stats_min_size));
        }
        const llama_mtp_strategy_stats & own = mtp->slots[(size_t) index].stats;
        std::memcpy(stats, &own, std::min<size_t>(size, sizeof(own)));
        stats->struct_size = size;
        return ok();
    });
}

llama_mtp_status llama_mtp_default_strategy(int32_t type, llama_mtp_strategy * strategy) {
    return guarded("llama_mtp_default_strategy", [&]() {
        const std::string where = "llama_mtp_default_strategy";
        if (strategy == nullptr) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT, where + ": strategy is NULL");
        }
        const uint32_t size = strategy->struct_size;
        if (size < k_strategy_min_size) {
            return fail(LLAMA_MTP_STATUS_UNSUPPORTED_VERSION,
                        where + ": struct_size " + std::to_string(size) + " is smaller than " +
                            std::to_string(k_strategy_min_size));
        }
        if (find_strategy(type) == nullptr) {
            return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                        where + ": " + std::to_string(type) + " is not a llama_mtp_strategy_type");
        }
        llama_mtp_strategy defaults;
        strategy_defaults(type, defaults);
        std::memcpy(strategy, &defaults, sizeof(defaults));
        strategy->struct_size = size;
        return ok();
    });
}

llama_mtp_status llama_mtp_strategy_supported(int32_t type) {
    return guarded("llama_mtp_strategy_supported", [&]() {
        const llama_mtp_status st = strategy_support(type, "llama_mtp_strategy_supported");
        return st == LLAMA_MTP_STATUS_OK ? ok() : st;
    });
}

const char * llama_mtp_strategy_name(int32_t type) {
    const strategy_info * info = find_strategy(type);
    return info != nullptr ? info->name : nullptr;
}

}  // extern "C"
