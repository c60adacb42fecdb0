#include "ui/views/validator_view.h"

#include <QAreaSeries>
#include <QFileDialog>
#include <QTabWidget>
#include <cmath>
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
#include <QScrollArea>
#include <QSplitter>
#include <QTableView>
#include <QToolTip>
#include <QVBoxLayout>
#include <QValueAxis>

#include "ui/data/model_summary.h"
#include "ui/colors.h"
#include "ui/theme.h"
#include "ui/views/chart_reset.h"
#include "ui/views/elided_label.h"

namespace colibri::studio {

namespace {
constexpr int kRowHeight = 16;
}  // namespace

FileMapWidget::FileMapWidget(QWidget* parent) : QWidget(parent) {
    setMinimumHeight(kRowHeight * 3);
    setMouseTracking(true);
}

QSize FileMapWidget::minimumSizeHint() const { return {200, kRowHeight * 3}; }

void FileMapWidget::set_file(const FileLayout& layout, const std::vector<SectionState>& states) {
    layout_ = layout;
    states_ = states;
    highlight_ = -1;
    update();
}

void FileMapWidget::set_highlight(int section) {
    highlight_ = section;
    update();
}

// The byte offset of each row's start is written in a gutter on the left.
int FileMapWidget::gutter() const { return fontMetrics().horizontalAdvance(QStringLiteral("999.9 MiB")) + 8; }

int FileMapWidget::rows() const { return std::max(1, height() / kRowHeight); }

// The strip runs right of the gutter only: counting the gutter's pixels too would wrap the file onto a row below the last.
qint64 FileMapWidget::pixels() const { return static_cast<qint64>(std::max(width() - gutter(), 1)) * rows(); }

FileMapWidget::Run FileMapWidget::run_of(const SectionInfo& s) const {
    const double scale = layout_.image_size > 0 ? static_cast<double>(pixels()) / static_cast<double>(layout_.image_size) : 0.0;
    const qint64 first = static_cast<qint64>(static_cast<double>(s.offset) * scale);
    const qint64 last = std::max(first, static_cast<qint64>(static_cast<double>(s.offset + s.size) * scale) - 1);
    return {std::min(first, pixels() - 1), std::min(last, pixels() - 1)};
}

QRect FileMapWidget::rect_of(qint64 first, qint64 last) const {
    const int w = std::max(width() - gutter(), 1);
    const int row = static_cast<int>(first / w);
    return QRect(gutter() + static_cast<int>(first % w), row * kRowHeight, static_cast<int>(last - first + 1), kRowHeight - 2);
}

QRect FileMapWidget::section_rect(int section) const {
    const int w = width() - gutter();
    if (section < 0 || section >= static_cast<int>(layout_.sections.size()) || w <= 0) return {};
    const Run r = run_of(layout_.sections[static_cast<size_t>(section)]);
    const qint64 row_end = (r.first / w + 1) * w - 1;
    return rect_of(r.first, std::min(r.last, row_end));
}

int FileMapWidget::section_at(const QPoint& p) const {
    const int w = width() - gutter();
    if (p.y() < 0 || p.y() >= rows() * kRowHeight || w <= 0 || p.x() < gutter()) return -1;
    const qint64 pixel = static_cast<qint64>(p.y() / kRowHeight) * w + (p.x() - gutter());
    // The last section drawn there wins, as in paintEvent.
    int found = -1;
    for (size_t i = 0; i < layout_.sections.size(); ++i) {
        const Run r = run_of(layout_.sections[i]);
        if (pixel >= r.first && pixel <= r.last) found = static_cast<int>(i);
    }
    return found;
}

QString FileMapWidget::short_name(const SectionInfo& s) {
    if (s.expert >= 0) return QStringLiteral("L%1 E%2").arg(s.layer).arg(s.expert);
    if (s.kind == QLatin1String("attention")) return QStringLiteral("attn %1").arg(s.layer);
    if (s.kind == QLatin1String("router")) return QStringLiteral("router %1").arg(s.layer);
    if (s.kind == QLatin1String("shared_expert")) return QStringLiteral("shared %1").arg(s.layer);
    if (s.kind == QLatin1String("dense_mlp")) return QStringLiteral("mlp %1").arg(s.layer);
    if (s.layer >= 0) return QStringLiteral("%1 %2").arg(s.kind).arg(s.layer);
    return s.kind;
}

void FileMapWidget::paintEvent(QPaintEvent*) {
    QPainter p(this);
    const QPalette pal = palette();
    const int g = gutter();
    const int w = std::max(width() - g, 1);
    const int map_height = rows() * kRowHeight;
    drawn_names_.clear();
    axis_labels_.clear();
    p.fillRect(rect(), pal.color(QPalette::Window));
    p.fillRect(QRect(g, 0, w, map_height), blend(pal.color(QPalette::Base), pal.color(QPalette::Text), 0.08));  // padding between sections
    if (!layout_.error.isEmpty()) {
        p.fillRect(QRect(g, 0, w, map_height), section_state_color(SectionState::Damaged));
        p.setPen(Qt::white);
        p.drawText(QRect(g, 0, w, map_height).adjusted(6, 0, -6, 0), Qt::AlignCenter | Qt::TextWordWrap, tr("Unreadable: %1").arg(layout_.error));
    }
    // The offset axis: each row's first byte.
    if (layout_.image_size > 0 && w > 0) {
        p.setPen(pal.color(QPalette::WindowText));
        const int every = std::max(1, (fontMetrics().height() + 2) / kRowHeight + 1);
        for (int row = 0; row < rows(); row += every) {
            const quint64 offset = static_cast<quint64>(static_cast<double>(row) * w / static_cast<double>(pixels()) * static_cast<double>(layout_.image_size));
            const QString label = row == 0 ? QStringLiteral("0") : human_bytes(offset);
            p.drawText(QRect(0, row * kRowHeight, g - 6, kRowHeight - 2), Qt::AlignRight | Qt::AlignVCenter, label);
            axis_labels_ << label;
        }
    }
    const QFontMetrics fm = fontMetrics();
    for (size_t i = 0; i < layout_.sections.size(); ++i) {
        const Run r = run_of(layout_.sections[i]);
        const QColor c = section_state_color(i < states_.size() ? states_[i] : SectionState::NotChecked);
        // Alternate a shade so neighbouring sections of one state stay apart.
        const QColor fill = i % 2 == 0 ? c : c.darker(115);
        const QString name = short_name(layout_.sections[i]);
        bool named = false;
        for (qint64 first = r.first; first <= r.last;) {
            const qint64 row_end = (first / w + 1) * w - 1;
            const qint64 last = std::min(r.last, row_end);
            const QRect box = rect_of(first, last);
            p.fillRect(box, fill);
            if (static_cast<int>(i) == highlight_) {
                p.setPen(QPen(pal.color(QPalette::Highlight), 2));
                p.drawRect(box.adjusted(1, 1, -1, -1));
            }
            // The name on the run's first piece wide enough for it, left-aligned so the rest shows the colour.
            if (!named && box.width() >= fm.horizontalAdvance(name) + 10) {
                p.setPen(text_color_on(fill));
                p.drawText(box.adjusted(3, 0, 0, 0), Qt::AlignLeft | Qt::AlignVCenter, name);
                drawn_names_ << name;
                named = true;
            }
            first = last + 1;
        }
    }
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
        if (!verifying_ && !comparing_) return;
        progress_->setRange(0, 1000);
        progress_->setValue(total ? static_cast<int>(1000.0 * done / total) : 1000);
    });
    connect(worker_, &FileWorker::histogramReady, this, &ValidatorView::on_histogram);
    connect(worker_, &FileWorker::comparedFiles, this, &ValidatorView::on_compared);

    path_ = new ElidedLabel(tr("No file. Open one with File ▸ Validate, or load a model."));
    path_->setElideMode(Qt::ElideMiddle);
    status_ = new ElidedLabel;
    status_->setObjectName(QStringLiteral("validator_status"));
    verify_ = new QPushButton(tr("Verify checksums"));
    cancel_ = new QPushButton(tr("Cancel"));
    progress_ = new QProgressBar;
    progress_->setRange(0, 1000);
    progress_->setValue(0);
    connect(verify_, &QPushButton::clicked, this, &ValidatorView::verify);
    connect(cancel_, &QPushButton::clicked, this, &ValidatorView::cancel);

    map_ = new FileMapWidget;
    connect(map_, &FileMapWidget::sectionClicked, this, [this](int section) {
        map_->set_highlight(section);
        select_sections({section});
    });
    // The legend is a row of its own under the map, so it never covers the map's last row.
    legend_ = new QWidget;
    legend_->setObjectName(QStringLiteral("map_legend"));
    auto* legend_layout = new QHBoxLayout(legend_);
    legend_layout->setContentsMargins(0, 0, 0, 0);
    legend_layout->setSpacing(4);
    for (SectionState st : {SectionState::NotChecked, SectionState::Ok, SectionState::Damaged, SectionState::Misaligned}) {
        QPixmap swatch(12, 12);
        swatch.fill(section_state_color(st));
        auto* mark = new QLabel;
        mark->setPixmap(swatch);
        legend_layout->addWidget(mark);
        legend_layout->addWidget(new QLabel(section_state_name(st)));
        legend_layout->addSpacing(10);
    }
    map_summary_ = new ElidedLabel;
    legend_layout->addWidget(map_summary_, 1);

    graph_ = new ModelGraphView;
    connect(graph_, &ModelGraphView::blockClicked, this, [this](const std::vector<int>& sections) {
        map_->set_highlight(sections.empty() ? -1 : sections.front());
        select_sections(sections);
    });
    auto* graph_scroll = new QScrollArea;
    graph_scroll->setWidget(graph_);
    graph_scroll->setWidgetResizable(true);
    graph_scroll->setToolTip(QString());

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

    compare_ = new QPushButton(tr("Compare with…"));
    compare_->setToolTip(tr("Compare this file tensor by tensor with another model file (a quantised copy, say)"));
    connect(compare_, &QPushButton::clicked, this, &ValidatorView::compare_dialog);
    comparison_sort_.setSourceModel(&comparison_);
    comparison_sort_.setSortRole(Qt::EditRole);
    comparison_label_ = new ElidedLabel(tr("Compare this file with another: every tensor's largest and RMS difference."));
    comparison_label_->setObjectName(QStringLiteral("comparison_label"));
    auto* comparison_table = new QTableView;
    comparison_table->setModel(&comparison_sort_);
    comparison_table->setSortingEnabled(true);
    // Unsorted until a header is clicked: the rows come differing first (on_compared orders them).
    comparison_table->horizontalHeader()->setSortIndicator(-1, Qt::AscendingOrder);
    comparison_table->verticalHeader()->hide();
    comparison_table_ = comparison_table;
    comparison_table->horizontalHeader()->setStretchLastSection(true);

    problem_list_ = new QListView;
    problem_list_->setModel(&problems_);

    chart_ = new QChart;
    chart_->legend()->hide();
    chart_->setMargins(QMargins(2, 2, 2, 2));
    chart_view_ = new QChartView(chart_);
    chart_view_->setRenderHint(QPainter::Antialiasing);
    chart_view_->installEventFilter(this);  // the axes' tick counts follow its width
    histogram_label_ = new QLabel(tr("Select a tensor for the histogram of its values."));
    histogram_label_->setWordWrap(true);

    auto* bar = new QHBoxLayout;
    bar->addWidget(path_, 1);
    bar->addWidget(verify_);
    bar->addWidget(cancel_);
    bar->addWidget(compare_);
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
    auto* compared = new QWidget;
    auto* compared_layout = new QVBoxLayout(compared);
    compared_layout->setContentsMargins(0, 0, 0, 0);
    compared_layout->addWidget(comparison_label_);
    compared_layout->addWidget(comparison_table, 1);
    tabs_ = new QTabWidget;
    tabs_->setDocumentMode(true);
    // The layer graph first, as wide as the tabs are (a dock leaves no room for it beside the table): a click on
    // a block shows its tensors in the Tensors tab, the first one's histogram beside it.
    tabs_->addTab(graph_scroll, tr("Layers"));
    tabs_->setTabToolTip(0, tr("The model's layers: click a block to select its tensors"));
    tables_tab_ = tables;
    tabs_->addTab(tables, tr("Tensors"));
    tabs_->addTab(problem_list_, tr("Problems"));
    compared_tab_ = compared;
    tabs_->addTab(compared, tr("Compared"));
    auto* splitter = new QSplitter(Qt::Horizontal);
    splitter->addWidget(tabs_);
    splitter->addWidget(histogram);
    splitter->setStretchFactor(0, 3);
    splitter->setStretchFactor(1, 2);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 4);
    layout->addLayout(bar);
    layout->addWidget(status_);
    layout->addWidget(map_);
    layout->addWidget(legend_);
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
    // Nothing of the previous file may stay on screen: its map, tensors, histogram and comparison.
    states_.clear();
    tensors_.set_layout(layout_);
    map_->set_file(layout_, states_);
    graph_->set_file(layout_, states_);
    problems_.setStringList({});
    clear_histogram(tr("Select a tensor for the histogram of its values."));
    diffs_.clear();
    comparison_.clear();
    comparison_label_->setText(tr("Compare this file with another: every tensor's largest and RMS difference."));
    worker_->inspect(path);
}

