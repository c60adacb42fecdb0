#include "model.h"

#include <cmath>

namespace colibri {

using namespace format;

namespace {

bool is_matrix_type(WeightType t) {
    return t == WeightType::F32 || t == WeightType::F16 || t == WeightType::BF16 || t == WeightType::Q8_0 ||
           t == WeightType::Q4_K || t == WeightType::Q4_0;
}

class Binder {
public:
    explicit Binder(const ModelFile& f) : file_(f) {}

    // A 2-d weight [rows, cols] in any matrix type.
    const TensorView* matrix(const std::string& name, uint64_t rows, uint64_t cols) {
        const TensorView* t = get(name);
        if (t == nullptr) return nullptr;
        if (t->n_dims != 2 || t->rows != rows || t->cols != cols)
            return fail(name, "has shape " + shape(*t) + ", expected [" + std::to_string(rows) + ", " + std::to_string(cols) + "]");
        if (!is_matrix_type(t->type)) return fail(name, std::string("has unsupported weight type ") + weight_type_name(t->type));
        return t;
    }
    // A 1-d f32 vector (norm weights, biases).
    const TensorView* vector(const std::string& name, uint64_t n) {
        const TensorView* t = get(name);
        if (t == nullptr) return nullptr;
        if (t->n_dims != 1 || t->rows != n)
            return fail(name, "has shape " + shape(*t) + ", expected [" + std::to_string(n) + "]");
        if (t->type != WeightType::F32) return fail(name, "must be f32");
        return t;
    }
    bool has(const std::string& name) const { return file_.find_tensor(name) != nullptr; }
    // Expert tensors of a .bin.zst are decompressed on first use (Session::moe); everything else the model
    // binds must be readable from the start, whatever section a (hostile) file puts it in.
    void set_lazy(bool lazy) { lazy_ = lazy; }
    const Status& status() const { return status_; }

private:
    const TensorView* get(const std::string& name) {
        if (!status_) return nullptr;
        const TensorView* t = file_.find_tensor(name);
        if (t == nullptr) return fail(name, "is missing");
        if (!lazy_) {
            if (Status s = file_.ensure_section(t->section); !s) {
                status_ = s;
                return nullptr;
            }
        }
        return t;
    }
    const TensorView* fail(const std::string& name, const std::string& why) {
        if (status_) status_ = error("tensor " + name + " " + why);
        return nullptr;
    }
    static std::string shape(const TensorView& t) {
        return t.n_dims == 1 ? "[" + std::to_string(t.rows) + "]"
                             : "[" + std::to_string(t.rows) + ", " + std::to_string(t.cols) + "]";
    }
    const ModelFile& file_;
    Status status_;
    bool lazy_ = false;
};

FfnWeights bind_ffn(Binder& b, const std::string& prefix, uint64_t hidden, uint64_t ffn) {
    FfnWeights w;
    w.gate = b.matrix(prefix + ".gate", ffn, hidden);
    w.up = b.matrix(prefix + ".up", ffn, hidden);
    w.down = b.matrix(prefix + ".down", hidden, ffn);
    return w;
}

}  // namespace

Result<std::unique_ptr<Model>> Model::load(const std::string& path) {
    auto file = ModelFile::open(path);
    if (!file) return file.status();
    std::unique_ptr<Model> model(new Model());
    model->file_ = std::move(file.value());
    if (Status s = model->bind(); !s) return error(path + ": " + s.message());
    return model;
}

Status Model::swap_expert(uint32_t layer, uint32_t expert, const ModelFile& donor, uint32_t donor_layer,
                          uint32_t donor_expert) {
    const std::string target = "expert L" + std::to_string(layer) + " E" + std::to_string(expert);
    if (layer >= layers_.size() || !layers_[layer].is_moe) return error("layer " + std::to_string(layer) + " has no experts");
    if (expert >= layers_[layer].experts.size()) return error(target + " does not exist");
    const FfnWeights& w = layers_[layer].experts[expert];
    const std::pair<const char*, const TensorView*> projections[] = {{"gate", w.gate}, {"up", w.up}, {"down", w.down}};
    const TensorView* sources[3] = {};
    for (int i = 0; i < 3; ++i) {
        const auto& [proj, t] = projections[i];
        const std::string name = tensor_names::expert(donor_layer, donor_expert, proj);
        const TensorView* d = donor.find_tensor(name);
        if (d == nullptr) return error(donor.path() + ": tensor " + name + " is missing");
        if (d->type != t->type || d->rows != t->rows || d->cols != t->cols)
            return error(donor.path() + ": tensor " + name + " is " + weight_type_name(d->type) + " [" +
                         std::to_string(d->rows) + ", " + std::to_string(d->cols) + "], " + target + " needs " +
                         weight_type_name(t->type) + " [" + std::to_string(t->rows) + ", " + std::to_string(t->cols) + "]");
        COLIBRI_TRY(donor.ensure_section(d->section));
        if (!donor.verify_section(d->section))
            return error(donor.path() + ": section " + donor.section_label(d->section) + " checksum mismatch");
        sources[i] = d;
    }
    std::unique_lock lock(swap_lock_);
    for (int i = 0; i < 3; ++i) {
        const TensorView* t = projections[i].second;
        COLIBRI_TRY(file_->overwrite_section(t->section, t->offset, sources[i]->data, t->size));
    }
    return Status::ok();
}

Status Model::ensure_expert(uint32_t layer, uint32_t expert) const {
    const FfnWeights& w = layers_[layer].experts[expert];
    for (const TensorView* t : {w.gate, w.up, w.down}) COLIBRI_TRY(file_->ensure_section(t->section));
    return Status::ok();
}

uint32_t Model::moe_layer_count() const {
    uint32_t n = 0;
    for (const LayerWeights& l : layers_) n += l.is_moe ? 1 : 0;
    return n;
}

Status Model::bind() {
    const HyperParams& hp = hparams();
    const Family fam = family();
    if (fam != Family::Mixtral && fam != Family::Qwen2Moe && fam != Family::Olmoe)
        return error("unknown architecture family " + std::to_string(file_->header().family));
    if (hp.hidden_size == 0 || hp.n_heads == 0 || hp.n_kv_heads == 0 || hp.head_dim == 0 || hp.vocab_size == 0)
        return error("hyper-parameters are incomplete (zero hidden size, heads or vocabulary)");
    if (hp.n_heads % hp.n_kv_heads != 0) return error("n_heads is not a multiple of n_kv_heads");
    if (hp.head_dim % 2 != 0) return error("head_dim must be even for RoPE");
    if (hp.n_experts_active == 0 || hp.n_experts_active > hp.n_experts)
        return error("active experts (" + std::to_string(hp.n_experts_active) + ") out of range for " +
                     std::to_string(hp.n_experts) + " experts");
    if (!(hp.rms_eps > 0.0f) || !(hp.rope_theta > 0.0f)) return error("rms_eps and rope_theta must be positive");
    if (file_->layers().size() != hp.n_layers) return error("layer table size does not match n_layers");

    Binder b(*file_);
    const uint64_t H = hp.hidden_size, q_dim = uint64_t(hp.n_heads) * hp.head_dim, kv_dim = uint64_t(hp.n_kv_heads) * hp.head_dim;
    embed_ = b.matrix("embed", hp.vocab_size, H);
    output_norm_ = b.vector("output_norm", H);
    lm_head_ = (hp.flags & kTiedEmbeddings) ? embed_ : b.matrix("lm_head", hp.vocab_size, H);

    layers_.resize(hp.n_layers);
    for (uint32_t l = 0; l < hp.n_layers; ++l) {
        LayerWeights& w = layers_[l];
        auto name = [l](std::string_view what) { return tensor_names::layer(l, what); };
        w.attn_norm = b.vector(name("attn_norm"), H);
        w.q = b.matrix(name("attn.q"), q_dim, H);
        w.k = b.matrix(name("attn.k"), kv_dim, H);
        w.v = b.matrix(name("attn.v"), kv_dim, H);
        w.o = b.matrix(name("attn.o"), H, q_dim);
        if (hp.flags & kQkvBias) {
            w.q_bias = b.vector(name("attn.q_bias"), q_dim);
            w.k_bias = b.vector(name("attn.k_bias"), kv_dim);
            w.v_bias = b.vector(name("attn.v_bias"), kv_dim);
        }
        if (hp.flags & kQkNorm) {
            w.q_norm = b.vector(name("attn.q_norm"), q_dim);
            w.k_norm = b.vector(name("attn.k_norm"), kv_dim);
        }
        w.ffn_norm = b.vector(name("ffn_norm"), H);
        w.is_moe = file_->layers()[l].is_moe != 0;
        if (w.is_moe) {
            w.router = b.matrix(name("router"), hp.n_experts, H);
            w.experts.resize(hp.n_experts);
            b.set_lazy(true);
            for (uint32_t e = 0; e < hp.n_experts; ++e)
                w.experts[e] = bind_ffn(b, "layers." + std::to_string(l) + ".experts." + std::to_string(e), H, hp.expert_ffn);
            b.set_lazy(false);
            if (hp.flags & kSharedExpert) {
                w.shared_expert = bind_ffn(b, name("shared_expert"), H, hp.shared_expert_ffn);
                w.shared_expert_gate = b.matrix(name("shared_expert_gate"), 1, H);
            }
        } else {
            if (hp.dense_ffn == 0) return error("layer " + std::to_string(l) + " is dense but dense_ffn is 0");
            w.dense = bind_ffn(b, name("mlp"), H, hp.dense_ffn);
        }
        if (!b.status()) break;
    }
    if (!b.status()) return b.status();
    // Sizes that no bound tensor vouches for must be zero: the session sizes its buffers from them.
    bool any_dense = false;
    for (const LayerWeights& w : layers_) any_dense |= !w.is_moe;
    if (!any_dense && hp.dense_ffn != 0) return error("dense_ffn is set but no layer is dense");
    if (!(hp.flags & kSharedExpert) && hp.shared_expert_ffn != 0) return error("shared_expert_ffn is set but there is no shared expert");

    inv_freq_.resize(hp.head_dim / 2);
    for (uint32_t i = 0; i < hp.head_dim / 2; ++i)  // float32 as transformers computes it
        inv_freq_[i] = 1.0f / std::pow(hp.rope_theta, static_cast<float>(2 * i) / static_cast<float>(hp.head_dim));

    const std::string_view tok_json = file_->section_text(SectionKind::TokenizerJson);
    if (!tok_json.empty()) {
        auto tok = Tokenizer::from_json(tok_json, file_->section_text(SectionKind::TokenizerConfig));
        if (!tok) return error("embedded tokenizer: " + tok.message());
        tokenizer_.emplace(std::move(tok.value()));
    }
    chat_template_ = std::string(file_->section_text(SectionKind::ChatTemplate));
    return Status::ok();
}

}  // namespace colibri
