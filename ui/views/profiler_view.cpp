#include "ui/views/profiler_view.h"

#include <QBarCategoryAxis>
#include <QBarSeries>
#include <QBarSet>
#include <QChart>
#include <QChartView>
#include <QDir>
#include <QCheckBox>
#include <QComboBox>
#include <QDateTime>
#include <QEvent>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QMenu>
#include <QScatterSeries>
#include <QSplitter>
#include <QStandardPaths>
#include <QStackedBarSeries>
#include <QTabWidget>
#include <QTableView>
#include <QToolButton>
#include <QVBoxLayout>
#include <QValueAxis>
#include <cmath>

#include "tools/measurement.h"
#include "ui/colors.h"
#include "ui/rank_stats.h"
#include "ui/theme.h"
#include "ui/views/chart_reset.h"
#include "ui/views/elided_label.h"
#include "ui/views/token_timeline.h"

namespace colibri::studio {

namespace {

QString ms(double v) { return QString::number(v, 'f', v < 10 ? 2 : 1); }

QTableView* table_for(QAbstractItemModel* model) {
    auto* t = new QTableView;
    t->setModel(model);
    t->verticalHeader()->hide();
    t->verticalHeader()->setDefaultSectionSize(t->fontMetrics().height() + 6);
    t->setMinimumSize(120, 60);
    return t;
}

// The tokens the summary's figures are of. Generated tokens tell the decode's cost; prompt tokens share batched
// chunks. Tokens with counters read are slower (the reads, and per expert one expert at a time), so they are
// never mixed with the others: the figures are the uncounted tokens' when there are any.
struct ShownTokens {
    int n = 0;
    QString which;
    const TokenTime* sum = nullptr;
    const std::vector<double>* steps = nullptr;
};

ShownTokens shown_tokens(const TimeTotals& t) {
    const bool gen = t.generated > 0;
    const bool uncounted = gen && t.uncounted > 0;
    return {!gen ? t.tokens : uncounted ? t.uncounted : t.counted,
            !gen ? QObject::tr("prompt tokens") : uncounted ? QObject::tr("generated tokens, counters off") : QObject::tr("generated tokens, all with counters read"),
            !gen ? &t.sum : uncounted ? &t.uncounted_sum : &t.counted_sum,
            !gen ? &t.step_ms : uncounted ? &t.uncounted_step_ms : &t.counted_step_ms};
}

}  // namespace

ProfilerView::ProfilerView(Conversation* conversation, QWidget* parent) : QWidget(parent), conversation_(conversation) {
    counting_ = new QComboBox;
    counting_->setObjectName(QStringLiteral("counting_mode"));
    counting_->addItem(tr("off"), static_cast<int>(Counting::Off));
    counting_->addItem(tr("per layer"), static_cast<int>(Counting::Layers));
    counting_->addItem(tr("per layer and expert (slow)"), static_cast<int>(Counting::Experts));
    counting_->setToolTip(tr("perf_event counters cost time: per layer a little, per expert a lot (each expert runs alone). "
                             "Their cost is measured and shown; timings are honest with them off."));
    connect(counting_, &QComboBox::currentIndexChanged, this, [this] { emit countingChanged(counting()); });
    generated_only_ = new QCheckBox(tr("generated tokens only"));
    connect(generated_only_, &QCheckBox::toggled, this, &ProfilerView::refresh);
    summary_ = new ElidedLabel;
    summary_->setObjectName(QStringLiteral("profiler_summary"));
    overhead_ = new ElidedLabel;
    overhead_->setObjectName(QStringLiteral("profiler_overhead"));
    reliability_ = new ElidedLabel;
    reliability_->setObjectName(QStringLiteral("profiler_reliability"));
    reliability_->setStyleSheet(QStringLiteral("color: %1; font-weight: bold").arg(status_color(StatusColor::Warning).name()));
    reliability_->hide();
    comparison_ = new ElidedLabel;
    comparison_->setObjectName(QStringLiteral("profiler_comparison"));
    comparison_->hide();
    compare_ = new QToolButton;
    compare_->setObjectName(QStringLiteral("profiler_compare"));
    compare_->setText(tr("Compare"));
    compare_->setToolTip(tr("Compare this profile with another: keep it as the baseline, or open one saved before. A change "
                            "counts when the two runs' middle halves of token steps (IQR) do not overlap; the layer table and "
                            "chart show the baseline's total per layer beside this run's."));
    compare_->setPopupMode(QToolButton::InstantPopup);
    auto* menu = new QMenu(compare_);
    menu->addAction(tr("Keep this profile as the baseline"), this, [this] {
        if (Status st = keep_as_baseline(); !st) {
            comparison_->setText(QString::fromStdString(st.message()));
            comparison_->show();
        }
    });
    menu->addAction(tr("Compare with a saved profile…"), this, &ProfilerView::compare_with_chosen_file);
    menu->addAction(tr("Save this profile…"), this, &ProfilerView::save_profile_as);
    menu->addSeparator();
    QAction* stop = menu->addAction(tr("Stop comparing"), this, &ProfilerView::clear_baseline);
    // What cannot be done now is greyed out: keeping or saving needs a profile, stopping a baseline.
    connect(menu, &QMenu::aboutToShow, this, [this, menu, stop] {
        const bool profiled = !snapshot().empty();
        menu->actions().at(0)->setEnabled(profiled);
        menu->actions().at(2)->setEnabled(profiled);
        stop->setEnabled(baseline_.has_value());
    });
    compare_->setMenu(menu);
    status_ = new QLabel(tr("Open a model to profile it."));
    status_->setObjectName(QStringLiteral("counter_status"));
    status_->setWordWrap(true);
    status_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);

