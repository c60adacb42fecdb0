#include "ui/views/validator_view.h"

#include <QAreaSeries>
#include <QChart>
#include <QChartView>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QHelpEvent>
#include <QLabel>
#include <QLineEdit>
#include <QLineSeries>
#include <QListView>
#include <QMouseEvent>
#include <QPainter>
#include <QProgressBar>
#include <QPushButton>
#include <QSplitter>
#include <QTableView>
#include <QToolTip>
#include <QVBoxLayout>
#include <QValueAxis>

#include "ui/models/model_summary.h"
#include "ui/views/chart_reset.h"

namespace colibri::studio {

namespace {
constexpr int kRowHeight = 16;
constexpr int kLegendHeight = 22;
}  // namespace

FileMapWidget::FileMapWidget(QWidget* parent) : QWidget(parent) {
    setMinimumHeight(kRowHeight * 3 + kLegendHeight);
    setMouseTracking(true);
}

void FileMapWidget::set_file(const FileLayout& layout, const std::vector<SectionState>& states) {
    layout_ = layout;
    states_ = states;
    update();
}

int FileMapWidget::rows() const { return std::max(1, (height() - kLegendHeight) / kRowHeight); }

FileMapWidget::Run FileMapWidget::run_of(const SectionInfo& s) const {
    const double scale = layout_.image_size > 0 ? static_cast<double>(pixels()) / static_cast<double>(layout_.image_size) : 0.0;
    const qint64 first = static_cast<qint64>(static_cast<double>(s.offset) * scale);
    const qint64 last = std::max(first, static_cast<qint64>(static_cast<double>(s.offset + s.size) * scale) - 1);
    return {std::min(first, pixels() - 1), std::min(last, pixels() - 1)};
}

QRect FileMapWidget::rect_of(qint64 first, qint64 last) const {
    const int w = std::max(width(), 1);
    const int row = static_cast<int>(first / w);
    return QRect(static_cast<int>(first % w), row * kRowHeight, static_cast<int>(last - first + 1), kRowHeight - 2);
}

QRect FileMapWidget::section_rect(int section) const {
    if (section < 0 || section >= static_cast<int>(layout_.sections.size()) || width() <= 0) return {};
    const Run r = run_of(layout_.sections[static_cast<size_t>(section)]);
    const qint64 row_end = (r.first / width() + 1) * width() - 1;
    return rect_of(r.first, std::min(r.last, row_end));
}

int FileMapWidget::section_at(const QPoint& p) const {
    if (p.y() < 0 || p.y() >= rows() * kRowHeight || width() <= 0) return -1;
    const qint64 pixel = static_cast<qint64>(p.y() / kRowHeight) * width() + p.x();
    // The last section drawn there wins, as in paintEvent.
    int found = -1;
    for (size_t i = 0; i < layout_.sections.size(); ++i) {
        const Run r = run_of(layout_.sections[i]);
        if (pixel >= r.first && pixel <= r.last) found = static_cast<int>(i);
    }
    return found;
}

void FileMapWidget::paintEvent(QPaintEvent*) {
    QPainter p(this);
    const int w = width();
    const int map_height = rows() * kRowHeight;
    p.fillRect(QRect(0, 0, w, map_height), QColor(235, 235, 235));  // padding between sections
    if (!layout_.error.isEmpty()) {
        p.fillRect(QRect(0, 0, w, map_height), section_state_color(SectionState::Damaged));
        p.setPen(Qt::white);
        p.drawText(rect().adjusted(6, 0, -6, -kLegendHeight), Qt::AlignCenter | Qt::TextWordWrap, tr("Unreadable: %1").arg(layout_.error));
    }
    for (size_t i = 0; i < layout_.sections.size(); ++i) {
        const Run r = run_of(layout_.sections[i]);
        const QColor c = section_state_color(i < states_.size() ? states_[i] : SectionState::NotChecked);
        // Alternate a shade so neighbouring sections of one state stay apart.
        const QColor fill = i % 2 == 0 ? c : c.darker(115);
        for (qint64 first = r.first; first <= r.last;) {
            const qint64 row_end = (first / w + 1) * w - 1;
            const qint64 last = std::min(r.last, row_end);
            p.fillRect(rect_of(first, last), fill);
            first = last + 1;
        }
    }
    // Legend.
    int x = 4;
    const int y = map_height + 4;
    for (SectionState s : {SectionState::NotChecked, SectionState::Ok, SectionState::Damaged, SectionState::Misaligned}) {
        p.fillRect(QRect(x, y + 2, 12, 12), section_state_color(s));
        p.setPen(palette().color(QPalette::WindowText));
        const QString label = section_state_name(s);
        p.drawText(QPoint(x + 16, y + 12), label);
        x += 16 + p.fontMetrics().horizontalAdvance(label) + 14;
    }
    if (layout_.image_size > 0)
        p.drawText(QPoint(x + 10, y + 12), tr("%1, %2 sections, drawn to scale").arg(human_bytes(layout_.image_size)).arg(layout_.sections.size()));
}

void FileMapWidget::mousePressEvent(QMouseEvent* e) {
    const int s = section_at(e->position().toPoint());
    if (s >= 0) emit sectionClicked(s);
}

bool FileMapWidget::event(QEvent* e) {
    if (e->type() == QEvent::ToolTip) {
        auto* help = static_cast<QHelpEvent*>(e);
        const int s = section_at(help->pos());
        if (s < 0) {
            QToolTip::hideText();
        } else {
            const SectionInfo& info = layout_.sections[static_cast<size_t>(s)];
            const SectionState state = static_cast<size_t>(s) < states_.size() ? states_[static_cast<size_t>(s)] : SectionState::NotChecked;
            QString text = tr("%1\noffset 0x%2, %3\n%4").arg(info.label).arg(info.offset, 0, 16).arg(human_bytes(info.size), section_state_name(state));
            if (layout_.compressed) text += tr("\nstored as %1").arg(human_bytes(info.stored_size));
            QToolTip::showText(help->globalPos(), text, this);
        }
        return true;
    }
    return QWidget::event(e);
}

ValidatorView::ValidatorView(QWidget* parent)
    : QWidget(parent), worker_(new FileWorker),
      thread_(std::make_unique<WorkerThread>(worker_, QStringLiteral("validator"), [w = worker_] { w->cancel(); })) {
    connect(worker_, &FileWorker::inspected, this, &ValidatorView::on_layout);
    connect(worker_, &FileWorker::verified, this, &ValidatorView::on_report);
    connect(worker_, &FileWorker::verifyCancelled, this, [this] {
        verifying_ = false;
        show_status();
    });
    connect(worker_, &FileWorker::progress, this, [this](quint64 done, quint64 total) {
        if (!verifying_) return;
        progress_->setRange(0, 1000);
        progress_->setValue(total ? static_cast<int>(1000.0 * done / total) : 1000);
    });
    connect(worker_, &FileWorker::histogramReady, this, &ValidatorView::on_histogram);

    path_ = new QLabel(tr("No file. Open one with File ▸ Validate, or load a model."));
    status_ = new QLabel;
    status_->setObjectName(QStringLiteral("validator_status"));
    status_->setWordWrap(true);
    verify_ = new QPushButton(tr("Verify checksums"));
    cancel_ = new QPushButton(tr("Cancel"));
    progress_ = new QProgressBar;
    progress_->setRange(0, 1000);
    progress_->setValue(0);
    connect(verify_, &QPushButton::clicked, this, &ValidatorView::verify);
    connect(cancel_, &QPushButton::clicked, this, &ValidatorView::cancel);

    map_ = new FileMapWidget;
    connect(map_, &FileMapWidget::sectionClicked, this, &ValidatorView::select_section);

    filter_.setSourceModel(&tensors_);
    filter_.setSortRole(Qt::EditRole);
    filter_.setFilterKeyColumn(TensorTableModel::Name);
    filter_.setFilterCaseSensitivity(Qt::CaseInsensitive);
    filter_edit_ = new QLineEdit;
    filter_edit_->setPlaceholderText(tr("filter tensors by name, e.g. layers.1.experts"));
    connect(filter_edit_, &QLineEdit::textChanged, &filter_, &QSortFilterProxyModel::setFilterFixedString);
    table_ = new QTableView;
    table_->setModel(&filter_);
    table_->setSortingEnabled(true);
    table_->sortByColumn(TensorTableModel::Offset, Qt::AscendingOrder);
    table_->setSelectionBehavior(QAbstractItemView::SelectRows);
    table_->verticalHeader()->hide();
    table_->horizontalHeader()->setStretchLastSection(true);
    connect(table_->selectionModel(), &QItemSelectionModel::currentRowChanged, this, [this](const QModelIndex& current) {
        const TensorInfo* t = tensors_.tensor(filter_.mapToSource(current).row());
        if (t != nullptr) worker_->histogram(layout_.path, t->name);
    });

    problem_list_ = new QListView;
    problem_list_->setModel(&problems_);
    problem_list_->setMaximumHeight(90);

    chart_ = new QChart;
    chart_->legend()->hide();
    chart_->setMargins(QMargins(2, 2, 2, 2));
    chart_view_ = new QChartView(chart_);
    chart_view_->setRenderHint(QPainter::Antialiasing);
    histogram_label_ = new QLabel(tr("Select a tensor for the histogram of its values."));
    histogram_label_->setWordWrap(true);

    auto* bar = new QHBoxLayout;
    bar->addWidget(path_, 1);
    bar->addWidget(verify_);
    bar->addWidget(cancel_);
    bar->addWidget(progress_);
    auto* histogram = new QWidget;
    auto* histogram_layout = new QVBoxLayout(histogram);
    histogram_layout->setContentsMargins(0, 0, 0, 0);
    histogram_layout->addWidget(chart_view_, 1);
    histogram_layout->addWidget(histogram_label_);
    auto* tables = new QWidget;
    auto* tables_layout = new QVBoxLayout(tables);
    tables_layout->setContentsMargins(0, 0, 0, 0);
    tables_layout->addWidget(filter_edit_);
    tables_layout->addWidget(table_, 1);
    auto* splitter = new QSplitter(Qt::Horizontal);
    splitter->addWidget(tables);
    splitter->addWidget(histogram);
    splitter->setStretchFactor(0, 3);
    splitter->setStretchFactor(1, 2);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 4);
    layout->addLayout(bar);
    layout->addWidget(status_);
    layout->addWidget(map_);
    layout->addWidget(problem_list_);
    layout->addWidget(splitter, 1);
    show_status();
}

