#include "ui/views/kernels_view.h"

#include <QCheckBox>
#include <QComboBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSettings>
#include <QSpinBox>
#include <QSplitter>
#include <QTabWidget>
#include <QTableView>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "kernels/registry.h"
#include "ui/colors.h"
#include "ui/views/bar_chart.h"
#include "ui/views/elided_label.h"

namespace colibri::studio {

namespace {

constexpr double kMissing = std::numeric_limits<double>::quiet_NaN();

// Fixed colours per variant, so that a variant looks the same in every chart.
QColor variant_color(const QString& variant) {
    if (variant == QLatin1String("scalar")) return {158, 158, 158};
    if (variant == QLatin1String("avx2")) return {66, 133, 244};
    if (variant == QLatin1String("avx512")) return {52, 168, 83};
    if (variant == QLatin1String("neon")) return {234, 67, 53};
    if (variant == QLatin1String("neon_translated")) return {251, 140, 0};
    return {171, 71, 188};
}

QSpinBox* count_box(int lo, int hi, int value, const QString& tip) {
    auto* s = new QSpinBox;
    s->setRange(lo, hi);
    s->setValue(value);
    s->setToolTip(tip);
    return s;
}

}  // namespace

KernelsView::KernelsView(QWidget* parent) : QWidget(parent) {
    // Which kernels the chat runs on.
    session_kernel_ = new QComboBox;
    session_kernel_->setObjectName(QStringLiteral("session_kernel"));
    session_kernel_->addItem(tr("automatic"), QString());
    session_kernel_->setItemData(0, tr("COLIBRI_KERNEL when set, else the tune cache's choice, else the widest this CPU runs"), Qt::ToolTipRole);
    for (kernels::Variant v : kernels::supported_variants()) {
        session_kernel_->addItem(QString::fromLatin1(kernels::variant_display_name(v)), QString::fromLatin1(kernels::variant_name(v)));
        if (v == kernels::Variant::NeonTranslated)
            session_kernel_->setItemData(session_kernel_->count() - 1, tr(tools::kNeonTranslatedNote), Qt::ToolTipRole);
    }
    connect(session_kernel_, &QComboBox::currentIndexChanged, this, [this] {
        if (neon_note_) update_neon_note();
        emit sessionKernelChanged(session_kernel_->currentData().toString());
    });
    log_scale_ = new QCheckBox(tr("log scale"));
    log_scale_->setChecked(true);
    auto* export_button = new QPushButton(tr("Export…"));
    export_button->setToolTip(tr("Every comparison and tune run of this machine as JSON, or the comparisons as CSV"));
    connect(export_button, &QPushButton::clicked, this, &KernelsView::export_dialog);

    // End to end on the model.
    prompt_tokens_ = count_box(1, 4096, 64, tr("prompt tokens (the conversation's, when it has that many; else random ids)"));
    decode_tokens_ = count_box(1, 4096, 32, tr("tokens decoded greedily after the prompt"));
    reps_ = count_box(1, 20, 3, tr("repetitions per variant, interleaved; the median is shown with the min–max"));
    compare_ = new QPushButton(tr("Compare"));
    compare_->setObjectName(QStringLiteral("compare_kernels"));
    compare_->setToolTip(tr("Run the same prompt and decode on the model with every kernel variant this machine runs"));
    compare_cancel_ = new QPushButton(tr("Cancel"));
    compare_progress_ = new QProgressBar;
    compare_progress_->setRange(0, 1);
    compare_progress_->setValue(0);
    compare_progress_->setMaximumWidth(120);
    compare_status_ = new ElidedLabel(tr("Load a model, then compare the kernel variants on it."));
    compare_status_->setObjectName(QStringLiteral("comparison_status"));
    // One line each, whole in the tooltip: at dock size the charts keep the height.
    reliability_ = new ElidedLabel;
    reliability_->setObjectName(QStringLiteral("comparison_reliability"));
    reliability_->hide();
    neon_note_ = new ElidedLabel(tr(tools::kNeonTranslatedNote));
    neon_note_->setObjectName(QStringLiteral("neon_translated_note"));
    neon_note_->hide();
    connect(compare_, &QPushButton::clicked, this, &KernelsView::start_comparison);
    connect(compare_cancel_, &QPushButton::clicked, this, &KernelsView::cancel_comparison);
    speed_chart_ = new BarChart;
    speed_chart_->setObjectName(QStringLiteral("kernel_speed_chart"));
    speed_chart_->set_title(tr("Tokens/s on the model"));
    speed_chart_->set_axis_title(tr("tokens/s"));
    layer_chart_ = new BarChart;
    layer_chart_->setObjectName(QStringLiteral("kernel_layer_chart"));
    layer_chart_->set_title(tr("Decode time per token and layer"));
    layer_chart_->set_axis_title(tr("µs"));

    // Micro-benchmarks.
    run_ = new QPushButton(tr("Run tuner"));
    run_->setToolTip(tr("Measure every kernel variant on this machine, as `colibri tune` does"));
    cancel_ = new QPushButton(tr("Cancel"));
    progress_ = new QProgressBar;
    progress_->setRange(0, 1);
    progress_->setValue(0);
    progress_->setMaximumWidth(120);
    connect(run_, &QPushButton::clicked, this, &KernelsView::run_tuner);
    connect(cancel_, &QPushButton::clicked, this, &KernelsView::cancel_tuner);
    connect(&tuner_, &TuneRunner::progress, this, [this](int done, int total, const QString& measured) {
        progress_->setRange(0, total);
        progress_->setValue(done);
        status_->setText(tr("Tuning: %1 of %2 measured (%3)").arg(done).arg(total).arg(measured));
    });
    connect(&tuner_, &TuneRunner::finished, this, [this](const TuneReport& report, const QString& note) {
        set_tuning(false);
        add_own_report(report);
        status_->setText(tr("Tuned this machine: %n result(s)", nullptr, static_cast<int>(report.results.size())) +
                         (note.isEmpty() ? QStringLiteral(".") : QStringLiteral("; ") + note + QLatin1Char('.')));
    });
    connect(&tuner_, &TuneRunner::cancelled, this, [this](const TuneReport& partial) {
        set_tuning(false);
        if (partial.results.empty()) {
            status_->setText(tr("Tuning cancelled before the first measurement."));
            return;
        }
        add_own_report(partial);
        status_->setText(tr("Tuning cancelled: the %n finished measurement(s) are kept (not saved as the tuned choice).", nullptr,
                            static_cast<int>(partial.results.size())));
    });
    auto* import = new QPushButton(tr("Import…"));
    import->setToolTip(tr("Import `colibri tune --json` reports of other machines"));
    auto* remove = new QPushButton(tr("Remove"));
    remove->setToolTip(tr("Remove the report of the selected row"));
    auto* clear = new QPushButton(tr("Clear"));
    connect(import, &QPushButton::clicked, this, &KernelsView::import_dialog);
    connect(remove, &QPushButton::clicked, this, [this] {
        const QModelIndex i = table_->currentIndex();
        if (!i.isValid()) return;
        const int report = filter_.mapToSource(i).data(KernelResultsModel::ReportRole).toInt();
        const QString source = results_.reports()[static_cast<size_t>(report)].source;
        results_.remove_report(report);
        data_.remove_own_report(source);
        refill_selectors();
    });
    connect(clear, &QPushButton::clicked, this, [this] {
        results_.clear();
        data_.clear_own_reports();
        refill_selectors();
    });
    op_ = new QComboBox;
    type_ = new QComboBox;
    shape_ = new QComboBox;
    metric_ = new QComboBox;
    for (QComboBox* box : {op_, type_, shape_, metric_}) {
        box->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
        box->setMinimumContentsLength(6);
    }
    metric_->addItem(tr("GFLOP/s"), static_cast<int>(KernelResultsModel::Metric::Gflops));
    metric_->addItem(tr("GB/s"), static_cast<int>(KernelResultsModel::Metric::Gbps));
    metric_->addItem(tr("median µs"), static_cast<int>(KernelResultsModel::Metric::Microseconds));
    connect(op_, &QComboBox::currentTextChanged, this, [this] {
        type_->blockSignals(true);
        type_->clear();
        type_->addItems(results_.types(op_->currentText()));
        type_->blockSignals(false);
        emit type_->currentTextChanged(type_->currentText());
    });
    connect(type_, &QComboBox::currentTextChanged, this, [this] {
        shape_->blockSignals(true);
        shape_->clear();
        shape_->addItems(results_.shapes(op_->currentText(), type_->currentText()));
        shape_->blockSignals(false);
        rebuild_chart();
    });
    connect(shape_, &QComboBox::currentTextChanged, this, &KernelsView::rebuild_chart);
    connect(metric_, &QComboBox::currentIndexChanged, this, &KernelsView::rebuild_chart);
    connect(log_scale_, &QCheckBox::toggled, this, [this](bool on) {
        for (BarChart* c : {speed_chart_, layer_chart_, tuner_chart_}) c->set_log_scale(on);
    });
    status_ = new ElidedLabel(tr("Import reports written by `colibri tune --json` on any machine (an ARM board, say) to compare its "
                                 "kernel variants with this one's."));
    status_->setObjectName(QStringLiteral("tuner_status"));
    tuner_chart_ = new BarChart;
    tuner_chart_->setObjectName(QStringLiteral("kernel_tuner_chart"));
    for (BarChart* c : {speed_chart_, layer_chart_, tuner_chart_}) c->set_log_scale(true);

    filter_.setSourceModel(&results_);
    filter_.setSortRole(Qt::EditRole);
    filter_.setFilterKeyColumn(-1);
    filter_.setFilterCaseSensitivity(Qt::CaseInsensitive);
    filter_edit_ = new QLineEdit;
    filter_edit_->setPlaceholderText(tr("filter results (machine, op, type, variant…)"));
    connect(filter_edit_, &QLineEdit::textChanged, &filter_, &QSortFilterProxyModel::setFilterFixedString);
    table_ = new QTableView;
    table_->setModel(&filter_);
    table_->setSortingEnabled(true);
    table_->setSelectionBehavior(QAbstractItemView::SelectRows);
    table_->verticalHeader()->hide();
    table_->horizontalHeader()->setStretchLastSection(true);
    comparison_table_ = new QTableView;
    comparison_table_->setModel(&comparison_model_);
    comparison_table_->verticalHeader()->hide();
    comparison_table_->horizontalHeader()->setStretchLastSection(true);
    // Headers whole from the start ("prompt tok/s (min–max)" was clipped in an empty table at 1280×720), and again
    // whenever the columns change (a second comparison beside).
    for (QTableView* t : {table_, comparison_table_}) {
        t->resizeColumnsToContents();
        connect(t->model(), &QAbstractItemModel::modelReset, t, &QTableView::resizeColumnsToContents);
        connect(t->model(), &QAbstractItemModel::headerDataChanged, t, &QTableView::resizeColumnsToContents);
    }
    comparison_selector_ = new QComboBox;
    comparison_selector_->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
    comparison_selector_->setMinimumContentsLength(16);
    connect(comparison_selector_, &QComboBox::currentIndexChanged, this, [this](int i) {
        if (i >= 0 && static_cast<size_t>(i) < data_.comparisons().size()) show_comparison(data_.comparisons()[static_cast<size_t>(i)]);
    });
    baseline_selector_ = new QComboBox;
    baseline_selector_->setObjectName(QStringLiteral("comparison_baseline"));
    baseline_selector_->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
    baseline_selector_->setMinimumContentsLength(16);
    baseline_selector_->setToolTip(tr("Another comparison side by side with this one: its decode tokens/s per variant, and the ratio"));
    baseline_selector_->addItem(tr("nothing"), -1);
    connect(baseline_selector_, &QComboBox::currentIndexChanged, this, [this] {
        const int i = comparison_selector_->currentIndex();
        if (i >= 0 && static_cast<size_t>(i) < data_.comparisons().size()) show_comparison(data_.comparisons()[static_cast<size_t>(i)]);
    });

    // Left: the model; right: the micro-benchmarks.
    auto* model_side = new QWidget;
    auto* model_grid = new QGridLayout(model_side);
    model_grid->setContentsMargins(0, 0, 0, 0);
    auto* model_buttons = new QHBoxLayout;
    model_buttons->addWidget(compare_);
    model_buttons->addWidget(compare_cancel_);
    model_buttons->addWidget(compare_progress_);
    model_buttons->addWidget(new QLabel(tr("prompt")));
    model_buttons->addWidget(prompt_tokens_);
    model_buttons->addWidget(new QLabel(tr("decode")));
    model_buttons->addWidget(decode_tokens_);
    model_buttons->addWidget(new QLabel(tr("reps")));
    model_buttons->addWidget(reps_);
    model_buttons->addStretch();
    model_grid->addLayout(model_buttons, 0, 0, 1, 2);
    model_grid->addWidget(compare_status_, 1, 0, 1, 2);
    model_grid->addWidget(reliability_, 2, 0, 1, 2);
    model_grid->addWidget(neon_note_, 3, 0, 1, 2);
    model_grid->addWidget(speed_chart_, 4, 0);
    model_grid->addWidget(layer_chart_, 4, 1);
    model_grid->setColumnStretch(0, 2);
    model_grid->setColumnStretch(1, 3);
    model_grid->setRowStretch(4, 1);

    auto* tuner_side = new QWidget;
    auto* tuner_layout = new QVBoxLayout(tuner_side);
    tuner_layout->setContentsMargins(0, 0, 0, 0);
    auto* tuner_buttons = new QHBoxLayout;
    tuner_buttons->addWidget(run_);
    tuner_buttons->addWidget(cancel_);
    tuner_buttons->addWidget(progress_);
    tuner_buttons->addWidget(import);
    tuner_buttons->addWidget(remove);
    tuner_buttons->addWidget(clear);
    tuner_buttons->addStretch();
    auto* selectors = new QHBoxLayout;
    for (QComboBox* box : {op_, type_, shape_, metric_}) selectors->addWidget(box);
    selectors->addStretch();
    tuner_layout->addLayout(tuner_buttons);
    tuner_layout->addLayout(selectors);
    tuner_layout->addWidget(status_);
    tuner_layout->addWidget(tuner_chart_, 1);

    auto* charts = new QSplitter(Qt::Horizontal);
    charts->addWidget(model_side);
    charts->addWidget(tuner_side);
    charts->setStretchFactor(0, 3);
    charts->setStretchFactor(1, 2);

    auto* model_tab = new QWidget;
    auto* model_tab_layout = new QVBoxLayout(model_tab);
    model_tab_layout->setContentsMargins(0, 0, 0, 0);
    auto* selectors_row = new QHBoxLayout;
    selectors_row->addWidget(comparison_selector_, 1);
    selectors_row->addWidget(new QLabel(tr("beside:")));
    selectors_row->addWidget(baseline_selector_, 1);
    model_tab_layout->addLayout(selectors_row);
    model_tab_layout->addWidget(comparison_table_, 1);
    auto* tuner_tab = new QWidget;
    auto* tuner_tab_layout = new QVBoxLayout(tuner_tab);
    tuner_tab_layout->setContentsMargins(0, 0, 0, 0);
    tuner_tab_layout->addWidget(filter_edit_);
    tuner_tab_layout->addWidget(table_, 1);
    auto* tables = new QTabWidget;
    tables->setDocumentMode(true);
    tables->addTab(model_tab, tr("Comparisons on the model"));
    tables->addTab(tuner_tab, tr("Micro-benchmarks"));

    auto* splitter = new QSplitter(Qt::Vertical);
    splitter->addWidget(charts);
    splitter->addWidget(tables);
    splitter->setStretchFactor(0, 3);
    splitter->setStretchFactor(1, 1);

    auto* top = new QHBoxLayout;
    top->addWidget(new QLabel(tr("Chat runs on:")));
    top->addWidget(session_kernel_);
    top->addWidget(log_scale_);
    top->addStretch();
    top->addWidget(export_button);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 4);
    layout->setSpacing(3);
    layout->addLayout(top);
    layout->addWidget(splitter, 1);
    set_tuning(false);
    set_comparing(false);
    rebuild_chart();
}

