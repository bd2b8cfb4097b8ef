/* MTP smoke test in C, for targets with no Python of their own (windows-x86_64 under wine).
 *
 * Runs the algorithm of llama-bindgen's Python runtime (generator/shipped/runtime/decoding.py:
 * the plain and MTP decode loops and _fill_batch; generation.py: _Run.emit) greedily on one
 * model, once without and once with MTP, so that its tokens equal those the runtime produces,
 * and prints one JSON line.
 *
 * usage: mtp_smoke MODEL_PATH MAX_TOKENS N_CTX DRAFT_MAX N_THREADS EXPECT_UNSUPPORTED PROMPT
 *                  [STRATEGIES DRAFT_MODEL]
 *   PROMPT: comma-separated token ids; EXPECT_UNSUPPORTED: 1 for a model without NextN layers.
 *   STRATEGIES: comma-separated strategy names (llama_mtp_strategy_name, e.g. ngram-mod,draft-mtp)
 *   for the speculative run instead of draft-mtp alone; DRAFT_MODEL: the draft model's path, or -.
 *   The speculative run's metrics then carry per-strategy counters, as the runtime's do.
 *
 * usage: mtp_smoke --media MODEL PROJECTOR IMAGE MAX_TOKENS N_CTX DRAFT_MAX N_THREADS TEXT
 *   (built with LLAMA_SMOKE_MTMD, linked with libmtmd): the media part, TEXT holding libmtmd's
 *   marker once; greedy generation after the image without and with draft-mtp, as the runtime's
 *   Context.generate(prompt, media=[image]) runs it.
 *
 * usage (built with LLAMA_SMOKE_RPC, linked with libggml-rpc): mtp_smoke --rpc-serve ...,
 *   mtp_smoke --rpc-devices ..., and mtp_smoke --rpc ENDPOINTS N_GPU_LAYERS ... before the usual
 *   arguments: the RPC part, see mtp_smoke_rpc.c.
 *
 * stdout: exactly one JSON line. Exit status 0 when the test ran (whatever its results), else 1
 * with {"ok": false, "error": "..."}; 2 on a usage error.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"
#include "llama_mtp.h"
#ifdef LLAMA_SMOKE_MTMD
#    include "mtmd-helper.h"
#    include "mtmd.h"
#endif
#ifdef LLAMA_SMOKE_RPC
#    include "mtp_smoke_rpc.h"
#endif

/* ---------------------------------------------------------------- small utilities */

/* Seconds on ggml's monotonic clock (llama_backend_init starts it). C11's timespec_get is not
 * in MinGW's default C runtime (msvcrt), only with UCRT. */
static double now_s(void) {
    return (double) ggml_time_us() * 1e-6;
}

static void quiet_log(enum ggml_log_level level, const char * text, void * data) {
    (void) level;
    (void) text;
    (void) data;
}

#ifdef LLAMA_SMOKE_RPC
/* llama.cpp's log on stderr (the RPC part: its buffer lines say where the weights went) */
static void stderr_log(enum ggml_log_level level, const char * text, void * data) {
    (void) level;
    (void) data;
    fputs(text, stderr);
}
#endif

/* A growing text buffer; on allocation failure it stops growing and remembers it. */
struct sbuf {
    char * data;
    size_t len;
    size_t cap;
    int failed;
};

static void sb_reserve(struct sbuf * b, size_t extra) {
    if (b->failed || b->len + extra + 1 <= b->cap) {
        return;
    }
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1) {
        cap *= 2;
    }
    char * p = realloc(b->data, cap);
    if (p == NULL) {
        b->failed = 1;
        return;
    }
    b->data = p;
    b->cap = cap;
}

static void sb_add(struct sbuf * b, const char * s, size_t n) {
    sb_reserve(b, n);
    if (b->failed) {
        return;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

static void sb_puts(struct sbuf * b, const char * s) {
    sb_add(b, s, strlen(s));
}

static void sb_printf(struct sbuf * b, const char * fmt, ...) {
    char small[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->failed = 1;
        return;
    }
    if ((size_t) n < sizeof small) {
        sb_add(b, small, (size_t) n);
        return;
    }
    sb_reserve(b, (size_t) n);
    if (b->failed) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t) n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t) n;
}

/* A JSON string literal. Bytes >= 0x80 are copied as they are (the text is UTF-8). */
static void sb_json_string(struct sbuf * b, const char * s) {
    sb_puts(b, "\"");
    for (const unsigned char * p = (const unsigned char *) (s ? s : ""); *p; ++p) {
        switch (*p) {
            case '"':  sb_puts(b, "\\\""); break;
            case '\\': sb_puts(b, "\\\\"); break;
            case '\n': sb_puts(b, "\\n"); break;
            case '\r': sb_puts(b, "\\r"); break;
            case '\t': sb_puts(b, "\\t"); break;
            case '\b': sb_puts(b, "\\b"); break;
            case '\f': sb_puts(b, "\\f"); break;
            default:
                if (*p < 0x20 || *p == 0x7f) {
                    sb_printf(b, "\\u%04x", (unsigned) *p);
                } else {
                    char c = (char) *p;
                    sb_add(b, &c, 1);
                }
        }
    }
    sb_puts(b, "\"");
}

/* The shortest decimal that reads back as x, written like Python's json (1.0, not 1). */
static void sb_json_double(struct sbuf * b, double x) {
    if (x != x || x > 1.7976931348623157e308 || x < -1.7976931348623157e308) {
        sb_puts(b, "null");
        return;
    }
    char text[64];
    for (int prec = 1; prec <= 17; ++prec) {
        snprintf(text, sizeof text, "%.*g", prec, x);
        if (strtod(text, NULL) == x) {
            break;
        }
    }
    sb_puts(b, text);
    if (strpbrk(text, ".eE") == NULL) {
        sb_puts(b, ".0");
    }
}