void ValidatorView::open(const QString& path, bool verify_after) {
    if (verifying_) cancel();
    has_report_ = false;
    verify_after_layout_ = verify_after;
    layout_ = FileLayout{};
    layout_.path = path;
    path_->setText(QFileInfo(path).fileName());
    path_->setToolTip(path);
    status_->setText(tr("Reading the structure…"));
    worker_->inspect(path);
}

void ValidatorView::verify() {
    // A file whose structure cannot be read has nothing to hash; its error is already shown.
    if (layout_.path.isEmpty() || verifying_ || !layout_.error.isEmpty()) return;
    verifying_ = true;
    progress_->setValue(0);
    show_status();
    worker_->verify(layout_.path);
}

void ValidatorView::cancel() {
    if (!verifying_) return;
    worker_->cancel();
}

void ValidatorView::on_layout(const FileLayout& layout) {
    if (layout.path != layout_.path) return;  // an older request
    layout_ = layout;
    states_ = section_states(layout_, nullptr);
    tensors_.set_layout(layout_);
    map_->set_file(layout_, states_);
    problems_.setStringList(layout_.error.isEmpty() ? layout_.problems : QStringList{layout_.error});
    table_->resizeColumnsToContents();
    show_status();
    if (verify_after_layout_) verify();
}