QLabel* KernelsView::status_label() const { return status_; }
QLabel* KernelsView::comparison_status() const { return compare_status_; }
QLabel* KernelsView::reliability_label() const { return reliability_; }
QLabel* KernelsView::neon_note() const { return neon_note_; }

void KernelsView::run_tuner() {
    if (tuner_.running()) return;
    set_tuning(true);
    status_->setText(tr("Starting the tuner…"));
    tuner_.start();
}

void KernelsView::cancel_tuner() { tuner_.cancel(); }

void KernelsView::set_tuning(bool on) {
    run_->setEnabled(!on);
    cancel_->setEnabled(on);
    if (on) progress_->setValue(0);
}

void KernelsView::set_comparing(bool on) {
    comparing_ = on;
    compare_->setEnabled(!on && model_loaded_);
    compare_cancel_->setEnabled(on);
    for (QSpinBox* s : {prompt_tokens_, decode_tokens_, reps_}) s->setEnabled(!on);
    if (on) compare_progress_->setValue(0);
}

void KernelsView::set_model_loaded(bool loaded) {
    model_loaded_ = loaded;
    set_comparing(comparing_);
    // The prompt line follows the model; a comparison's result stays until the next one.
    if (!comparing_ && comparison_selector_->count() == 0)
        compare_status_->setText(loaded ? tr("Compare runs the same prompt and decode on the loaded model with every kernel variant this machine runs.")
                                        : tr("Load a model, then compare the kernel variants on it."));
}

