// llama.cpp's chat layer behind llama_mtp_chat_upstream.h: the only wrapper file that includes
// common/chat.h and common/json-schema-to-grammar.h.
//
// Variants (LLAMA_MTP_UP_* from upstream_probes.cmake, compile checks of the tree):
//   CHAT                   the chat layer the wrapper drives is there at all (else every call
//                          throws NOT_IN_RELEASE);
//   CHAT_PARSER_TEXT       common_chat_params.parser is the parser serialised as text, loaded into
//                          the parser parameters' arena (older trees); else it is the arena itself;
//   CHAT_PARSER_REASONING  the parser parameters carry the reasoning format and the tool-call
//                          switch (older trees; later ones bake both into the parser).
// The tree's JSON type (nlohmann::ordered_json, later common_json) and the parser's input type
// (std::string, later common_chat_input) are taken from its function declarations. The wrapper's
// own JSON (the request, the results) is nlohmann's, from the tree's vendor/ folder; upstream's
// values cross as JSON text.

#include "llama_mtp_chat_upstream.h"

#include <string>

#if LLAMA_MTP_UP_CHAT
#    include "chat.h"
#    include "json-schema-to-grammar.h"

#    include <map>
#    include <nlohmann/json.hpp>
#    include <type_traits>
#    include <utility>
#    include <vector>
#endif

