#include "ui/views/model_graph_view.h"

#include <QHelpEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QPainterPath>
#include <QToolTip>

#include "ui/colors.h"

namespace colibri::studio {

namespace {
constexpr int kMaxLines = 4;   // tensor lines drawn in a block; the tooltip has them all
constexpr int kGap = 14;       // between blocks and rows (the arrows run there)
constexpr int kPad = 4;

// A tint per kind of block, so a row reads at a glance (mixer, routing, experts).
QColor kind_color(GraphBlock::Kind k) {
    switch (k) {
    case GraphBlock::Kind::Tokenizer: return QColor(158, 158, 158);
    case GraphBlock::Kind::Embedding:
    case GraphBlock::Kind::Output: return QColor(121, 134, 203);
    case GraphBlock::Kind::Attention: return QColor(66, 133, 244);
    case GraphBlock::Kind::LinearAttention: return QColor(0, 150, 136);
    case GraphBlock::Kind::Router: return QColor(255, 167, 38);
    case GraphBlock::Kind::Experts: return QColor(171, 71, 188);
    case GraphBlock::Kind::SharedExpert: return QColor(236, 64, 122);
    case GraphBlock::Kind::DenseMlp: return QColor(141, 110, 99);
    }
    return QColor(158, 158, 158);
}
}  // namespace

ModelGraphView::ModelGraphView(QWidget* parent) : QWidget(parent) {
    setMouseTracking(true);
    QSizePolicy p(QSizePolicy::Preferred, QSizePolicy::Preferred);
    p.setHeightForWidth(true);
    setSizePolicy(p);
}

void ModelGraphView::set_file(const FileLayout& layout, const std::vector<SectionState>& states) {
    rows_ = model_graph(layout);
    states_ = states;
    selected_ = {-1, -1};
    // Blocks as wide as their longest line (up to a cap): narrower, the lines would be elided to nothing; the
    // scroll area scrolls sideways instead.
    const QFontMetrics fm = fontMetrics();
    block_width_ = 0;
    size_t most = 1;
    for (const GraphRow& r : rows_) {
        most = std::max(most, r.blocks.size());
        for (const GraphBlock& b : r.blocks) {
            block_width_ = std::max(block_width_, fm.horizontalAdvance(b.title));
            for (const QString& t : b.tensors) block_width_ = std::max(block_width_, fm.horizontalAdvance(t));
        }
    }
    block_width_ = std::min(block_width_ + 2 * kPad + 8, fm.horizontalAdvance(QLatin1Char('x')) * 28);
    setMinimumWidth(rows_.empty() ? 0 : label_width() + kPad + static_cast<int>(most) * (block_width_ + kGap));
    updateGeometry();
    update();
}

void ModelGraphView::set_states(const std::vector<SectionState>& states) {
    states_ = states;
    update();
}

int ModelGraphView::line_height() const { return fontMetrics().height(); }
int ModelGraphView::label_width() const { return fontMetrics().horizontalAdvance(QStringLiteral("layer 000")) + 8; }

int ModelGraphView::row_height(const GraphRow& r) const {
    int lines = 0;
    for (const GraphBlock& b : r.blocks) lines = std::max(lines, std::min<int>(static_cast<int>(b.tensors.size()), kMaxLines + 1));
    return (lines + 1) * line_height() + 2 * kPad;
}

int ModelGraphView::row_top(int row) const {
    int y = kPad;
    for (int i = 0; i < row; ++i) y += row_height(rows_[static_cast<size_t>(i)]) + kGap;
    return y;
}

int ModelGraphView::content_height() const { return rows_.empty() ? 60 : row_top(static_cast<int>(rows_.size())) - kGap + kPad; }

QSize ModelGraphView::sizeHint() const { return {420, std::min(content_height(), 400)}; }

QRect ModelGraphView::block_rect(int row, int block) const {
    if (row < 0 || row >= static_cast<int>(rows_.size())) return {};
    const GraphRow& r = rows_[static_cast<size_t>(row)];
    if (block < 0 || block >= static_cast<int>(r.blocks.size())) return {};
    // Every row shares one block width, the widest row's share, so the columns line up from layer to layer.
    size_t most = 1;
    for (const GraphRow& x : rows_) most = std::max(most, x.blocks.size());
    const int left = label_width();
    const int w = std::max(block_width_, (width() - left - kPad - kGap * static_cast<int>(most - 1)) / static_cast<int>(most));
    return QRect(left + block * (w + kGap), row_top(row), w, row_height(r));
}

std::pair<int, int> ModelGraphView::block_at(const QPoint& p) const {
    for (int r = 0; r < static_cast<int>(rows_.size()); ++r)
        for (int b = 0; b < static_cast<int>(rows_[static_cast<size_t>(r)].blocks.size()); ++b)
            if (block_rect(r, b).contains(p)) return {r, b};
    return {-1, -1};
}

SectionState ModelGraphView::state_of(const GraphBlock& b) const {
    // The worst of its sections: damaged over misaligned over not checked over ok.
    auto rank = [](SectionState s) { return s == SectionState::Damaged ? 3 : s == SectionState::Misaligned ? 2 : s == SectionState::NotChecked ? 1 : 0; };
    SectionState worst = SectionState::Ok;
    bool any = false;
    for (int s : b.sections) {
        const SectionState st = static_cast<size_t>(s) < states_.size() ? states_[static_cast<size_t>(s)] : SectionState::NotChecked;
        if (!any || rank(st) > rank(worst)) worst = st;
        any = true;
    }
    return any ? worst : SectionState::NotChecked;
}

void ModelGraphView::select_block(int row, int block) {
    if (block_rect(row, block).isEmpty()) return;
    selected_ = {row, block};
    update();
    emit blockClicked(rows_[static_cast<size_t>(row)].blocks[static_cast<size_t>(block)].sections);
}

void ModelGraphView::paintEvent(QPaintEvent*) {
    QPainter p(this);
    p.setRenderHint(QPainter::Antialiasing);
    const QPalette pal = palette();
    const QFontMetrics fm = fontMetrics();
    const int lh = line_height();
    drawn_.clear();
    p.fillRect(rect(), pal.color(QPalette::Base));
    if (rows_.empty()) {
        p.setPen(pal.color(QPalette::PlaceholderText));
        p.drawText(rect(), Qt::AlignCenter, tr("Open a model file for its layer graph."));
        return;
    }
    const QColor line_color = blend(pal.color(QPalette::Base), pal.color(QPalette::Text), 0.45);
    for (int r = 0; r < static_cast<int>(rows_.size()); ++r) {
        const GraphRow& row = rows_[static_cast<size_t>(r)];
        const QRect first = block_rect(r, 0);
        p.setPen(pal.color(QPalette::Text));
        p.drawText(QRect(2, first.top(), label_width() - 6, lh + kPad), Qt::AlignLeft | Qt::AlignVCenter, row.label);
        // The residual stream: an arrow down from each row into the next.
        if (r + 1 < static_cast<int>(rows_.size())) {
            const int x = label_width() / 2, y0 = first.top() + lh + kPad + 2, y1 = row_top(r + 1) - 2;
            p.setPen(QPen(line_color, 1.5));
            p.drawLine(x, y0, x, y1);
            p.drawLine(x, y1, x - 4, y1 - 5);
            p.drawLine(x, y1, x + 4, y1 - 5);
        }
        for (int b = 0; b < static_cast<int>(row.blocks.size()); ++b) {
            const GraphBlock& block = row.blocks[static_cast<size_t>(b)];
            const QRect box = block_rect(r, b);
            if (b > 0) {  // data flows left to right within a layer
                const int y = box.top() + lh / 2 + kPad, x0 = block_rect(r, b - 1).right() + 2, x1 = box.left() - 2;
                p.setPen(QPen(line_color, 1.5));
                p.drawLine(x0, y, x1, y);
                p.drawLine(x1, y, x1 - 5, y - 4);
                p.drawLine(x1, y, x1 - 5, y + 4);
            }
            const SectionState st = state_of(block);
            const QColor tint = kind_color(block.kind);
            p.setBrush(blend(pal.color(QPalette::Base), tint, 0.18));
            const bool bad = st == SectionState::Damaged || st == SectionState::Misaligned;
            const bool chosen = selected_ == std::make_pair(r, b);
            p.setPen(QPen(bad ? section_state_color(st) : chosen ? pal.color(QPalette::Highlight) : tint, bad || chosen ? 3 : 1.5));
            p.drawRoundedRect(QRectF(box).adjusted(1, 1, -1, -1), 5, 5);
            // Title bar in the kind's colour.
            QPainterPath title;
            title.addRoundedRect(QRectF(box.left() + 2, box.top() + 2, box.width() - 4, lh + kPad), 4, 4);
            p.fillPath(title, tint);
            p.setPen(text_color_on(tint));
            QString heading = block.title;
            if (bad) heading += QStringLiteral(" — ") + section_state_name(st);
            const QString t = fm.elidedText(heading, Qt::ElideRight, box.width() - 2 * kPad - 4);
            p.drawText(QRect(box.left() + kPad + 2, box.top() + 2, box.width() - 2 * kPad - 4, lh + kPad), Qt::AlignLeft | Qt::AlignVCenter, t);
            drawn_ << t;
            p.setPen(pal.color(QPalette::Text));
            const int shown = std::min<int>(static_cast<int>(block.tensors.size()), kMaxLines);
            auto line = [&](int i, const QString& text) {
                const QString e = fm.elidedText(text, Qt::ElideMiddle, box.width() - 2 * kPad - 4);
                p.drawText(QRect(box.left() + kPad + 2, box.top() + 2 + lh + kPad + i * lh, box.width() - 2 * kPad - 4, lh), Qt::AlignLeft | Qt::AlignVCenter, e);
                drawn_ << e;
            };
            for (int i = 0; i < shown; ++i) line(i, block.tensors[i]);
            if (block.tensors.size() > shown) line(shown, tr("… %n more", nullptr, static_cast<int>(block.tensors.size()) - shown));
        }
    }
}

void ModelGraphView::mousePressEvent(QMouseEvent* e) {
    const auto [r, b] = block_at(e->position().toPoint());
    if (r >= 0) select_block(r, b);
}

bool ModelGraphView::event(QEvent* e) {
    if (e->type() == QEvent::ToolTip) {
        auto* help = static_cast<QHelpEvent*>(e);
        const auto [r, b] = block_at(help->pos());
        if (r < 0) {
            QToolTip::hideText();
        } else {
            const GraphBlock& block = rows_[static_cast<size_t>(r)].blocks[static_cast<size_t>(b)];
            QString text = QStringLiteral("<b>%1</b> (%2)<br>%3<br><i>%4</i>")
                               .arg(block.title.toHtmlEscaped(), section_state_name(state_of(block)), block.tensors.join(QLatin1Char('\n')).toHtmlEscaped().replace(QLatin1Char('\n'), QStringLiteral("<br>")),
                                    tr("click to select its tensors in the table"));
            QToolTip::showText(help->globalPos(), text, this);
        }
        return true;
    }
    return QWidget::event(e);
}

}  // namespace colibri::studio