    // Per token.
    timeline_ = new TokenTimeline;
    timeline_->set_model(&tokens_);
    connect(timeline_, &TokenTimeline::positionClicked, conversation_, &Conversation::select);
    token_sort_.setSourceModel(&tokens_);
    token_sort_.setSortRole(Qt::EditRole);
    token_table_ = table_for(&token_sort_);
    token_table_->setSortingEnabled(true);
    token_table_->setSelectionBehavior(QAbstractItemView::SelectRows);
    connect(token_table_, &QTableView::clicked, this, [this](const QModelIndex& i) {
        conversation_->select(token_sort_.mapToSource(i).data(TokenTimeModel::PositionRole).toInt());
    });
    auto* per_token = new QSplitter(Qt::Horizontal);
    per_token->addWidget(timeline_);
    per_token->addWidget(token_table_);
    per_token->setStretchFactor(0, 3);
    per_token->setStretchFactor(1, 2);

    // Per layer.
    chart_ = new QChart;
    chart_->setTitle(tr("Time per token and layer (µs)"));
    // Below the plot: at dock width a legend at the side took the width the layers' bars and labels need.
    chart_->legend()->setAlignment(Qt::AlignBottom);
    chart_->setMargins(QMargins(2, 2, 2, 2));
    chart_view_ = new QChartView(chart_);
    chart_view_->setRenderHint(QPainter::Antialiasing);
    chart_view_->setMinimumSize(200, 100);
    layer_table_ = table_for(&layers_);
    auto* per_layer = new QSplitter(Qt::Horizontal);
    per_layer->addWidget(chart_view_);
    per_layer->addWidget(layer_table_);
    per_layer->setStretchFactor(0, 3);
    per_layer->setStretchFactor(1, 2);

    // Counters: one at a time per layer (page faults show experts paged in; LLC misses, where counted, which
    // layers stream their weights from memory), and per expert.
    counter_ = new QComboBox;
    counter_->setObjectName(QStringLiteral("profiler_counter"));
    counter_->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
    counter_->setMinimumContentsLength(12);
    connect(counter_, &QComboBox::currentIndexChanged, this, &ProfilerView::rebuild_counter_chart);
    counter_chart_ = new QChart;
    counter_chart_->legend()->hide();
    counter_chart_->setMargins(QMargins(2, 2, 2, 2));
    counter_chart_view_ = new QChartView(counter_chart_);
    counter_chart_view_->setRenderHint(QPainter::Antialiasing);
    counter_chart_view_->setMinimumSize(160, 100);
    expert_sort_.setSourceModel(&experts_);
    expert_sort_.setSortRole(Qt::EditRole);
    expert_table_ = table_for(&expert_sort_);
    expert_table_->setSortingEnabled(true);
    auto* counter_panel = new QWidget;
    auto* counter_layout = new QVBoxLayout(counter_panel);
    counter_layout->setContentsMargins(0, 0, 0, 0);
    auto* counter_row = new QHBoxLayout;
    counter_row->addWidget(new QLabel(tr("per token and layer:")));
    counter_row->addWidget(counter_);
    counter_row->addStretch();
    counter_layout->addLayout(counter_row);
    counter_layout->addWidget(counter_chart_view_, 1);
    auto* counters_split = new QSplitter(Qt::Horizontal);
    counters_split->addWidget(counter_panel);
    counters_split->addWidget(expert_table_);
    auto* counters_page = new QWidget;
    auto* counters_page_layout = new QVBoxLayout(counters_page);
    counters_page_layout->setContentsMargins(0, 0, 0, 0);
    counters_page_layout->addWidget(status_);
    counters_page_layout->addWidget(counters_split, 1);

