# Configure-time probes of a llama.cpp tree for the wrapper's compatibility layer
# (llama_mtp_upstream.cpp). Each probe compiles a few lines against the tree's own headers, so
# the variant is chosen by what the tree declares, never by a version number.
#
# After llama_mtp_run_probes():
#   LLAMA_MTP_UP_DEFINITIONS   the LLAMA_MTP_UP_*=0|1 definitions for llama_mtp_upstream.cpp
#   LLAMA_MTP_UP_SUMMARY       "facet=variant ..." (variant "none" when no variant matched, and
#                              TYPE=1|0 per strategy type of common.h), for logs and build-info.json
#   LLAMA_MTP_UP_FAILURE       "" or why no variant matched (the facet, what each variant
#                              needed, and the first compiler error of the last one tried)

set(_llama_mtp_probe_dir "${CMAKE_BINARY_DIR}/llama_mtp_probes")
set(_llama_mtp_header "${CMAKE_CURRENT_LIST_DIR}/llama_mtp.h")

# llama_mtp_strategy_suffixes(<out var>): the suffixes of enum llama_mtp_strategy_type's
# enumerators (DRAFT_SIMPLE, ..., NGRAM_CACHE), read from llama_mtp.h, the list's one home, in
# its order. Each is also upstream's COMMON_SPECULATIVE_TYPE_<suffix>. Configuring stops when the
# header yields none (its enumerators must stay one a line, `LLAMA_MTP_STRATEGY_<SUFFIX> = <n>`).
function(llama_mtp_strategy_suffixes out_var)
    file(STRINGS "${_llama_mtp_header}" _lines REGEX "^[ \t]*LLAMA_MTP_STRATEGY_[A-Z0-9_]+[ \t]*=")
    set(_suffixes "")
    foreach(_line IN LISTS _lines)
        string(REGEX REPLACE "^[ \t]*LLAMA_MTP_STRATEGY_([A-Z0-9_]+)[ \t]*=.*$" "\\1" _suffix "${_line}")
        list(APPEND _suffixes "${_suffix}")
    endforeach()
    if(NOT _suffixes OR NOT "DRAFT_MTP" IN_LIST _suffixes)
        message(FATAL_ERROR "llama_mtp: no strategy enumerators (LLAMA_MTP_STRATEGY_<SUFFIX> = <n>, one a "
            "line, DRAFT_MTP among them) found in ${_llama_mtp_header}; the probes read the "
            "strategy list from there")
    endif()
    set(${out_var} "${_suffixes}" PARENT_SCOPE)
endfunction()

# A probe's source: the tree's headers the wrapper uses, then BODY inside a function.
function(_llama_mtp_probe_source out_var body)
    set(${out_var} "#include \"llama.h\"
#include \"common.h\"
#include \"speculative.h\"
#include \"ngram-cache.h\"
#include \"llama-ext.h\"
${LLAMA_MTP_PROBE_EXTRA_INCLUDES}
void llama_mtp_probe(llama_context * ctx, llama_model * model, common_speculative * spec) {
    (void) ctx; (void) model; (void) spec;
${body}
}
" PARENT_SCOPE)
endfunction()

# llama_mtp_probe(<name> <result var> <body>): compile BODY; result 1 or 0, and on failure the
# first compiler error line in <result var>_ERROR.
function(llama_mtp_probe name result_var body)
    _llama_mtp_probe_source(_src "${body}")
    set(_file "${_llama_mtp_probe_dir}/${name}.cpp")
    file(WRITE "${_file}" "${_src}")
    set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)
    try_compile(_ok "${_llama_mtp_probe_dir}/${name}" "${_file}"
        CMAKE_FLAGS "-DINCLUDE_DIRECTORIES=${LLAMA_MTP_PROBE_INCLUDES}"
        CXX_STANDARD 17
        CXX_STANDARD_REQUIRED ON
        OUTPUT_VARIABLE _out)
    if(_ok)
        set(${result_var} 1 PARENT_SCOPE)
        set(${result_var}_ERROR "" PARENT_SCOPE)
    else()
        set(${result_var} 0 PARENT_SCOPE)
        string(REGEX MATCH "[^\n]*error[^\n]*" _first "${_out}")
        string(STRIP "${_first}" _first)
        string(REPLACE "${_llama_mtp_probe_dir}/" "" _first "${_first}")
        set(${result_var}_ERROR "${_first}" PARENT_SCOPE)
    endif()
    file(APPEND "${_llama_mtp_probe_dir}/probes.log" "== ${name}: ${_ok}\n${_out}\n")
endfunction()