void KernelsView::set_comparison_size(int prompt_tokens, int decode_tokens, int reps) {
    prompt_tokens_->setValue(prompt_tokens);
    decode_tokens_->setValue(decode_tokens);
    reps_->setValue(reps);
}

void KernelsView::start_comparison() {
    if (comparing_ || !model_loaded_) return;
    set_comparing(true);
    compare_status_->setText(tr("Starting…"));
    KernelComparisonRequest request;
    request.prompt_tokens = prompt_tokens_->value();
    request.decode_tokens = decode_tokens_->value();
    request.reps = reps_->value();
    emit compareRequested(request);
}

void KernelsView::cancel_comparison() {
    if (comparing_) emit compareCancelled();
}

void KernelsView::comparison_progress(int done, int total, const QString& what) {
    compare_progress_->setRange(0, std::max(total, 1));
    compare_progress_->setValue(done);
    if (!what.isEmpty()) compare_status_->setText(tr("Running %1 (%2 of %3 runs done)").arg(what).arg(done).arg(total));
}

void KernelsView::comparison_failed(const QString& error) {
    set_comparing(false);
    compare_status_->setText(tr("The comparison did not run: %1").arg(error));
}

void KernelsView::comparison_finished(const KernelComparison& result) {
    set_comparing(false);
    if (!result.error.isEmpty() && result.runs.empty()) {
        compare_status_->setText(tr("The comparison failed: %1").arg(result.error));
        return;
    }
    if (result.runs.empty()) {
        compare_status_->setText(tr("Cancelled before every variant had run once: nothing to compare."));
        return;
    }
    data_.add_comparison(result);
    add_comparison_item(result);
    comparison_selector_->setCurrentIndex(comparison_selector_->count() - 1);
}