static void print_failure(const char * message) {
    struct sbuf b = {0};
    sb_puts(&b, "{\"ok\": false, \"error\": ");
    sb_json_string(&b, message);
    sb_puts(&b, "}");
    if (b.failed) {
        fputs("{\"ok\": false, \"error\": \"out of memory\"}\n", stdout);
    } else {
        fputs(b.data, stdout);
        fputs("\n", stdout);
    }
    fflush(stdout);
    free(b.data);
}

/* Message of the first driver failure (the test could not run). */
static char g_failure[1024];

static void set_failure(const char * fmt, ...) {
    if (g_failure[0] != '\0') {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_failure, sizeof g_failure, fmt, ap);
    va_end(ap);
}

/* The status's name (llama_mtp_status_name: "no_nextn_layers", ...), as the host's checks read it. */
static const char * status_name(enum llama_mtp_status status) {
    const char * name = llama_mtp_status_name((int32_t) status);
    return name != NULL ? name : "unknown";
}

static int parse_int(const char * text, long lo, long hi, long * out) {
    char * end = NULL;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || v < lo || v > hi) {
        return 0;
    }
    *out = v;
    return 1;
}

/* "10,11,12" -> a malloc'ed array; NULL (and *n = 0) when the text is not a token list. */
static llama_token * parse_prompt(const char * text, int * n) {
    *n = 0;
    size_t count = 1;
    for (const char * p = text; *p; ++p) {
        count += *p == ',';
    }
    llama_token * toks = malloc(sizeof(llama_token) * count);
    if (toks == NULL) {
        return NULL;
    }
    const char * p = text;
    size_t i = 0;
    for (;;) {
        char * end = NULL;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (errno != 0 || end == p || v < 0 || v > INT32_MAX || (*end != ',' && *end != '\0')) {
            free(toks);
            return NULL;
        }
        toks[i++] = (llama_token) v;
        if (*end == '\0') {
            break;
        }
        p = end + 1;
    }
    *n = (int) i;
    return toks;
}

/* ---------------------------------------------------------------- one generation (_Run) */

enum finish {
    FINISH_NONE = 0,
    FINISH_LENGTH,
    FINISH_EOG,
    FINISH_CONTEXT_FULL
};

static const char * finish_name(enum finish f) {
    switch (f) {
        case FINISH_EOG:          return "eog";
        case FINISH_CONTEXT_FULL: return "context_full";
        case FINISH_NONE:         /* the runtime reports an unfinished run as length */
        case FINISH_LENGTH:       return "length";
    }
    return "length";
}

struct run {
    const struct llama_vocab * vocab;
    int max_tokens;
    llama_token * tokens;    /* the result, as _Run.tokens */
    int n_tokens;
    llama_token * streamed;  /* what the on_token callback saw, one by one */
    int n_streamed;
    enum finish finish;
    long long drafted;
    long long accepted;
    long long steps;
    int prompt_tokens;
    double started;
    double generation_started;
    double generation_seconds;
};

static int run_init(struct run * r, const struct llama_vocab * vocab, int max_tokens,
                    int prompt_tokens) {
    memset(r, 0, sizeof *r);
    r->vocab = vocab;
    r->max_tokens = max_tokens;
    r->prompt_tokens = prompt_tokens;
    const size_t cap = (size_t) max_tokens + 1;
    r->tokens = malloc(sizeof(llama_token) * cap);
    r->streamed = malloc(sizeof(llama_token) * cap);
    r->finish = max_tokens > 0 ? FINISH_NONE : FINISH_LENGTH;
    r->started = now_s();
    r->generation_started = r->started;
    return r->tokens != NULL && r->streamed != NULL;
}

static void run_free(struct run * r) {
    free(r->tokens);
    free(r->streamed);
    r->tokens = NULL;
    r->streamed = NULL;
}

static void run_prompt_done(struct run * r) {
    r->generation_started = now_s();
}

static int run_remaining(const struct run * r) {
    return r->max_tokens - r->n_tokens;
}

static void run_finish(struct run * r, enum finish f) {
    if (r->finish == FINISH_NONE) {
        r->finish = f;
    }
}

static void on_token(struct run * r, llama_token token) {
    r->streamed[r->n_streamed++] = token;
#ifdef LLAMA_SMOKE_RPC
    smoke_rpc_after_token();
#endif
}

/* _Run.emit: record an accepted token; 0 when generation must end. */
static int run_emit(struct run * r, llama_token token) {
    if (r->finish != FINISH_NONE) {
        return 0;
    }
    if (llama_vocab_is_eog(r->vocab, token)) {
        run_finish(r, FINISH_EOG);
        return 0;
    }
    r->tokens[r->n_tokens++] = token;
    on_token(r, token);
    if (r->n_tokens >= r->max_tokens) {
        run_finish(r, FINISH_LENGTH);
        return 0;
    }
    return 1;
}

static void run_end(struct run * r) {
    r->generation_seconds = now_s() - r->generation_started;
}