    // Across ranks: the summary line over a table of the MoE layers.
    rank_summary_ = new QLabel;
    rank_summary_->setObjectName(QStringLiteral("profiler_rank_summary"));
    rank_summary_->setWordWrap(true);
    rank_summary_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    rank_table_ = table_for(&ranks_);
    rank_table_->setObjectName(QStringLiteral("profiler_rank_table"));
    auto* ranks_page = new QWidget;
    auto* ranks_layout = new QVBoxLayout(ranks_page);
    ranks_layout->setContentsMargins(0, 2, 0, 0);
    ranks_layout->addWidget(rank_summary_);
    ranks_layout->addWidget(rank_table_, 1);

    tabs_ = new QTabWidget;
    tabs_->setDocumentMode(true);
    tabs_->addTab(per_token, tr("Per token"));
    tabs_->addTab(per_layer, tr("Per layer"));
    tabs_->addTab(counters_page, tr("Counters"));
    ranks_tab_ = tabs_->addTab(ranks_page, tr("Ranks"));
    tabs_->setTabVisible(ranks_tab_, false);

    auto* options = new QHBoxLayout;
    options->addWidget(new QLabel(tr("Counters:")));
    options->addWidget(counting_);
    options->addWidget(generated_only_);
    options->addWidget(overhead_, 1);
    options->addWidget(compare_);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 4);
    layout->setSpacing(3);
    layout->addLayout(options);
    layout->addWidget(summary_);
    layout->addWidget(reliability_);
    layout->addWidget(comparison_);
    layout->addWidget(tabs_, 1);

    timer_.setSingleShot(true);
    timer_.setInterval(250);
    connect(&timer_, &QTimer::timeout, this, &ProfilerView::refresh);
    connect(conversation_, &Conversation::traceUpdated, this, &ProfilerView::schedule);
    connect(conversation_, &Conversation::tokensChanged, this, [this](int from) {
        // Tokens re-evaluated after the baseline are this run's (the next turn's template re-evaluates the reply's
        // last token); a new conversation is all of it.
        since_ = std::min(since_, std::max(from, 0));
        schedule();
    });
    style_chart(chart_);
    style_chart(counter_chart_);
    refresh();
}

QLabel* ProfilerView::summary_label() const { return summary_; }
QLabel* ProfilerView::overhead_label() const { return overhead_; }
QLabel* ProfilerView::reliability_label() const { return reliability_; }
QLabel* ProfilerView::comparison_label() const { return comparison_; }

Counting ProfilerView::counting() const { return static_cast<Counting>(counting_->currentData().toInt()); }

void ProfilerView::set_counting(Counting mode) {
    const int i = counting_->findData(static_cast<int>(mode));
    if (i >= 0 && i != counting_->currentIndex()) counting_->setCurrentIndex(i);
}