void KernelsView::add_comparison_item(const KernelComparison& c) {
    const QString name = tr("%1: %2, %3 threads").arg(c.when, QFileInfo(c.model).fileName()).arg(c.threads);
    comparison_selector_->addItem(name);
    baseline_selector_->addItem(name, comparison_selector_->count() - 1);
}

void KernelsView::set_baseline(int comparison) {
    const int i = baseline_selector_->findData(comparison);
    baseline_selector_->setCurrentIndex(i >= 0 ? i : 0);
}

void KernelsView::show_reliability(const KernelComparison& c) {
    const QString why = c.unreliable();
    const tools::MachineLoad load = c.load();
    const size_t reps = c.runs.empty() ? 0 : c.runs.front().report.decode_tps.samples.size();
    QString text;
    if (!why.isEmpty()) {
        text = tr("⚠ Unreliable: %1. Run it again on a quiet machine.").arg(why);
    } else {
        text = load.measured ? tr("The machine was quiet: %1.").arg(QString::fromStdString(load.describe()))
                             : tr("The machine's load was not measured (%1).").arg(QString::fromStdString(load.not_measured));
        text += reps > 1 ? tr(" Every variant's repetitions lie within %1 % of their median.").arg(100.0 * tools::kLargeSpread, 0, 'f', 0)
                         : tr(" One repetition: no spread to judge it by (3 or more tell).");
    }
    reliability_->setText(text);
    reliability_->setStyleSheet(why.isEmpty() ? QString() : QStringLiteral("color: %1; font-weight: bold").arg(status_color(StatusColor::Warning).name()));
    reliability_->show();
}

