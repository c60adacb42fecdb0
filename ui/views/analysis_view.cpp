#include "ui/views/analysis_view.h"

#include <QComboBox>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QJsonDocument>
#include <QLabel>
#include <QPainter>
#include <QProgressBar>
#include <QPushButton>
#include <QSplitter>
#include <QTabWidget>
#include <QTableView>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <functional>

#include "ui/colors.h"
#include "ui/views/bar_chart.h"
#include "ui/views/elided_label.h"
#include "ui/views/heatmap_view.h"

namespace colibri::studio {

namespace {

using Cell = StatsTableModel::Cell;
using Format = StatsTableModel::Format;

QTableView* table_for(QAbstractItemModel* m, bool sortable = true) {
    auto* t = new QTableView;
    t->setModel(m);
    t->setSortingEnabled(false);
    (void)sortable;
    t->verticalHeader()->setDefaultSectionSize(t->fontMetrics().height() + 6);
    t->horizontalHeader()->setStretchLastSection(true);
    t->setMinimumSize(120, 60);
    // Columns as wide as their header and contents (a narrow pane scrolls rather than clipping "same first choice").
    QObject::connect(m, &QAbstractItemModel::modelReset, t, [t] { t->resizeColumnsToContents(); });
    return t;
}

// A tab's page: its controls, a line of text under them, and the body taking the rest.
QWidget* page(QLayout* controls, QWidget* line, QWidget* body) {
    auto* w = new QWidget;
    auto* l = new QVBoxLayout(w);
    l->setContentsMargins(0, 0, 0, 0);
    l->setSpacing(3);
    l->addLayout(controls);
    l->addWidget(line);
    l->addWidget(body, 1);
    return w;
}

// A note that wraps onto as many lines as it needs rather than ending in "…".
QLabel* note(const QString& text = {}) {
    auto* l = new QLabel(text);
    l->setWordWrap(true);
    l->setTextInteractionFlags(Qt::TextSelectableByMouse);
    return l;
}

// An axis title written bottom to top beside a table's rows.
class VerticalTitle : public QWidget {
public:
    explicit VerticalTitle(const QString& text) : text_(text) { setToolTip(text); }
    const QString& text() const { return text_; }
    QSize sizeHint() const override { return {fontMetrics().height() + 4, fontMetrics().horizontalAdvance(text_) + 8}; }
    QSize minimumSizeHint() const override { return {fontMetrics().height() + 4, 20}; }

protected:
    void paintEvent(QPaintEvent*) override {
        QPainter p(this);
        p.translate(0, height());
        p.rotate(-90);
        p.drawText(QRect(0, 0, height(), width()), Qt::AlignCenter, fontMetrics().elidedText(text_, Qt::ElideRight, height()));
    }

private:
    QString text_;
};

QWidget* column(std::initializer_list<QWidget*> widgets, QLayout* top = nullptr) {
    auto* w = new QWidget;
    auto* l = new QVBoxLayout(w);
    l->setContentsMargins(0, 0, 0, 0);
    l->setSpacing(3);
    if (top) l->addLayout(top);
    for (QWidget* x : widgets) l->addWidget(x, x == *widgets.begin() && top == nullptr ? 0 : 1);
    return w;
}

QString shown(const QString& text) {
    QString t = text;
    t.replace(QLatin1Char('\n'), QStringLiteral("↵"));
    return QStringLiteral("“%1”").arg(t);
}

QString experts_text(const std::vector<int32_t>& e) {
    QStringList parts;
    for (int32_t x : e) parts << QStringLiteral("E%1").arg(x);
    return parts.join(QStringLiteral(", "));
}

}  // namespace

AnalysisView::AnalysisView(Conversation* conversation, QWidget* parent) : QWidget(parent), conversation_(conversation) {
    tabs_ = new QTabWidget;
    tabs_->setDocumentMode(true);

    // Co-activation.
    co_layer_ = new QComboBox;
    co_layer_->setObjectName(QStringLiteral("coactivation_layer"));
    co_mode_ = new QComboBox;
    co_mode_->addItem(tr("tokens choosing both"));
    co_mode_->addItem(tr("P(column chosen | row chosen)"));
    connect(co_layer_, &QComboBox::currentIndexChanged, this, &AnalysisView::show_coactivation);
    connect(co_mode_, &QComboBox::currentIndexChanged, this, &AnalysisView::show_coactivation);
    co_table_ = table_for(&coactivation_, false);
    co_table_->horizontalHeader()->setStretchLastSection(false);
    co_table_->horizontalHeader()->setDefaultSectionSize(46);
    co_summary_ = note();
    co_legend_ = new HeatLegend;
    co_legend_->setObjectName(QStringLiteral("coactivation_legend"));
    co_legend_caption_ = note();
    co_legend_caption_->setObjectName(QStringLiteral("coactivation_legend_caption"));
    co_legend_caption_->setMaximumWidth(110);
    co_x_title_ = new QLabel(tr("column: the expert chosen with it"));
    co_x_title_->setObjectName(QStringLiteral("coactivation_x_title"));
    co_x_title_->setAlignment(Qt::AlignCenter);
    auto* co_y_title = new VerticalTitle(tr("row: the expert chosen"));
    co_y_title->setObjectName(QStringLiteral("coactivation_y_title"));
    co_y_title_ = tr("row: the expert chosen");
    auto* co_top = new QHBoxLayout;
    co_top->addWidget(new QLabel(tr("layer")));
    co_top->addWidget(co_layer_);
    co_top->addWidget(co_mode_);
    co_top->addStretch();
    auto* co_grid = new QGridLayout;
    co_grid->setContentsMargins(0, 0, 0, 0);
    co_grid->setSpacing(2);
    co_grid->addWidget(co_x_title_, 0, 1);
    co_grid->addWidget(co_y_title, 1, 0);
    co_grid->addWidget(co_table_, 1, 1);
    auto* legend_column = new QVBoxLayout;
    legend_column->addWidget(co_legend_caption_);
    legend_column->addWidget(co_legend_, 1);
    co_grid->addLayout(legend_column, 1, 2);
    co_grid->setColumnStretch(1, 1);
    co_grid->setRowStretch(1, 1);
    auto* co_matrix = new QWidget;
    co_matrix->setLayout(co_grid);
    tabs_->addTab(page(co_top, co_summary_, co_matrix), tr("Co-activation"));

    // Top tokens per expert.
    top_layer_ = new QComboBox;
    top_layer_->setObjectName(QStringLiteral("top_tokens_layer"));
    connect(top_layer_, &QComboBox::currentIndexChanged, this, &AnalysisView::show_top_tokens);
    auto* top_top = new QHBoxLayout;
    top_top->addWidget(new QLabel(tr("layer")));
    top_top->addWidget(top_layer_);
    top_top->addWidget(note(tr("the tokens each expert receives most (any of its top-k), and the share of that token's occurrences")), 1);
    tabs_->addTab(column({table_for(&top_tokens_)}, top_top), tr("Top tokens"));

    // Consecutive tokens.
    repetition_chart_ = new BarChart;
    repetition_chart_->setObjectName(QStringLiteral("repetition_chart"));
    repetition_chart_->set_axis_title(tr("% of consecutive token pairs"));
    repetition_chart_->set_x_axis_title(tr("layer"));
    repetition_chart_->set_value_format([](double v) { return QString::number(v, 'f', 1); });
    repetition_note_ = note();
    auto* rep_split = new QSplitter(Qt::Horizontal);
    rep_split->addWidget(table_for(&repetition_));
    rep_split->addWidget(repetition_chart_);
    tabs_->addTab(column({repetition_note_, rep_split}), tr("Consecutive tokens"));

    // Next-layer predictability.
    predictability_chart_ = new BarChart;
    predictability_chart_->setObjectName(QStringLiteral("predictability_chart"));
    predictability_chart_->set_axis_title(tr("% of tokens"));
    predictability_chart_->set_x_axis_title(tr("layer → next layer"));
    predictability_chart_->set_value_format([](double v) { return QString::number(v, 'f', 1); });
    auto* pred_split = new QSplitter(Qt::Horizontal);
    pred_split->addWidget(table_for(&predictability_));
    pred_split->addWidget(predictability_chart_);
    auto* pred_note = note(tr("Guess: the most frequent successor of this layer's first choice (fitted on these tokens); "
                                         "baseline: always the next layer's most frequent expert."));
    tabs_->addTab(column({pred_note, pred_split}), tr("Next layer"));

    // Comparison with another run.
    compare_model_ = new QPushButton(tr("With another model…"));
    compare_model_->setToolTip(tr("This conversation's tokens through another model file (another quantisation, say)"));
    compare_conversation_ = new QPushButton(tr("With a saved conversation…"));
    compare_conversation_->setToolTip(tr("A conversation saved with Chat ▸ Save conversation, through the loaded model"));
    compare_cancel_ = new QPushButton(tr("Cancel"));
    compare_cancel_->setEnabled(false);
    compare_progress_ = new QProgressBar;
    compare_progress_->setMaximumWidth(120);
    compare_progress_->setRange(0, 1);
    compare_progress_->setValue(0);
    compare_status_ = note(tr("Compare this conversation's routing with another model's on the same tokens, or with another conversation."));
    compare_status_->setObjectName(QStringLiteral("comparison_status"));
    connect(compare_model_, &QPushButton::clicked, this, [this] {
        const QString path = QFileDialog::getOpenFileName(this, tr("Compare with another model"), QString(), tr("Colibri models (*.bin *.bin.zst)"));
        if (!path.isEmpty()) compare_with_model(path);
    });
    connect(compare_conversation_, &QPushButton::clicked, this, [this] {
        const QString path = QFileDialog::getOpenFileName(this, tr("Compare with a saved conversation"), QString(), tr("Conversations (*.json)"));
        if (path.isEmpty()) return;
        if (Status s = compare_with_conversation(path); !s) compare_status_->setText(QString::fromStdString(s.message()));
    });
    connect(compare_cancel_, &QPushButton::clicked, this, &AnalysisView::cancel_comparison);
    connect(&replayer_, &Replayer::progress, this, [this](int done, int total) {
        compare_progress_->setRange(0, std::max(total, 1));
        compare_progress_->setValue(done);
    });
    connect(&replayer_, &Replayer::finished, this, &AnalysisView::show_comparison);
    comparison_chart_ = new BarChart;
    comparison_chart_->setObjectName(QStringLiteral("comparison_chart"));
    comparison_chart_->set_axis_title(tr("% of positions"));
    comparison_chart_->set_x_axis_title(tr("layer"));
    comparison_chart_->set_value_format([](double v) { return QString::number(v, 'f', 1); });
    auto* cmp_top = new QHBoxLayout;
    cmp_top->addWidget(compare_model_);
    cmp_top->addWidget(compare_conversation_);
    cmp_top->addWidget(compare_cancel_);
    cmp_top->addWidget(compare_progress_);
    cmp_top->addStretch();
    auto* cmp_split = new QSplitter(Qt::Horizontal);
    cmp_split->addWidget(table_for(&agreement_));
    cmp_split->addWidget(comparison_chart_);
    divergence_table_ = table_for(&divergence_);
    cmp_split->addWidget(divergence_table_);
    tabs_->addTab(page(cmp_top, compare_status_, cmp_split), tr("Compare"));

    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 4);
    layout->addWidget(tabs_);

