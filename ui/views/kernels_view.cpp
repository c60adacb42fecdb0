#include "ui/views/kernels_view.h"

#include <QBarCategoryAxis>
#include <QBarSeries>
#include <QBarSet>
#include <QChart>
#include <QChartView>
#include <QComboBox>
#include <QFileDialog>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSettings>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>
#include <QValueAxis>

#include "ui/colors.h"
#include "ui/views/chart_reset.h"

namespace colibri::studio {

KernelsView::KernelsView(QWidget* parent) : QWidget(parent) {
    run_ = new QPushButton(tr("Run tuner"));
    run_->setToolTip(tr("Measure every kernel variant on this machine, as `colibri tune` does"));
    cancel_ = new QPushButton(tr("Cancel"));
    progress_ = new QProgressBar;
    progress_->setRange(0, 1);
    progress_->setValue(0);
    progress_->setMaximumWidth(160);

    connect(run_, &QPushButton::clicked, this, &KernelsView::run_tuner);
    connect(cancel_, &QPushButton::clicked, this, &KernelsView::cancel_tuner);
    connect(&tuner_, &TuneRunner::progress, this, [this](int done, int total, const QString& measured) {
        progress_->setRange(0, total);
        progress_->setValue(done);
        status_->setText(tr("Tuning: %1 of %2 measured (%3)").arg(done).arg(total).arg(measured));
    });
    connect(&tuner_, &TuneRunner::finished, this, [this](const TuneReport& report, const QString& note) {
        set_tuning(false);
        results_.add_report(report);
        status_->setText(tr("Tuned this machine: %n result(s)", nullptr, static_cast<int>(report.results.size())) +
                         (note.isEmpty() ? QStringLiteral(".") : QStringLiteral("; ") + note + QLatin1Char('.')));
        table_->resizeColumnsToContents();
        refill_selectors();
    });
    connect(&tuner_, &TuneRunner::failed, this, [this](const QString& error) {
        set_tuning(false);
        status_->setText(tr("The tuner failed: %1").arg(error));
    });
    connect(&tuner_, &TuneRunner::cancelled, this, [this] {
        set_tuning(false);
        status_->setText(tr("Tuning cancelled."));
    });
    auto* import = new QPushButton(tr("Import report…"));
    auto* remove = new QPushButton(tr("Remove report"));
    auto* clear = new QPushButton(tr("Clear"));
    connect(import, &QPushButton::clicked, this, &KernelsView::import_dialog);
    connect(remove, &QPushButton::clicked, this, [this] {
        const QModelIndex i = table_->currentIndex();
        if (!i.isValid()) return;
        results_.remove_report(filter_.mapToSource(i).data(KernelResultsModel::ReportRole).toInt());
        refill_selectors();
    });
    connect(clear, &QPushButton::clicked, this, [this] {
        results_.clear();
        refill_selectors();
    });
    op_ = new QComboBox;
    type_ = new QComboBox;
    shape_ = new QComboBox;
    metric_ = new QComboBox;
    for (QComboBox* box : {op_, type_, shape_, metric_}) box->setSizeAdjustPolicy(QComboBox::AdjustToContents);
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

    status_ = new QLabel(tr("Import reports written by `colibri tune --json` on any machine (an ARM board, say) to compare "
                            "its kernel variants with this one's."));
    status_->setWordWrap(true);
    chart_ = new QChart;
    chart_->legend()->setAlignment(Qt::AlignBottom);
    chart_view_ = new QChartView(chart_);
    chart_view_->setRenderHint(QPainter::Antialiasing);
    chart_view_->setMinimumHeight(220);

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

    auto* buttons = new QHBoxLayout;
    buttons->addWidget(run_);
    buttons->addWidget(cancel_);
    buttons->addWidget(progress_);
    buttons->addSpacing(16);
    buttons->addWidget(import);
    buttons->addWidget(remove);
    buttons->addWidget(clear);
    buttons->addSpacing(16);
    for (auto [label, box] : {std::pair{tr("op"), op_}, {tr("type"), type_}, {tr("shape"), shape_}, {tr("metric"), metric_}}) {
        buttons->addWidget(new QLabel(label));
        buttons->addWidget(box);
    }
    buttons->addStretch();
    auto* bottom = new QWidget;
    auto* bottom_layout = new QVBoxLayout(bottom);
    bottom_layout->setContentsMargins(0, 0, 0, 0);
    bottom_layout->addWidget(filter_edit_);
    bottom_layout->addWidget(table_, 1);
    auto* splitter = new QSplitter(Qt::Vertical);
    splitter->addWidget(chart_view_);
    splitter->addWidget(bottom);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 4);
    layout->addWidget(status_);
    layout->addLayout(buttons);
    layout->addWidget(splitter, 1);
    set_tuning(false);
    rebuild_chart();
}

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
    reset_chart(chart_);
    const QString op = op_->currentText(), type = type_->currentText(), shape = shape_->currentText();
    categories_ = results_.variants(op, type, shape);
    values_.clear();
    chart_->setTitle(op.isEmpty() ? tr("No tune report imported") : tr("%1 %2 %3: %4").arg(op, type, shape, metric_->currentText()));
    if (categories_.isEmpty()) return;
    auto* series = new QBarSeries;
    double top = 0;
    for (int r = 0; r < static_cast<int>(results_.reports().size()); ++r) {
        auto* set = new QBarSet(results_.reports()[static_cast<size_t>(r)].label());
        set->setColor(expert_color(r));
        QList<qreal> row;
        for (const QString& variant : categories_) {
            // A variant one machine lacks (AVX-512 on an ARM board) is an empty slot, not zero performance.
            const double v = results_.value(r, op, type, shape, variant, metric());
            row << std::max(v, 0.0);
            top = std::max(top, v);
        }
        set->append(row);
        values_.push_back(row);
        series->append(set);
    }
    chart_->addSeries(series);
    auto* x = new QBarCategoryAxis;
    x->append(categories_);
    auto* y = new QValueAxis;
    y->setRange(0, top > 0 ? top * 1.1 : 1.0);
    y->setTitleText(metric_->currentText());
    chart_->addAxis(x, Qt::AlignBottom);
    chart_->addAxis(y, Qt::AlignLeft);
    series->attachAxis(x);
    series->attachAxis(y);
}

QStringList KernelsView::chart_categories() const { return categories_; }

QList<qreal> KernelsView::chart_values(int report) const {
    return report >= 0 && report < static_cast<int>(values_.size()) ? values_[static_cast<size_t>(report)] : QList<qreal>{};
}

void KernelsView::save_settings(QSettings& s) const {
    QStringList paths;
    for (const TuneReport& r : results_.reports()) paths << r.source;
    s.setValue("kernels/reports", paths);
    s.setValue("kernels/metric", metric_->currentIndex());
}

void KernelsView::restore_settings(QSettings& s) {
    metric_->setCurrentIndex(s.value("kernels/metric", 0).toInt());
    for (const QString& p : s.value("kernels/reports").toStringList()) import_report(p);
}

}  // namespace colibri::studio