void KernelsView::update_neon_note() {
    const bool shown = comparison_model_.comparison().has_variant(kernels::Variant::NeonTranslated) ||
                       (comparison_model_.baseline() && comparison_model_.baseline()->has_variant(kernels::Variant::NeonTranslated)) ||
                       categories_.contains(QString::fromLatin1(kernels::variant_name(kernels::Variant::NeonTranslated))) ||
                       session_kernel_->currentData().toString() == QLatin1String(kernels::variant_name(kernels::Variant::NeonTranslated));
    neon_note_->setVisible(shown);
}

void KernelsView::show_comparison(const KernelComparison& c) {
    const int b = baseline_selector_->currentData().toInt();
    std::optional<KernelComparison> baseline;
    if (b >= 0 && static_cast<size_t>(b) < data_.comparisons().size()) baseline = data_.comparisons()[static_cast<size_t>(b)];
    comparison_model_.set_comparison(c);
    comparison_model_.set_baseline(baseline);
    comparison_table_->resizeColumnsToContents();
    show_reliability(c);
    QStringList parts;
    for (const KernelRun& r : c.runs) parts << QStringLiteral("%1 %2").arg(variant_label(r), median_with_range(r.report.decode_tps, 1));
    QString text = tr("%1: prompt %2 + decode %3 tokens × %4 reps, %5 threads; decode tok/s: %6")
                       .arg(QFileInfo(c.model).fileName()).arg(c.prompt_tokens).arg(c.decode_tokens).arg(c.runs.empty() ? 0 : c.runs.front().report.decode_tps.samples.size())
                       .arg(c.threads).arg(parts.join(QStringLiteral(", ")));
    text += c.identical_output() ? tr("; every variant decoded the same tokens") : tr("; THE VARIANTS DECODED DIFFERENT TOKENS");
    if (!c.complete) text += tr(" (stopped early: complete repetitions only)");
    compare_status_->setText(text);
    // Tokens/s: prompt and decode, a bar per variant.
    QVector<BarChart::Series> speed, layers;
    QStringList layer_categories;
    if (!c.runs.empty()) {
        for (const tools::LayerTimes& l : c.runs.front().report.decode_layers) layer_categories << tr("L%1").arg(l.layer);
        layer_categories << tr("lm head");
    }
    auto range = [](const tools::Spread& s) { return qMakePair(s.min, s.max); };
    for (const KernelRun& r : c.runs) {
        speed.push_back({variant_label(r), variant_color(variant_key(r)), {r.report.prompt_tps.median, r.report.decode_tps.median}, {},
                         {range(r.report.prompt_tps), range(r.report.decode_tps)}});
        QVector<double> v;
        for (const tools::LayerTimes& l : r.report.decode_layers) v << l.total_us();
        v << r.report.decode_lm_head_us;
        layers.push_back({variant_label(r), variant_color(variant_key(r)), v, {}});
    }
    layer_chart_->set_data(layer_categories, layers);
    if (!baseline) {
        speed_chart_->set_title(tr("Tokens/s, median (min–max)"));
        speed_chart_->set_data({tr("prompt"), tr("decode")}, speed);
    } else {
        // Side by side: a group per variant, this comparison's decode beside the baseline's.
        QStringList variants;
        BarChart::Series now{c.when, expert_color(0), {}, {}, {}}, then{baseline->when, expert_color(1), {}, {}, {}};
        for (const KernelRun& r : c.runs) {
            variants << variant_label(r);
            now.values << r.report.decode_tps.median;
            now.ranges << range(r.report.decode_tps);
            auto old = std::find_if(baseline->runs.begin(), baseline->runs.end(), [&](const KernelRun& o) { return o.variant == r.variant; });
            then.values << (old != baseline->runs.end() ? old->report.decode_tps.median : kMissing);
            then.ranges << (old != baseline->runs.end() ? range(old->report.decode_tps) : qMakePair(kMissing, kMissing));
        }
        speed_chart_->set_title(tr("Decode tokens/s, two runs (min–max)"));
        speed_chart_->set_data(variants, {now, then});
    }
    update_neon_note();
}