    timer_.setSingleShot(true);
    timer_.setInterval(400);
    connect(&timer_, &QTimer::timeout, this, &AnalysisView::refresh);
    connect(conversation_, &Conversation::traceUpdated, this, &AnalysisView::schedule);
    connect(conversation_, &Conversation::tokensChanged, this, &AnalysisView::schedule);
    refresh();
}

QLabel* AnalysisView::comparison_status() const { return compare_status_; }

QString AnalysisView::coactivation_legend_caption() const { return co_legend_caption_->text(); }

QString AnalysisView::coactivation_axis_title(Qt::Orientation o) const { return o == Qt::Horizontal ? co_x_title_->text() : co_y_title_; }

void AnalysisView::schedule() {
    if (!timer_.isActive()) timer_.start();
}

void AnalysisView::set_model(const ModelSummary& model) {
    model_ = model;
    comparison_ = {};
    agreement_.clear();
    divergence_.clear();
    comparison_chart_->clear();
    fill_layer_boxes();
    refresh();
}

void AnalysisView::fill_layer_boxes() {
    for (QComboBox* box : {co_layer_, top_layer_}) {
        const int keep = box->currentData().isValid() ? box->currentData().toInt() : -1;
        box->blockSignals(true);
        box->clear();
        for (int l : model_.moe_layer_ids) box->addItem(tr("%1").arg(l), l);
        const int i = box->findData(keep);
        box->setCurrentIndex(i >= 0 ? i : 0);
        box->blockSignals(false);
    }
}

