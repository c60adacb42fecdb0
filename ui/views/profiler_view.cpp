#include "ui/views/profiler_view.h"

#include <QBarCategoryAxis>
#include <QBarSeries>
#include <QBarSet>
#include <QChart>
#include <QChartView>
#include <QCheckBox>
#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QSplitter>
#include <QStackedBarSeries>
#include <QTableView>
#include <QVBoxLayout>
#include <QValueAxis>
#include "ui/views/chart_reset.h"

namespace colibri::studio {

ProfilerView::ProfilerView(Conversation* conversation, QWidget* parent) : QWidget(parent), conversation_(conversation) {
    status_ = new QLabel(tr("Open a model to profile it."));
    status_->setObjectName(QStringLiteral("counter_status"));
    status_->setWordWrap(true);
    counting_ = new QCheckBox(tr("sample counters per layer and expert"));
    counting_->setChecked(true);
    connect(counting_, &QCheckBox::toggled, this, &ProfilerView::countingChanged);
    generated_only_ = new QCheckBox(tr("generated tokens only"));
    connect(generated_only_, &QCheckBox::toggled, this, &ProfilerView::refresh);
    summary_ = new QLabel;

    chart_ = new QChart;
    chart_->setTitle(tr("Time per token and layer (µs)"));
    chart_->legend()->setAlignment(Qt::AlignBottom);
    chart_->setMargins(QMargins(2, 2, 2, 2));
    chart_view_ = new QChartView(chart_);
    chart_view_->setRenderHint(QPainter::Antialiasing);
    chart_view_->setMinimumHeight(200);
    chart_view_->setMinimumWidth(420);

    // One counter at a time per layer: page faults show experts paged in, LLC misses (where counted) show
    // which layers stream their weights from memory.
    counter_ = new QComboBox;
    counter_->setObjectName(QStringLiteral("profiler_counter"));
    counter_->setSizeAdjustPolicy(QComboBox::AdjustToContents);
    connect(counter_, &QComboBox::currentIndexChanged, this, &ProfilerView::rebuild_counter_chart);
    counter_chart_ = new QChart;
    counter_chart_->legend()->hide();
    counter_chart_->setMargins(QMargins(2, 2, 2, 2));
    counter_chart_view_ = new QChartView(counter_chart_);
    counter_chart_view_->setRenderHint(QPainter::Antialiasing);
    counter_chart_view_->setMinimumWidth(320);
    auto* counter_panel = new QWidget;
    auto* counter_layout = new QVBoxLayout(counter_panel);
    counter_layout->setContentsMargins(0, 0, 0, 0);
    auto* counter_row = new QHBoxLayout;
    counter_row->addWidget(new QLabel(tr("counter per token and layer")));
    counter_row->addWidget(counter_);
    counter_row->addStretch();
    counter_layout->addLayout(counter_row);
    counter_layout->addWidget(counter_chart_view_, 1);
    auto* charts = new QSplitter(Qt::Horizontal);
    charts->addWidget(chart_view_);
    charts->addWidget(counter_panel);
    charts->setStretchFactor(0, 3);
    charts->setStretchFactor(1, 2);

    layer_table_ = new QTableView;
    layer_table_->setModel(&layers_);
    layer_table_->verticalHeader()->hide();
    expert_sort_.setSourceModel(&experts_);
    expert_sort_.setSortRole(Qt::EditRole);
    expert_table_ = new QTableView;
    expert_table_->setModel(&expert_sort_);
    expert_table_->setSortingEnabled(true);
    expert_table_->verticalHeader()->hide();

    auto* options = new QHBoxLayout;
    options->addWidget(counting_);
    options->addWidget(generated_only_);
    options->addStretch();
    options->addWidget(summary_);
    auto* tables = new QSplitter(Qt::Horizontal);
    tables->addWidget(layer_table_);
    tables->addWidget(expert_table_);
    auto* splitter = new QSplitter(Qt::Vertical);
    splitter->addWidget(charts);
    splitter->addWidget(tables);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 4);
    layout->addWidget(status_);
    layout->addLayout(options);
    layout->addWidget(splitter, 1);