Status KernelsView::import_report(const QString& path) {
    auto report = read_tune_report(path);
    if (!report) {
        status_->setText(QString::fromStdString(report.message()));
        return report.status();
    }
    results_.add_report(report.value());
    status_->setText(tr("%n report(s) imported.", nullptr, static_cast<int>(results_.reports().size())));
    table_->resizeColumnsToContents();
    refill_selectors();
    return Status::ok();
}

void KernelsView::add_own_report(const TuneReport& report) {
    results_.add_report(data_.add_own_report(report));
    table_->resizeColumnsToContents();
    refill_selectors();
}

void KernelsView::import_dialog() {
    const QStringList paths = QFileDialog::getOpenFileNames(this, tr("Import tune reports"), QString(), tr("Tune reports (*.json)"));
    for (const QString& p : paths) import_report(p);
}

void KernelsView::refill_selectors() {
    const QString op = op_->currentText(), type = type_->currentText(), shape = shape_->currentText();
    op_->blockSignals(true);
    op_->clear();
    op_->addItems(results_.ops());
    op_->blockSignals(false);
    if (!op.isEmpty() && op_->findText(op) >= 0) op_->setCurrentText(op);
    emit op_->currentTextChanged(op_->currentText());
    if (!type.isEmpty() && type_->findText(type) >= 0) type_->setCurrentText(type);
    if (!shape.isEmpty() && shape_->findText(shape) >= 0) shape_->setCurrentText(shape);
}