std::vector<TokenTrace> AnalysisView::traces() const {
    std::vector<TokenTrace> out;
    for (const ConversationToken& t : conversation_->tokens())
        if (t.evaluated) out.push_back(t.trace);
    return out;
}

void AnalysisView::refresh() {
    timer_.stop();
    traces_ = traces();
    show_coactivation();
    show_top_tokens();
    // Consecutive tokens: Mixtral's Table 5 per layer.
    const std::vector<Repetition> reps = consecutive_repetition(traces_);
    const double r_first = random_same_first(model_.experts), r_overlap = random_overlap(model_.experts, model_.active_experts);
    QVector<QVector<Cell>> rows;
    QStringList categories;
    BarChart::Series first{tr("same first choice"), QColor(66, 133, 244), {}, {}};
    BarChart::Series overlap{tr("top-%1 sets overlap").arg(model_.active_experts), QColor(52, 168, 83), {}, {}};
    for (const Repetition& r : reps) {
        rows.push_back({{r.layer}, {r.pairs}, {r.same_first}, {r_first}, {r.overlap}, {r_overlap}});
        categories << tr("L%1").arg(r.layer);
        first.values << r.same_first * 100;
        overlap.values << r.overlap * 100;
    }
    repetition_.set_table({tr("layer"), tr("pairs"), tr("same first choice"), tr("random"), tr("top-k sets overlap"), tr("random")},
                          {Format::Integer, Format::Integer, Format::Percent, Format::Percent, Format::Percent, Format::Percent}, rows);
    repetition_chart_->set_data(categories, reps.empty() ? QVector<BarChart::Series>{} : QVector<BarChart::Series>{first, overlap});
    repetition_chart_->set_fixed_range(0, 100);
    repetition_chart_->set_title(tr("Consecutive tokens routed alike (random: %1 % and %2 %)").arg(r_first * 100, 0, 'f', 1).arg(r_overlap * 100, 0, 'f', 1));
    repetition_note_->setText(tr("As the Mixtral paper's Table 5: how often tokens i and i+1 share their first expert, and how often their top-%1 sets "
                                 "share one, per layer; uniformly random routing over %2 experts gives %3 % and %4 %.")
                                  .arg(model_.active_experts).arg(model_.experts).arg(r_first * 100, 0, 'f', 1).arg(r_overlap * 100, 0, 'f', 1));
    // Next layer.
    const std::vector<Predictability> preds = next_layer_predictability(traces_);
    rows.clear();
    categories.clear();
    BarChart::Series acc{tr("guessed from the layer before"), QColor(171, 71, 188), {}, {}};
    BarChart::Series base{tr("baseline"), QColor(158, 158, 158), {}, {}};
    for (const Predictability& p : preds) {
        rows.push_back({{QStringLiteral("%1 → %2").arg(p.layer).arg(p.next_layer)}, {p.tokens}, {p.accuracy}, {p.baseline}, {p.top_k_hit},
                        {p.mutual_information}, {p.normalized_mi}});
        categories << QStringLiteral("%1→%2").arg(p.layer).arg(p.next_layer);
        acc.values << p.accuracy * 100;
        base.values << p.baseline * 100;
    }
    predictability_.set_table({tr("layers"), tr("tokens"), tr("first choice guessed"), tr("baseline"), tr("guess in top-k"), tr("MI bits"),
                               tr("MI / entropy")},
                              {Format::Text, Format::Integer, Format::Percent, Format::Percent, Format::Percent, Format::Decimal3, Format::Decimal3}, rows);
    predictability_chart_->set_fixed_range(0, 100);
    predictability_chart_->set_title(tr("Next layer's first choice predicted"));
    predictability_chart_->set_data(categories, preds.empty() ? QVector<BarChart::Series>{} : QVector<BarChart::Series>{acc, base});
}

