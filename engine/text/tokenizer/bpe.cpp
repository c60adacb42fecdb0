#include "engine/text/tokenizer/bpe.h"

#include <algorithm>
#include <cstdio>
#include <queue>

#include "engine/text/tokenizer/json_reader.h"
#include "engine/text/utf8.h"

namespace colibri::tokenizer_parts {

void Bpe::merge_word(std::string_view w, std::vector<int32_t>& out) const {
    std::vector<Symbol> syms;
    syms.reserve(w.size());
    auto add = [&](int32_t id, uint32_t len) {
        const int32_t n = static_cast<int32_t>(syms.size());
        if (!syms.empty()) syms.back().next = n;
        syms.push_back({id, n - 1, -1, len});
    };
    bool have_unk = false;
    uint32_t unk_len = 0;
    std::string tmp;
    for (size_t i = 0; i < w.size();) {
        const size_t n = std::min(utf8_sequence_length(static_cast<unsigned char>(w[i])), w.size() - i);
        const bool first = i == 0, last = i + n == w.size();
        std::string_view s = w.substr(i, n);
        if ((!first && prefix) || (last && suffix)) {
            tmp.clear();
            if (!first && prefix) tmp += *prefix;
            tmp.append(s);
            if (last && suffix) tmp += *suffix;
            s = tmp;
        }
        const int32_t id = find(s);
        if (id >= 0) {
            if (have_unk) {
                add(unk_id, unk_len);
                have_unk = false;
            }
            add(id, static_cast<uint32_t>(n));
        } else {
            bool done = false;
            if (byte_fallback) {
                bool all = true;
                for (unsigned char b : s)
                    if (byte_ids[b] < 0) { all = false; break; }
                if (all) {
                    for (unsigned char b : s) add(byte_ids[b], 1);
                    done = true;
                }
            }
            if (!done && unk_id >= 0) {
                if (have_unk && fuse_unk) {
                    unk_len += static_cast<uint32_t>(n);
                } else {
                    if (have_unk) add(unk_id, unk_len);
                    have_unk = true;
                    unk_len = static_cast<uint32_t>(n);
                }
            }
        }
        i += n;
    }
    if (have_unk) add(unk_id, unk_len);

    std::priority_queue<Merge> queue;
    uint32_t rank;
    int32_t nid;
    for (size_t i = 0; i + 1 < syms.size(); ++i)
        if (merges.get(syms[i].id, syms[i + 1].id, &rank, &nid)) queue.push({rank, static_cast<int32_t>(i), nid});
    while (!queue.empty()) {
        const Merge top = queue.top();
        queue.pop();
        Symbol& cur = syms[top.pos];
        if (cur.len == 0 || cur.next < 0) continue;
        const int32_t next_pos = cur.next;
        const Symbol right = syms[next_pos];
        if (!merges.get(cur.id, right.id, &rank, &nid) || nid != top.new_id) continue;
        cur.id = top.new_id;
        cur.len += right.len;
        cur.next = right.next;
        syms[next_pos].len = 0;
        if (right.next >= 0) syms[right.next].prev = top.pos;
        if (cur.prev >= 0 && merges.get(syms[cur.prev].id, cur.id, &rank, &nid)) queue.push({rank, cur.prev, nid});
        if (cur.next >= 0 && merges.get(cur.id, syms[cur.next].id, &rank, &nid)) queue.push({rank, top.pos, nid});
    }
    for (const auto& s : syms)
        if (s.len != 0) out.push_back(s.id);
}

void Bpe::tokenize(std::string_view w, std::vector<int32_t>& out) const {
    if (w.empty()) return;
    if (ignore_merges) {
        const int32_t id = find(w);
        if (id >= 0) {
            out.push_back(id);
            return;
        }
    }
    const bool cacheable = w.size() < kCacheMaxWordLen;
    if (cacheable) {
        std::lock_guard<std::mutex> lock(cache_mu);
        auto it = cache.find(w);
        if (it != cache.end()) {
            out.insert(out.end(), it->second.begin(), it->second.end());
            return;
        }
    }
    const size_t before = out.size();
    merge_word(w, out);
    if (cacheable) {
        std::lock_guard<std::mutex> lock(cache_mu);
        if (cache.size() < kCacheCapacity) cache.emplace(std::string(w), std::vector<int32_t>(out.begin() + before, out.end()));
    }
}

namespace {

int32_t checked_id(int64_t id, bool integer, const std::string& what) {
    if (!integer) fail(what + " must be an integer id");
    if (id < 0 || id >= 0x7FFFFFFF) fail(what + " has an out-of-range id " + std::to_string(id));  // id + 1 fits int32
    return static_cast<int32_t>(id);
}

}  // namespace

void parse_bpe(const json& m, StreamedModel& st, Bpe& bpe) {
    if (m.contains("type") && !(m["type"].is_string() && m["type"].get<std::string>() == "BPE")) {
        const std::string t = m["type"].is_string() ? m["type"].get<std::string>() : std::string("?");
        fail("unsupported model type '" + t + "' (only BPE is supported)");
    }
    if (!st.have_vocab) fail("model has no 'vocab' object");
    if (!st.have_merges) fail("model has no 'merges' array");

    bpe.vocab.reserve(st.vocab.size());
    int32_t max_id = -1;
    for (const auto& e : st.vocab) {
        const int32_t id = checked_id(e.id, e.integer, "vocab entry '" + e.piece + "'");
        bpe.vocab.assign(e.piece, id);
        max_id = std::max(max_id, id);
    }
    st.vocab = {};
    if (static_cast<size_t>(max_id) > 4 * bpe.vocab.size() + (1u << 20))
        fail("vocab ids are far from dense (largest id " + std::to_string(max_id) + " for " +
             std::to_string(bpe.vocab.size()) + " pieces)");
    bpe.vocab_r.assign(static_cast<size_t>(max_id + 1), std::string());
    bpe.has_id.assign(static_cast<size_t>(max_id + 1), 0);
    bpe.vocab.for_each([&](std::string_view piece, int32_t id) {
        bpe.vocab_r[id] = piece;
        bpe.has_id[id] = 1;
    });

    if (m.contains("continuing_subword_prefix") && m["continuing_subword_prefix"].is_string())
        bpe.prefix = m["continuing_subword_prefix"].get<std::string>();
    if (m.contains("end_of_word_suffix") && m["end_of_word_suffix"].is_string())
        bpe.suffix = m["end_of_word_suffix"].get<std::string>();
    if (bpe.prefix && bpe.prefix->empty()) bpe.prefix.reset();
    if (bpe.suffix && bpe.suffix->empty()) bpe.suffix.reset();
    bpe.fuse_unk = get_bool(m, "fuse_unk", false);
    bpe.byte_fallback = get_bool(m, "byte_fallback", false);
    bpe.ignore_merges = get_bool(m, "ignore_merges", false);
    const std::string unk = get_string(m, "unk_token", "");
    if (!unk.empty()) bpe.unk_id = bpe.find(unk);
    for (int b = 0; b < 256; ++b) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        bpe.byte_ids[b] = bpe.find(name);
    }

