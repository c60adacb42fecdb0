#include "ui/views/heatmap_view.h"

#include <QCheckBox>
#include <QComboBox>
#include <QEvent>
#include <QFile>
#include <QFileDialog>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLinearGradient>
#include <QPainter>
#include <QPushButton>
#include <QBuffer>
#include <QSpinBox>
#include <QSplitter>
#include <QStyle>
#include <QStyledItemDelegate>
#include <QTableView>
#include <QVBoxLayout>
#include <tuple>

#include "ui/colors.h"
#include "ui/file_output.h"

namespace colibri::studio {

namespace {
// Cells as the table draws them, plus a frame around the selected token's experts (MarkedRole).
class MarkDelegate : public QStyledItemDelegate {
public:
    using QStyledItemDelegate::QStyledItemDelegate;
    void paint(QPainter* p, const QStyleOptionViewItem& option, const QModelIndex& index) const override {
        QStyledItemDelegate::paint(p, option, index);
        const QColor bg = index.data(Qt::BackgroundRole).value<QColor>();
        const auto* heat = qobject_cast<const HeatmapModel*>(index.model());
        if (heat != nullptr && heat->by_rank() && index.data(HeatmapModel::ReplicatedRole).toBool()) {
            p->save();
            draw_stripes(*p, option.rect, text_color_on(bg));
            p->restore();
        }
        if (!index.data(HeatmapModel::MarkedRole).toBool()) return;
        p->save();
        p->setPen(QPen(text_color_on(bg), 3));
        p->setBrush(Qt::NoBrush);
        p->drawRect(QRectF(option.rect).adjusted(1.5, 1.5, -1.5, -1.5));
        p->restore();
    }
};
}  // namespace

void draw_stripes(QPainter& p, const QRectF& rect, const QColor& color) {
    QColor c = color;
    c.setAlphaF(0.45f);
    p.setPen(QPen(c, 1.5));
    p.setClipRect(rect);
    const double step = 7.0;
    for (double x = rect.left() - rect.height(); x < rect.right(); x += step)
        p.drawLine(QPointF(x, rect.bottom()), QPointF(x + rect.height(), rect.top()));
    p.setClipping(false);
}

void RankLegend::set_ranks(int ranks) {
    ranks_ = ranks;
    updateGeometry();
    update();
}

QSize RankLegend::sizeHint() const {
    const QFontMetrics fm(font());
    return {minimumSizeHint().width(), fm.height() + 8};
}

QSize RankLegend::minimumSizeHint() const {
    // Two ranks, the replicated swatch and the shade's note: what a narrow map still shows ("+N more" for the rest).
    const QFontMetrics fm(font());
    return {fm.horizontalAdvance(tr("rank 0") + tr("+%1 more").arg(ranks_) + tr("replicated") + tr("shade: count")) + 4 * 30, fm.height() + 8};
}

void RankLegend::paintEvent(QPaintEvent*) {
    // One line under the map: each rank's swatch, then the replicated one, then what the shade means.
    QPainter p(this);
    const QFontMetrics fm(font());
    const int box = std::min(fm.height(), 14), gap = 14, y = (height() - box) / 2;
    const QString note = tr("shade: count");
    const int tail = fm.horizontalAdvance(tr("replicated")) + box + 6 + gap + fm.horizontalAdvance(note);
    int x = 2;
    auto item = [&](const QColor& color, const QString& text, bool striped) {
        const QRect swatch(x, y, box, box);
        p.fillRect(swatch, color);
        if (striped) draw_stripes(p, swatch, text_color_on(color));
        p.setPen(palette().color(QPalette::WindowText));
        p.drawRect(swatch);
        p.drawText(QRect(swatch.right() + 5, 0, fm.horizontalAdvance(text) + 2, height()), Qt::AlignLeft | Qt::AlignVCenter, text);
        x = swatch.right() + 5 + fm.horizontalAdvance(text) + gap;
    };
    for (int r = 0; r < ranks_; ++r) {
        // The ranks that fit before the replicated swatch and the note; the rest said as a count.
        const QString more = tr("+%1 more").arg(ranks_ - r);
        const int after = r + 1 < ranks_ ? box + 5 + fm.horizontalAdvance(more) + gap : 0;
        if (x + box + 5 + fm.horizontalAdvance(tr("rank %1").arg(r)) + gap + after + tail > width() && r > 0) {
            p.setPen(palette().color(QPalette::WindowText));
            p.drawText(QRect(x, 0, fm.horizontalAdvance(more) + 2, height()), Qt::AlignLeft | Qt::AlignVCenter, more);
            x += fm.horizontalAdvance(more) + gap;
            break;
        }
        item(rank_color(r), tr("rank %1").arg(r), false);
    }
    item(QColor(120, 120, 120), tr("replicated"), true);
    p.setPen(palette().color(QPalette::PlaceholderText));
    p.drawText(QRect(x, 0, width() - x, height()), Qt::AlignLeft | Qt::AlignVCenter, note);
}

void HeatLegend::set_max(double max) {
    max_ = max;
    update();
}

void HeatLegend::set_format(std::function<QString(double)> format) {
    format_ = std::move(format);
    update();
}

QStringList HeatLegend::labels() const {
    if (!(max_ > 0)) return {};  // nothing counted yet: a scale from 0 to 0 says nothing
    if (format_) return {format_(max_), format_(max_ / 2.0), format_(0.0)};
    return {QString::number(max_, 'g', 4), QString::number(max_ / 2.0, 'g', 3), QStringLiteral("0")};
}

void HeatLegend::paintEvent(QPaintEvent*) {
    QPainter p(this);
    const QRect bar(8, 8, 18, height() - 16);
    const QStringList text = labels();
    if (text.isEmpty()) {
        // An outline and a word instead of a colour scale, until there is something to scale.
        p.setPen(palette().color(QPalette::PlaceholderText));
        p.drawRect(bar);
        p.drawText(QRect(bar.right() + 4, bar.top(), width() - bar.right() - 4, bar.height()), Qt::AlignVCenter | Qt::TextWordWrap,
                   tr("no data"));
        return;
    }
    QLinearGradient g(bar.bottomLeft(), bar.topLeft());
    for (int i = 0; i <= 10; ++i) g.setColorAt(i / 10.0, heat_color(i / 10.0));
    p.fillRect(bar, g);
    p.setPen(palette().color(QPalette::WindowText));
    p.drawRect(bar);
    p.drawText(QPoint(bar.right() + 6, bar.top() + 10), text[0]);
    p.drawText(QPoint(bar.right() + 6, (bar.top() + bar.bottom()) / 2 + 4), text[1]);
    p.drawText(QPoint(bar.right() + 6, bar.bottom()), text[2]);
}

HeatmapView::HeatmapView(Conversation* conversation, QWidget* parent) : QWidget(parent), conversation_(conversation) {
    from_ = new QSpinBox;
    from_->setRange(0, 1 << 24);
    to_ = new QSpinBox;
    to_->setRange(-1, 1 << 24);
    to_->setValue(-1);
    to_->setSpecialValueText(tr("end"));
    // Sized for six digits, not for the range's eight: the first row then fits the workspace's heatmap column (at
    // 1280×720 it was wider than the dock, which scrolled the legend out of sight).
    for (QSpinBox* box : {from_, to_}) box->setMaximumWidth(box->fontMetrics().horizontalAdvance(QStringLiteral("000000")) + 22);
    generated_only_ = new QCheckBox(tr("generated tokens only"));
    bin_ = new QComboBox;
    bin_->addItem(tr("fit width"), 0);
    for (int b = 1; b <= 64; b *= 2) bin_->addItem(b == 1 ? tr("1 expert") : tr("%1 experts").arg(b), b);
    bin_->setToolTip(tr("experts per column: neighbouring experts summed, so hundreds of experts fit"));
    connect(bin_, &QComboBox::currentIndexChanged, this, &HeatmapView::apply_bin);
    by_rank_ = new QCheckBox(tr("colour by rank"));
    by_rank_->setObjectName(QStringLiteral("heatmap_by_rank"));
    by_rank_->setToolTip(tr("Each expert in the colour of the rank that holds it (the server spreads its experts over ranks); "
                            "the shade is still its count, replicated experts are striped"));
    by_rank_->hide();
    connect(by_rank_, &QCheckBox::toggled, this, &HeatmapView::apply_by_rank);
    auto* whole = new QPushButton(tr("Whole conversation"));
    auto* png = new QPushButton(tr("Export PNG…"));
    auto* csv = new QPushButton(tr("Export CSV…"));
    connect(from_, &QSpinBox::valueChanged, this, &HeatmapView::schedule);
    connect(to_, &QSpinBox::valueChanged, this, &HeatmapView::schedule);
    connect(generated_only_, &QCheckBox::toggled, this, &HeatmapView::schedule);
    connect(whole, &QPushButton::clicked, this, [this] { set_span(TokenSpan{}); });
    connect(png, &QPushButton::clicked, this, &HeatmapView::export_png_dialog);
    connect(csv, &QPushButton::clicked, this, &HeatmapView::export_csv_dialog);

    auto* controls = new QHBoxLayout;
    controls->addWidget(new QLabel(tr("positions")));
    controls->addWidget(from_);
    controls->addWidget(new QLabel(tr("to")));
    controls->addWidget(to_);
    controls->addWidget(generated_only_);
    controls->addWidget(whole);
    controls->addStretch();
    // The binning and export controls: at the end of the first row where the view is wide enough, else a second
    // row (a narrow workspace column fits without scrolling sideways, a wide strip keeps its height for the map).
    controls_ = controls;
    more_controls_ = new QWidget;
    auto* controls2 = new QHBoxLayout(more_controls_);
    controls2->setContentsMargins(0, 0, 0, 0);
    controls2->addWidget(new QLabel(tr("per column")));
    controls2->addWidget(bin_);
    controls2->addWidget(by_rank_);
    controls2->addStretch();
    controls2->addWidget(png);
    controls2->addWidget(csv);

    table_ = new QTableView;
    table_->setModel(&heatmap_);
    table_->horizontalHeader()->setDefaultSectionSize(kCellWidth);
    table_->horizontalHeader()->setMinimumSectionSize(20);
    table_->verticalHeader()->setDefaultSectionSize(24);
    table_->verticalHeader()->setMinimumSectionSize(kMinRow);
    table_->setItemDelegate(new MarkDelegate(table_));
    table_->setShowGrid(false);
    table_->setSelectionMode(QAbstractItemView::NoSelection);
    table_->viewport()->installEventFilter(this);
    legend_ = new HeatLegend;
    rank_legend_ = new RankLegend;
    rank_legend_->setObjectName(QStringLiteral("heatmap_rank_legend"));
    rank_legend_->hide();
    summary_ = new QLabel;
    summary_->setObjectName(QStringLiteral("heatmap_summary"));
    mark_note_ = new QLabel;
    mark_note_->setObjectName(QStringLiteral("heatmap_mark_note"));
    mark_note_->setWordWrap(true);
    balance_table_ = new QTableView;
    balance_table_->setModel(&balance_);
    balance_table_->verticalHeader()->hide();
    balance_table_->horizontalHeader()->setStretchLastSection(true);
    balance_table_->setMinimumHeight(2 * balance_table_->fontMetrics().height() + 12);

    // By rank the legend is a line under the map, which keeps the map's whole width for the experts' columns.
    auto* map = new QWidget;
    auto* map_column = new QVBoxLayout(map);
    map_column->setContentsMargins(0, 0, 0, 0);
    map_column->setSpacing(2);
    auto* map_layout = new QHBoxLayout;
    map_layout->addWidget(table_, 1);
    map_layout->addWidget(legend_);
    map_column->addLayout(map_layout, 1);
    map_column->addWidget(rank_legend_);
    auto* bottom = new QWidget;
    auto* bottom_layout = new QVBoxLayout(bottom);
    bottom_layout->setContentsMargins(0, 0, 0, 0);
    bottom_layout->addWidget(mark_note_);
    bottom_layout->addWidget(summary_);
    bottom_layout->addWidget(balance_table_, 1);
    auto* splitter = new QSplitter(Qt::Vertical);
    splitter->addWidget(map);
    splitter->addWidget(bottom);
    splitter->setStretchFactor(0, 3);  // the map first: every layer should show
    splitter->setStretchFactor(1, 1);

    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 4);
    layout->addLayout(controls);
    layout->addWidget(more_controls_);
    layout->addWidget(splitter, 1);

