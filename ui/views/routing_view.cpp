#include "ui/views/routing_view.h"

#include <QComboBox>
#include <QEvent>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPainter>
#include <QSplitter>
#include <QTableView>
#include <QTextBlock>
#include <QTextBrowser>
#include <QUrl>
#include <QVBoxLayout>
#include <algorithm>
#include <numeric>

#include "ui/colors.h"
#include "ui/views/bar_chart.h"
#include "ui/views/elided_label.h"

namespace colibri::studio {

void DistributionDelegate::paint(QPainter* painter, const QStyleOptionViewItem& option, const QModelIndex& index) const {
    QStyledItemDelegate::paint(painter, option, QModelIndex());  // background and selection only
    const QList<float> probs = index.data(RoutingTableModel::ProbsRole).value<QList<float>>();
    if (probs.isEmpty()) return;
    // The chosen experts are the other cells of the row.
    QList<int> chosen;
    for (int c = 1; c < index.model()->columnCount() - 1; ++c) chosen << index.siblingAtColumn(c).data(RoutingTableModel::ExpertRole).toInt();
    const QRectF r = QRectF(option.rect).adjusted(3, 3, -3, -3);
    const qreal w = r.width() / probs.size();
    const float top = *std::max_element(probs.begin(), probs.end());
    painter->save();
    painter->setPen(Qt::NoPen);
    for (int e = 0; e < probs.size(); ++e) {
        const qreal h = top > 0 ? r.height() * probs[e] / top : 0;
        painter->setBrush(chosen.contains(e) ? expert_color(e) : QColor(190, 190, 190));
        painter->drawRect(QRectF(r.left() + e * w + w * 0.1, r.bottom() - h, w * 0.8, h));
    }
    painter->restore();
}

QSize DistributionDelegate::sizeHint(const QStyleOptionViewItem& option, const QModelIndex& index) const {
    const int n = static_cast<int>(index.data(RoutingTableModel::ProbsRole).value<QList<float>>().size());
    // Six pixels per expert up to 64 experts; more squeeze into 384 (a sparkline: the chart below has the detail).
    return QSize(std::clamp(n * 6, 120, 384), std::max(QStyledItemDelegate::sizeHint(option, index).height(), 26));
}

void RoutingView::fit_columns() {
    table_->resizeColumnsToContents();
    const int columns = table_model_.columnCount();
    if (columns < 2 || delegate_column_ != columns - 1) return;
    int others = 0;
    for (int c = 0; c + 1 < columns; ++c) others += table_->columnWidth(c);
    const int room = table_->viewport()->width() - others;
    const int wanted = table_->columnWidth(delegate_column_);
    table_->setColumnWidth(delegate_column_, std::max(kMinSparklineWidth, std::min(wanted, room)));
}

bool RoutingView::eventFilter(QObject* watched, QEvent* event) {
    if (watched == table_->viewport() && event->type() == QEvent::Resize) fit_columns();
    return QWidget::eventFilter(watched, event);
}

RoutingView::RoutingView(Conversation* conversation, QWidget* parent) : QWidget(parent), conversation_(conversation) {
    title_ = new ElidedLabel(tr("Select a token in the chat or in the text below."));
    title_->setObjectName(QStringLiteral("routing_title"));
    delegate_ = new DistributionDelegate(this);
    table_ = new QTableView;
    table_->setModel(&table_model_);
    table_->setSelectionBehavior(QAbstractItemView::SelectRows);
    table_->setSelectionMode(QAbstractItemView::SingleSelection);
    table_->verticalHeader()->hide();
    // Columns as wide as their contents and headers, but the sparkline gives way to the dock's width (fit_columns):
    // a top-k too wide for it still scrolls rather than clipping the weights.
    table_->horizontalHeader()->setStretchLastSection(false);
    table_->viewport()->installEventFilter(this);
    connect(&table_model_, &QAbstractItemModel::modelReset, this, [this] {
        // The distribution column moves with the model's top-k.
        table_->setItemDelegateForColumn(delegate_column_, nullptr);
        delegate_column_ = table_model_.distribution_column();
        table_->setItemDelegateForColumn(delegate_column_, delegate_);
        fit_columns();
        if (table_model_.rowCount() > 0) table_->selectRow(0);
        else show_distribution(-1);
    });
    connect(table_->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
            [this](const QModelIndex& current) { show_distribution(current.row()); });

    chart_ = new BarChart;
    chart_->setObjectName(QStringLiteral("router_chart"));
    chart_->set_axis_title(tr("router probability (all experts)"));
    chart_->set_x_axis_title(tr("expert"));
    chart_->set_value_format([](double v) { return QString::number(v, 'f', 2); });
    chart_->setMinimumHeight(120);

    layer_ = new QComboBox;
    layer_->setObjectName(QStringLiteral("text_layer"));
    connect(layer_, &QComboBox::currentIndexChanged, this, &RoutingView::render_text);
    legend_ = new QLabel;
    legend_->setWordWrap(true);
    text_ = new QTextBrowser;
    text_->setOpenLinks(false);
    connect(text_, &QTextBrowser::anchorClicked, this, &RoutingView::on_anchor);

    auto* top = new QWidget;
    auto* top_layout = new QVBoxLayout(top);
    top_layout->setContentsMargins(0, 0, 0, 0);
    top_layout->addWidget(title_);
    // The table's weight and the chart's probability differ for the same expert (0.876 against 0.60): say which is which.
    weights_note_ = new QLabel(tr("Table: the chosen experts' <b>weights</b> (their router probabilities renormalised over the top-k: "
                                  "what scales each expert's output). Chart: every expert's <b>router probability</b>."));
    weights_note_->setObjectName(QStringLiteral("routing_weights_note"));
    weights_note_->setWordWrap(true);
    top_layout->addWidget(weights_note_);
    // Table above chart: the dock is tall and narrow, and the chart needs the width for one bar per expert.
    auto* table_and_chart = new QSplitter(Qt::Vertical);
    table_and_chart->addWidget(table_);
    table_and_chart->addWidget(chart_);
    table_and_chart->setStretchFactor(0, 1);
    table_and_chart->setStretchFactor(1, 1);
    top_layout->addWidget(table_and_chart, 1);

    auto* bottom = new QWidget;
    auto* bottom_layout = new QVBoxLayout(bottom);
    bottom_layout->setContentsMargins(0, 0, 0, 0);
    auto* selector = new QHBoxLayout;
    auto* selector_label = new QLabel(tr("Text coloured by the first expert at"));
    selector_label->setWordWrap(true);  // a narrow dock wraps it rather than scrolling sideways
    selector->addWidget(selector_label, 1);
    selector->addWidget(layer_);
    bottom_layout->addLayout(selector);
    bottom_layout->addWidget(legend_);
    bottom_layout->addWidget(text_, 1);

    auto* splitter = new QSplitter(Qt::Vertical);
    splitter->addWidget(top);
    splitter->addWidget(bottom);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 4);
    layout->addWidget(splitter);