# Probes one facet with variants tried in order; sets LLAMA_MTP_UP_<facet> to the 1-based index of
# the first variant that compiles (0: none) and appends to the definitions and summary. A facet
# with REQUIRED and no matching variant records LLAMA_MTP_UP_FAILURE.
macro(_llama_mtp_facet facet required)
    set(_variants ${ARGN})
    set(_chosen 0)
    set(_index 0)
    set(_tried "")
    foreach(_variant IN LISTS _variants)
        math(EXPR _index "${_index} + 1")
        if(_chosen EQUAL 0)
            llama_mtp_probe("${facet}_${_index}" _probe_ok "${_llama_mtp_variant_${_variant}}")
            if(_probe_ok)
                set(_chosen ${_index})
                math(EXPR _index_of_chosen "${_index} - 1")
            else()
                list(APPEND _tried "${_variant}")
                set(_last_error "${_probe_ok_ERROR}")
            endif()
        endif()
    endforeach()
    set(LLAMA_MTP_UP_${facet} ${_chosen})
    if(_chosen EQUAL 0)
        list(APPEND LLAMA_MTP_UP_SUMMARY "${facet}=none")
    else()
        list(GET _variants ${_index_of_chosen} _chosen_name)
        list(APPEND LLAMA_MTP_UP_SUMMARY "${facet}=${_chosen_name}")
    endif()
    if(_chosen EQUAL 0 AND ${required} AND LLAMA_MTP_UP_FAILURE STREQUAL "")
        string(REPLACE ";" ", " _tried_text "${_tried}")
        set(LLAMA_MTP_UP_FAILURE
            "probe ${facet}: the tree matches none of the known variants (${_tried_text}); first compiler error: ${_last_error}")
    endif()
endmacro()

# Variant bodies (one statement list each).
set(_llama_mtp_variant_core [=[
    common_params_speculative sp;
    sp.types = {COMMON_SPECULATIVE_TYPE_DRAFT_MTP};
    sp.draft.n_max = 1; sp.draft.n_min = 0; sp.draft.p_min = 0.0f;
    sp.draft.ctx_tgt = ctx; sp.draft.ctx_dft = ctx; sp.draft.mparams.path = "";
    sp.ngram_simple.size_n = 1; sp.ngram_map_k.size_m = 1; sp.ngram_map_k4v.min_hits = 1;
    sp.ngram_mod.n_match = 1; sp.ngram_mod.n_min = 0; sp.ngram_mod.n_max = 1;
    sp.ngram_cache.lookup_cache_static = ""; sp.ngram_cache.lookup_cache_dynamic = "";
    common_speculative * s = common_speculative_init(sp, 1u);
    llama_tokens prompt, result;
    common_speculative_begin(s, 0, prompt);
    auto & dp = common_speculative_get_draft_params(s, 0);
    dp.drafting = true; dp.n_max = 1; dp.id_last = 0; dp.prompt = &prompt; dp.result = &result;
    common_speculative_draft(s);
    common_speculative_accept(s, 0, (uint16_t) 0);
    common_speculative_free(s);
    int n = LLAMA_NGRAM_MAX; (void) n;
    llama_context_params cp = llama_context_default_params();
    cp.ctx_type = LLAMA_CONTEXT_TYPE_MTP; cp.n_rs_seq = 0;
    (void) llama_n_rs_seq(ctx);
]=])
set(_llama_mtp_variant_common_batch [=[
    common_batch b(ctx);
    b.clear();
    b.add(0, 0, 0, true);
    bool ok = common_speculative_process(spec, b); (void) ok;
    for (const auto & t : b.tokens) { (void) t.seq_id; }
]=])
set(_llama_mtp_variant_common_batch_embd [=[
    common_batch b(ctx);
    const float row[1] = {0.0f};
    const llama_pos pos[4] = {0, 0, 0, 0};
    int32_t idx = b.add_embd(llama_embd{row, 1, 1}, pos, 0, false); (void) idx;
    bool ok = b.has_embd(); (void) ok;
]=])
set(_llama_mtp_variant_llama_batch [=[
    llama_batch b = llama_batch_init(1, 0, 1);
    bool ok = common_speculative_process(spec, b); (void) ok;
    llama_batch_free(b);
]=])
set(_llama_mtp_variant_llama_process [=[
    common_batch b(ctx);
    int32_t rc = llama_process(ctx, LLAMA_PROCESS_TYPE_DECODE, b.get()); (void) rc;
]=])
set(_llama_mtp_variant_llama_decode [=[
    llama_batch b = llama_batch_init(1, 0, 1);
    int32_t rc = llama_decode(ctx, b); (void) rc;
]=])
set(_llama_mtp_variant_draft_pos0 [=[
    common_speculative_draft_params & dp = common_speculative_get_draft_params(spec, 0);
    dp.pos0 = 0;
]=])
set(_llama_mtp_variant_draft_n_past [=[
    common_speculative_draft_params & dp = common_speculative_get_draft_params(spec, 0);
    dp.n_past = 0;
]=])
set(_llama_mtp_variant_embd_nextn [=[
    float * all = llama_get_embeddings_nextn(ctx); (void) all;
    float * row = llama_get_embeddings_nextn_ith(ctx, 0); (void) row;
]=])
set(_llama_mtp_variant_embd_pre_norm [=[
    float * all = llama_get_embeddings_pre_norm(ctx); (void) all;
    float * row = llama_get_embeddings_pre_norm_ith(ctx, 0); (void) row;
]=])
set(_llama_mtp_variant_n_layer_nextn [=[
    int32_t n = llama_model_n_layer_nextn(model); (void) n;
]=])
set(_llama_mtp_variant_ctx_other [=[
    llama_context_params cp = llama_context_default_params();
    cp.ctx_other = ctx;
]=])
set(_llama_mtp_variant_layer_drafts [=[
    const int32_t * ids = llama_model_target_layer_ids(model);
    uint32_t n = llama_model_target_layer_ids_n(model);
    llama_set_embeddings_layer_inp(ctx, 0, false);
    llama_context_params cp = llama_context_default_params();
    cp.ctx_other = ctx;
    (void) ids; (void) n;
]=])
set(_llama_mtp_variant_outputs_per_seq [=[
    llama_context_params cp = llama_context_default_params();
    cp.n_outputs_max_per_seq = 1;
]=])
set(_llama_mtp_variant_dflash_selector [=[
    int32_t k = llama_model_dflash_selector_top_k(model); (void) k;
]=])
set(_llama_mtp_variant_n_outputs_max [=[
    uint32_t n = ctx->get_cparams().n_outputs_max; (void) n;
]=])
set(_llama_mtp_variant_draft_backend_sampling [=[
    common_params_speculative sp;
    sp.draft.backend_sampling = true;
]=])