    timer_.setSingleShot(true);
    timer_.setInterval(200);
    connect(&timer_, &QTimer::timeout, this, &HeatmapView::refresh);
    connect(conversation_, &Conversation::traceUpdated, this, &HeatmapView::schedule);
    connect(conversation_, &Conversation::tokensChanged, this, &HeatmapView::schedule);
    connect(conversation_, &Conversation::selectionChanged, this, &HeatmapView::show_marked);
    connect(conversation_, &Conversation::traceUpdated, this, [this](int position) {
        if (position == conversation_->selected()) show_marked();
    });
    show_marked();
}

void HeatmapView::resizeEvent(QResizeEvent* e) {
    QWidget::resizeEvent(e);
    // The width both rows need side by side (the first row's hint holds the second already when they are one).
    const int need = controls_->sizeHint().width() + (controls_in_one_row() ? 0 : more_controls_->sizeHint().width() + controls_->spacing()) + 8;
    const bool one_row = width() >= need;
    if (one_row == controls_in_one_row()) return;
    auto* outer = static_cast<QVBoxLayout*>(layout());
    if (one_row) {
        outer->removeWidget(more_controls_);
        controls_->addWidget(more_controls_);
    } else {
        controls_->removeWidget(more_controls_);
        outer->insertWidget(outer->indexOf(controls_) + 1, more_controls_);
    }
}