static void sb_run(struct sbuf * b, const struct run * r) {
    sb_puts(b, "{\"tokens\": [");
    for (int i = 0; i < r->n_tokens; ++i) {
        sb_printf(b, i ? ", %d" : "%d", (int) r->tokens[i]);
    }
    int in_order = r->n_streamed == r->n_tokens;
    for (int i = 0; in_order && i < r->n_tokens; ++i) {
        in_order = r->streamed[i] == r->tokens[i];
    }
    const double rate = r->drafted ? (double) r->accepted / (double) r->drafted : 0.0;
    const double tps =
        r->generation_seconds > 0.0 ? (double) r->n_tokens / r->generation_seconds : 0.0;
    sb_printf(b, "], \"streamed_in_order\": %s, \"finish_reason\": \"%s\", \"metrics\": {",
              in_order ? "true" : "false", finish_name(r->finish));
    sb_printf(b, "\"generated_tokens\": %d, \"drafted_tokens\": %lld, \"accepted_tokens\": %lld, "
                 "\"acceptance_rate\": ",
              r->n_tokens, r->drafted, r->accepted);
    sb_json_double(b, rate);
    sb_printf(b, ", \"steps\": %lld, \"tokens_per_second\": ", r->steps);
    sb_json_double(b, tps);
    sb_printf(b, ", \"prompt_tokens\": %d}}", r->prompt_tokens);
}

/* ---------------------------------------------------------------- model and context */

struct options {
    const char * model_path;
    int max_tokens;
    int n_ctx;
    int draft_max;
    int n_threads;
    int expect_unsupported;
    llama_token * prompt;
    int n_prompt;
    const char * strategies;  /* NULL: draft-mtp alone */
    const char * draft_path;  /* NULL: no draft model */
    int uses_mtp;             /* the strategies include draft-mtp */
};

static struct llama_model * load_path(const char * path, int load_mtp, int split) {
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    mp.load_mtp = load_mtp != 0;
#ifdef LLAMA_SMOKE_RPC
    if (split) {
        smoke_rpc_model_params(&mp);
    }
#else
    (void) split;
#endif
    struct llama_model * model = llama_model_load_from_file(path, mp);
    if (model == NULL) {
        set_failure("llama.cpp could not load the model %s (load_mtp %d)", path, load_mtp);
    }
    return model;
}

static struct llama_model * load_model(const struct options * o, int load_mtp) {
    return load_path(o->model_path, load_mtp, 1);
}

static struct llama_context * new_context(struct llama_model * model, const struct options * o,
                                          int mtp) {
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t) o->n_ctx;
    cp.n_batch = 512;
    cp.n_ubatch = 512;
    cp.n_seq_max = 1;
    cp.n_threads = o->n_threads;
    cp.n_threads_batch = o->n_threads;
    if (mtp) {
        cp.n_rs_seq = (uint32_t) o->draft_max;
    }
    struct llama_context * ctx = llama_init_from_model(model, cp);
    if (ctx == NULL) {
        set_failure("llama.cpp could not create the context (mtp %d)", mtp);
    }
    return ctx;
}

static struct llama_sampler * greedy_sampler(void) {
    struct llama_sampler * chain = llama_sampler_chain_init(llama_sampler_chain_default_params());
    if (chain == NULL) {
        set_failure("llama_sampler_chain_init failed");
        return NULL;
    }
    llama_sampler_chain_add(chain, llama_sampler_init_greedy());
    return chain;
}

static int check_prompt(struct llama_context * ctx, const struct options * o) {
    const uint32_t n_ctx = llama_n_ctx(ctx);
    if (o->n_prompt <= 0) {
        set_failure("the prompt has no tokens");
        return 0;
    }
    if ((uint32_t) o->n_prompt >= n_ctx) {
        set_failure("the prompt (%d tokens) does not fit n_ctx %u", o->n_prompt, (unsigned) n_ctx);
        return 0;
    }
    return 1;
}

/* ---------------------------------------------------------------- plain run (_generate_plain) */

/* _generate_plain's loop after the prompt (n_cells: the cells it fills, room: the context's):
 * one token per llama_decode. 1 when the run completed, 0 on a driver failure. */
static int plain_loop(struct llama_context * ctx, struct llama_sampler * smpl, struct run * r,
                      long long n_cells, long long room) {
    run_prompt_done(r);
    while (r->finish == FINISH_NONE) {
        llama_token token = llama_sampler_sample(smpl, ctx, -1);
        r->steps += 1;
        if (!run_emit(r, token)) {
            break;
        }
        if (n_cells + 1 > room) {
            run_finish(r, FINISH_CONTEXT_FULL);
            break;
        }
        const int32_t rc = llama_decode(ctx, llama_batch_get_one(&token, 1));
        if (rc != 0) {
            set_failure("llama_decode failed (%d)", (int) rc);
            return 0;
        }
        n_cells += 1;
    }
    run_end(r);
    return 1;
}

/* 1 when the run completed (its result is in *r), 0 on a driver failure. */
static int generate_plain(struct llama_context * ctx, const struct llama_vocab * vocab,
                          const struct options * o, struct run * r) {
    if (!check_prompt(ctx, o)) {
        return 0;
    }
    struct llama_sampler * smpl = greedy_sampler();
    if (smpl == NULL) {
        return 0;
    }
    const int n_batch = (int) llama_n_batch(ctx);
    const long long n_ctx = (long long) llama_n_ctx(ctx);
    long long n_history = 0;
    int ok = 0;
    if (!run_init(r, vocab, o->max_tokens, o->n_prompt)) {
        set_failure("out of memory");
        goto done;
    }
    llama_memory_clear(llama_get_memory(ctx), true);
    for (int start = 0; start < o->n_prompt; start += n_batch) {
        const int n = o->n_prompt - start < n_batch ? o->n_prompt - start : n_batch;
        const int32_t rc = llama_decode(ctx, llama_batch_get_one(o->prompt + start, n));
        if (rc != 0) {
            set_failure("llama_decode failed (%d) on the prompt", (int) rc);
            goto done;
        }
        n_history += n;
    }
    ok = plain_loop(ctx, smpl, r, n_history, n_ctx);
done:
    llama_sampler_free(smpl);
    return ok;
}

/* ---------------------------------------------------------------- MTP run (_generate_mtp) */