namespace llama_mtp_chat_upstream {

#if LLAMA_MTP_UP_CHAT

using ojson = nlohmann::ordered_json;

namespace {

template <typename F> struct first_parameter;
template <typename R, typename A, typename... Rest> struct first_parameter<R (*)(A, Rest...)> {
    using type = std::decay_t<A>;
};
// the JSON type the tree's chat layer takes
using up_json = first_parameter<decltype(&common_chat_msgs_parse_oaicompat)>::type;
// what common_chat_parse reads the generated text from
using parse_input = first_parameter<decltype(&common_chat_parse)>::type;

up_json to_upstream(const ojson & value) {
    return up_json::parse(value.dump());
}

const char * trigger_type_name(common_grammar_trigger_type type) {
    switch (type) {
        case COMMON_GRAMMAR_TRIGGER_TYPE_TOKEN:        return "token";
        case COMMON_GRAMMAR_TRIGGER_TYPE_WORD:         return "word";
        case COMMON_GRAMMAR_TRIGGER_TYPE_PATTERN:      return "pattern";
        case COMMON_GRAMMAR_TRIGGER_TYPE_PATTERN_FULL: return "pattern_full";
    }
    return "unknown";
}

[[noreturn]] void invalid(const std::string & message) {
    throw error(LLAMA_MTP_STATUS_INVALID_ARGUMENT, message);
}

// A member of the request of the expected JSON kind, or nullptr when absent (null counts as
// absent); INVALID_ARGUMENT when it is of another kind.
const ojson * member(const ojson & request, const char * name, ojson::value_t kind) {
    auto it = request.find(name);
    if (it == request.end() || it->is_null()) {
        return nullptr;
    }
    const bool number = kind == ojson::value_t::number_integer;
    if (it->type() != kind && !(number && it->is_number_integer())) {
        invalid(std::string("chat request: \"") + name + "\" is a " + it->type_name());
    }
    return &*it;
}

bool flag(const ojson & request, const char * name, bool fallback) {
    const ojson * value = member(request, name, ojson::value_t::boolean);
    return value != nullptr ? value->get<bool>() : fallback;
}

std::string text_member(const ojson & request, const char * name) {
    const ojson * value = member(request, name, ojson::value_t::string);
    return value != nullptr ? value->get<std::string>() : std::string();
}

// The request's choices (tools, reasoning, schema) into the inputs; the messages are apart.
void read_options(const ojson & request, common_chat_templates_inputs & in) {
    if (const ojson * tools = member(request, "tools", ojson::value_t::array)) {
        in.tools = common_chat_tools_parse_oaicompat(to_upstream(*tools));
    }
    const std::string choice = text_member(request, "tool_choice");
    if (!choice.empty()) {
        in.tool_choice = common_chat_tool_choice_parse_oaicompat(choice);
    }
    in.parallel_tool_calls = flag(request, "parallel_tool_calls", false);
    const std::string reasoning = text_member(request, "reasoning_format");
    if (!reasoning.empty()) {
        in.reasoning_format = common_reasoning_format_from_name(reasoning);
    }
    in.enable_thinking = flag(request, "enable_thinking", true);
    in.add_generation_prompt = flag(request, "add_generation_prompt", true);
    if (const ojson * kwargs = member(request, "chat_template_kwargs", ojson::value_t::object)) {
        for (const auto & item : kwargs->items()) {
            in.chat_template_kwargs[item.key()] = item.value().dump();
        }
    }
    in.grammar = text_member(request, "grammar");
    if (const ojson * schema = member(request, "json_schema", ojson::value_t::object)) {
        if (!in.grammar.empty()) {
            invalid("chat request: give \"grammar\" or \"json_schema\", not both");
        }
        (void) schema_to_grammar(schema->dump());  // SCHEMA_ERROR before rendering
        in.json_schema = schema->dump();
    }
}

ojson result_of(const common_chat_params & params) {
    ojson triggers = ojson::array();
    for (const auto & trigger : params.grammar_triggers) {
        triggers.push_back({{"type", trigger_type_name(trigger.type)},
                            {"value", trigger.value},
                            {"token", trigger.token}});
    }
    return {
        {"prompt", params.prompt},
        {"grammar", params.grammar},
        {"grammar_lazy", params.grammar_lazy},
        {"grammar_triggers", triggers},
        {"preserved_tokens", params.preserved_tokens},
        {"additional_stops", params.additional_stops},
        {"format", common_chat_format_name(params.format)},
        {"generation_prompt", params.generation_prompt},
        {"supports_thinking", params.supports_thinking},
    };
}

}  // namespace

class templates {
  public:
    common_chat_templates_ptr ptr;
};

class rendered {
  public:
    common_chat_parser_params parser;
};

bool supported() {
    return true;
}

namespace {

// Why `source` does not parse: llama.cpp's own message. common_chat_templates_init logs it and
// rethrows a copy sliced to std::exception, so the template is parsed again to get it.
std::string parse_failure(const std::string & source, const char * fallback) {
    try {
        common_chat_template again(source, "", "");
    } catch (const std::exception & e) {
        return e.what();
    }
    return fallback;
}

}  // namespace

std::unique_ptr<templates> templates_init(const llama_model * model, const char * template_text) {
    auto out = std::make_unique<templates>();
    try {
        out->ptr = common_chat_templates_init(model, template_text != nullptr ? template_text : "");
    } catch (const std::exception & e) {
        const char * src = template_text;
        if (src == nullptr && model != nullptr) {
            src = llama_model_chat_template(model, nullptr);
        }
        const std::string why = src != nullptr ? parse_failure(src, e.what()) : e.what();
        throw error(LLAMA_MTP_STATUS_TEMPLATE_ERROR, "chat template: " + why);
    }
    if (!out->ptr) {
        throw error(LLAMA_MTP_STATUS_TEMPLATE_ERROR, "chat template: llama.cpp made none");
    }
    return out;
}

std::string templates_info(const templates & tmpls) {
    ojson caps = ojson::object();
    for (const auto & [name, value] : common_chat_templates_get_caps(tmpls.ptr.get())) {
        caps[name] = static_cast<bool>(value);
    }
    ojson info = {
        {"source", common_chat_templates_source(tmpls.ptr.get())},
        {"caps", caps},
        {"supports_thinking", common_chat_templates_support_enable_thinking(tmpls.ptr.get())},
    };
    return info.dump();
}

std::unique_ptr<rendered> apply(const templates & tmpls, const std::string & request_json,
                                std::string & result_json) {
    const ojson request = ojson::parse(request_json, nullptr, false);
    if (request.is_discarded() || !request.is_object()) {
        invalid("chat request: not a JSON object");
    }
    common_chat_templates_inputs in;
    in.use_jinja = true;
    try {
        const ojson * messages = member(request, "messages", ojson::value_t::array);
        if (messages == nullptr) {
            invalid("chat request: \"messages\" is missing");
        }
        in.messages = common_chat_msgs_parse_oaicompat(to_upstream(*messages));
        read_options(request, in);
    } catch (const error &) {
        throw;
    } catch (const std::exception & e) {
        invalid(std::string("chat request: ") + e.what());
    }
    common_chat_params params;
    try {
        params = common_chat_templates_apply(tmpls.ptr.get(), in);
    } catch (const std::exception & e) {
        throw error(LLAMA_MTP_STATUS_TEMPLATE_ERROR, std::string("chat template: ") + e.what());
    }
    auto out = std::make_unique<rendered>();
    out->parser = common_chat_parser_params(params);
#    if LLAMA_MTP_UP_CHAT_PARSER_TEXT
    if (!params.parser.empty()) {
        out->parser.parser.load(params.parser);
    }
#    else
    out->parser.parser = params.parser;
#    endif
#    if LLAMA_MTP_UP_CHAT_PARSER_REASONING
    out->parser.reasoning_format = in.reasoning_format;
    out->parser.parse_tool_calls = !in.tools.empty();
#    endif
    result_json = result_of(params).dump();
    return out;
}

std::string parse(const rendered & chat, const std::string & text, bool is_partial) {
    common_chat_msg msg;
    try {
        msg = common_chat_parse(parse_input(text), is_partial, chat.parser);
    } catch (const std::exception & e) {
        throw error(LLAMA_MTP_STATUS_PARSE_ERROR, std::string("chat parse: ") + e.what());
    }
    ojson calls = ojson::array();
    for (const auto & call : msg.tool_calls) {
        calls.push_back({{"id", call.id}, {"name", call.name}, {"arguments", call.arguments}});
    }
    ojson out = {
        {"role", msg.role.empty() ? std::string("assistant") : msg.role},
        {"content", msg.content},
        {"reasoning_content", msg.reasoning_content},
        {"tool_calls", calls},
    };
    return out.dump();
}

std::string schema_to_grammar(const std::string & schema_json) {
    up_json schema;
    try {
        schema = up_json::parse(schema_json);
    } catch (const std::exception & e) {
        throw error(LLAMA_MTP_STATUS_SCHEMA_ERROR, std::string("JSON schema: not JSON: ") + e.what());
    }
    try {
        return json_schema_to_grammar(schema);
    } catch (const std::exception & e) {
        throw error(LLAMA_MTP_STATUS_SCHEMA_ERROR, std::string("JSON schema: ") + e.what());
    }
}

void destroy(templates * tmpls) {
    delete tmpls;
}

void destroy(rendered * chat) {
    delete chat;
}

#else  // no chat layer in this tree

class templates {};
class rendered {};

namespace {
[[noreturn]] void absent() {
    throw error(LLAMA_MTP_STATUS_NOT_IN_RELEASE,
                "the llama.cpp release this library was built from has no chat layer the "
                "wrapper can drive (common/chat.h: see the build's probe summary)");
}
}  // namespace

bool supported() {
    return false;
}

std::unique_ptr<templates> templates_init(const llama_model *, const char *) {
    absent();
}

std::string templates_info(const templates &) {
    absent();
}

std::unique_ptr<rendered> apply(const templates &, const std::string &, std::string &) {
    absent();
}

std::string parse(const rendered &, const std::string &, bool) {
    absent();
}

std::string schema_to_grammar(const std::string &) {
    absent();
}

void destroy(templates * tmpls) {
    delete tmpls;
}

void destroy(rendered * chat) {
    delete chat;
}

#endif

}  // namespace llama_mtp_chat_upstream