bool HeatmapView::controls_in_one_row() const { return controls_->indexOf(more_controls_) >= 0; }

void HeatmapView::show_marked() {
    const ConversationToken* t = conversation_->token(conversation_->selected());
    QHash<int, QVector<int>> marked;
    if (t != nullptr && t->evaluated)
        for (const LayerRouting& r : t->trace.routing) marked.insert(r.layer, QVector<int>(r.experts.begin(), r.experts.end()));
    heatmap_.set_marked(marked);
    mark_note_->setText(marked.isEmpty() ? tr("Select a token in the chat or the routing view: its experts are framed on the map.")
                                         : tr("Framed: the experts chosen for the selected token, position %1 “%2”.")
                                               .arg(t->trace.position).arg(t->trace.text.trimmed().toHtmlEscaped()));
}

void HeatmapView::set_model(const ModelSummary& model) {
    experts_ = model.experts;
    heatmap_.set_linear_layers(model.linear_layer_ids);
    heatmap_.set_placement(model.placement);
    rank_legend_->set_ranks(model.placement.ranks);
    // Across ranks who holds which expert is what the map is looked at for: on from the start.
    by_rank_->setVisible(model.placement.spread());
    by_rank_->setChecked(model.placement.spread());
    apply_by_rank();
    refresh();
}

