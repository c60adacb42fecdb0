#include "engine/text/tokenizer/pattern.h"

#include <algorithm>
#include <cstring>

namespace colibri::tokenizer_parts {

void Pattern::find_matches(std::string_view s, std::vector<Seg>& out) const {
    if (s.empty()) {
        out.push_back({0, 0, false});
        return;
    }
    if (!is_regex && literal.empty()) {
        out.push_back({0, s.size(), false});
        return;
    }
    size_t prev = 0;
    auto emit = [&](size_t st, size_t en) {
        if (prev != st) out.push_back({prev, st, false});
        out.push_back({st, en, true});
        prev = en;
    };
    if (is_regex) {
        std::vector<std::pair<size_t, size_t>> ms;
        re->find_iter(s, ms);
        for (auto [st, en] : ms) emit(st, en);
    } else {
        size_t pos = 0;
        while (pos + literal.size() <= s.size()) {  // memmem: linear whatever the literal (std::find is not)
            const void* at = memmem(s.data() + pos, s.size() - pos, literal.data(), literal.size());
            if (!at) break;
            pos = static_cast<size_t>(static_cast<const char*>(at) - s.data());
            emit(pos, pos + literal.size());
            pos += literal.size();
        }
    }
    if (prev != s.size()) out.push_back({prev, s.size(), false});
}

Pattern parse_pattern(const json& j, const char* where) {
    if (!j.is_object()) fail(std::string(where) + ": pattern must be an object with String or Regex");
    Pattern p;
    if (j.contains("String") && j["String"].is_string()) {
        p.literal = j["String"].get<std::string>();
    } else if (j.contains("Regex") && j["Regex"].is_string()) {
        p.is_regex = true;
        p.re = std::make_shared<Regex>(j["Regex"].get<std::string>());
    } else {
        fail(std::string(where) + ": pattern must have a String or Regex field");
    }
    return p;
}

Behavior parse_behavior(const json& j) {
    const std::string b = j.is_string() ? j.get<std::string>() : std::string();
    if (b == "Removed") return Behavior::Removed;
    if (b == "Isolated") return Behavior::Isolated;
    if (b == "MergedWithPrevious") return Behavior::MergedWithPrevious;
    if (b == "MergedWithNext") return Behavior::MergedWithNext;
    if (b == "Contiguous") return Behavior::Contiguous;
    fail("unknown split behavior '" + b + "'");
}

// Rewrites `segs` into the pieces to keep; Seg::m then marks a piece to remove.
void apply_behavior(std::vector<Seg>& segs, Behavior beh) {
    std::vector<Seg> acc;
    acc.reserve(segs.size());
    bool previous = false;
    switch (beh) {
        case Behavior::Isolated:
            for (auto& s : segs) s.m = false;
            return;
        case Behavior::Removed:
            return;
        case Behavior::Contiguous:
            for (const auto& s : segs) {
                if (s.m == previous && !acc.empty()) acc.back().e = s.e;
                else acc.push_back({s.b, s.e, false});
                previous = s.m;
            }
            break;
        case Behavior::MergedWithPrevious:
            for (const auto& s : segs) {
                if (s.m && !previous && !acc.empty()) acc.back().e = s.e;
                else acc.push_back({s.b, s.e, false});
                previous = s.m;
            }
            break;
        case Behavior::MergedWithNext:
            for (auto it = segs.rbegin(); it != segs.rend(); ++it) {
                if (it->m && !previous && !acc.empty()) acc.back().b = it->b;
                else acc.push_back({it->b, it->e, false});
                previous = it->m;
            }
            std::reverse(acc.begin(), acc.end());
            break;
    }
    segs.swap(acc);
}

}  // namespace colibri::tokenizer_parts