    text_timer_.setSingleShot(true);
    text_timer_.setInterval(120);
    connect(&text_timer_, &QTimer::timeout, this, [this] { full_render_ ? render_text() : append_text(); });
    // While a reply streams only new positions are appended; anything that changes text already drawn (a
    // replaced trace, removed tokens, the selection) draws it again.
    auto text_dirty = [this](bool full) {
        full_render_ = full_render_ || full;
        if (!text_timer_.isActive()) text_timer_.start();
    };
    connect(conversation_, &Conversation::tokensChanged, this, [this, text_dirty](int from) { text_dirty(from < rendered_); });
    connect(conversation_, &Conversation::traceUpdated, this, [this, text_dirty](int position) { text_dirty(position < rendered_); });
    connect(conversation_, &Conversation::selectionChanged, this, [this, text_dirty] {
        show_selected();
        text_dirty(true);
    });
    connect(conversation_, &Conversation::traceUpdated, this, [this](int position) {
        if (position == conversation_->selected()) show_selected();
    });
}

void RoutingView::set_model(const ModelSummary& model) {
    model_ = model;
    // Only MoE layers route; dense ones have nothing to colour by.
    layer_->blockSignals(true);
    layer_->clear();
    for (int l : model.moe_layer_ids) layer_->addItem(tr("layer %1").arg(l), l);
    layer_->blockSignals(false);
    update_legend();

    show_distribution(-1);
    show_selected();
    render_text();
}

