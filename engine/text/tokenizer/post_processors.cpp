#include "engine/text/tokenizer/post_processors.h"

#include <algorithm>
#include <string>

namespace colibri::tokenizer_parts {

void PostProcessor::apply(std::vector<int32_t>& ids, size_t max_ids) const {
    switch (type) {
        case Type::ByteLevel:
            break;
        case Type::Template: {
            std::vector<int32_t> out;
            out.reserve(ids.size() + 4);
            for (const auto& [is_a, special] : single) {
                if (is_a) out.insert(out.end(), ids.begin(), ids.end());
                else out.insert(out.end(), special.begin(), special.end());
                if (out.size() > max_ids) throw LimitError("the post-processor multiplies the text's tokens past its limit");
            }
            ids.swap(out);
            break;
        }
        case Type::Bert:
            ids.insert(ids.begin(), cls.begin(), cls.end());
            ids.insert(ids.end(), sep.begin(), sep.end());
            break;
        case Type::Sequence:
            for (const auto& c : children) c.apply(ids, max_ids);
            break;
    }
}

PostProcessor parse_post_processor(const json& j, int depth) {
    if (depth > kMaxComponentDepth) too_deep("post_processor");
    const std::string t = type_of(j, "post_processor");
    PostProcessor p;
    using T = PostProcessor::Type;
    if (t == "ByteLevel") {
        p.type = T::ByteLevel;
    } else if (t == "TemplateProcessing") {
        p.type = T::Template;
        const json specials = j.contains("special_tokens") && j["special_tokens"].is_object() ? j["special_tokens"] : json::object();
        auto special_ids = [&](const std::string& name) {
            auto it = specials.find(name);
            if (it == specials.end() || !it->is_object() || !it->contains("ids") || !(*it)["ids"].is_array())
                fail("TemplateProcessing: missing special token '" + name + "'");
            std::vector<int32_t> ids;
            for (const auto& v : (*it)["ids"]) ids.push_back(json_id(v, "special token '" + name + "'"));
            return ids;
        };
        auto add_piece = [&](std::string s) {  // string form: "$A", "$B:1", "[CLS]:0"
            if (const size_t colon = s.rfind(':'); colon != std::string::npos && colon > 0) {
                const std::string tail = s.substr(colon + 1);
                if (!tail.empty() && std::all_of(tail.begin(), tail.end(), [](char c) { return c >= '0' && c <= '9'; }))
                    s = s.substr(0, colon);
            }
            if (!s.empty() && s[0] == '$') {
                const std::string rest = s.substr(1);
                if (rest == "B" || rest == "b") p.single.push_back({false, {}});  // no pair input here
                else p.single.push_back({true, {}});
            } else {
                p.single.push_back({false, special_ids(s)});
            }
        };
        if (!j.contains("single")) fail("TemplateProcessing needs 'single'");
        const json& single = j["single"];
        if (single.is_string()) {
            const std::string s = single.get<std::string>();
            size_t i = 0;
            while (i < s.size()) {
                while (i < s.size() && s[i] == ' ') ++i;
                size_t e = i;
                while (e < s.size() && s[e] != ' ') ++e;
                if (e > i) add_piece(s.substr(i, e - i));
                i = e;
            }
        } else if (single.is_array()) {
            for (const auto& piece : single) {
                if (piece.is_string()) {
                    add_piece(piece.get<std::string>());
                } else if (piece.is_object() && piece.contains("Sequence")) {
                    const std::string id = get_string(piece["Sequence"], "id", "A");
                    p.single.push_back({id == "A", {}});
                } else if (piece.is_object() && piece.contains("SpecialToken")) {
                    p.single.push_back({false, special_ids(get_string(piece["SpecialToken"], "id", ""))});
                } else {
                    fail("TemplateProcessing: unknown template piece");
                }
            }
        } else {
            fail("TemplateProcessing 'single' must be a string or an array");
        }
    } else if (t == "BertProcessing" || t == "RobertaProcessing") {
        p.type = T::Bert;
        auto pair_id = [&](const char* key) {
            if (!j.contains(key) || !j[key].is_array() || j[key].size() != 2) fail(t + " needs '" + key + "' as [token, id]");
            return json_id(j[key][1], t + " " + key);
        };
        p.cls = {pair_id("cls")};
        p.sep = {pair_id("sep")};
    } else if (t == "Sequence") {
        p.type = T::Sequence;
        for (const auto& c : get_array(j, "processors", "Sequence post-processor")) p.children.push_back(parse_post_processor(c, depth + 1));
    } else {
        fail("unsupported post_processor type '" + t + "'");
    }
    return p;
}

}  // namespace colibri::tokenizer_parts
