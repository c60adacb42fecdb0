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
#include <QTableView>
#include <QVBoxLayout>
#include <tuple>

#include "ui/colors.h"
#include "ui/file_output.h"

namespace colibri::studio {

void HeatLegend::set_max(double max) {
    max_ = max;
    update();
}

void HeatLegend::paintEvent(QPaintEvent*) {
    QPainter p(this);
    const QRect bar(8, 8, 18, height() - 16);
    QLinearGradient g(bar.bottomLeft(), bar.topLeft());
    for (int i = 0; i <= 10; ++i) g.setColorAt(i / 10.0, heat_color(i / 10.0));
    p.fillRect(bar, g);
    p.setPen(palette().color(QPalette::WindowText));
    p.drawRect(bar);
    p.drawText(QPoint(bar.right() + 6, bar.top() + 10), QString::number(max_, 'g', 4));
    p.drawText(QPoint(bar.right() + 6, (bar.top() + bar.bottom()) / 2 + 4), QString::number(max_ / 2.0, 'g', 3));
    p.drawText(QPoint(bar.right() + 6, bar.bottom()), QStringLiteral("0"));
}

HeatmapView::HeatmapView(Conversation* conversation, QWidget* parent) : QWidget(parent), conversation_(conversation) {
    from_ = new QSpinBox;
    from_->setRange(0, 1 << 24);
    to_ = new QSpinBox;
    to_->setRange(-1, 1 << 24);
    to_->setValue(-1);
    to_->setSpecialValueText(tr("end"));
    generated_only_ = new QCheckBox(tr("generated tokens only"));
    bin_ = new QComboBox;
    bin_->addItem(tr("fit width"), 0);
    for (int b = 1; b <= 64; b *= 2) bin_->addItem(b == 1 ? tr("1 expert") : tr("%1 experts").arg(b), b);
    bin_->setToolTip(tr("experts per column: neighbouring experts summed, so hundreds of experts fit"));
    connect(bin_, &QComboBox::currentIndexChanged, this, &HeatmapView::apply_bin);
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
    controls->addWidget(new QLabel(tr("per column")));
    controls->addWidget(bin_);
    controls->addStretch();
    controls->addWidget(png);
    controls->addWidget(csv);

    table_ = new QTableView;
    table_->setModel(&heatmap_);
    table_->horizontalHeader()->setDefaultSectionSize(kCellWidth);
    table_->horizontalHeader()->setMinimumSectionSize(20);
    table_->verticalHeader()->setDefaultSectionSize(24);
    table_->setShowGrid(false);
    table_->setSelectionMode(QAbstractItemView::NoSelection);
    table_->viewport()->installEventFilter(this);
    legend_ = new HeatLegend;
    summary_ = new QLabel;
    summary_->setObjectName(QStringLiteral("heatmap_summary"));
    balance_table_ = new QTableView;
    balance_table_->setModel(&balance_);
    balance_table_->verticalHeader()->hide();
    balance_table_->horizontalHeader()->setStretchLastSection(true);

    auto* map = new QWidget;
    auto* map_layout = new QHBoxLayout(map);
    map_layout->setContentsMargins(0, 0, 0, 0);
    map_layout->addWidget(table_, 1);
    map_layout->addWidget(legend_);
    auto* bottom = new QWidget;
    auto* bottom_layout = new QVBoxLayout(bottom);
    bottom_layout->setContentsMargins(0, 0, 0, 0);
    bottom_layout->addWidget(summary_);
    bottom_layout->addWidget(balance_table_, 1);
    auto* splitter = new QSplitter(Qt::Vertical);
    splitter->addWidget(map);
    splitter->addWidget(bottom);
    splitter->setStretchFactor(0, 2);
    splitter->setStretchFactor(1, 1);

    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 4);
    layout->addLayout(controls);
    layout->addWidget(splitter, 1);

    timer_.setSingleShot(true);
    timer_.setInterval(200);
    connect(&timer_, &QTimer::timeout, this, &HeatmapView::refresh);
    connect(conversation_, &Conversation::traceUpdated, this, &HeatmapView::schedule);
    connect(conversation_, &Conversation::tokensChanged, this, &HeatmapView::schedule);
}

void HeatmapView::set_model(const ModelSummary& model) {
    experts_ = model.experts;
    heatmap_.set_linear_layers(model.linear_layer_ids);
    refresh();
}

void HeatmapView::set_bin(int experts) {
    const int i = bin_->findData(experts);
    if (i >= 0) bin_->setCurrentIndex(i);
    apply_bin();
}

bool HeatmapView::eventFilter(QObject* watched, QEvent* e) {
    // The table's viewport has its new width only once the layout has run: fit then.
    if (watched == table_->viewport() && e->type() == QEvent::Resize && bin_->currentData().toInt() == 0) QTimer::singleShot(0, this, &HeatmapView::apply_bin);
    return QWidget::eventFilter(watched, e);
}

QFont HeatmapView::header_font(int bin) const {
    // Bin labels ("504–511") in a smaller face.
    QFont f = table_->font();
    if (bin > 1) f.setPixelSize(10);
    return f;
}

int HeatmapView::min_section(int bin) const {
    if (bin <= 1) return kCellWidth;
    const int last = experts_ - 1, first = last / bin * bin;
    return std::max(kCellWidth, QFontMetrics(header_font(bin)).horizontalAdvance(QStringLiteral("%1–%2").arg(first).arg(last)) + 8);
}

std::pair<int, int> HeatmapView::fit(int width) const {
    const auto columns = [this](int bin) { return std::max((experts_ + bin - 1) / bin, 1); };
    int bin = 1;
    while (bin < 64 && columns(bin) * min_section(bin) > width) bin *= 2;
    return {bin, std::clamp(width / columns(bin), min_section(bin), std::max(min_section(bin), 2 * kCellWidth))};
}

void HeatmapView::apply_bin() {
    int bin = bin_->currentData().toInt(), section = min_section(bin);
    // Fit: the fewest experts per column (a power of two) whose columns fit the table's width, widened to fill it.
    if (bin == 0) std::tie(bin, section) = fit(std::max(table_->viewport()->width(), 1));
    table_->horizontalHeader()->setFont(header_font(bin));
    table_->horizontalHeader()->setDefaultSectionSize(section);
    heatmap_.set_bin(bin);
    legend_->set_max(heatmap_.max_cell());
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
    const int max = std::max(heatmap_.max_cell(), 1);
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
            const QColor bg = heat_color(static_cast<double>(v) / max);
            const QRect cellRect(left + c * cell, top + r * cell, cell, cell);
            p.fillRect(cellRect, bg);
            p.setPen(text_color_on(bg));
            if (cell >= 20) p.drawText(cellRect, Qt::AlignCenter, QString::number(v));
        }
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