/* _fill_batch: one sequence (0), positions from pos0, logits for the last token only. */
static void fill_batch(struct llama_batch * batch, const llama_token * tokens, int n, int pos0) {
    for (int i = 0; i < n; ++i) {
        batch->token[i] = tokens[i];
        batch->pos[i] = (llama_pos) (pos0 + i);
        batch->n_seq_id[i] = 1;
        batch->seq_id[i][0] = 0;
        batch->logits[i] = (int8_t) (i == n - 1);
    }
    batch->n_tokens = n;
}

/* A failed wrapper call: the message mtp_unexpected_error reports. */
static char g_mtp_error[1024];

static int mtp_check(enum llama_mtp_status status, const char * what) {
    if (status == LLAMA_MTP_STATUS_OK) {
        return 1;
    }
    if (g_mtp_error[0] == '\0') {
        snprintf(g_mtp_error, sizeof g_mtp_error, "llama_mtp_%s failed (status %s): %s", what,
                 status_name(status), llama_mtp_last_error());
    }
    return 0;
}

/* _generate_mtp's steps after the prompt: one llama_mtp_step each, from id_last at n_past (room:
 * the positions the context leaves). 1 when the run completed, 0 when it stopped on a wrapper
 * error (g_mtp_error) or a driver failure (g_failure). */
static int mtp_loop(struct llama_mtp * mtp, struct llama_sampler * smpl, struct run * r,
                    llama_token id_last, long long n_past, long long room, int capacity) {
    struct llama_mtp_stats stats;
    int ok = 0;
    run_prompt_done(r);
    llama_token * out = malloc(sizeof(llama_token) * (size_t) capacity);
    if (out == NULL) {
        set_failure("out of memory");
        return 0;
    }
    while (r->finish == FINISH_NONE) {
        if (n_past + 1 > room) {
            run_finish(r, FINISH_CONTEXT_FULL);
            break;
        }
        const int remaining = run_remaining(r);
        const int want = remaining > 1 ? remaining : 1;
        const int cap = capacity < want ? capacity : want;
        int32_t n_out = 0;
        const enum llama_mtp_status st =
            llama_mtp_step(mtp, 0, smpl, id_last, (llama_pos) n_past, out, cap, &n_out);
        if (!mtp_check(st, "step")) {
            goto done;
        }
        if (n_out < 1 || n_out > cap) {
            set_failure("llama_mtp_step returned %d tokens for capacity %d", (int) n_out, cap);
            goto done;
        }
        n_past += n_out;
        id_last = out[n_out - 1];
        for (int i = 0; i < n_out; ++i) {
            if (!run_emit(r, out[i])) {
                break;
            }
        }
    }
    memset(&stats, 0, sizeof stats);
    stats.struct_size = (uint32_t) sizeof stats;
    if (!mtp_check(llama_mtp_get_stats(mtp, &stats), "get_stats")) {
        goto done;
    }
    r->drafted = (long long) stats.n_drafted;
    r->accepted = (long long) stats.n_accepted;
    r->steps = (long long) stats.n_steps;
    run_end(r);
    ok = 1;
done:
    free(out);
    return ok;
}

/* 1 when the run completed, 0 when it stopped on a wrapper error (g_mtp_error) or a driver
 * failure (g_failure). */
static int generate_mtp(struct llama_context * ctx, struct llama_mtp * mtp,
                        const struct llama_vocab * vocab, const struct options * o,
                        struct run * r) {
    if (!check_prompt(ctx, o)) {
        return 0;
    }
    struct llama_sampler * smpl = greedy_sampler();
    if (smpl == NULL) {
        return 0;
    }
    const int n_batch = (int) llama_n_batch(ctx);
    const long long n_ctx = (long long) llama_n_ctx(ctx);
    const int n_head = o->n_prompt - 1;
    const int capacity = o->draft_max + 1;
    long long n_past = n_head;
    llama_token id_last = o->prompt[o->n_prompt - 1];
    int ok = 0;
    if (!run_init(r, vocab, o->max_tokens, o->n_prompt)) {
        set_failure("out of memory");
        goto done;
    }
    if (!mtp_check(llama_mtp_seq_rm(mtp, 0, 0, -1), "seq_rm") ||
        !mtp_check(llama_mtp_reset_stats(mtp), "reset_stats")) {
        goto done;
    }
    {
        struct llama_batch batch = llama_batch_init(n_batch, 0, 1);
        int prompt_ok = 1;
        for (int start = 0; prompt_ok && start < n_head; start += n_batch) {
            const int n = n_head - start < n_batch ? n_head - start : n_batch;
            fill_batch(&batch, o->prompt + start, n, start);
            const int32_t rc = llama_decode(ctx, batch);
            if (rc != 0) {
                set_failure("llama_decode failed (%d) on the prompt", (int) rc);
                prompt_ok = 0;
            } else if (!mtp_check(llama_mtp_process(mtp, &batch), "process")) {
                prompt_ok = 0;
            }
        }
        llama_batch_free(batch);
        if (!prompt_ok) {
            goto done;
        }
    }
    if (!mtp_check(llama_mtp_begin(mtp, 0, n_head > 0 ? o->prompt : NULL, n_head), "begin")) {
        goto done;
    }
    ok = mtp_loop(mtp, smpl, r, id_last, n_past, n_ctx, capacity);
done:
    llama_sampler_free(smpl);
    return ok;
}

/* The strategy named `name` (n characters), or 0. */
static int32_t strategy_type(const char * name, size_t n) {
    for (int32_t t = 1; t < 64; ++t) {
        const char * known = llama_mtp_strategy_name(t);
        if (known != NULL && strlen(known) == n && strncmp(known, name, n) == 0) {
            return t;
        }
    }
    return 0;
}

#define MAX_STRATEGIES 16