void AnalysisView::show_coactivation() {
    const std::vector<CoActivation> all = co_activation(traces_, model_.experts);
    const int layer = co_layer_->currentData().isValid() ? co_layer_->currentData().toInt() : -1;
    const auto it = std::find_if(all.begin(), all.end(), [layer](const CoActivation& c) { return c.layer == layer; });
    const bool conditional = co_mode_->currentIndex() == 1;
    co_legend_caption_->setText(conditional ? tr("colour: % of the row's tokens that also chose the column")
                                            : tr("colour: tokens that chose both"));
    co_x_title_->setText(conditional ? tr("column: the expert also chosen (%)") : tr("column: the expert chosen with it"));
    if (it == all.end()) {
        coactivation_.clear();
        co_legend_->set_max(0);
        co_summary_->setText(tr("No routed tokens yet."));
        return;
    }
    const CoActivation& c = *it;
    double top = 0;
    for (int i = 0; i < c.experts; ++i)
        for (int j = 0; j < c.experts; ++j)
            if (i != j) top = std::max(top, conditional ? c.conditional(i, j) : static_cast<double>(c.at(i, j)));
    QVector<QVector<Cell>> rows;
    QStringList headers, row_headers;
    QVector<Format> formats;
    for (int j = 0; j < c.experts; ++j) {
        headers << QStringLiteral("E%1").arg(j);
        formats << (conditional ? Format::Percent : Format::Integer);
    }
    int best_i = -1, best_j = -1;
    for (int i = 0; i < c.experts; ++i) {
        row_headers << QStringLiteral("E%1").arg(i);
        QVector<Cell> row;
        for (int j = 0; j < c.experts; ++j) {
            Cell cell;
            if (i == j) {
                cell.value = conditional ? QVariant() : QVariant(c.at(i, i));
                cell.tooltip = tr("E%1 chosen for %2 of %3 tokens").arg(i).arg(c.at(i, i)).arg(c.tokens);
            } else {
                const double v = conditional ? c.conditional(i, j) : static_cast<double>(c.at(i, j));
                cell.value = conditional ? QVariant(v) : QVariant(c.at(i, j));
                cell.background = heat_color(top > 0 ? v / top : 0.0);
                cell.tooltip = tr("E%1 and E%2 together for %3 tokens; %4 % of E%1's tokens also chose E%2")
                                   .arg(i).arg(j).arg(c.at(i, j)).arg(c.conditional(i, j) * 100, 0, 'f', 1);
                if (best_i < 0 || c.at(i, j) > c.at(best_i, best_j)) best_i = i, best_j = j;
            }
            row << cell;
        }
        rows << row;
    }
    coactivation_.set_table(headers, formats, rows, row_headers);
    co_table_->resizeColumnsToContents();
    // The diagonal (an expert's own count) is uncoloured: the scale is the off-diagonal cells'.
    co_legend_->set_format(conditional ? std::function<QString(double)>([](double v) { return QStringLiteral("%1 %").arg(v * 100, 0, 'f', 0); })
                                       : std::function<QString(double)>([](double v) { return QString::number(std::round(v)); }));
    co_legend_->set_max(top);
    co_summary_->setText(best_i < 0 ? QString()
                                    : tr("%1 tokens; the most frequent pair E%2 + E%3 (%4 tokens)").arg(c.tokens).arg(best_i).arg(best_j).arg(c.at(best_i, best_j)));
}