void ValidatorView::on_report(const tools::CheckReport& report) {
    verifying_ = false;
    if (QString::fromStdString(report.path) != layout_.path) return;
    report_ = report;
    has_report_ = true;
    states_ = section_states(layout_, &report_);
    tensors_.set_states(states_);
    map_->set_file(layout_, states_);
    QStringList problems;
    for (const std::string& p : report.problems) problems << QString::fromStdString(p);
    problems_.setStringList(problems);
    progress_->setValue(1000);
    show_status();
    emit verifiedFile(layout_.path, report.valid);
}

void ValidatorView::show_status() {
    verify_->setEnabled(!layout_.path.isEmpty() && !verifying_ && layout_.error.isEmpty());
    cancel_->setEnabled(verifying_);
    QString text;
    QString color;
    if (layout_.path.isEmpty()) {
        text = tr("No file.");
    } else if (!layout_.error.isEmpty()) {
        text = tr("This file cannot be opened: %1").arg(layout_.error);
        color = QStringLiteral("#c62828");
    } else if (verifying_) {
        text = tr("Verifying the checksum of every section…");
    } else if (!has_report_) {
        text = tr("%1 sections, %2 tensors; checksums not verified yet.").arg(layout_.sections.size()).arg(layout_.tensors.size());
        if (!layout_.problems.isEmpty()) {
            text = tr("DAMAGED: %n problem(s) in the structure (listed below); ", nullptr, static_cast<int>(layout_.problems.size())) + text;
            color = QStringLiteral("#c62828");
        }
    } else if (report_.valid) {
        text = tr("Valid: every section is aligned and matches its checksum; shapes and tokenizer load.");
        color = QStringLiteral("#2e7d32");
    } else {
        text = tr("INVALID: %n problem(s) (listed below).", nullptr, static_cast<int>(report_.problems.size()));
        color = QStringLiteral("#c62828");
    }
    if (layout_.compressed) text += tr(" Compressed: %1 on disk for a %2 image.").arg(human_bytes(layout_.file_size), human_bytes(layout_.image_size));
    status_->setText(text);
    status_->setStyleSheet(color.isEmpty() ? QString() : QStringLiteral("color: %1").arg(color));
}