void RoutingView::show_selected() {
    const ConversationToken* t = conversation_->token(conversation_->selected());
    table_model_.set_token(t, model_.active_experts);
    if (t == nullptr) {
        title_->setText(tr("Select a token in the chat or in the text below."));
    } else {
        title_->setText(tr("Token %1 at position %2: “%3”%4%5")
                            .arg(t->trace.token).arg(t->trace.position).arg(t->trace.text.trimmed())
                            .arg(t->trace.generated ? tr(", generated") : tr(", prompt"))
                            .arg(t->evaluated ? QString() : tr(" (not evaluated yet)")));
    }
}

void RoutingView::show_distribution(int row) {
    const LayerRouting* r = table_model_.routing(row);
    QStringList categories;
    BarChart::Series s;
    double top = 0.0;
    // Hundreds of experts do not fit as bars: the most likely ones, by descending probability, are charted instead.
    std::vector<int> order(static_cast<size_t>(std::max(model_.experts, 0)));
    std::iota(order.begin(), order.end(), 0);
    const bool ranked = model_.experts > kChartAllExperts;
    if (ranked) {
        auto prob = [r](int e) { return r && static_cast<size_t>(e) < r->probs.size() ? r->probs[static_cast<size_t>(e)] : 0.0f; };
        std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return prob(a) > prob(b); });
        order.resize(kChartedExperts);
    }
    for (const int e : order) {
        // Expert numbers under the bars, the axis titled "expert": narrow enough that every one is written.
        categories << (ranked ? QStringLiteral("E%1").arg(e) : QString::number(e));
        const double p = r && static_cast<size_t>(e) < r->probs.size() ? r->probs[static_cast<size_t>(e)] : 0.0;
        const bool chosen = r && std::find(r->experts.begin(), r->experts.end(), e) != r->experts.end();
        s.values << p;
        s.bar_colors << (chosen ? expert_color(e) : QColor(160, 160, 160));
        top = std::max(top, p);
    }
    chart_->set_fixed_range(0.0, top > 0 ? std::min(1.0, top * 1.2) : 1.0);
    chart_->set_title(!r ? tr("Router probability")
                      : ranked ? tr("Router probability at layer %1: the %2 most likely of %3 experts")
                                     .arg(r->layer).arg(kChartedExperts).arg(model_.experts)
                               : tr("Router probability at layer %1").arg(r->layer));
    chart_->set_x_axis_title(ranked ? tr("expert, most likely first") : tr("expert"));
    chart_->set_legend_entries({{tr("chosen (top-%1), in the expert's colour").arg(model_.active_experts), r && !r->experts.empty()
                                                                                                              ? expert_color(r->experts.front())
                                                                                                              : expert_color(0)},
                                {tr("not chosen"), QColor(160, 160, 160)}});
    chart_->set_data(categories, r ? QVector<BarChart::Series>{s} : QVector<BarChart::Series>{});
}

QList<qreal> RoutingView::chart_values() const {
    QList<qreal> v;
    if (chart_->series().isEmpty()) return v;
    for (double x : chart_->series().front().values) v << x;
    return v;
}

QStringList RoutingView::chart_categories() const { return chart_->categories(); }

QString RoutingView::legend_text() const { return legend_->text(); }

int RoutingView::text_layer() const { return layer_->currentIndex() >= 0 ? layer_->currentData().toInt() : -1; }

void RoutingView::set_text_layer(int layer) {
    const int i = layer_->findData(layer);
    if (i >= 0) layer_->setCurrentIndex(i);
}

void RoutingView::refresh() {
    text_timer_.stop();
    render_text();
}

void RoutingView::render_text() {
    text_timer_.stop();
    full_render_ = false;
    text_->clear();
    rendered_ = 0;
    append_text();
}