void ProfilerView::set_model(const ModelSummary& model, const CounterSet& counters) {
    counter_set_ = counters;
    model_name_ = QFileInfo(model.path).fileName();
    rank_count_ = model.placement.ranks;
    tabs_->setTabVisible(ranks_tab_, rank_count_ > 1);
    threads_ = model.threads;
    kernel_.clear();
    layers_.set_deltanet_steps(!model.linear_layer_ids.isEmpty());
    layers_.set_counter_names(counters.names);
    counter_->blockSignals(true);
    counter_->clear();
    counter_->addItems(counters.names);
    // Page faults first when there: on a mapped model they are experts' pages being mapped in (major ones
    // read from disk, the rest from the page cache).
    const int faults = static_cast<int>(counters.names.indexOf(QStringLiteral("page faults")));
    if (faults >= 0) counter_->setCurrentIndex(faults);
    counter_->blockSignals(false);
    counter_bars_ = nullptr;
    experts_.set_counter_names(counters.names);
    QStringList lines;
    if (counters.names.isEmpty()) {
        lines << tr("No perf counters: %1").arg(counters.software_status.isEmpty() ? tr("none could be opened") : counters.software_status);
    } else {
        QStringList software;
        for (const QString& n : counters.names)
            if (!counters.hardware_names.contains(n)) software << n;
        if (counters.hardware_names.isEmpty())
            lines << tr("Hardware counters %1. Showing the software events: %2.")
                         .arg(counters.hardware_status.isEmpty() ? tr("unavailable") : counters.hardware_status, software.join(QStringLiteral(", ")));
        else
            lines << tr("Counting %1%2.").arg(counters.names.join(QStringLiteral(", ")),
                                             counters.hardware_status.isEmpty() ? QString() : QStringLiteral("; ") + counters.hardware_status);
        if (!counters.software_status.isEmpty()) lines << tr("Software events: %1.").arg(counters.software_status);
        lines << tr("Major faults are pages read from the model file: an expert used for the first time shows here.");
    }
    status_->setText(lines.join(QLatin1Char('\n')));
    status_->setStyleSheet(counters.hardware_names.isEmpty() ? QStringLiteral("color: %1").arg(status_color(StatusColor::Warning).name()) : QString());
    refresh();
}

void ProfilerView::schedule() {
    if (!timer_.isActive()) timer_.start();
}

void ProfilerView::changeEvent(QEvent* e) {
    if (e->type() == QEvent::PaletteChange) {
        style_chart(chart_);
        style_chart(counter_chart_);
    }
    QWidget::changeEvent(e);
}

void ProfilerView::refresh() {
    timer_.stop();
    TokenSpan span;
    span.from = since_;
    span.generated_only = generated_only_->isChecked();
    const ProfileTotals totals = profile_totals(*conversation_, span, static_cast<int>(counter_set_.names.size()));
    layers_.set_totals(totals);
    experts_.set_totals(totals);
    tokens_.set_tokens(*conversation_, span);
    timeline_->update();
    layer_table_->resizeColumnsToContents();
    expert_table_->resizeColumnsToContents();
    token_table_->resizeColumnsToContents();
    times_ = time_totals(*conversation_, span);
    show_summary(times_);
    show_ranks(span);
    show_comparison();
    rebuild_chart();
    rebuild_counter_chart();
}

void ProfilerView::show_summary(const TimeTotals& t) {
    if (t.tokens == 0) {
        summary_->setText(tr("No tokens profiled yet. Counters are %1.").arg(counting_->currentText()));
        reliability_->clear();
        reliability_->hide();
        overhead_->clear();
        return;
    }
    const ShownTokens shown = shown_tokens(t);
    const int n = shown.n;
    const TokenTime& s = *shown.sum;
    const tools::Spread step = tools::Spread::of(*shown.steps);
    auto mean = [n](uint64_t ns) { return static_cast<double>(ns) / n / 1e6; };
    const QString& which = shown.which;
    const bool uncounted = t.generated > 0 && t.uncounted > 0;
    QString text = tr("%1 %2: %3 ms per token median (IQR %4–%5, min–max %6–%7); mean %8 = attention %9 + router %10 + experts %11 + "
                      "lm head %12 + sampling %13 + counters %14 + other %15 ms")
                       .arg(n).arg(which)
                       .arg(ms(step.median), ms(step.q1), ms(step.q3), ms(step.min), ms(step.max), ms(mean(s.total)), ms(mean(s.attention)),
                            ms(mean(s.router)), ms(mean(s.experts)))
                       .arg(ms(mean(s.lm_head)), ms(mean(s.sampling)), ms(mean(s.counters)), ms(mean(s.other())));
    if (uncounted && t.counted > 0) text += tr("; %n more with counters read left out", nullptr, t.counted);
    // Per-token steps vary with position and routing; half of them beyond 20 % of the median is noise, not that.
    summary_->setText(text);
    // Its own line under the figures, so that neither hides the other at dock width.
    QStringList why;
    if (last_load_.busy()) why << tr("the machine was busy during the last reply (%1)").arg(QString::fromStdString(last_load_.describe()));
    if (step.samples.size() > 2 && step.median > 0 && (step.q3 - step.q1) / step.median > tools::kLargeSpread)
        why << tr("the middle half of the steps spans %1 % of the median").arg(100.0 * (step.q3 - step.q1) / step.median, 0, 'f', 0);
    reliability_->setText(why.isEmpty() ? QString() : tr("⚠ Unreliable: %1.").arg(why.join(QStringLiteral("; "))));
    reliability_->setVisible(!why.isEmpty());
    QString overhead;
    if (t.counted == 0) {
        overhead = tr("counters off: no profiler cost beyond the clock");
    } else {
        const double counted_mean = static_cast<double>(t.counted_sum.total) / t.counted / 1e6;
        const double reads = static_cast<double>(t.counted_sum.counters) / t.counted / 1e6;
        overhead = tr("reading counters took %1 ms per counted token (%2 % of it)").arg(ms(reads)).arg(reads / std::max(counted_mean, 1e-9) * 100.0, 0, 'f', 1);
        if (t.uncounted > 0) {
            const double with = static_cast<double>(t.counted_ns) / t.counted / 1e6, without = static_cast<double>(t.uncounted_ns) / t.uncounted / 1e6;
            overhead += tr("; a generated token took %1 ms counted (%2) and %3 ms uncounted (%4): %5%6 %")
                            .arg(ms(with)).arg(t.counted).arg(ms(without)).arg(t.uncounted)
                            .arg(with >= without ? QStringLiteral("+") : QString()).arg((with / without - 1.0) * 100.0, 0, 'f', 0);
        }
    }
    overhead_->setText(overhead);
}