void ValidatorView::clear_histogram(const QString& text) {
    histogram_ = TensorHistogram{};
    reset_chart(chart_);
    chart_->setTitle(QString());
    histogram_label_->setText(text);
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
    if (layout.unreadable) {
        // No file to draw (missing, a directory, no permission): an error, not a damaged drawing.
        layout_ = FileLayout{};
        layout_.path = layout.path;
        layout_.unreadable = true;
        layout_.error = layout.error;
        map_->set_file(FileLayout{}, {});
        graph_->set_file(FileLayout{}, {});
        problems_.setStringList({layout.error});
        verify_->setEnabled(false);
        status_->setText(tr("Cannot open this file: %1").arg(layout.error));
        status_->setStyleSheet(QStringLiteral("color: %1").arg(status_color(StatusColor::Error).name()));
        return;
    }
    layout_ = layout;
    states_ = section_states(layout_, nullptr);
    tensors_.set_layout(layout_);
    map_->set_file(layout_, states_);
    graph_->set_file(layout_, states_);
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
    graph_->set_states(states_);
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
        color = status_color(StatusColor::Error).name();
    } else if (verifying_) {
        text = tr("Verifying the checksum of every section…");
    } else if (!has_report_) {
        text = tr("%1 sections, %2 tensors; checksums not verified yet.").arg(layout_.sections.size()).arg(layout_.tensors.size());
        if (!layout_.problems.isEmpty()) {
            text = tr("DAMAGED: %n problem(s) in the structure (listed below); ", nullptr, static_cast<int>(layout_.problems.size())) + text;
            color = status_color(StatusColor::Error).name();
        }
    } else if (report_.valid) {
        // The tokenizer is claimed only when the file has one (a model converted without tokenizer.json has none).
        text = has_tokenizer() ? tr("Valid: every section is aligned and matches its checksum; shapes and tokenizer load.")
                               : tr("Valid: every section is aligned and matches its checksum; shapes load. No tokenizer: this file "
                                    "takes token ids, not text (convert it with tokenizer.json beside config.json to chat).");
        color = status_color(StatusColor::Ok).name();
    } else {
        text = tr("INVALID: %n problem(s) (listed below).", nullptr, static_cast<int>(report_.problems.size()));
        color = status_color(StatusColor::Error).name();
    }
    if (layout_.compressed) text += tr(" Compressed: %1 on disk for a %2 image.").arg(human_bytes(layout_.file_size), human_bytes(layout_.image_size));
    status_->setText(text);
    status_->setStyleSheet(color.isEmpty() ? QString() : QStringLiteral("color: %1").arg(color));
    map_summary_->setText(layout_.image_size > 0 ? tr("%1, %2 sections, to scale; left: byte offset of each row")
                                                       .arg(human_bytes(layout_.image_size)).arg(layout_.sections.size())
                                                 : QString());
}