void AnalysisView::show_top_tokens() {
    const int layer = top_layer_->currentData().isValid() ? top_layer_->currentData().toInt() : -1;
    QVector<QVector<Cell>> rows;
    if (layer >= 0)
        for (const ExpertTokens& e : top_tokens(traces_, layer, model_.experts, 6)) {
            QStringList parts;
            for (const ExpertToken& t : e.top)
                parts << tr("%1 ×%2 (%3 %)").arg(shown(t.text)).arg(t.count).arg(t.occurrences > 0 ? 100.0 * t.count / t.occurrences : 0.0, 0, 'f', 0);
            rows.push_back({{QStringLiteral("E%1").arg(e.expert)}, {e.activations}, {parts.join(QStringLiteral(", "))}});
        }
    top_tokens_.set_table({tr("expert"), tr("tokens"), tr("top tokens: ×times routed here (share of the token's occurrences)")},
                          {Format::Text, Format::Integer, Format::Text}, rows);
}

void AnalysisView::compare_with_model(const QString& path) {
    if (replayer_.running()) return;
    const std::vector<int32_t> ids = conversation_->token_ids();
    if (ids.empty()) {
        compare_status_->setText(tr("The conversation has no tokens yet: chat first, then compare."));
        emit comparisonFinished(false);
        return;
    }
    other_label_ = QFileInfo(path).fileName();
    compare_status_->setText(tr("Evaluating the conversation's %1 tokens on %2…").arg(ids.size()).arg(other_label_));
    compare_cancel_->setEnabled(true);
    compare_model_->setEnabled(false);
    compare_conversation_->setEnabled(false);
    replayer_.start(path, ids);
}