void KernelsView::select(const QString& op, const QString& type, const QString& shape) {
    op_->setCurrentText(op);
    type_->setCurrentText(type);
    shape_->setCurrentText(shape);
    rebuild_chart();
}

KernelResultsModel::Metric KernelsView::metric() const { return static_cast<KernelResultsModel::Metric>(metric_->currentData().toInt()); }

void KernelsView::rebuild_chart() {
    const QString op = op_->currentText(), type = type_->currentText(), shape = shape_->currentText();
    categories_ = results_.variants(op, type, shape);
    values_.clear();
    tuner_chart_->set_title(op.isEmpty() ? tr("Micro-benchmarks: run the tuner or import a report")
                                         : tr("%1 %2 %3").arg(op, type, shape));
    tuner_chart_->set_axis_title(metric_->currentText());
    QStringList labels;
    for (const QString& v : categories_) {
        kernels::Variant variant{};
        labels << (kernels::variant_from_name(v.toStdString(), &variant) ? QString::fromLatin1(kernels::variant_display_name(variant)) : v);
    }
    QVector<BarChart::Series> series;
    for (int r = 0; r < static_cast<int>(results_.reports().size()); ++r) {
        BarChart::Series s;
        s.name = results_.reports()[static_cast<size_t>(r)].label();
        s.color = expert_color(r);
        QList<qreal> row;
        for (const QString& variant : categories_) {
            // A variant one machine lacks (AVX-512 on an ARM board) is an empty slot, not zero performance.
            const double v = results_.value(r, op, type, shape, variant, metric());
            row << std::max(v, 0.0);
            s.values << (v > 0 ? v : kMissing);
        }
        values_.push_back(row);
        series.push_back(s);
    }
    tuner_chart_->set_data(labels, series);
    update_neon_note();
}