bool ValidatorView::has_tokenizer() const {
    return std::any_of(layout_.sections.begin(), layout_.sections.end(), [](const SectionInfo& s) { return s.kind == QLatin1String("tokenizer"); });
}

void ValidatorView::select_sections(const std::vector<int>& sections) {
    // Select the sections' tensors in the table; the first one gets the histogram.
    tabs_->setCurrentWidget(tables_tab_);
    table_->clearSelection();
    bool first = true;
    for (int r = 0; r < filter_.rowCount(); ++r) {
        const QModelIndex i = filter_.index(r, 0);
        const int section = filter_.mapToSource(i).data(TensorTableModel::SectionRole).toInt();
        if (std::find(sections.begin(), sections.end(), section) == sections.end()) continue;
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
        chart_->setTitle(QString());
        histogram_label_->setText(h.error);
        return;
    }
    auto* upper = new QLineSeries;
    quint64 top = 0;
    double lo = h.min, hi = h.max;
    if (h.constant()) {
        // Every value the same: one bar at that value on an axis around it, not a bin of zero width.
        const double half = h.min != 0.0 ? std::fabs(h.min) * 0.5 : 0.5;
        lo = h.min - half;
        hi = h.max + half;
        const double w = (hi - lo) / 40.0;
        upper->append(h.min - w / 2, 0);
        upper->append(h.min - w / 2, static_cast<qreal>(h.sampled));
        upper->append(h.min + w / 2, static_cast<qreal>(h.sampled));
        upper->append(h.min + w / 2, 0);
        top = h.sampled;
    } else {
        // Steps over the bin edges: each bin is a flat top from its lower to its upper edge.
        const double width = h.bins.empty() ? 0.0 : (h.max - h.min) / static_cast<double>(h.bins.size());
        for (size_t b = 0; b < h.bins.size(); ++b) {
            const double x0 = h.min + width * static_cast<double>(b), x1 = x0 + width;
            upper->append(x0, static_cast<qreal>(h.bins[b]));
            upper->append(x1, static_cast<qreal>(h.bins[b]));
            top = std::max(top, h.bins[b]);
        }
    }
    auto* area = new QAreaSeries(upper);
    area->setColor(QColor(66, 133, 244));
    area->setBorderColor(QColor(25, 90, 200));
    chart_->addSeries(area);
    auto* x = new QValueAxis;
    x->setRange(lo, hi > lo ? hi : lo + 1.0);
    x->setTitleText(tr("value"));
    x->setLabelFormat(QStringLiteral("%.2g"));
    auto* y = new QValueAxis;
    y->setRange(0, top > 0 ? static_cast<double>(top) * 1.1 : 1.0);
    y->setLabelFormat(QStringLiteral("%d"));
    chart_->addAxis(x, Qt::AlignBottom);
    chart_->addAxis(y, Qt::AlignLeft);
    area->attachAxis(x);
    area->attachAxis(y);
    chart_->setTitle(h.tensor);
    style_chart(chart_);
    fit_histogram_ticks();
    QString text;
    if (h.constant()) text = tr("constant: every one of the %1 values is %2").arg(h.sampled).arg(h.min, 0, 'g', 6);
    else
        text = tr("min %1, max %2, mean %3, std %4 over %5 values").arg(h.min, 0, 'g', 4).arg(h.max, 0, 'g', 4)
                   .arg(h.mean, 0, 'g', 4).arg(h.stddev, 0, 'g', 4).arg(h.values);
    if (h.sampled < h.values) text += tr(" (histogram of %1 sampled by rows)").arg(h.sampled);
    if (h.non_finite > 0) text += tr("; %1 NaN or infinite").arg(h.non_finite);
    histogram_label_->setText(text);
    emit histogramShown(h.tensor);
}