    timer_.setSingleShot(true);
    timer_.setInterval(250);
    connect(&timer_, &QTimer::timeout, this, &ProfilerView::refresh);
    connect(conversation_, &Conversation::traceUpdated, this, &ProfilerView::schedule);
    connect(conversation_, &Conversation::tokensChanged, this, &ProfilerView::schedule);
}

void ProfilerView::set_model(const ModelSummary&, const CounterSet& counters) {
    counter_set_ = counters;
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
    status_->setStyleSheet(counters.hardware_names.isEmpty() ? QStringLiteral("color: #8a5a00") : QString());
    refresh();
}

void ProfilerView::schedule() {
    if (!timer_.isActive()) timer_.start();
}

void ProfilerView::refresh() {
    timer_.stop();
    TokenSpan span;
    span.generated_only = generated_only_->isChecked();
    const ProfileTotals totals = profile_totals(*conversation_, span, static_cast<int>(counter_set_.names.size()));
    layers_.set_totals(totals);
    experts_.set_totals(totals);
    layer_table_->resizeColumnsToContents();
    expert_table_->resizeColumnsToContents();
    double total_us = 0;
    for (int r = 0; r < layers_.rowCount(); ++r) total_us += layers_.mean_us(r, LayerProfileModel::Total);
    summary_->setText(totals.tokens == 0 ? QString() : tr("%1 tokens, %2 µs per token in the layers").arg(totals.tokens).arg(total_us, 0, 'f', 1));
    rebuild_chart();
    rebuild_counter_chart();
}

void ProfilerView::rebuild_chart() {
    QStringList categories;
    for (int r = 0; r < layers_.rowCount(); ++r) categories << tr("L%1").arg(layers_.totals().layers[static_cast<size_t>(r)]);
    const int columns[3] = {LayerProfileModel::Attention, LayerProfileModel::Router, LayerProfileModel::Experts};
    // The series is made again only when the layers change; new values replace the old in place, which keeps
    // Qt Charts from drawing a removed axis's labels over the new one.
    if (categories != categories_ || sets_[0] == nullptr) {
        reset_chart(chart_);
        categories_ = categories;
        auto* series = new QStackedBarSeries;
        const char* names[3] = {QT_TR_NOOP("attention"), QT_TR_NOOP("router"), QT_TR_NOOP("experts")};
        const QColor colors[3] = {QColor(66, 133, 244), QColor(251, 188, 5), QColor(52, 168, 83)};
        for (int s = 0; s < 3; ++s) {
            sets_[s] = new QBarSet(tr(names[s]));
            sets_[s]->setColor(colors[s]);
            for (int r = 0; r < layers_.rowCount(); ++r) *sets_[s] << 0.0;
            series->append(sets_[s]);
        }
        chart_->addSeries(series);
        auto* x = new QBarCategoryAxis;
        x->append(categories_);
        y_axis_ = new QValueAxis;
        y_axis_->setTitleText(tr("µs per token"));
        chart_->addAxis(x, Qt::AlignBottom);
        chart_->addAxis(y_axis_, Qt::AlignLeft);
        series->attachAxis(x);
        series->attachAxis(y_axis_);
    }
    double top = 0;
    for (int r = 0; r < layers_.rowCount(); ++r) {
        top = std::max(top, layers_.mean_us(r, LayerProfileModel::Total));
        for (int s = 0; s < 3; ++s) sets_[s]->replace(r, layers_.mean_us(r, columns[s]));
    }
    y_axis_->setRange(0, top > 0 ? top * 1.1 : 1.0);
}

void ProfilerView::rebuild_counter_chart() {
    const int counter = counter_->currentIndex();
    QStringList categories;
    for (int r = 0; r < layers_.rowCount(); ++r) categories << tr("L%1").arg(layers_.totals().layers[static_cast<size_t>(r)]);
    if (counter < 0) {
        reset_chart(counter_chart_);
        counter_bars_ = nullptr;
        counter_chart_->setTitle(tr("No counters"));
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
    }
    double top = 0;
    for (int r = 0; r < layers_.rowCount(); ++r) {
        const double v = layers_.mean_counter(r, counter);
        counter_bars_->replace(r, v);
        top = std::max(top, v);
    }
    counter_axis_->setRange(0, top > 0 ? top * 1.1 : 1.0);
    counter_chart_->setTitle(tr("%1 per token").arg(counter_->currentText()));
}

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
