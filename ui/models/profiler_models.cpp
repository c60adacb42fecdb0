#include "ui/models/profiler_models.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

namespace colibri::studio {

QString compact_number(double v) {
    const double a = std::fabs(v);
    if (a >= 1e9) return QString::number(v / 1e9, 'f', 2) + QStringLiteral(" G");
    if (a >= 1e6) return QString::number(v / 1e6, 'f', 2) + QStringLiteral(" M");
    if (a >= 1e4) return QString::number(v / 1e3, 'f', 1) + QStringLiteral(" k");
    return QString::number(v, 'f', a < 10 && v != std::floor(v) ? 2 : 0);
}

namespace {

// A counter's mean, or "not measured" where no token of the row had its counters read (NaN): counting off is
// not zero page faults.
TableColumn counter_column(const QString& header, std::function<double(int row)> mean) {
    return {header,
            [mean](int row) {
                const double v = mean(row);
                return QVariant(std::isnan(v) ? QObject::tr("not measured") : compact_number(v));
            },
            [mean](int row) {
                const double v = mean(row);
                return QVariant(std::isnan(v) ? -1.0 : v);
            },
            Qt::AlignRight | Qt::AlignVCenter,
            [mean](int row) {
                return std::isnan(mean(row)) ? QVariant(QObject::tr("counting was off for these tokens: choose “per layer” to measure"))
                                             : QVariant();
            }};
}

}  // namespace

LayerProfileModel::LayerProfileModel(QObject* parent) : TableModel(parent) { declare_columns(); }

// The stage columns, then one per counter of the loaded model's CounterSet.
void LayerProfileModel::declare_columns() {
    auto stage = [this](const QString& header, int column) { return number(header, [this, column](int row) { return mean_us(row, column); }, 1); };
    std::vector<TableColumn> columns{{tr("layer"), [this](int row) { return QVariant(totals_.layers[static_cast<size_t>(row)]); }},
                                stage(tr("attention µs"), Attention),
                                stage(tr("router µs"), Router),
                                stage(tr("experts µs"), Experts),
                                stage(tr("total µs"), Total),
                                stage(tr("counter reads µs"), CounterReads)};
    for (int i = 0; i < counters_.size(); ++i)
        columns.push_back(counter_column(tr("%1 / token").arg(counters_[i]), [this, i](int row) { return mean_counter(row, i); }));
    if (steps_) {
        const char* names[kDeltaNetSteps] = {QT_TR_NOOP("in proj µs"), QT_TR_NOOP("conv µs"), QT_TR_NOOP("gates µs"),
                                              QT_TR_NOOP("delta rule µs"), QT_TR_NOOP("gated norm µs"), QT_TR_NOOP("out proj µs")};
        for (size_t i = 0; i < kDeltaNetSteps; ++i) {
            const auto step = static_cast<DeltaNetStep>(i);
            // Blank for a full-attention layer: it has no such step.
            const auto linear = [this](int row) {
                const auto& ns = totals_.per_layer[static_cast<size_t>(row)].deltanet_ns;
                return std::any_of(ns.begin(), ns.end(), [](uint64_t v) { return v > 0; });
            };
            columns.push_back({tr(names[i]),
                               [this, step, linear](int row) { return linear(row) ? QVariant(QString::number(mean_step_us(row, step), 'f', 1)) : QVariant(); },
                               [this, step](int row) { return QVariant(mean_step_us(row, step)); }});
        }
    }
    if (baseline_ != nullptr) {
        // "—" for a layer the baseline lacks (another model), rather than a change from nothing.
        const auto missing = [] { return QVariant(QStringLiteral("—")); };
        columns.push_back({tr("baseline µs"),
                           [this, missing](int row) {
                               const double b = baseline_total_us(row);
                               return std::isnan(b) ? missing() : QVariant(QString::number(b, 'f', 1));
                           },
                           [this](int row) {
                               const double b = baseline_total_us(row);
                               return QVariant(std::isnan(b) ? -1.0 : b);
                           },
                           Qt::AlignRight | Qt::AlignVCenter,
                           [this](int) { return QVariant(tr("Total µs per token in this layer in the baseline: %1").arg(baseline_->label())); }});
        const auto change = [this](int row) {
            const double b = baseline_total_us(row);
            return std::isnan(b) || b <= 0 ? std::numeric_limits<double>::quiet_NaN() : mean_us(row, Total) / b - 1.0;
        };
        columns.push_back({tr("change"),
                           [change, missing](int row) {
                               const double c = change(row);
                               return std::isnan(c) ? missing() : QVariant(percent_change(c));
                           },
                           [change](int row) {
                               const double c = change(row);
                               return QVariant(std::isnan(c) ? 0.0 : c);
                           },
                           Qt::AlignRight | Qt::AlignVCenter,
                           [](int) { return QVariant(tr("This profile's total against the baseline's: negative is faster")); }});
    }
    set_columns(std::move(columns));
}

void LayerProfileModel::set_baseline(const ProfileSnapshot* baseline) {
    beginResetModel();
    baseline_ = baseline;
    declare_columns();
    endResetModel();
}

double LayerProfileModel::baseline_total_us(int row) const {
    if (baseline_ == nullptr || row < 0 || row >= rowCount()) return std::numeric_limits<double>::quiet_NaN();
    const ProfileLayer* l = baseline_->layer(totals_.layers[static_cast<size_t>(row)]);
    return l != nullptr ? l->total_us() : std::numeric_limits<double>::quiet_NaN();
}

void LayerProfileModel::set_deltanet_steps(bool on) {
    if (on == steps_) return;
    beginResetModel();
    steps_ = on;
    declare_columns();
    endResetModel();
}

double LayerProfileModel::mean_step_us(int row, DeltaNetStep step) const {
    if (row < 0 || row >= rowCount()) return 0.0;
    const StageTotals& s = totals_.per_layer[static_cast<size_t>(row)];
    return s.tokens > 0 ? static_cast<double>(s.deltanet_ns[static_cast<size_t>(step)]) / s.tokens / 1e3 : 0.0;
}

void LayerProfileModel::set_counter_names(const QStringList& names) {
    beginResetModel();
    counters_ = names;
    totals_ = {};
    declare_columns();
    endResetModel();
}

void LayerProfileModel::set_totals(const ProfileTotals& totals) {
    beginResetModel();
    totals_ = totals;
    endResetModel();
}

double LayerProfileModel::mean_us(int row, int column) const {
    if (row < 0 || row >= rowCount()) return 0.0;
    const StageTotals& s = totals_.per_layer[static_cast<size_t>(row)];
    if (s.tokens == 0) return 0.0;
    uint64_t ns = 0;
    switch (column) {
    case Attention: ns = s.attention_ns; break;
    case Router: ns = s.router_ns; break;
    case Experts: ns = s.experts_ns; break;
    case Total: ns = s.attention_ns + s.router_ns + s.experts_ns; break;
    case CounterReads: ns = s.counter_ns; break;
    default: return 0.0;
    }
    return static_cast<double>(ns) / s.tokens / 1e3;
}

double LayerProfileModel::mean_counter(int row, int counter) const {
    if (row < 0 || row >= rowCount() || counter < 0 || counter >= counters_.size()) return 0.0;
    const StageTotals& s = totals_.per_layer[static_cast<size_t>(row)];
    // Over the tokens counted only: with counting switched on part-way, the others would halve the mean.
    if (s.counted_tokens == 0) return std::numeric_limits<double>::quiet_NaN();
    return static_cast<size_t>(counter) < s.counters.size() ? static_cast<double>(s.counters[static_cast<size_t>(counter)]) / s.counted_tokens : 0.0;
}

bool LayerProfileModel::counters_measured() const {
    return std::any_of(totals_.per_layer.begin(), totals_.per_layer.end(), [](const StageTotals& s) { return s.counted_tokens > 0; });
}

ExpertCounterModel::ExpertCounterModel(QObject* parent) : TableModel(parent) { declare_columns(); }

void ExpertCounterModel::declare_columns() {
    auto e = [this](int row) -> const ExpertTotals& { return rows_[static_cast<size_t>(row)]; };
    std::vector<TableColumn> columns{{tr("layer"), [e](int row) { return QVariant(e(row).layer); }},
                                {tr("expert"), [e](int row) { return QVariant(e(row).expert); }},
                                {tr("activations"), [e](int row) { return QVariant(e(row).activations); }}};
    for (int i = 0; i < counters_.size(); ++i)
        columns.push_back(counter_column(tr("%1 / activation").arg(counters_[i]), [e, c = static_cast<size_t>(i)](int row) {
            const ExpertTotals& t = e(row);
            if (t.counted_activations == 0) return std::numeric_limits<double>::quiet_NaN();
            return c < t.counters.size() ? static_cast<double>(t.counters[c]) / t.counted_activations : 0.0;
        }));
    set_columns(std::move(columns));
}

void ExpertCounterModel::set_counter_names(const QStringList& names) {
    beginResetModel();
    counters_ = names;
    rows_.clear();
    declare_columns();
    endResetModel();
}

void ExpertCounterModel::set_totals(const ProfileTotals& totals) {
    beginResetModel();
    rows_ = totals.per_expert;
    endResetModel();
}

TokenTimeModel::TokenTimeModel(QObject* parent) : TableModel(parent) {
    auto time = [this](const QString& header, int column) { return number(header, [this, column](int row) { return us(row, column); }, 1); };
    set_columns({{tr("position"), [this](int row) { return QVariant(trace(row).position); }},
                 text(tr("token"),
                      [this](int row) {
                          QString text = trace(row).text;
                          text.replace(QLatin1Char('\n'), QStringLiteral("↵"));
                          return QVariant(text);
                      }),
                 {tr("kind"), [this](int row) { return QVariant(trace(row).generated ? tr("generated") : tr("prompt")); }},
                 time(tr("attention µs"), Attention),
                 time(tr("router µs"), Router),
                 time(tr("experts µs"), Experts),
                 time(tr("lm head µs"), LmHead),
                 time(tr("sampling µs"), Sampling),
                 time(tr("counters µs"), Counters),
                 time(tr("other µs"), Other),
                 time(tr("total µs"), Total)});
}

QVariant TokenTimeModel::other_data(int row, int, int role) const { return role == PositionRole ? QVariant(trace(row).position) : QVariant(); }

void TokenTimeModel::set_tokens(const Conversation& c, const TokenSpan& span) {
    beginResetModel();
    rows_.clear();
    for (const ConversationToken& t : c.tokens()) {
        if (!span.contains(t)) continue;
        TokenTrace copy;
        copy.position = t.trace.position;
        copy.token = t.trace.token;
        copy.text = t.trace.text;
        copy.generated = t.trace.generated;
        copy.layers = t.trace.layers;
        for (LayerProfile& l : copy.layers) l.counters.clear();
        copy.lm_head_ns = t.trace.lm_head_ns;
        copy.sampling_ns = t.trace.sampling_ns;
        copy.step_ns = t.trace.step_ns;
        copy.counted = t.trace.counted;
        rows_.push_back(std::move(copy));
    }
    endResetModel();
}

double TokenTimeModel::us(int row, int column) const {
    if (row < 0 || row >= rowCount()) return 0.0;
    const TokenTime t = rows_[static_cast<size_t>(row)].time();
    uint64_t ns = 0;
    switch (column) {
    case Attention: ns = t.attention; break;
    case Router: ns = t.router; break;
    case Experts: ns = t.experts; break;
    case LmHead: ns = t.lm_head; break;
    case Sampling: ns = t.sampling; break;
    case Counters: ns = t.counters; break;
    case Other: ns = t.other(); break;
    case Total: ns = t.total; break;
    default: return 0.0;
    }
    return static_cast<double>(ns) / 1e3;
}

}  // namespace colibri::studio