void HeatmapView::apply_by_rank() {
    heatmap_.set_by_rank(by_rank_->isChecked());
    legend_->setVisible(!heatmap_.by_rank());
    rank_legend_->setVisible(heatmap_.by_rank());
}

void HeatmapView::set_bin(int experts) {
    const int i = bin_->findData(experts);
    if (i >= 0) bin_->setCurrentIndex(i);
    apply_bin();
}

bool HeatmapView::eventFilter(QObject* watched, QEvent* e) {
    // The table's viewport has its new width only once the layout has run: fit then.
    if (watched == table_->viewport() && e->type() == QEvent::Resize) {
        if (bin_->currentData().toInt() == 0) QTimer::singleShot(0, this, &HeatmapView::apply_bin);
        QTimer::singleShot(0, this, &HeatmapView::fit_rows);
    }
    return QWidget::eventFilter(watched, e);
}

QFont HeatmapView::header_font(int bin) const {
    // Bin labels ("504–511") and two-digit experts ("E15") in a smaller face: 16 experts fit a column of the workspace.
    QFont f = table_->font();
    if (bin > 1 || experts_ > 10) f.setPixelSize(10);
    return f;
}

int HeatmapView::header_margins() const {
    // The header style's margin on either side of a section's text, and a pixel to spare.
    return 2 * table_->horizontalHeader()->style()->pixelMetric(QStyle::PM_HeaderMargin, nullptr, table_->horizontalHeader()) + 1;
}