void ProfilerView::show_ranks(const TokenSpan& span) {
    if (rank_count_ < 2) {
        ranks_.set_totals(RankTotals{});
        rank_summary_->clear();
        return;
    }
    const RankTotals r = rank_totals(*conversation_, span, rank_count_);
    ranks_.set_totals(r);
    rank_table_->resizeColumnsToContents();
    if (r.tokens == 0) {
        rank_summary_->setText(tr("%1 ranks hold the experts. No tokens with rank timings yet: send a message.").arg(r.ranks));
        return;
    }
    rank_summary_->setText(tr("%1 ranks, %2 tokens: %3 exchanged per token (every rank's expert rows, all MoE layers); "
                              "rank 0 spent %4 % of the step in exchanges (waiting for the other ranks, then the transfer); slowest: rank %5, "
                              "the slowest at %6 of %7 MoE layers, its experts %8× the fastest rank's time.")
                               .arg(r.ranks).arg(r.tokens).arg(bytes_text(r.bytes_per_token))
                               .arg(r.exchange_share * 100.0, 0, 'f', 1).arg(r.slowest).arg(r.slowest_layers).arg(r.layers.size())
                               .arg(r.slowest_over_fastest, 0, 'f', 2));
}

void ProfilerView::rebuild_chart() {
    QStringList categories;
    for (int r = 0; r < layers_.rowCount(); ++r) categories << tr("L%1").arg(layers_.totals().layers[static_cast<size_t>(r)]);
    const int columns[3] = {LayerProfileModel::Attention, LayerProfileModel::Router, LayerProfileModel::Experts};
    // The series is made again only when the layers change; new values replace the old in place, which keeps
    // Qt Charts from drawing a removed axis's labels over the new one.
    if (categories != categories_ || sets_[0] == nullptr || baseline_.has_value() != (baseline_markers_ != nullptr)) {
        reset_chart(chart_);
        baseline_markers_ = nullptr;
        categories_ = categories;
        auto* series = new QStackedBarSeries;
        const char* names[3] = {QT_TR_NOOP("attention"), QT_TR_NOOP("router"), QT_TR_NOOP("experts")};
        const int stage_columns[3] = {TokenTimeModel::Attention, TokenTimeModel::Router, TokenTimeModel::Experts};
        for (int s = 0; s < 3; ++s) {
            sets_[s] = new QBarSet(tr(names[s]));
            sets_[s]->setColor(TokenTimeline::stage_color(stage_columns[s]));
            for (int r = 0; r < layers_.rowCount(); ++r) *sets_[s] << 0.0;
            series->append(sets_[s]);
        }
        chart_->addSeries(series);
        auto* x = new QBarCategoryAxis;
        x->append(categories_);
        y_axis_ = new QValueAxis;
        y_axis_->setTitleText(tr("µs per token"));
        y_axis_->setLabelFormat(QStringLiteral("%.0f"));
        chart_->addAxis(x, Qt::AlignBottom);
        chart_->addAxis(y_axis_, Qt::AlignLeft);
        series->attachAxis(x);
        series->attachAxis(y_axis_);
        if (baseline_) {
            // The baseline's total per layer as a marker over each stacked bar: above it, this run is faster there.
            baseline_markers_ = new QScatterSeries;
            baseline_markers_->setName(tr("baseline total"));
            baseline_markers_->setMarkerShape(QScatterSeries::MarkerShapeRectangle);
            baseline_markers_->setMarkerSize(9);
            baseline_markers_->setColor(status_color(StatusColor::Warning));
            chart_->addSeries(baseline_markers_);
            baseline_markers_->attachAxis(x);
            baseline_markers_->attachAxis(y_axis_);
        }
        style_chart(chart_);
    }
    double top = 0;
    QList<QPointF> markers;
    for (int r = 0; r < layers_.rowCount(); ++r) {
        top = std::max(top, layers_.mean_us(r, LayerProfileModel::Total));
        for (int s = 0; s < 3; ++s) sets_[s]->replace(r, layers_.mean_us(r, columns[s]));
        const double b = layers_.baseline_total_us(r);
        if (!std::isnan(b)) {
            markers << QPointF(r, b);
            top = std::max(top, b);
        }
    }
    if (baseline_markers_ != nullptr) baseline_markers_->replace(markers);
    y_axis_->setRange(0, top > 0 ? top * 1.1 : 1.0);
}