/* o->strategies as llama_mtp_strategy entries with llama.cpp's defaults; their number, or -1. */
static int parse_strategies(const char * list, struct llama_mtp_strategy * out) {
    int n = 0;
    for (const char * p = list; *p != '\0';) {
        const char * end = strchr(p, ',');
        const size_t len = end != NULL ? (size_t) (end - p) : strlen(p);
        const int32_t type = strategy_type(p, len);
        if (type == 0 || n == MAX_STRATEGIES) {
            return -1;
        }
        memset(&out[n], 0, sizeof out[n]);
        out[n].struct_size = (uint32_t) sizeof out[n];
        if (llama_mtp_default_strategy(type, &out[n]) != LLAMA_MTP_STATUS_OK) {
            return -1;
        }
        ++n;
        p += len + (end != NULL ? 1 : 0);
    }
    return n;
}

/* Context._strategy_metrics: the per-strategy counters, as JSON. */
static void sb_strategy_stats(struct sbuf * b, struct llama_mtp * mtp) {
    sb_puts(b, "[");
    for (int32_t i = 0; i < llama_mtp_n_strategies(mtp); ++i) {
        struct llama_mtp_strategy_stats st;
        memset(&st, 0, sizeof st);
        st.struct_size = (uint32_t) sizeof st;
        if (llama_mtp_get_strategy_stats(mtp, i, &st) != LLAMA_MTP_STATUS_OK) {
            set_failure("llama_mtp_get_strategy_stats failed: %s", llama_mtp_last_error());
            break;
        }
        const char * name = llama_mtp_strategy_name(st.type);
        sb_puts(b, i ? ", {\"kind\": " : "{\"kind\": ");
        sb_json_string(b, name != NULL ? name : "unknown");
        sb_printf(b, ", \"drafts\": %llu, \"drafted_tokens\": %llu, \"accepted_tokens\": %llu}",
                  (unsigned long long) st.n_drafts, (unsigned long long) st.n_drafted,
                  (unsigned long long) st.n_accepted);
    }
    sb_puts(b, "]");
}

/* Context._create_mtp: 1 and *out on success, else 0 with the status in *status. */
static int create_mtp(struct llama_context * ctx, const struct options * o,
                      struct llama_model * draft, struct llama_mtp ** out,
                      enum llama_mtp_status * status) {
    struct llama_mtp_strategy strategies[MAX_STRATEGIES];
    struct llama_mtp_params params;
    memset(&params, 0, sizeof params);
    params.struct_size = (uint32_t) sizeof params;
    *out = NULL;
    *status = llama_mtp_default_params(&params);
    if (*status != LLAMA_MTP_STATUS_OK) {
        mtp_check(*status, "default_params");
        return 0;
    }
    params.n_max = o->draft_max;
    params.n_min = 0;
    params.p_min = 0.0f;
    params.n_seq = 1;
    if (o->strategies != NULL) {
        const int n = parse_strategies(o->strategies, strategies);
        if (n < 0) {
            set_failure("STRATEGIES names an unknown strategy: %s", o->strategies);
            return 0;
        }
        params.strategies = strategies;
        params.n_strategies = (uint32_t) n;
        params.draft_model = draft;
    }
    *status = llama_mtp_create(ctx, &params, out);
    if (*status != LLAMA_MTP_STATUS_OK) {
        mtp_check(*status, "create");
        *out = NULL;
        return 0;
    }
    return 1;
}

/* The driver's one JSON line (b), or the failure (g_failure, or out of memory); frees b. The
 * exit status: 0, or 1 on a failure. */
static int print_result(struct sbuf * b) {
    int rc = 0;
    if (g_failure[0] == '\0' && b->failed) {
        set_failure("out of memory");
    }
    if (g_failure[0] != '\0') {
        print_failure(g_failure);
        rc = 1;
    } else {
        fputs(b->data, stdout);
        fputs("\n", stdout);
        fflush(stdout);
    }
    free(b->data);
    return rc;
}

#ifdef LLAMA_SMOKE_MTMD
/* ---------------------------------------------------------------- the media part (libmtmd) */

/* A prompt with one image, tokenized by libmtmd (the runtime's MediaPrompt): its chunks, its text
 * tokens in order, the positions it takes and the KV cells its image fills beyond them. */
struct media_prompt {
    mtmd_input_chunks * chunks;
    llama_token * text;
    int n_text;
    long long n_pos;
    long long extra_cells;
    long long image_rows;
    long long image_positions;
};

static void media_prompt_free(struct media_prompt * p) {
    if (p->chunks != NULL) {
        mtmd_input_chunks_free(p->chunks);
    }
    free(p->text);
    memset(p, 0, sizeof *p);
}

static mtmd_context * media_init(const char * projector, struct llama_model * model, int n_threads) {
    struct mtmd_context_params mp = mtmd_context_params_default();
    mp.use_gpu = false;
    mp.print_timings = false;
    mp.warmup = false;  /* the test projector's warm-up image would be needlessly large */
    mp.n_threads = n_threads;
    mtmd_context * mctx = mtmd_init_from_file(projector, model, mp);
    if (mctx == NULL) {
        set_failure("libmtmd could not load the projector %s", projector);
    }
    return mctx;
}

/* Projector.tokenize: 1 and *p filled, or 0 on a driver failure. The prompt must end with text
 * of at least two tokens (the MTP run decodes all but the last before its steps). */