# The chat layer's probes (file scope before each body): its headers (with nlohmann's whole
# json.hpp: older trees' chat.h declares the JSON type through json_fwd.hpp only), and how the
# wrapper names the types the tree declares (llama_mtp_chat_upstream.cpp does the same).
set(_llama_mtp_chat_includes [=[
#include <nlohmann/json.hpp>
#include "chat.h"
#include "json-schema-to-grammar.h"
#include <type_traits>
template <typename F> struct llama_mtp_probe_first;
template <typename R, typename A, typename... Rest> struct llama_mtp_probe_first<R (*)(A, Rest...)> {
    using type = std::decay_t<A>;
};
]=])
set(_llama_mtp_variant_chat [=[
    using up_json = llama_mtp_probe_first<decltype(&common_chat_msgs_parse_oaicompat)>::type;
    using parse_input = llama_mtp_probe_first<decltype(&common_chat_parse)>::type;
    common_chat_templates_ptr t = common_chat_templates_init(model, std::string("x"));
    common_chat_templates_inputs in;
    in.messages = common_chat_msgs_parse_oaicompat(up_json::parse("[]"));
    in.tools = common_chat_tools_parse_oaicompat(up_json::parse("[]"));
    in.tool_choice = common_chat_tool_choice_parse_oaicompat("auto");
    in.reasoning_format = common_reasoning_format_from_name("none");
    in.use_jinja = true; in.add_generation_prompt = true; in.parallel_tool_calls = false;
    in.enable_thinking = true; in.chat_template_kwargs["k"] = "v"; in.json_schema = "";
    in.grammar = json_schema_to_grammar(up_json::parse("{}"));
    common_chat_params p = common_chat_templates_apply(t.get(), in);
    for (const auto & tr : p.grammar_triggers) {
        (void) tr.value; (void) tr.token;
        bool word = tr.type == COMMON_GRAMMAR_TRIGGER_TYPE_WORD; (void) word;
    }
    (void) p.prompt; (void) p.grammar; (void) p.grammar_lazy; (void) p.preserved_tokens;
    (void) p.additional_stops; (void) p.generation_prompt; (void) p.supports_thinking;
    (void) common_chat_format_name(p.format);
    common_chat_parser_params pp(p);
    common_chat_msg m = common_chat_parse(parse_input(std::string("x")), false, pp);
    (void) m.role; (void) m.content; (void) m.reasoning_content;
    for (const auto & c : m.tool_calls) { (void) c.id; (void) c.name; (void) c.arguments; }
    for (const auto & [name, on] : common_chat_templates_get_caps(t.get())) { (void) name; (void) on; }
    (void) common_chat_templates_source(t.get());
    (void) common_chat_templates_support_enable_thinking(t.get());
    common_chat_template again(std::string("x"), "", ""); (void) again;
]=])
set(_llama_mtp_variant_chat_parser_text [=[
    common_chat_params p;
    common_chat_parser_params pp(p);
    const std::string & serialised = p.parser;
    pp.parser.load(serialised);
]=])
set(_llama_mtp_variant_chat_parser_arena [=[
    common_chat_params p;
    common_chat_parser_params pp(p);
    pp.parser = p.parser;
]=])
set(_llama_mtp_variant_chat_parser_reasoning [=[
    common_chat_parser_params pp;
    pp.reasoning_format = COMMON_REASONING_FORMAT_NONE;
    pp.parse_tool_calls = true;
]=])