void RoutingView::append_text() {
    text_timer_.stop();
    const int layer = text_layer();
    QTextCursor c(text_->document());
    c.movePosition(QTextCursor::End);
    // One edit block per batch: the document lays the paragraph out once, not once per token (a thousand
    // tokens appended one by one stalled the UI thread for ~3 s in test_ui_views).
    c.beginEditBlock();
    const std::vector<ConversationToken>& tokens = conversation_->tokens();
    // Positions in order, up to the first one still waiting for its trace.
    for (; rendered_ < static_cast<int>(tokens.size()) && tokens[static_cast<size_t>(rendered_)].evaluated; ++rendered_) {
        const ConversationToken& t = tokens[static_cast<size_t>(rendered_)];
        if (t.trace.text.isEmpty()) continue;
        QTextCharFormat f;
        f.setAnchor(true);
        f.setAnchorHref(QStringLiteral("tok:%1").arg(t.trace.position));
        const LayerRouting* r = t.trace.routing_at(layer);
        if (r && !r->experts.empty()) {
            const QColor bg = expert_color(r->experts.front());
            f.setBackground(bg);
            f.setForeground(text_color_on(bg));
            QStringList experts;
            for (int32_t e : r->experts) experts << QString::number(e);
            f.setToolTip(tr("position %1, token %2: experts %3 at layer %4").arg(t.trace.position).arg(t.trace.token)
                             .arg(experts.join(QStringLiteral(", "))).arg(layer));
        }
        if (t.trace.position == conversation_->selected()) {
            f.setFontUnderline(true);
            f.setFontWeight(QFont::Bold);
        }
        // The document lays out again only the paragraph that changed: a reply without line breaks would make
        // every append shape the whole reply, so long paragraphs are cut at a token boundary.
        if (c.block().length() > 600) c.insertBlock();
        c.insertText(t.trace.text, f);
    }
    c.endEditBlock();
    if (model_.experts > kChartAllExperts) update_legend();
}

namespace {
QString expert_chip(int e, const QString& suffix = {}) {
    return QStringLiteral("<span style='background:%1; color:%2'>&nbsp;E%3%4&nbsp;</span>")
        .arg(expert_color(e).name(), text_color_on(expert_color(e)).name()).arg(e).arg(suffix);
}
}  // namespace

void RoutingView::update_legend() {
    QStringList chips;
    if (model_.experts <= kChartAllExperts) {
        for (int e = 0; e < model_.experts; ++e) chips << expert_chip(e);
        legend_->setText(chips.join(QLatin1Char(' ')));
        return;
    }
    // Hundreds of experts would fill the view with chips: the text's first experts at the layer, most frequent first.
    std::vector<std::pair<int, int>> counts(static_cast<size_t>(model_.experts));  // (-count, expert)
    for (int e = 0; e < model_.experts; ++e) counts[static_cast<size_t>(e)] = {0, e};
    int distinct = 0;
    for (const ConversationToken& t : conversation_->tokens())
        if (const LayerRouting* r = t.trace.routing_at(text_layer()); r && !r->experts.empty() && r->experts.front() < model_.experts)
            distinct += counts[static_cast<size_t>(r->experts.front())].first-- == 0;
    std::sort(counts.begin(), counts.end());
    for (size_t i = 0; i < counts.size() && i < size_t(kLegendExperts) && counts[i].first < 0; ++i)
        chips << expert_chip(counts[i].second, QStringLiteral(" ×%1").arg(-counts[i].first));
    legend_->setText(distinct == 0 ? tr("No routed tokens at this layer yet.")
                                   : tr("%1 of %2 experts come first here; the most frequent: %3")
                                         .arg(distinct).arg(model_.experts).arg(chips.join(QLatin1Char(' '))));
}

QColor RoutingView::text_background(int position) const {
    const QString href = QStringLiteral("tok:%1").arg(position);
    for (QTextBlock b = text_->document()->begin(); b.isValid(); b = b.next())
        for (auto it = b.begin(); !it.atEnd(); ++it) {
            const QTextCharFormat f = it.fragment().charFormat();
            if (f.anchorHref() == href) return f.hasProperty(QTextFormat::BackgroundBrush) ? f.background().color() : QColor();
        }
    return {};
}

void RoutingView::on_anchor(const QUrl& url) {
    bool ok = false;
    const int position = url.path().toInt(&ok);
    if (url.scheme() == QLatin1String("tok") && ok) conversation_->select(position);
}

}  // namespace colibri::studio