static int media_tokenize(mtmd_context * mctx, const char * image, const char * text,
                          struct media_prompt * p) {
    memset(p, 0, sizeof *p);
    struct mtmd_helper_bitmap_wrapper w =
        mtmd_helper_bitmap_init_from_file(mctx, image, false, mtmd_helper_init_opt_default());
    if (w.video_ctx != NULL) {
        mtmd_helper_video_free(w.video_ctx);
    }
    if (w.bitmap == NULL) {
        set_failure("libmtmd could not read the image %s", image);
        return 0;
    }
    p->chunks = mtmd_input_chunks_init();
    struct mtmd_input_text in = {text, strlen(text), true, true};
    const mtmd_bitmap * bitmaps[1] = {w.bitmap};
    const int32_t rc = mtmd_tokenize(mctx, p->chunks, &in, bitmaps, 1);
    mtmd_bitmap_free(w.bitmap);
    if (rc != 0) {
        set_failure("mtmd_tokenize failed (%d)", (int) rc);
        return 0;
    }
    const size_t n_chunks = mtmd_input_chunks_size(p->chunks);
    size_t n_text_tokens = 0;  /* counted first: the buffer holds exactly the text tokens */
    for (size_t c = 0; c < n_chunks; ++c) {
        const mtmd_input_chunk * chunk = mtmd_input_chunks_get(p->chunks, c);
        if (mtmd_input_chunk_get_type(chunk) == MTMD_INPUT_CHUNK_TYPE_TEXT) {
            n_text_tokens += mtmd_input_chunk_get_n_tokens(chunk);
        }
    }
    p->text = malloc(sizeof(llama_token) * (n_text_tokens + 1));
    size_t last_text = 0;
    for (size_t c = 0; p->text != NULL && c < n_chunks; ++c) {
        const mtmd_input_chunk * chunk = mtmd_input_chunks_get(p->chunks, c);
        if (mtmd_input_chunk_get_type(chunk) == MTMD_INPUT_CHUNK_TYPE_TEXT) {
            const llama_token * tokens = mtmd_input_chunk_get_tokens_text(chunk, &last_text);
            memcpy(p->text + p->n_text, tokens, sizeof(llama_token) * last_text);
            p->n_text += (int) last_text;
            p->n_pos += (long long) last_text;
            continue;
        }
        last_text = 0;
        p->image_rows = (long long) mtmd_input_chunk_get_n_tokens(chunk);
        p->image_positions = (long long) mtmd_input_chunk_get_n_pos(chunk);
        p->n_pos += p->image_positions;
        p->extra_cells += p->image_rows - p->image_positions;
    }
    if (p->text == NULL) {
        set_failure("out of memory");
        return 0;
    }
    if (last_text < 2) {
        set_failure("the media prompt must end with text of at least two tokens");
        return 0;
    }
    return 1;
}

/* mtmd_helper_decode_image_chunk's post-decode callback: mirror the image rows (Sidecar.process_rows). */
static int32_t mirror_rows(const struct mtmd_helper_embd_batch * b, void * data) {
    struct llama_mtp * mtp = (struct llama_mtp *) data;
    const enum llama_mtp_status st =
        llama_mtp_process_embd(mtp, b->seq_id, b->embd, b->n_tokens, b->n_embd, b->pos, b->n_pos);
    return mtp_check(st, "process_embd") ? 0 : 1;
}

/* NativeSession.decode_prompt over the chunks, at positions from 0, each text batch and image
 * batch mirrored into mtp (when not NULL); the last token left out when leave_last. */
static int media_prefill(struct llama_context * ctx, mtmd_context * mctx,
                         const struct media_prompt * p, struct llama_mtp * mtp, int leave_last) {
    const int n_batch = (int) llama_n_batch(ctx);
    struct llama_batch batch = llama_batch_init(n_batch, 0, 1);
    const size_t n_chunks = mtmd_input_chunks_size(p->chunks);
    long long n_past = 0;
    int ok = 1;
    for (size_t c = 0; ok && c < n_chunks; ++c) {
        const mtmd_input_chunk * chunk = mtmd_input_chunks_get(p->chunks, c);
        if (mtmd_input_chunk_get_type(chunk) != MTMD_INPUT_CHUNK_TYPE_TEXT) {
            llama_pos new_n_past = 0;
            if (mtmd_encode_chunk(mctx, chunk) != 0) {
                set_failure("mtmd_encode_chunk failed");
                ok = 0;
            } else if (mtmd_helper_decode_image_chunk(mctx, ctx, chunk, mtmd_get_output_embd(mctx),
                                                      (llama_pos) n_past, 0, n_batch, &new_n_past,
                                                      mtp != NULL ? mirror_rows : NULL, mtp) != 0) {
                if (g_mtp_error[0] == '\0') {
                    set_failure("decoding the image failed");
                }
                ok = 0;
            }
            n_past = (long long) new_n_past;
            continue;
        }
        size_t n_tokens = 0;
        const llama_token * tokens = mtmd_input_chunk_get_tokens_text(chunk, &n_tokens);
        const int n = (int) n_tokens - (leave_last && c + 1 == n_chunks ? 1 : 0);
        for (int start = 0; ok && start < n; start += n_batch) {
            const int k = n - start < n_batch ? n - start : n_batch;
            fill_batch(&batch, tokens + start, k, (int) (n_past + start));
            const int32_t rc = llama_decode(ctx, batch);
            if (rc != 0) {
                set_failure("llama_decode failed (%d) on the prompt", (int) rc);
                ok = 0;
            } else if (mtp != NULL && !mtp_check(llama_mtp_process(mtp, &batch), "process")) {
                ok = 0;
            }
        }
        n_past += n;
    }
    llama_batch_free(batch);
    return ok;
}

/* One media run (plain, or draft-mtp when mtp): model, projector, prompt, generation. JSON into b
 * under key; 1 when the driver can go on (a wrapper refusal is reported, not a failure). */