void ValidatorView::select_section(int section) {
    // Select the section's tensors in the table; the first one gets the histogram.
    table_->clearSelection();
    bool first = true;
    for (int r = 0; r < filter_.rowCount(); ++r) {
        const QModelIndex i = filter_.index(r, 0);
        if (filter_.mapToSource(i).data(TensorTableModel::SectionRole).toInt() != section) continue;
        if (first) {
            table_->setCurrentIndex(i);
            table_->scrollTo(i);
            first = false;
        }
        table_->selectionModel()->select(i, QItemSelectionModel::Select | QItemSelectionModel::Rows);
    }
}

void ValidatorView::on_histogram(const TensorHistogram& h) {
    if (h.path != layout_.path) return;
    histogram_ = h;
    reset_chart(chart_);
    if (!h.error.isEmpty()) {
        histogram_label_->setText(h.error);
        return;
    }
    // Steps over the bin edges: each bin is a flat top from its lower to its upper edge.
    auto* upper = new QLineSeries;
    const double width = h.bins.empty() ? 0.0 : (h.max - h.min) / static_cast<double>(h.bins.size());
    quint64 top = 0;
    for (size_t b = 0; b < h.bins.size(); ++b) {
        const double x0 = h.min + width * static_cast<double>(b), x1 = x0 + width;
        upper->append(x0, static_cast<qreal>(h.bins[b]));
        upper->append(x1, static_cast<qreal>(h.bins[b]));
        top = std::max(top, h.bins[b]);
    }
    auto* area = new QAreaSeries(upper);
    area->setColor(QColor(66, 133, 244));
    area->setBorderColor(QColor(25, 90, 200));
    chart_->addSeries(area);
    auto* x = new QValueAxis;
    x->setRange(h.min, h.max > h.min ? h.max : h.min + 1.0);
    x->setTitleText(tr("value"));
    auto* y = new QValueAxis;
    y->setRange(0, top > 0 ? static_cast<double>(top) * 1.1 : 1.0);
    y->setLabelFormat(QStringLiteral("%d"));
    chart_->addAxis(x, Qt::AlignBottom);
    chart_->addAxis(y, Qt::AlignLeft);
    area->attachAxis(x);
    area->attachAxis(y);
    chart_->setTitle(h.tensor);
    QString text = tr("min %1, max %2, mean %3, std %4 over %5 values").arg(h.min, 0, 'g', 4).arg(h.max, 0, 'g', 4)
                       .arg(h.mean, 0, 'g', 4).arg(h.stddev, 0, 'g', 4).arg(h.values);
    if (h.sampled < h.values) text += tr(" (histogram of %1 sampled by rows)").arg(h.sampled);
    if (h.non_finite > 0) text += tr("; %1 NaN or infinite").arg(h.non_finite);
    histogram_label_->setText(text);
    emit histogramShown(h.tensor);
}

}  // namespace colibri::studio
