// The strategy table and the checks of each strategy's parameters (see llama_mtp_strategies.h).

#include "llama_mtp_strategies.h"

#include "llama_mtp_upstream.h"

#include <cctype>
#include <cstring>
#include <fstream>
#include <vector>

#ifndef LLAMA_MTP_LLAMA_TAG
#    define LLAMA_MTP_LLAMA_TAG "unknown tag"
#endif

namespace llama_mtp_impl {

namespace {

// In upstream's order of preference (common_speculative_init): draftless first. Whether the tree
// has each type is llama_mtp_upstream's to say. Names and draft-context membership come from
// llama_mtp.h; reads_layers: the draft reads the target's layer inputs.
struct strategy_row {
    int32_t type;
    const char * enumerator;  // the enumerator's suffix ("NGRAM_MAP_K4V")
    bool reads_layers;
};
#define LLAMA_MTP_ROW(suffix, reads_layers) {LLAMA_MTP_STRATEGY_##suffix, #suffix, reads_layers}
const strategy_row k_rows[] = {
    LLAMA_MTP_ROW(NGRAM_SIMPLE, false),
    LLAMA_MTP_ROW(NGRAM_MAP_K, false),
    LLAMA_MTP_ROW(NGRAM_MAP_K4V, false),
    LLAMA_MTP_ROW(NGRAM_MOD, false),
    LLAMA_MTP_ROW(NGRAM_CACHE, false),
    LLAMA_MTP_ROW(DRAFT_SIMPLE, false),
    LLAMA_MTP_ROW(DRAFT_EAGLE3, true),
    LLAMA_MTP_ROW(DRAFT_MTP, false),
    LLAMA_MTP_ROW(DRAFT_DFLASH, true),
    LLAMA_MTP_ROW(DRAFT_DSPARK, true),
};
#undef LLAMA_MTP_ROW
constexpr uint32_t k_n_strategies = sizeof(k_rows) / sizeof(k_rows[0]);

// llama_mtp.h's naming rule: the enumerator's suffix in lower case, '-' for '_'.
std::string strategy_name_of(const char * enumerator) {
    std::string name(enumerator);
    for (char & c : name) {
        c = c == '_' ? '-' : (char) std::tolower((unsigned char) c);
    }
    return name;
}

const std::vector<strategy_info> & table() {
    static const std::vector<strategy_info> rows = [] {
        std::vector<strategy_info> out;
        for (const strategy_row & row : k_rows) {
            const bool draft = ((LLAMA_MTP_DRAFT_CONTEXT_STRATEGIES >> row.type) & 1u) != 0;
            out.push_back({row.type, strategy_name_of(row.enumerator), draft, row.reads_layers});
        }
        return out;
    }();
    return rows;
}

}  // namespace

bool in_list(const std::string & list, const std::string & name) {
    size_t start = 0;
    while (start <= list.size()) {
        const size_t found = list.find(',', start);
        const size_t end = found == std::string::npos ? list.size() : found;
        if (list.compare(start, end - start, name) == 0) {
            return true;
        }
        start = end + 1;
    }
    return false;
}

const strategy_info * strategies_begin() {
    return table().data();
}

const strategy_info * strategies_end() {
    return table().data() + table().size();
}

uint32_t n_strategy_types() {
    return k_n_strategies;
}

const strategy_info * find_strategy(int32_t type) {
    for (const auto & info : table()) {
        if (info.type == type) {
            return &info;
        }
    }
    return nullptr;
}

llama_mtp_status strategy_support(int32_t type, const std::string & where) {
    const strategy_info * info = find_strategy(type);
    if (info == nullptr) {
        return fail(LLAMA_MTP_STATUS_INVALID_ARGUMENT,
                    where + ": " + std::to_string(type) + " is not a llama_mtp_strategy_type");
    }
    if (llama_mtp_upstream::upstream_strategy_type(type) < 0) {
        return fail(LLAMA_MTP_STATUS_NOT_IN_RELEASE,
                    where + ": " + info->name + " is not in this llama.cpp release (" +
                        LLAMA_MTP_LLAMA_TAG + ": common/common.h has no matching "
                        "COMMON_SPECULATIVE_TYPE_* value)");
    }
    if (info->reads_target_layers && !llama_mtp_upstream::has_layer_drafts()) {
        return fail(LLAMA_MTP_STATUS_NOT_IN_RELEASE,
                    where + ": " + info->name + " is in this llama.cpp release (" +
                        LLAMA_MTP_LLAMA_TAG + "), but not what the wrapper needs to check its "
                        "draft first (src/llama-ext.h: llama_model_target_layer_ids, "
                        "llama_set_embeddings_layer_inp; llama_context_params.ctx_other)");
    }
    return LLAMA_MTP_STATUS_OK;
}

void strategy_defaults(int32_t type, llama_mtp_strategy & s) {
    const llama_mtp_upstream::speculative_defaults up = llama_mtp_upstream::defaults();
    const int map = type == LLAMA_MTP_STRATEGY_NGRAM_MAP_K     ? 1
                    : type == LLAMA_MTP_STRATEGY_NGRAM_MAP_K4V ? 2
                                                               : 0;
    std::memset(&s, 0, sizeof(s));
    s.struct_size = sizeof(s);
    s.type = type;
    s.size_n = up.map_size_n[map];
    s.size_m = up.map_size_m[map];
    s.min_hits = up.map_min_hits[map];
    s.n_match = up.mod_n_match;
    s.mod_n_min = up.mod_n_min;
    s.mod_n_max = up.mod_n_max;
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
static llama_mtp_status check_ngram_cache_file(const std::string & path, const std::string & what) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        return fail(LLAMA_MTP_STATUS_FILE_UNREADABLE, what + ": cannot open '" + path + "'");
    }
    const std::streamsize ngram_bytes = (std::streamsize) sizeof(llama_token) *
                                         llama_mtp_upstream::ngram_cache_key_length();
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


}  // namespace llama_mtp_impl