void ProfilerView::rebuild_counter_chart() {
    const int counter = counter_->currentIndex();
    QStringList categories;
    for (int r = 0; r < layers_.rowCount(); ++r) categories << tr("L%1").arg(layers_.totals().layers[static_cast<size_t>(r)]);
    // No counters, or none read for these tokens: say so rather than draw zeros.
    const bool measured = layers_.counters_measured();
    if (counter < 0 || !measured) {
        reset_chart(counter_chart_);
        counter_bars_ = nullptr;
        counter_chart_->setTitle(counter < 0 ? tr("No counters")
                                             : layers_.rowCount() == 0 ? tr("Counters not measured yet: no tokens profiled")
                                                                       : tr("Counters not measured: counting was off for these tokens "
                                                                            "(choose “per layer” above, then generate)"));
        style_chart(counter_chart_);
        return;
    }
    // As for the time chart: a new series only when the layers change.
    if (counter_bars_ == nullptr || categories != counter_categories_) {
        reset_chart(counter_chart_);
        counter_categories_ = categories;
        auto* series = new QBarSeries;
        counter_bars_ = new QBarSet(QString());
        counter_bars_->setColor(QColor(171, 71, 188));
        for (int r = 0; r < layers_.rowCount(); ++r) *counter_bars_ << 0.0;
        series->append(counter_bars_);
        counter_chart_->addSeries(series);
        auto* x = new QBarCategoryAxis;
        x->append(categories);
        counter_axis_ = new QValueAxis;
        counter_chart_->addAxis(x, Qt::AlignBottom);
        counter_chart_->addAxis(counter_axis_, Qt::AlignLeft);
        series->attachAxis(x);
        series->attachAxis(counter_axis_);
        style_chart(counter_chart_);
    }
    double top = 0;
    int counted = 0;
    for (int r = 0; r < layers_.rowCount(); ++r) {
        const double v = layers_.mean_counter(r, counter);
        counter_bars_->replace(r, std::isnan(v) ? 0.0 : v);  // a layer never counted: no bar
        top = std::max(top, std::isnan(v) ? 0.0 : v);
        counted = std::max(counted, layers_.totals().per_layer[static_cast<size_t>(r)].counted_tokens);
    }
    counter_axis_->setRange(0, top > 0 ? top * 1.1 : 1.0);
    const int tokens = layers_.totals().tokens;
    counter_chart_->setTitle(counted < tokens ? tr("%1 per token (the %2 of %3 tokens counted)").arg(counter_->currentText()).arg(counted).arg(tokens)
                                              : tr("%1 per token").arg(counter_->currentText()));
}

void ProfilerView::note_generation(const GenerationStats& stats) {
    last_load_ = stats.load;
    if (!stats.kernel.isEmpty()) kernel_ = stats.kernel;
    refresh();
}