Status AnalysisView::compare_with_conversation(const QString& conversation_path, const QString& model_path) {
    if (replayer_.running()) return error("a comparison is running");
    const QString model = model_path.isEmpty() ? model_.path : model_path;
    if (model.isEmpty()) return error("open a model first");
    QFile f(conversation_path);
    if (!f.open(QIODevice::ReadOnly)) return error((conversation_path + ": " + f.errorString()).toStdString());
    Conversation other;
    if (Status s = other.from_json(QJsonDocument::fromJson(f.readAll()).object()); !s) return error(conversation_path.toStdString() + ": " + s.message());
    if (other.size() == 0) return error(conversation_path.toStdString() + ": the conversation has no tokens");
    other_label_ = QFileInfo(conversation_path).fileName();
    compare_status_->setText(tr("Evaluating %1 (%2 tokens) on %3…").arg(other_label_).arg(other.size()).arg(QFileInfo(model).fileName()));
    compare_cancel_->setEnabled(true);
    compare_model_->setEnabled(false);
    compare_conversation_->setEnabled(false);
    replayer_.start(model, other.token_ids());
    return Status::ok();
}

void AnalysisView::cancel_comparison() { replayer_.cancel(); }

void AnalysisView::show_comparison(const ReplayResult& other) {
    compare_cancel_->setEnabled(false);
    compare_model_->setEnabled(true);
    compare_conversation_->setEnabled(true);
    if (!other.error.isEmpty() || other.cancelled) {
        compare_status_->setText(other.cancelled ? tr("Comparison cancelled.") : tr("The comparison failed: %1").arg(other.error));
        emit comparisonFinished(false);
        return;
    }
    const std::vector<TokenTrace> here = traces();
    comparison_ = compare_routing(here, other.traces, model_.experts);
    QVector<QVector<Cell>> rows;
    QStringList categories;
    BarChart::Series first{tr("same first choice"), QColor(66, 133, 244), {}, {}};
    BarChart::Series set{tr("same top-k set"), QColor(52, 168, 83), {}, {}};
    for (size_t i = 0; i < comparison_.usage.size(); ++i) {
        const UsageDivergence& u = comparison_.usage[i];
        QVector<Cell> row{{u.layer}};
        // Other tokens: only the usage compares, so the agreement columns are left out rather than left empty.
        if (comparison_.same_tokens) {
            const LayerAgreement g = i < comparison_.layers.size() ? comparison_.layers[i] : LayerAgreement{};
            row << Cell{g.same_first} << Cell{g.same_set} << Cell{g.jaccard};
            categories << tr("L%1").arg(u.layer);
            first.values << g.same_first * 100;
            set.values << g.same_set * 100;
        }
        row << Cell{u.js_bits};
        rows << row;
    }
    const QString js_header = tr("usage JS divergence (bits)");
    if (comparison_.same_tokens)
        agreement_.set_table({tr("layer"), tr("same first choice"), tr("same top-k set"), tr("mean Jaccard"), js_header},
                             {Format::Integer, Format::Percent, Format::Percent, Format::Decimal3, Format::Significant3}, rows);
    else
        agreement_.set_table({tr("layer"), js_header}, {Format::Integer, Format::Significant3}, rows);
    // The positions that differ exist only for the same tokens.
    divergence_table_->setVisible(comparison_.same_tokens);
    if (comparison_.same_tokens) {
        comparison_chart_->set_title(tr("Routing agreement with %1").arg(other_label_));
        comparison_chart_->set_fixed_range(0, 100);
        comparison_chart_->set_axis_title(tr("% of positions"));
        comparison_chart_->set_value_format([](double v) { return QString::number(v, 'f', 1); });
        comparison_chart_->set_data(categories, {first, set});
    } else {
        // Different tokens: only the usage can be compared.
        BarChart::Series js{tr("JS divergence"), QColor(234, 67, 53), {}, {}};
        for (const UsageDivergence& u : comparison_.usage) {
            categories << tr("L%1").arg(u.layer);
            js.values << u.js_bits;
        }
        comparison_chart_->set_title(tr("Expert usage against %1 (0 = the same shares, 1 = disjoint)").arg(other_label_));
        comparison_chart_->set_fixed_range(0, 0);  // automatic: divergences of 0.003 bits stay visible
        comparison_chart_->set_axis_title(tr("Jensen-Shannon divergence, bits"));
        comparison_chart_->set_value_format([](double v) { return significant(v, 3); });
        comparison_chart_->set_data(categories, {js});
    }
    QVector<QVector<Cell>> div;
    for (const PositionDivergence& d : comparison_.divergent)
        div.push_back({{d.position}, {shown(d.text)}, {d.layer}, {experts_text(d.experts_a)}, {experts_text(d.experts_b)}});
    divergence_.set_table({tr("position"), tr("token"), tr("first layer that differs"), tr("experts here"), tr("experts in %1").arg(other_label_)},
                          {Format::Integer, Format::Text, Format::Integer, Format::Text, Format::Text}, div);
    if (comparison_.same_tokens) {
        double agree = 0;
        for (const LayerAgreement& g : comparison_.layers) agree += g.same_set;
        agree = comparison_.layers.empty() ? 0 : agree / comparison_.layers.size();
        compare_status_->setText(tr("%1 positions against %2: %3 % of layer decisions chose the same experts; routing differs somewhere at %4 positions")
                                     .arg(comparison_.positions).arg(other_label_).arg(agree * 100, 0, 'f', 1).arg(comparison_.divergent.size()));
    } else {
        compare_status_->setText(tr("%1 has other tokens than this conversation: compared by expert usage per layer").arg(other_label_));
    }
    emit comparisonFinished(true);
}

}  // namespace colibri::studio
