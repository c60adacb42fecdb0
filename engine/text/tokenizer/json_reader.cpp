#include "engine/text/tokenizer/json_reader.h"

#include <utility>

namespace colibri::tokenizer_parts {

namespace {

using json = nlohmann::json;

// nlohmann::json SAX handler: builds the document as json values, except model.vocab (an object) and model.merges
// (an array), which go to a StreamedModel. The nesting (and a NUL byte) is refused by json_text_problem before parsing.
class TokenizerJsonReader {
public:
    explicit TokenizerJsonReader(StreamedModel& model) : model_(model) {}
    json& root() { return root_; }
    const std::string& error_message() const { return error_; }

    bool null() { return scalar(json(nullptr)); }
    bool boolean(bool v) { return scalar(json(v)); }
    bool number_integer(json::number_integer_t v) {
        if (mode_ == Mode::Vocab) return vocab_value(static_cast<int64_t>(v), true);
        return scalar(json(v));
    }
    bool number_unsigned(json::number_unsigned_t v) {
        if (mode_ == Mode::Vocab) return vocab_value(v > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(v), true);
        return scalar(json(v));
    }
    bool number_float(json::number_float_t v, const json::string_t&) { return scalar(json(v)); }
    bool binary(json::binary_t&) { return scalar(json(nullptr)); }
    bool string(json::string_t& v) {
        switch (mode_) {
            case Mode::Merges: {
                StreamedModel::MergeEntry e;
                e.form = StreamedModel::MergeEntry::Line;
                e.a = model_.merge_text.size();
                e.a_len = v.size();
                model_.merge_text += v;
                model_.merges.push_back(e);
                return true;
            }
            case Mode::MergePair: {
                StreamedModel::MergeEntry& e = model_.merges.back();
                if (pair_items_ < 2) {
                    (pair_items_ == 0 ? e.a : e.b) = model_.merge_text.size();
                    (pair_items_ == 0 ? e.a_len : e.b_len) = v.size();
                    model_.merge_text += v;
                }
                ++pair_items_;
                return true;
            }
            default: return scalar(json(std::move(v)));
        }
    }
    bool key(json::string_t& k) {
        if (mode_ == Mode::Vocab) vocab_key_ = std::move(k);
        else if (mode_ == Mode::Dom) key_ = std::move(k);
        return true;
    }
    bool start_object(std::size_t) {
        if (mode_ == Mode::Dom && at_model() && key_ == "vocab") {
            model_.have_vocab = true;
            model_.vocab.clear();
            mode_ = Mode::Vocab;
            return true;
        }
        if (mode_ != Mode::Dom) return skip_container();
        open(json::object());
        return true;
    }
    bool start_array(std::size_t) {
        if (mode_ == Mode::Dom && at_model() && key_ == "merges") {
            model_.have_merges = true;
            model_.merges.clear();
            mode_ = Mode::Merges;
            return true;
        }
        if (mode_ == Mode::Merges) {
            model_.merges.emplace_back().form = StreamedModel::MergeEntry::Pair;
            pair_items_ = 0;
            mode_ = Mode::MergePair;
            return true;
        }
        if (mode_ != Mode::Dom) return skip_container();
        open(json::array());
        return true;
    }
    bool end_object() { return close(); }
    bool end_array() {
        if (mode_ == Mode::MergePair) {
            if (pair_items_ != 2) model_.merges.back().form = StreamedModel::MergeEntry::Bad;
            mode_ = Mode::Merges;
            return true;
        }
        return close();
    }
    bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) {
        error_ = e.what();
        return false;
    }

private:
    enum class Mode { Dom, Vocab, Merges, MergePair, Skip };

    // Inside model (the object under the root's "model" key), waiting for a member's value.
    bool at_model() const { return stack_.size() == 2 && stack_[1] == model_obj_; }

    json* add(json v) {
        if (stack_.empty()) {
            root_ = std::move(v);
            return &root_;
        }
        json& parent = *stack_.back();
        if (parent.is_object()) {
            const bool is_model = stack_.size() == 1 && key_ == "model";
            if (is_model) model_ = StreamedModel{};  // a repeated model member starts afresh
            if (at_model() && (key_ == "vocab" || key_ == "merges"))  // a later plain value replaces a streamed one
                (key_ == "vocab" ? model_.have_vocab : model_.have_merges) = false;
            json& slot = parent[key_];
            slot = std::move(v);
            if (is_model) model_obj_ = slot.is_object() ? &slot : nullptr;
            return &slot;
        }
        parent.push_back(std::move(v));
        return &parent.back();
    }
    bool scalar(json v) {
        switch (mode_) {
            case Mode::Vocab: return vocab_value(0, false);
            case Mode::Merges: model_.merges.emplace_back(); return true;
            case Mode::MergePair: model_.merges.back().form = StreamedModel::MergeEntry::Bad; return true;
            case Mode::Skip: return true;
            case Mode::Dom: add(std::move(v)); return true;
        }
        return true;
    }
    bool vocab_value(int64_t id, bool integer) {
        model_.vocab.push_back({std::move(vocab_key_), id, integer});
        vocab_key_.clear();
        return true;
    }
    void open(json v) { stack_.push_back(add(std::move(v))); }
    bool close() {
        switch (mode_) {
            case Mode::Vocab:
            case Mode::Merges: mode_ = Mode::Dom; return true;
            case Mode::Skip:
                if (--skip_depth_ == 0) mode_ = skip_from_;
                return true;
            default: break;
        }
        if (!stack_.empty()) stack_.pop_back();
        return true;
    }
    // A value inside vocab or merges that is itself an object or array: wrong, and its contents are skipped.
    bool skip_container() {
        if (mode_ == Mode::Skip) {
            ++skip_depth_;
            return true;
        }
        if (mode_ == Mode::Vocab) vocab_value(0, false);
        else if (mode_ == Mode::Merges) model_.merges.emplace_back();
        else if (mode_ == Mode::MergePair) model_.merges.back().form = StreamedModel::MergeEntry::Bad;
        skip_from_ = mode_;
        skip_depth_ = 1;
        mode_ = Mode::Skip;
        return true;
    }

    StreamedModel& model_;
    json root_;
    std::vector<json*> stack_;  // the open containers of the document (their parents do not grow while they are open)
    std::string key_, vocab_key_, error_;
    Mode mode_ = Mode::Dom, skip_from_ = Mode::Dom;
    int skip_depth_ = 0;
    int pair_items_ = 0;
    const json* model_obj_ = nullptr;  // the root's "model" object (std::map nodes do not move)
};

}  // namespace

bool read_tokenizer_json(std::string_view text, json* root, StreamedModel* model, std::string* error) {
    TokenizerJsonReader reader(*model);
    if (!json::sax_parse(text.begin(), text.end(), &reader)) {
        *error = reader.error_message();
        return false;
    }
    *root = std::move(reader.root());
    return true;
}

}  // namespace colibri::tokenizer_parts