QLabel* ValidatorView::comparison_label() const { return comparison_label_; }

QStringList ValidatorView::histogram_tick_labels() const {
    QStringList labels;
    const auto axes = chart_->axes(Qt::Horizontal);
    auto* x = axes.isEmpty() ? nullptr : qobject_cast<QValueAxis*>(axes.front());
    if (x == nullptr) return labels;
    for (int i = 0; i < x->tickCount(); ++i) {
        const double v = x->min() + (x->max() - x->min()) * i / std::max(1, x->tickCount() - 1);
        labels << QString::asprintf(x->labelFormat().toLatin1().constData(), v);
    }
    return labels;
}

// As many ticks on the value axis as their labels fit side by side in the plot's width (QtCharts elides the
// labels to "…" instead of dropping ticks); the count axis gets as many as its height holds.
void ValidatorView::fit_histogram_ticks() {
    const auto xs = chart_->axes(Qt::Horizontal), ys = chart_->axes(Qt::Vertical);
    auto* x = xs.isEmpty() ? nullptr : qobject_cast<QValueAxis*>(xs.front());
    auto* y = ys.isEmpty() ? nullptr : qobject_cast<QValueAxis*>(ys.front());
    if (x == nullptr || y == nullptr) return;
    const QFontMetrics fm(x->labelsFont());
    const double width = chart_->plotArea().width() > 0 ? chart_->plotArea().width() : chart_view_->width() * 0.8;
    int ticks = 2;
    for (int n = 7; n > 2; --n) {
        x->setTickCount(n);
        int widest = 0;
        for (const QString& label : histogram_tick_labels()) widest = std::max(widest, fm.horizontalAdvance(label));
        if ((widest + 12) * (n - 1) <= width) {
            ticks = n;
            break;
        }
    }
    x->setTickCount(ticks);
    const double height = chart_->plotArea().height() > 0 ? chart_->plotArea().height() : chart_view_->height() * 0.6;
    y->setTickCount(std::clamp(static_cast<int>(height / (QFontMetrics(y->labelsFont()).height() * 2)) + 1, 2, 6));
}