static int media_run(const struct options * o, const char * projector, const char * image,
                     const char * text, int mtp_on, struct sbuf * b) {
    struct llama_model * model = load_model(o, mtp_on);
    struct llama_context * ctx = NULL;
    mtmd_context * mctx = NULL;
    struct llama_mtp * mtp = NULL;
    struct llama_sampler * smpl = NULL;
    struct media_prompt p;
    struct run r;
    enum llama_mtp_status st = LLAMA_MTP_STATUS_OK;
    int ok = 0;
    memset(&p, 0, sizeof p);
    memset(&r, 0, sizeof r);
    g_mtp_error[0] = '\0';
    if (model == NULL || (ctx = new_context(model, o, mtp_on)) == NULL ||
        (mctx = media_init(projector, model, o->n_threads)) == NULL ||
        !media_tokenize(mctx, image, text, &p) || (smpl = greedy_sampler()) == NULL) {
        goto done;
    }
    if (!run_init(&r, llama_model_get_vocab(model), o->max_tokens, (int) p.n_pos)) {
        set_failure("out of memory");
        goto done;
    }
    const long long room = (long long) llama_n_ctx(ctx);
    int ran;
    if (!mtp_on) {
        ran = media_prefill(ctx, mctx, &p, NULL, 0) &&
              plain_loop(ctx, smpl, &r, p.n_pos + p.extra_cells, room);
    } else {
        ran = create_mtp(ctx, o, NULL, &mtp, &st) && media_prefill(ctx, mctx, &p, mtp, 1) &&
              mtp_check(llama_mtp_begin(mtp, 0, p.text, p.n_text - 1), "begin") &&
              mtp_loop(mtp, smpl, &r, p.text[p.n_text - 1], p.n_pos - 1, room - p.extra_cells,
                       o->draft_max + 1);
    }
    if (g_failure[0] != '\0') {
        goto done;
    }
    sb_puts(b, mtp_on ? ", \"mtp\": " : ", \"plain\": ");
    if (ran) {
        sb_run(b, &r);
        b->len -= 1;  /* reopen the object: the image's rows and positions go in it too */
        sb_printf(b, ", \"image_rows\": %lld, \"image_positions\": %lld}", p.image_rows,
                  p.image_positions);
    } else {
        sb_puts(b, "{\"refused\": ");
        sb_json_string(b, g_mtp_error);
        sb_puts(b, "}");
    }
    ok = 1;
done:
    llama_mtp_free(mtp);
    if (smpl != NULL) {
        llama_sampler_free(smpl);
    }
    media_prompt_free(&p);
    run_free(&r);
    if (mctx != NULL) {
        mtmd_free(mctx);
    }
    if (ctx != NULL) {
        llama_free(ctx);
    }
    if (model != NULL) {
        llama_model_free(model);
    }
    return ok;
}

/* usage: mtp_smoke --media MODEL PROJECTOR IMAGE MAX_TOKENS N_CTX DRAFT_MAX N_THREADS TEXT */
static int media_main(int argc, char ** argv) {
    long v[4];
    if (argc != 10 || !parse_int(argv[5], 0, 1000000, &v[0]) ||
        !parse_int(argv[6], 1, 1 << 24, &v[1]) ||
        !parse_int(argv[7], 1, LLAMA_MTP_DRAFT_MAX, &v[2]) || !parse_int(argv[8], 1, 1024, &v[3])) {
        print_failure("usage: mtp_smoke --media MODEL PROJECTOR IMAGE MAX_TOKENS N_CTX DRAFT_MAX "
                      "N_THREADS TEXT");
        return 2;
    }
    struct options o;
    memset(&o, 0, sizeof o);
    o.model_path = argv[2];
    o.max_tokens = (int) v[0];
    o.n_ctx = (int) v[1];
    o.draft_max = (int) v[2];
    o.n_threads = (int) v[3];
    llama_log_set(quiet_log, NULL);
    mtmd_helper_log_set(quiet_log, NULL);
    llama_backend_init();
    int32_t supported = 0;
    llama_mtp_embd_supported(&supported);
    struct sbuf b = {0};
    sb_printf(&b, "{\"ok\": true, \"embd_supported\": %s", supported ? "true" : "false");
    const int ok = media_run(&o, argv[3], argv[4], argv[9], 0, &b) &&
                   media_run(&o, argv[3], argv[4], argv[9], 1, &b);
    sb_puts(&b, "}");
    llama_backend_free();
    if (!ok && g_failure[0] == '\0') {
        set_failure("the media part failed");
    }
    return print_result(&b);
}
#endif

/* ---------------------------------------------------------------- main */