void HeatmapView::fit_rows() {
    // Every layer on screen: the rows share the map's height (scrolling only below kMinRow pixels a row).
    const int rows = std::max(heatmap_.rowCount(), 1);
    // The splitter gives the map at least room for a few layers at the smallest row height; the balance table
    // below gives way first.
    table_->setMinimumHeight(table_->horizontalHeader()->sizeHint().height() + std::min(rows, 8) * kMinRow + 2 * table_->frameWidth() + 2);
    table_->verticalHeader()->setDefaultSectionSize(std::clamp(table_->viewport()->height() / rows, int(kMinRow), int(kMaxRow)));
}

int HeatmapView::min_section(int bin) const {
    // One expert a column: as wide as its label ("E15") and a three-digit count.
    if (bin <= 1)
        return std::max({QFontMetrics(header_font(1)).horizontalAdvance(QStringLiteral("E%1").arg(std::max(experts_ - 1, 0))) + header_margins(),
                         table_->fontMetrics().horizontalAdvance(QStringLiteral("999")) + 4, 24});
    const int last = experts_ - 1, first = last / bin * bin;
    return std::max(kCellWidth, QFontMetrics(header_font(bin)).horizontalAdvance(QStringLiteral("%1–%2").arg(first).arg(last)) + header_margins());
}

std::pair<int, int> HeatmapView::fit(int width) const {
    const auto columns = [this](int bin) { return std::max((experts_ + bin - 1) / bin, 1); };
    int bin = 1;
    while (bin < 64 && columns(bin) * min_section(bin) > width) bin *= 2;
    // Widened to fill the table, up to kMaxCellWidth: a wide window shows the map, not an empty margin beside it.
    return {bin, std::clamp(width / columns(bin), min_section(bin), std::max(min_section(bin), int(kMaxCellWidth)))};
}

void HeatmapView::apply_bin() {
    int bin = bin_->currentData().toInt(), section = min_section(bin);
    // Fit: the fewest experts per column (a power of two) whose columns fit the table's width, widened to fill it.
    if (bin == 0) std::tie(bin, section) = fit(std::max(table_->viewport()->width(), 1));
    table_->horizontalHeader()->setFont(header_font(bin));
    table_->horizontalHeader()->setDefaultSectionSize(section);
    heatmap_.set_bin(bin);
    legend_->set_max(heatmap_.max_cell());
    fit_rows();
}

void HeatmapView::set_span(const TokenSpan& span) {
    from_->setValue(span.from);
    to_->setValue(span.to);
    generated_only_->setChecked(span.generated_only);
    refresh();
}

TokenSpan HeatmapView::span() const { return TokenSpan{from_->value(), to_->value(), generated_only_->isChecked()}; }

void HeatmapView::schedule() {
    if (!timer_.isActive()) timer_.start();
}

void HeatmapView::refresh() {
    timer_.stop();
    const ExpertUsage usage = expert_usage(*conversation_, span(), experts_);
    heatmap_.set_usage(usage);
    balance_.set_usage(usage);
    apply_bin();
    double ratio = 0.0;
    for (size_t r = 0; r < usage.layers.size(); ++r) ratio += usage.balance(r).entropy_ratio;
    summary_->setText(usage.layers.empty() ? tr("No routed tokens in this span yet.")
                                           : tr("%1 tokens, %2 MoE layers; mean entropy / max %3 (1 = perfectly balanced)")
                                                 .arg(usage.tokens).arg(usage.layers.size()).arg(ratio / usage.layers.size(), 0, 'f', 3));
}