QStringList KernelsView::chart_categories() const { return categories_; }

QList<qreal> KernelsView::chart_values(int report) const {
    return report >= 0 && report < static_cast<int>(values_.size()) ? values_[static_cast<size_t>(report)] : QList<qreal>{};
}

void KernelsView::export_dialog() {
    const QString path = QFileDialog::getSaveFileName(this, tr("Export kernel results"), QStringLiteral("kernels.json"),
                                                      tr("JSON (*.json);;CSV, comparisons only (*.csv)"));
    if (path.isEmpty()) return;
    const Status s = export_results(path);
    compare_status_->setText(s ? tr("Exported to %1").arg(path) : QString::fromStdString(s.message()));
}

void KernelsView::set_store(const QString& path) {
    data_.set_store(path);
    for (const KernelComparison& c : data_.comparisons()) add_comparison_item(c);
    for (const TuneReport& r : data_.own_reports()) results_.add_report(r);
    if (comparison_selector_->count() > 0) comparison_selector_->setCurrentIndex(comparison_selector_->count() - 1);
    table_->resizeColumnsToContents();
    refill_selectors();
}

void KernelsView::save_settings(QSettings& s) const {
    QStringList paths;
    for (const TuneReport& r : results_.reports())
        if (QFileInfo::exists(r.source)) paths << r.source;  // imported files; this machine's runs are in the store
    s.setValue("kernels/reports", paths);
    s.setValue("kernels/metric", metric_->currentIndex());
    s.setValue("kernels/session", session_kernel_->currentData().toString());
    s.setValue("kernels/log_scale", log_scale_->isChecked());
    s.setValue("kernels/comparison", QList<QVariant>{prompt_tokens_->value(), decode_tokens_->value(), reps_->value()});
}

void KernelsView::restore_settings(QSettings& s) {
    metric_->setCurrentIndex(s.value("kernels/metric", 0).toInt());
    log_scale_->setChecked(s.value("kernels/log_scale", true).toBool());
    const int session = session_kernel_->findData(s.value("kernels/session").toString());
    if (session >= 0) session_kernel_->setCurrentIndex(session);
    const QList<QVariant> size = s.value("kernels/comparison").toList();
    if (size.size() == 3) set_comparison_size(size[0].toInt(), size[1].toInt(), size[2].toInt());
    for (const QString& p : s.value("kernels/reports").toStringList()) import_report(p);
}

}  // namespace colibri::studio