int main(int argc, char ** argv) {
#ifdef LLAMA_SMOKE_MTMD
    if (argc > 1 && strcmp(argv[1], "--media") == 0) {
        return media_main(argc, argv);
    }
#endif
#ifdef LLAMA_SMOKE_RPC
    if (argc > 1 && strcmp(argv[1], "--rpc-serve") == 0) {
        return smoke_rpc_serve_main(argc, argv);
    }
    if (argc > 1 && strcmp(argv[1], "--rpc-devices") == 0) {
        return smoke_rpc_devices_main(argc, argv);
    }
    if (!smoke_rpc_split_arguments(&argc, &argv, llama_max_devices())) {
        print_failure("--rpc ENDPOINTS N_GPU_LAYERS: the servers could not be added");
        return 2;
    }
#endif
    if (argc != 8 && argc != 10) {
        fprintf(stderr,
                "usage: %s MODEL_PATH MAX_TOKENS N_CTX DRAFT_MAX N_THREADS EXPECT_UNSUPPORTED "
                "PROMPT [STRATEGIES DRAFT_MODEL]\n",
                argc > 0 ? argv[0] : "mtp_smoke");
        print_failure("usage: mtp_smoke MODEL_PATH MAX_TOKENS N_CTX DRAFT_MAX N_THREADS "
                      "EXPECT_UNSUPPORTED PROMPT [STRATEGIES DRAFT_MODEL]");
        return 2;
    }
    struct options o;
    memset(&o, 0, sizeof o);
    long v[5];
    o.model_path = argv[1];
    if (!parse_int(argv[2], 0, 1000000, &v[0]) || !parse_int(argv[3], 1, 1 << 24, &v[1]) ||
        !parse_int(argv[4], 1, LLAMA_MTP_DRAFT_MAX, &v[2]) || !parse_int(argv[5], 1, 1024, &v[3]) ||
        !parse_int(argv[6], 0, 1, &v[4])) {
        print_failure("bad numeric argument: MAX_TOKENS >= 0, N_CTX >= 1, DRAFT_MAX in [1, LLAMA_MTP_DRAFT_MAX], "
                      "N_THREADS >= 1, EXPECT_UNSUPPORTED 0 or 1");
        return 2;
    }
    o.max_tokens = (int) v[0];
    o.n_ctx = (int) v[1];
    o.draft_max = (int) v[2];
    o.n_threads = (int) v[3];
    o.expect_unsupported = (int) v[4];
    o.prompt = parse_prompt(argv[7], &o.n_prompt);
    if (o.prompt == NULL) {
        print_failure("PROMPT must be comma-separated token ids, e.g. 10,11,12");
        return 2;
    }
    o.uses_mtp = 1;
    if (argc == 10) {
        struct llama_mtp_strategy listed[MAX_STRATEGIES];
        o.strategies = argv[8];
        o.draft_path = strcmp(argv[9], "-") == 0 ? NULL : argv[9];
        const int n = parse_strategies(o.strategies, listed);
        if (n < 0) {
            print_failure("STRATEGIES names an unknown strategy");
            return 2;
        }
        o.uses_mtp = 0;
        for (int i = 0; i < n; ++i) {
            o.uses_mtp |= listed[i].type == LLAMA_MTP_STRATEGY_DRAFT_MTP;
        }
    }

    llama_log_set(quiet_log, NULL);
#ifdef LLAMA_SMOKE_RPC
    if (smoke_rpc_active()) {
        llama_log_set(stderr_log, NULL);
    }
#endif
    llama_backend_init();

    struct sbuf b = {0};
    struct run plain;
    struct run mtp_run;
    memset(&plain, 0, sizeof plain);
    memset(&mtp_run, 0, sizeof mtp_run);
    struct llama_model * model = NULL;
    struct llama_context * ctx = NULL;
    struct llama_mtp * mtp = NULL;
    struct llama_model * draft = NULL;
    int32_t n_nextn = 0;
    enum llama_mtp_status st_layers = LLAMA_MTP_STATUS_OK;
    enum llama_mtp_status st_create = LLAMA_MTP_STATUS_OK;

    sb_puts(&b, "{\"ok\": true, \"system_info\": ");
    sb_json_string(&b, llama_print_system_info());

    /* plain run: the model without its MTP layers */
    model = load_model(&o, 0);
    if (model == NULL) {
        goto end;
    }
    ctx = new_context(model, &o, 0);
    if (ctx == NULL) {
        goto end;
    }
    if (!generate_plain(ctx, llama_model_get_vocab(model), &o, &plain)) {
        goto end;
    }
    sb_puts(&b, ", \"plain\": ");
    sb_run(&b, &plain);
    llama_free(ctx);
    ctx = NULL;
    llama_model_free(model);
    model = NULL;

    /* MTP run: the model with its MTP layers, the sidecar created before any decode */
    model = load_model(&o, o.uses_mtp);
    if (model == NULL) {
        goto end;
    }
    if (o.draft_path != NULL && (draft = load_path(o.draft_path, 0, 0)) == NULL) {
        goto end;
    }
    st_layers = llama_mtp_model_n_nextn_layers(model, &n_nextn);
    ctx = new_context(model, &o, 1);
    if (ctx == NULL) {
        goto end;
    }
    if (o.expect_unsupported) {
        const int created = create_mtp(ctx, &o, draft, &mtp, &st_create);
        sb_puts(&b, ", \"mtp_error\": {\"error_type\": ");
        sb_json_string(&b, status_name(st_create));
        sb_puts(&b, ", \"reason\": ");
        sb_json_string(&b, created ? "" : llama_mtp_last_error());
        sb_printf(&b, ", \"n_nextn_layers\": %d}", (int) n_nextn);
    } else if (!mtp_check(st_layers, "model_n_nextn_layers") ||
               !create_mtp(ctx, &o, draft, &mtp, &st_create) ||
               !generate_mtp(ctx, mtp, llama_model_get_vocab(model), &o, &mtp_run)) {
        if (g_failure[0] != '\0') {
            goto end;
        }
        sb_puts(&b, ", \"mtp_unexpected_error\": ");
        sb_json_string(&b, g_mtp_error);
        /* a strategy the llama.cpp release lacks: the host may leave it out */
        sb_printf(&b, ", \"lacked_by_release\": %s",
                  st_create == LLAMA_MTP_STATUS_NOT_IN_RELEASE ? "true" : "false");
    } else {
        sb_puts(&b, ", \"mtp\": ");
        sb_run(&b, &mtp_run);
        if (o.strategies != NULL) {
            sb_puts(&b, ", \"strategies\": ");
            sb_strategy_stats(&b, mtp);
        }
    }
    sb_puts(&b, "}");

end:
    llama_mtp_free(mtp);
    if (ctx != NULL) {
        llama_free(ctx);
    }
    if (draft != NULL) {
        llama_model_free(draft);
    }
    if (model != NULL) {
        llama_model_free(model);
    }
    llama_backend_free();
    run_free(&plain);
    run_free(&mtp_run);
    free(o.prompt);

    return print_result(&b);
}