void ProfilerView::show_comparison() {
    if (!baseline_) {
        comparison_->clear();
        comparison_->hide();
        return;
    }
    const ProfileSnapshot now = snapshot();
    QString text = now.empty() ? tr("Baseline: %1. Generate to compare with it.").arg(baseline_->label()) : describe_step_change(*baseline_, now);
    if (since_ > 0) text = tr("From position %1 on: ").arg(since_) + text;
    comparison_->setText(text);
    comparison_->show();
}

ProfileSnapshot ProfilerView::snapshot() const {
    ProfileSnapshot p;
    p.model = model_name_;
    p.kernel = kernel_;
    p.threads = threads_;
    p.when = QDateTime::currentDateTime().toString(Qt::ISODate);
    const ShownTokens shown = shown_tokens(times_);
    p.tokens_kind = shown.which;
    p.step_ms = tools::Spread::of(*shown.steps);
    for (int r = 0; r < layers_.rowCount(); ++r)
        p.layers.push_back({layers_.totals().layers[static_cast<size_t>(r)], layers_.mean_us(r, LayerProfileModel::Attention),
                            layers_.mean_us(r, LayerProfileModel::Router), layers_.mean_us(r, LayerProfileModel::Experts)});
    p.load = last_load_;
    return p;
}

Status ProfilerView::keep_as_baseline() {
    ProfileSnapshot p = snapshot();
    if (p.empty()) return error("nothing profiled yet: generate a reply first");
    set_baseline(p, conversation_->size());
    return Status::ok();
}

void ProfilerView::set_baseline(const ProfileSnapshot& baseline, int since) {
    baseline_ = baseline;
    since_ = std::max(since, 0);
    layers_.set_baseline(&*baseline_);
    refresh();
}

void ProfilerView::clear_baseline() {
    layers_.set_baseline(nullptr);
    baseline_.reset();
    since_ = 0;
    refresh();
}

Status ProfilerView::compare_with_file(const QString& path) {
    auto p = ProfileSnapshot::read(path);
    if (!p) return error(p.message());
    set_baseline(p.value());
    return Status::ok();
}

Status ProfilerView::save_profile(const QString& path) const {
    const ProfileSnapshot p = snapshot();
    if (p.empty()) return error("nothing profiled yet: generate a reply first");
    return p.save(path);
}

namespace {

QString profiles_folder() {
    const QString docs = QStandardPaths::writableLocation(QStandardPaths::DocumentsLocation);
    return docs.isEmpty() ? QDir::homePath() : docs;
}

}  // namespace

void ProfilerView::save_profile_as() {
    const QString name = QStringLiteral("profile-%1-%2.json")
                             .arg(QFileInfo(model_name_).completeBaseName(), QDateTime::currentDateTime().toString(QStringLiteral("yyyyMMdd-HHmm")));
    const QString path = QFileDialog::getSaveFileName(this, tr("Save this profile"), QDir(profiles_folder()).filePath(name),
                                                      tr("Colibri profiles (*.json)"));
    if (path.isEmpty()) return;
    if (Status st = save_profile(path); !st) {
        comparison_->setText(tr("Not saved: %1").arg(QString::fromStdString(st.message())));
        comparison_->show();
    }
}

void ProfilerView::compare_with_chosen_file() {
    const QString path = QFileDialog::getOpenFileName(this, tr("Compare with a saved profile"), profiles_folder(), tr("Colibri profiles (*.json)"));
    if (path.isEmpty()) return;
    if (Status st = compare_with_file(path); !st) {
        comparison_->setText(tr("Cannot compare: %1").arg(QString::fromStdString(st.message())));
        comparison_->show();
    }
}

QList<qreal> ProfilerView::baseline_chart_values() const {
    QList<qreal> v;
    if (baseline_markers_ == nullptr) return v;
    for (const QPointF& p : baseline_markers_->points()) v << p.y();
    return v;
}

QString ProfilerView::counter_chart_title() const { return counter_chart_->title(); }

QList<qreal> ProfilerView::counter_chart_values() const {
    QList<qreal> v;
    if (counter_bars_ == nullptr) return v;
    for (int i = 0; i < counter_bars_->count(); ++i) v << counter_bars_->at(i);
    return v;
}

QList<qreal> ProfilerView::chart_values(int stage) const {
    QList<qreal> v;
    if (stage < 0 || stage > 2 || sets_[stage] == nullptr) return v;
    for (int i = 0; i < sets_[stage]->count(); ++i) v << sets_[stage]->at(i);
    return v;
}

}  // namespace colibri::studio
