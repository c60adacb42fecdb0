#include "engine/core/model.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cmath>

#include "engine/file/file_rules.h"
#include "engine/file/schema.h"

namespace colibri {

using namespace format;

namespace {

bool is_matrix_type(WeightType t) { return weight_type_known(static_cast<uint32_t>(t)) && weight_type_info(t).matrix; }

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
    // The cache reads experts from the file, which a swap does not change.
    if (expert_cache_) return error("expert hot-swap needs the whole model mapped (no --ram-budget)");
    if (layer >= hparams().n_layers || !layers_[layer].is_moe) return error("layer " + std::to_string(layer) + " has no experts");
    if (expert >= layers_[layer].experts.size()) return error(target + " does not exist");
    const FfnWeights& w = layers_[layer].experts[expert];
    // The three projections, and gpt_oss's biases with them.
    const std::pair<const char*, const TensorView*> projections[] = {{"gate", w.gate},           {"up", w.up},
                                                                     {"down", w.down},           {"gate_bias", w.gate_bias},
                                                                     {"up_bias", w.up_bias},     {"down_bias", w.down_bias}};
    const int count = w.gate_bias ? 6 : 3;
    const TensorView* sources[6] = {};
    for (int i = 0; i < count; ++i) {
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
    for (int i = 0; i < count; ++i) {
        const TensorView* t = projections[i].second;
        COLIBRI_TRY(file_->overwrite_section(t->section, t->offset, sources[i]->data, t->size));
    }
    return Status::ok();
}

Status Model::use_expert_cache(const ExpertCacheConfig& config) {
    if (expert_cache_) return error("the model already has an expert cache");
    auto cache = ExpertCache::create(*this, config);
    if (!cache) return cache.status();
    expert_cache_ = std::move(cache.value());
    // Experts are no longer used through the mapping: neither read-ahead nor 2 MiB folios (mapped_file.cpp)
    // should bring their pages in. Only their sections are advised so: what every token uses keeps its 2 MiB
    // pages (fewer page walks for the attention and the lm head) and is read ahead now, in large reads, instead
    // of page by page on first use (a 16-token prompt of the Qwen3-30B-A3B shape took 180,000 major faults with
    // the whole mapping advised random). Advice only; failure changes nothing. (A .bin.zst's image is anonymous
    // memory, decompressed already: nothing to advise.)
    if (!file_->compressed()) {
        uint8_t* base = const_cast<uint8_t*>(file_->data());
        const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
        const auto sections = file_->sections();
        std::vector<uint8_t> is_expert(sections.size(), 0);
        for (const format::ExpertEntry& e : file_->experts())
            if (e.section < sections.size()) is_expert[e.section] = 1;
        for (size_t i = 0; i < sections.size(); ++i) {
            const uint64_t begin = sections[i].offset / page * page;
            const uint64_t end = std::min<uint64_t>((sections[i].offset + sections[i].size + page - 1) / page * page, file_->size());
            if (end <= begin) continue;
            if (is_expert[i]) {
                madvise(base + begin, end - begin, MADV_NOHUGEPAGE);
                madvise(base + begin, end - begin, MADV_RANDOM);
            } else {
                madvise(base + begin, end - begin, MADV_WILLNEED);
            }
        }
    }
    return Status::ok();
}

Status Model::ensure_expert(uint32_t layer, uint32_t expert) const {
    const FfnWeights& w = layers_[layer].experts[expert];
    for (const TensorView* t : {w.gate, w.up, w.down}) COLIBRI_TRY(file_->ensure_section(t->section));
    return Status::ok();
}

const TensorView** Model::slot(const schema::TensorSpec& spec) {
    using schema::Role;
    LayerWeights* w = spec.layer < layers_.size() ? &layers_[spec.layer] : nullptr;
    FfnWeights* expert = w && spec.expert < w->experts.size() ? &w->experts[spec.expert] : nullptr;
    switch (spec.role) {
        case Role::Embed: return &embed_;
        case Role::OutputNorm: return &output_norm_;
        case Role::LmHead: return &lm_head_;
        default: break;
    }
    if (w == nullptr) return nullptr;
    switch (spec.role) {
        case Role::AttnNorm: return &w->attn_norm;
        case Role::Q: return &w->q;
        case Role::K: return &w->k;
        case Role::V: return &w->v;
        case Role::O: return &w->o;
        case Role::QBias: return &w->q_bias;
        case Role::KBias: return &w->k_bias;
        case Role::VBias: return &w->v_bias;
        case Role::OBias: return &w->o_bias;
        case Role::QNorm: return &w->q_norm;
        case Role::KNorm: return &w->k_norm;
        case Role::Sinks: return &w->sinks;
        case Role::QA: return &w->q_a;
        case Role::QANorm: return &w->q_a_norm;
        case Role::KvA: return &w->kv_a;
        case Role::KvANorm: return &w->kv_a_norm;
        case Role::KB: return &w->k_b;
        case Role::VB: return &w->v_b;
        case Role::RouterBias: return &w->router_bias;
        case Role::SelectionBias: return &w->selection_bias;
        case Role::ExpertGateBias: return expert ? &expert->gate_bias : nullptr;
        case Role::ExpertUpBias: return expert ? &expert->up_bias : nullptr;
        case Role::ExpertDownBias: return expert ? &expert->down_bias : nullptr;
        case Role::FfnNorm: return &w->ffn_norm;
        case Role::Router: return &w->router;
        case Role::SharedExpertGate: return &w->shared_expert_gate;
        case Role::ExpertGate: return expert ? &expert->gate : nullptr;
        case Role::ExpertUp: return expert ? &expert->up : nullptr;
        case Role::ExpertDown: return expert ? &expert->down : nullptr;
        case Role::SharedGate: return &w->shared_expert.gate;
        case Role::SharedUp: return &w->shared_expert.up;
        case Role::SharedDown: return &w->shared_expert.down;
        case Role::DenseGate: return &w->dense.gate;
        case Role::DenseUp: return &w->dense.up;
        case Role::DenseDown: return &w->dense.down;
        case Role::QGate: return &w->q_gate;
        case Role::LinQkv: return &w->lin_qkv;
        case Role::LinZ: return &w->lin_z;
        case Role::LinBeta: return &w->lin_beta;
        case Role::LinAlpha: return &w->lin_alpha;
        case Role::LinConv: return &w->lin_conv;
        case Role::LinDtBias: return &w->lin_dt_bias;
        case Role::LinSsmA: return &w->lin_ssm_a;
        case Role::LinNorm: return &w->lin_norm;
        case Role::MtpEnorm: return &w->mtp_enorm;
        case Role::MtpHnorm: return &w->mtp_hnorm;
        case Role::MtpEhProj: return &w->mtp_eh_proj;
        case Role::MtpNorm: return &w->mtp_norm;
        default: return nullptr;
    }
}

void Model::decide_rules() {
    const HyperParams& hp = hparams();
    // Mixtral always renormalises its top-k; qwen2_moe and olmoe only with norm_topk_prob.
    RoutingRules& r = rules_.routing;
    r.renormalise = family() == Family::Mixtral || (hp.flags & kNormTopkProb);
    r.scoring = static_cast<RouterScoring>(hp.router_scoring);
    r.scaling = hp.routed_scaling > 0.0f ? hp.routed_scaling : 1.0f;
    r.n_group = hp.n_group > 1 ? hp.n_group : 1;
    r.topk_group = hp.n_group > 1 ? hp.topk_group : 1;
    r.selection_bias = (hp.flags & kSelectionBias) != 0;
    AttentionRules& a = rules_.attention;
    a.qk_norm = !(hp.flags & kQkNorm) ? QkNorm::None : (hp.flags & kQkNormPerHead) ? QkNorm::PerHead : QkNorm::WholeProjection;
    a.clip_qkv = hp.clip_qkv;
    a.rope_style = (hp.flags & kRopePairs) ? RopeStyle::Pairs : RopeStyle::Halves;
    a.rotary_dim = hp.rotary_dim ? hp.rotary_dim : hp.head_dim;
    a.sliding_window = hp.sliding_window;
    a.sinks = (hp.flags & kAttentionSinks) != 0;
    a.mla = hp.kv_lora_rank != 0;
    a.q_lora_rank = hp.q_lora_rank;
    a.kv_lora_rank = hp.kv_lora_rank;
    a.v_head_dim = hp.v_head_dim;
    a.output_gate = (hp.flags & kAttentionOutputGate) != 0;
    a.linear_tiled = (hp.flags & kLinearValueTiled) != 0;
    rules_.shared_expert_gated = (hp.flags & kSharedExpert) && !(hp.flags & kSharedExpertUngated);
    rules_.swiglu_limit = hp.swiglu_limit;
    rules_.mtp_chain_normed = family() == Family::Qwen3Next || family() == Family::Qwen35Moe;
}

Status check_context(const Model& model, uint32_t context) {
    const uint32_t max_position = model.hparams().max_position;
    if (context > max_position)
        return error("context " + std::to_string(context) + " exceeds the model's maximum of " + std::to_string(max_position));
    return Status::ok();
}

Status check_token_ids(const Model& model, std::span<const int32_t> ids) {
    const uint32_t vocab = model.hparams().vocab_size;
    for (int32_t t : ids)
        if (t < 0 || static_cast<uint32_t>(t) >= vocab)
            return error("token id " + std::to_string(t) + " out of range (vocabulary " + std::to_string(vocab) + ")");
    return Status::ok();
}

uint32_t Model::moe_layer_count() const {
    uint32_t n = 0;
    for (const LayerWeights& l : layers()) n += l.is_moe ? 1 : 0;
    return n;
}

PlacementShape Model::placement_shape() const {
    PlacementShape shape;
    shape.n_experts = hparams().n_experts;
    for (const LayerWeights& l : layers()) shape.moe.push_back(l.is_moe);
    return shape;
}

uint64_t Model::fingerprint() const {
    const format::FileHeader& h = file_->header();
    return h.metadata_xxh64 ^ (h.file_size * 0x9E3779B97F4A7C15ull);
}

Status Model::bind() {
    const HyperParams& hp = hparams();
    const std::vector<bool> layer_is_moe = moe_layers(file_->tables());
    // The tensors against the family's schema, as `colibri check` sees them (engine/file/file_rules.h): the first problem
    // is the error.
    FirstProblem first;
    const std::vector<schema::TensorSpec> expected = expected_tensors(file_->tables(), first.sink());
    if (!first.text.empty()) return error(first.text);
    std::vector<bool> tensor_ok(file_->tensors().size(), true);
    check_tensor_set(file_->tables(), expected, file_->tensor_index(), file_->section_names(), first.sink(), &tensor_ok);
    if (!first.text.empty()) return error(first.text);

    Binder b(*file_);
    layers_.resize(layer_is_moe.size());  // n_layers + mtp_layers (expected_tensors checked the table's size)
    for (uint32_t l = 0; l < layers_.size(); ++l) {
        layers_[l].is_moe = layer_is_moe[l];
        layers_[l].sliding = (file_->layers()[l].is_moe & kLayerSliding) != 0;
        if (layer_is_moe[l]) layers_[l].experts.resize(hp.n_experts);
    }
    for (const schema::TensorSpec& spec : expected) {
        // Expert tensors of a .bin.zst are decompressed on first use (Session::moe); everything else must be
        // readable from the start, whatever section a (hostile) file puts it in.
        b.set_lazy(spec.section == SectionKind::Expert);
        const TensorView** place = slot(spec);
        if (place == nullptr) return error("tensor " + spec.name + " has no place in the model");
        *place = spec.kind == schema::Kind::Vector ? b.vector(spec.name, spec.rows) : b.matrix(spec.name, spec.rows, spec.cols);
        if (!b.status()) return b.status();
    }
    if (hp.flags & kTiedEmbeddings) lm_head_ = embed_;
    decide_rules();
    for (uint32_t l = 0; l < layers_.size(); ++l)
        layers_[l].mixer = schema::is_linear_layer(hp, l) ? TokenMixer::GatedDeltaNet
                           : rules_.attention.mla         ? TokenMixer::LatentAttention
                                                          : TokenMixer::Attention;

    rope_ = rope_table(hp, rules_.attention.rotary_dim);

    const std::string_view tok_json = file_->section_text(SectionKind::TokenizerJson);
    if (!tok_json.empty()) {
        auto tok = Tokenizer::from_json(tok_json, file_->section_text(SectionKind::TokenizerConfig));
        if (!tok) return error("embedded tokenizer: " + tok.message());
        // An id past the embedding would read outside it.
        if (const std::string p = tokenizer_fit_problem(tok->vocab_size(), hp.vocab_size); !p.empty()) return error("embedded tokenizer: " + p);
        tokenizer_.emplace(std::move(tok.value()));
    }
    chat_template_ = std::string(file_->section_text(SectionKind::ChatTemplate));
    auto defaults = parse_generation_defaults(file_->section_text(SectionKind::GenerationConfig));
    if (!defaults) return error("generation config: " + defaults.message());
    generation_defaults_ = defaults.value();
    return Status::ok();
}

}  // namespace colibri