bool ValidatorView::eventFilter(QObject* watched, QEvent* e) {
    if (watched == chart_view_ && e->type() == QEvent::Resize)
        QMetaObject::invokeMethod(this, &ValidatorView::fit_histogram_ticks, Qt::QueuedConnection);  // after the chart's own layout
    return QWidget::eventFilter(watched, e);
}

void ValidatorView::compare_dialog() {
    const QString other = QFileDialog::getOpenFileName(this, tr("Compare with another model file"), QString(), tr("Colibri models (*.bin *.bin.zst)"));
    if (!other.isEmpty()) compare_with(other);
}

void ValidatorView::compare_with(const QString& other) {
    if (layout_.path.isEmpty() || verifying_) return;
    comparison_label_->setText(tr("Comparing with %1…").arg(QFileInfo(other).fileName()));
    tabs_->setCurrentWidget(compared_tab_);
    progress_->setRange(0, 1000);
    progress_->setValue(0);
    comparing_ = true;
    worker_->compare(layout_.path, other);
}

void ValidatorView::on_compared(const TensorComparison& c) {
    comparing_ = false;
    if (c.path_a != layout_.path) return;
    using Cell = StatsTableModel::Cell;
    using Format = StatsTableModel::Format;
    if (!c.error.isEmpty() || c.cancelled) {
        comparison_label_->setText(c.cancelled ? tr("Comparison cancelled.") : tr("Cannot compare: %1").arg(c.error));
        emit compared(false);
        return;
    }
    diffs_ = c.tensors;
    // What differs first, worst first: tensors that do not match up, then differing ones by relative RMS difference,
    // identical ones last (each group in file order).
    auto rank = [](const TensorDiff& d) {
        return d.kind == TensorDiff::Kind::Identical ? 2 : d.kind == TensorDiff::Kind::Differs ? 1 : 0;
    };
    std::stable_sort(diffs_.begin(), diffs_.end(), [&rank](const TensorDiff& a, const TensorDiff& b) {
        if (rank(a) != rank(b)) return rank(a) < rank(b);
        return rank(a) == 1 && a.relative_rms > b.relative_rms;
    });
    QVector<QVector<Cell>> rows;
    int identical = 0, differ = 0, other = 0;
    double worst = 0;
    for (const TensorDiff& d : diffs_) worst = std::max(worst, d.relative_rms);
    for (const TensorDiff& d : diffs_) {
        QString kind;
        QColor mark;
        switch (d.kind) {
        case TensorDiff::Kind::Identical: kind = tr("identical"); ++identical; break;
        case TensorDiff::Kind::Differs: kind = tr("differs"); ++differ; mark = heat_color(worst > 0 ? d.relative_rms / worst : 0.0); break;
        case TensorDiff::Kind::ShapeDiffers: kind = tr("shape differs"); ++other; mark = status_color(StatusColor::Error); break;
        case TensorDiff::Kind::OnlyInA: kind = tr("only in this file"); ++other; mark = status_color(StatusColor::Warning); break;
        case TensorDiff::Kind::OnlyInB: kind = tr("only in the other"); ++other; mark = status_color(StatusColor::Warning); break;
        case TensorDiff::Kind::Unreadable: kind = tr("unreadable: %1").arg(d.error); ++other; mark = status_color(StatusColor::Error); break;
        }
        const bool numbers = d.kind == TensorDiff::Kind::Identical || d.kind == TensorDiff::Kind::Differs;
        rows.push_back({{d.name}, {kind, mark, {}}, {d.type_a + QStringLiteral(" / ") + d.type_b}, {d.shape_a.isEmpty() ? d.shape_b : d.shape_a},
                        {numbers ? QVariant(d.max_abs) : QVariant()}, {numbers ? QVariant(d.rms) : QVariant()},
                        {numbers ? QVariant(d.relative_rms) : QVariant()}, {numbers ? QVariant(d.cosine) : QVariant()}});
    }
    comparison_.set_table({tr("tensor"), tr("result"), tr("types"), tr("shape"), tr("max |Δ|"), tr("RMS Δ"), tr("RMS Δ / RMS"), tr("cosine")},
                          {Format::Text, Format::Text, Format::Text, Format::Text, Format::Decimal3, Format::Decimal3, Format::Percent, Format::Decimal3}, rows);
    comparison_label_->setText(tr("%1 against %2: %3 tensors identical, %4 differ, %5 do not match up; worst relative RMS difference %6 %")
                                   .arg(QFileInfo(c.path_a).fileName(), QFileInfo(c.path_b).fileName()).arg(identical).arg(differ).arg(other)
                                   .arg(worst * 100, 0, 'f', 2));
    progress_->setValue(1000);
    emit compared(true);
}

}  // namespace colibri::studio