function(llama_mtp_run_probes llama_cpp_dir)
    file(REMOVE_RECURSE "${_llama_mtp_probe_dir}")
    file(MAKE_DIRECTORY "${_llama_mtp_probe_dir}")
    set(LLAMA_MTP_PROBE_INCLUDES "${llama_cpp_dir}/include;${llama_cpp_dir}/ggml/include;${llama_cpp_dir}/common;${llama_cpp_dir}/src;${llama_cpp_dir}/vendor")
    set(LLAMA_MTP_PROBE_EXTRA_INCLUDES "")
    set(LLAMA_MTP_UP_SUMMARY "")
    set(LLAMA_MTP_UP_FAILURE "")

    # Required facets: the wrapper cannot run without one of their variants.
    _llama_mtp_facet(CORE TRUE core)
    _llama_mtp_facet(BATCH TRUE common_batch llama_batch)
    if(LLAMA_MTP_UP_BATCH EQUAL 1)
        _llama_mtp_facet(DECODE TRUE llama_process)
    else()
        _llama_mtp_facet(DECODE TRUE llama_decode)
    endif()
    _llama_mtp_facet(DRAFT_SLOT TRUE draft_pos0 draft_n_past)
    _llama_mtp_facet(EMBD TRUE embd_nextn embd_pre_norm)
    # Optional facets: a tree without them loses a check or a capability, said at run time.
    _llama_mtp_facet(N_LAYER_NEXTN FALSE n_layer_nextn)
    _llama_mtp_facet(CTX_OTHER FALSE ctx_other)
    _llama_mtp_facet(DRAFT_BACKEND_SAMPLING FALSE draft_backend_sampling)
    # EAGLE-3, DFlash and DSpark drafts: their target layers, the target's layer-input capture and
    # a draft context sharing the target's tensors (without them those strategies are refused).
    _llama_mtp_facet(LAYER_DRAFTS FALSE layer_drafts)
    _llama_mtp_facet(DFLASH_SELECTOR FALSE dflash_selector)
    _llama_mtp_facet(OUTPUTS_PER_SEQ FALSE outputs_per_seq)
    if(LLAMA_MTP_UP_BATCH EQUAL 1)
        # Embedding rows (multimodal chunks) in the speculative batch: llama_mtp_process_embd.
        _llama_mtp_facet(BATCH_EMBD FALSE common_batch_embd)
    else()
        set(LLAMA_MTP_UP_BATCH_EMBD 0)
        list(APPEND LLAMA_MTP_UP_SUMMARY "BATCH_EMBD=none")
    endif()
    # The chat layer (optional: without it the chat entry points answer NOT_IN_RELEASE).
    set(LLAMA_MTP_PROBE_EXTRA_INCLUDES "${_llama_mtp_chat_includes}")
    _llama_mtp_facet(CHAT FALSE chat)
    if(LLAMA_MTP_UP_CHAT EQUAL 1)
        _llama_mtp_facet(CHAT_PARSER FALSE chat_parser_text chat_parser_arena)
        _llama_mtp_facet(CHAT_PARSER_REASONING FALSE chat_parser_reasoning)
        if(LLAMA_MTP_UP_CHAT_PARSER EQUAL 0)
            set(LLAMA_MTP_UP_CHAT 0)  # a parser the wrapper cannot hand on: no chat
            list(APPEND LLAMA_MTP_UP_SUMMARY "CHAT=off")
        endif()
    else()
        set(LLAMA_MTP_UP_CHAT_PARSER 0)
        set(LLAMA_MTP_UP_CHAT_PARSER_REASONING 0)
    endif()
    set(LLAMA_MTP_PROBE_EXTRA_INCLUDES "")
    if(WIN32)
        # llama_context's members are not exported from a Windows libllama.
        set(LLAMA_MTP_UP_N_OUTPUTS_MAX 0)
        list(APPEND LLAMA_MTP_UP_SUMMARY "N_OUTPUTS_MAX=not-on-windows")
    else()
        set(LLAMA_MTP_PROBE_EXTRA_INCLUDES "#include \"llama-context.h\"")
        _llama_mtp_facet(N_OUTPUTS_MAX FALSE n_outputs_max)
    endif()

    # Which strategy types common/common.h declares (a release without one refuses it with
    # LLAMA_MTP_STATUS_NOT_IN_RELEASE). The list is llama_mtp.h's; draft-mtp is left out, as
    # mtp_api_rule.txt requires it of every tree the wrapper is built for.
    file(READ "${llama_cpp_dir}/common/common.h" _common_h)
    set(_defs "")
    llama_mtp_strategy_suffixes(_types)
    list(REMOVE_ITEM _types DRAFT_MTP)
    foreach(_type IN LISTS _types)
        string(REGEX MATCH "COMMON_SPECULATIVE_TYPE_${_type}[ ,=]" _found "${_common_h}")
        if(_found)
            list(APPEND _defs "LLAMA_MTP_UP_HAVE_${_type}=1")
            list(APPEND LLAMA_MTP_UP_SUMMARY "${_type}=1")
        else()
            list(APPEND _defs "LLAMA_MTP_UP_HAVE_${_type}=0")
            list(APPEND LLAMA_MTP_UP_SUMMARY "${_type}=0")
        endif()
    endforeach()

    macro(_flag name value)
        if(${value} EQUAL 1)
            list(APPEND _defs "${name}=1")
        else()
            list(APPEND _defs "${name}=0")
        endif()
    endmacro()
    _flag(LLAMA_MTP_UP_COMMON_BATCH ${LLAMA_MTP_UP_BATCH})
    _flag(LLAMA_MTP_UP_PROCESS_API "${LLAMA_MTP_UP_BATCH}")
    _flag(LLAMA_MTP_UP_DRAFT_POS0 ${LLAMA_MTP_UP_DRAFT_SLOT})
    _flag(LLAMA_MTP_UP_EMBD_NEXTN ${LLAMA_MTP_UP_EMBD})
    _flag(LLAMA_MTP_UP_N_LAYER_NEXTN ${LLAMA_MTP_UP_N_LAYER_NEXTN})
    _flag(LLAMA_MTP_UP_CTX_OTHER ${LLAMA_MTP_UP_CTX_OTHER})
    _flag(LLAMA_MTP_UP_N_OUTPUTS_MAX ${LLAMA_MTP_UP_N_OUTPUTS_MAX})
    _flag(LLAMA_MTP_UP_DRAFT_BACKEND_SAMPLING ${LLAMA_MTP_UP_DRAFT_BACKEND_SAMPLING})
    _flag(LLAMA_MTP_UP_BATCH_EMBD ${LLAMA_MTP_UP_BATCH_EMBD})
    _flag(LLAMA_MTP_UP_LAYER_DRAFTS ${LLAMA_MTP_UP_LAYER_DRAFTS})
    _flag(LLAMA_MTP_UP_DFLASH_SELECTOR ${LLAMA_MTP_UP_DFLASH_SELECTOR})
    _flag(LLAMA_MTP_UP_OUTPUTS_PER_SEQ ${LLAMA_MTP_UP_OUTPUTS_PER_SEQ})
    _flag(LLAMA_MTP_UP_CHAT ${LLAMA_MTP_UP_CHAT})
    if(LLAMA_MTP_UP_CHAT_PARSER EQUAL 1)
        list(APPEND _defs "LLAMA_MTP_UP_CHAT_PARSER_TEXT=1")
    else()
        list(APPEND _defs "LLAMA_MTP_UP_CHAT_PARSER_TEXT=0")
    endif()
    _flag(LLAMA_MTP_UP_CHAT_PARSER_REASONING ${LLAMA_MTP_UP_CHAT_PARSER_REASONING})
    set(LLAMA_MTP_UP_CHAT ${LLAMA_MTP_UP_CHAT} PARENT_SCOPE)

    string(REPLACE ";" " " _summary "${LLAMA_MTP_UP_SUMMARY}")
    set(LLAMA_MTP_UP_DEFINITIONS "${_defs}" PARENT_SCOPE)
    set(LLAMA_MTP_UP_SUMMARY "${_summary}" PARENT_SCOPE)
    set(LLAMA_MTP_UP_FAILURE "${LLAMA_MTP_UP_FAILURE}" PARENT_SCOPE)
endfunction()