    const size_t prefix_len = bpe.prefix ? bpe.prefix->size() : 0;
    bpe.merges.reserve(st.merges.size());
    std::string merged;
    uint32_t rank = 0;
    for (const auto& e : st.merges) {
        std::string_view a, b;
        if (e.form == StreamedModel::MergeEntry::Line) {
            const std::string_view line = st.text(e.a, e.a_len);
            const size_t sp = line.find(' ');
            if (sp == std::string::npos || line.find(' ', sp + 1) != std::string::npos)
                fail("merge " + std::to_string(rank + 1) + " ('" + std::string(line) + "') is not two tokens separated by one space");
            a = line.substr(0, sp);
            b = line.substr(sp + 1);
        } else if (e.form == StreamedModel::MergeEntry::Pair) {
            a = st.text(e.a, e.a_len);
            b = st.text(e.b, e.b_len);
        } else {
            fail("merge " + std::to_string(rank + 1) + " is neither \"a b\" nor [\"a\", \"b\"]");
        }
        const int32_t ia = bpe.find(a), ib = bpe.find(b);
        if (ia < 0 || ib < 0) fail("merge " + std::to_string(rank + 1) + " uses a token missing from the vocabulary");
        merged.assign(a);
        if (b.size() >= prefix_len) merged.append(b.substr(prefix_len));
        const int32_t in = bpe.find(merged);
        if (in < 0) fail("merge " + std::to_string(rank + 1) + " makes a token missing from the vocabulary");
        bpe.merges.put(ia, ib, rank, in);
        ++rank;
    }
    st.merges = {};
    st.merge_text = {};
}

}  // namespace colibri::tokenizer_parts