QImage HeatmapView::render_image(int cell) const {
    const ExpertUsage& u = heatmap_.usage();
    const int rows = heatmap_.rowCount(), cols = heatmap_.columnCount();
    const int left = 70, top = 30, legend = 80;
    QImage img(left + std::max(cols, 1) * cell + legend, top + std::max(rows, 1) * cell + 20, QImage::Format_RGB32);
    img.fill(Qt::white);
    QPainter p(&img);
    QFont f = p.font();
    f.setPixelSize(std::max(9, cell / 3));
    p.setFont(f);
    // Column labels where they fit: every column, or every 2nd, 4th... for long bin labels.
    const int label = p.fontMetrics().horizontalAdvance(heatmap_.headerData(cols - 1, Qt::Horizontal).toString()) + 4;
    int every = 1;
    while (every * cell < label) every *= 2;
    for (int c = 0; c < cols; c += every)
        p.drawText(QRect(left + c * cell, 4, cell * every, top - 6), Qt::AlignLeft | Qt::AlignVCenter, heatmap_.headerData(c, Qt::Horizontal).toString());
    for (int r = 0; r < rows; ++r) {
        p.setPen(Qt::black);
        p.drawText(QRect(0, top + r * cell, left - 6, cell), Qt::AlignRight | Qt::AlignVCenter, tr("layer %1").arg(u.layers[static_cast<size_t>(r)]));
        for (int c = 0; c < cols; ++c) {
            const int v = heatmap_.count(r, c);
            const QColor bg = heatmap_.cell_color(r, c);
            const QRect cellRect(left + c * cell, top + r * cell, cell, cell);
            p.fillRect(cellRect, bg);
            if (heatmap_.by_rank() && heatmap_.replicated(r, c)) draw_stripes(p, cellRect, text_color_on(bg));
            p.setPen(text_color_on(bg));
            if (cell >= 20) p.drawText(cellRect, Qt::AlignCenter, QString::number(v));
        }
    }
    if (heatmap_.by_rank()) {
        // The ranks' colours beside the map, as on screen.
        const int ranks = heatmap_.placement().ranks;
        const int line = std::max(cell / 2, 14), fit = std::max(std::max(rows, 1) * cell / line - 1, 1);
        for (int k = 0; k <= std::min(ranks, fit); ++k) {
            const bool replicated = k == std::min(ranks, fit);
            const QRect swatch(left + cols * cell + 8, top + k * line + 2, line - 4, line - 4);
            p.fillRect(swatch, replicated ? QColor(120, 120, 120) : rank_color(k));
            if (replicated) draw_stripes(p, swatch, Qt::white);
            p.setPen(Qt::black);
            p.drawText(QPoint(swatch.right() + 4, swatch.bottom()), replicated ? tr("repl.") : QString::number(k));
        }
        return img;
    }
    const QRect bar(left + cols * cell + 12, top, 16, std::max(rows, 1) * cell);
    QLinearGradient g(bar.bottomLeft(), bar.topLeft());
    for (int i = 0; i <= 10; ++i) g.setColorAt(i / 10.0, heat_color(i / 10.0));
    p.fillRect(bar, g);
    p.setPen(Qt::black);
    p.drawText(QPoint(bar.right() + 4, bar.top() + 10), QString::number(heatmap_.max_cell()));
    p.drawText(QPoint(bar.right() + 4, bar.bottom()), QStringLiteral("0"));
    return img;
}

Status HeatmapView::export_png(const QString& path) const {
    QByteArray png;
    QBuffer buffer(&png);
    if (!buffer.open(QIODevice::WriteOnly) || !render_image().save(&buffer, "PNG")) return error((path + ": could not encode the PNG").toStdString());
    return save_file(path, png);
}

Status HeatmapView::export_csv(const QString& path) const {
    return save_file(path, heatmap_.to_csv().toUtf8());
}

void HeatmapView::export_png_dialog() {
    const QString path = QFileDialog::getSaveFileName(this, tr("Export heatmap"), QStringLiteral("heatmap.png"), tr("PNG images (*.png)"));
    if (path.isEmpty()) return;
    if (Status s = export_png(path); !s) summary_->setText(QString::fromStdString(s.message()));
}

void HeatmapView::export_csv_dialog() {
    const QString path = QFileDialog::getSaveFileName(this, tr("Export heatmap"), QStringLiteral("heatmap.csv"), tr("CSV files (*.csv)"));
    if (path.isEmpty()) return;
    if (Status s = export_csv(path); !s) summary_->setText(QString::fromStdString(s.message()));
}

}  // namespace colibri::studio
