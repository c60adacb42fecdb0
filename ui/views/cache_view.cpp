#include "ui/views/cache_view.h"

#include <QChart>
#include <QChartView>
#include <QEvent>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineSeries>
#include <QPen>
#include <QPushButton>
#include <QSplitter>
#include <QStackedWidget>
#include <QStyle>
#include <QTabWidget>
#include <QTableView>
#include <QValueAxis>
#include <QVBoxLayout>
#include <QtConcurrent>
#include <algorithm>

#include "ui/colors.h"
#include "ui/conversation.h"
#include "ui/theme.h"
#include "ui/views/chart_reset.h"

namespace colibri::studio {

namespace {

const char* const kCurveColors[] = {"#1f77b4", "#2ca02c", "#9467bd", "#d62728", "#ff7f0e"};

}  // namespace

CacheView::CacheView(Conversation* conversation, QWidget* parent) : QWidget(parent), conversation_(conversation) {
    summary_ = new QLabel;
    summary_->setObjectName(QStringLiteral("cache_summary"));
    summary_->setWordWrap(true);
    totals_ = new QLabel;
    totals_->setObjectName(QStringLiteral("cache_totals"));
    totals_->setWordWrap(true);
    totals_->setTextInteractionFlags(Qt::TextSelectableByMouse);

    map_table_ = new QTableView;
    map_table_->setObjectName(QStringLiteral("cache_map"));
    map_table_->setModel(&map_);
    map_table_->horizontalHeader()->setDefaultSectionSize(22);
    map_table_->horizontalHeader()->setMinimumSectionSize(12);
    map_table_->verticalHeader()->setDefaultSectionSize(20);
    map_table_->verticalHeader()->setMinimumSectionSize(10);
    map_table_->setShowGrid(false);
    map_table_->setSelectionMode(QAbstractItemView::NoSelection);
    map_table_->installEventFilter(this);
    QString legend;
    for (CacheCell c : {CacheCell::Resident, CacheCell::Loaded, CacheCell::ReadAhead, CacheCell::Evicted, CacheCell::Loading, CacheCell::Out,
                        CacheCell::Never})
        legend += QStringLiteral("<span style='color:%1'>&#9632;</span>&nbsp;%2&nbsp;&nbsp; ")
                      .arg((c == CacheCell::Never ? blend(QPalette().color(QPalette::Base), QPalette().color(QPalette::Text), 0.2)
                                                  : cache_cell_color(c, 1.0)).name(),
                           QString::fromLatin1(cache_cell_name(c)).toHtmlEscaped().replace(QLatin1Char(' '), QStringLiteral("&nbsp;")));
    legend += tr("●&nbsp;this&nbsp;token's&nbsp;experts &nbsp; P&nbsp;pinned &nbsp; brighter:&nbsp;hotter");
    legend_ = new QLabel(legend);
    legend_->setWordWrap(true);
    QFont legend_font = legend_->font();
    legend_font.setPointSizeF(legend_font.pointSizeF() * 0.85);
    legend_->setFont(legend_font);
    no_budget_ = new QLabel(tr("This model is mapped whole, so there is no expert cache to watch. Open it with a RAM budget (File ▸ Open "
                               "with a RAM budget…) to see which experts its slots hold, token by token. The replay on the right needs only "
                               "the conversation's routing: it says what each policy would hit at every cache size."));
    no_budget_->setObjectName(QStringLiteral("cache_no_budget"));
    no_budget_->setWordWrap(true);
    no_budget_->setAlignment(Qt::AlignTop | Qt::AlignLeft);
    auto* map_page = new QWidget;
    auto* map_layout = new QVBoxLayout(map_page);
    map_layout->setContentsMargins(0, 0, 0, 0);
    map_layout->addWidget(map_table_, 1);
    map_layout->addWidget(legend_);
    map_stack_ = new QStackedWidget;
    map_stack_->addWidget(no_budget_);
    map_stack_->addWidget(map_page);

    layer_table_ = new QTableView;
    layer_table_->setObjectName(QStringLiteral("cache_layers"));
    layer_table_->setModel(&layers_);
    layer_table_->verticalHeader()->hide();
    layer_table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);

    chart_ = new QChart;
    // No title: the tab names it, and a bottom dock has little height to spare.
    chart_->legend()->setAlignment(Qt::AlignRight);
    chart_->setMargins(QMargins(2, 2, 2, 2));
    style_chart(chart_);
    QFont small = chart_->legend()->font();
    small.setPointSizeF(small.pointSizeF() * 0.85);
    chart_->legend()->setFont(small);
    chart_view_ = new QChartView(chart_);
    chart_view_->setRenderHint(QPainter::Antialiasing);
    chart_view_->setMinimumSize(240, 120);
    replay_status_ = new QLabel(tr("No routing to replay yet."));
    replay_status_->setObjectName(QStringLiteral("cache_replay_status"));
    replay_status_->setWordWrap(true);
    replay_button_ = new QPushButton(tr("Replay"));
    replay_button_->setToolTip(tr("Replay the conversation's routing through every policy (it also runs by itself once a reply is done)"));
    cancel_button_ = new QPushButton(tr("Cancel"));
    cancel_button_->setEnabled(false);
    connect(replay_button_, &QPushButton::clicked, this, &CacheView::replay);
    connect(cancel_button_, &QPushButton::clicked, this, [this] {
        if (cancel_) cancel_->store(true);
    });
    // The buttons sit in the tab bar's corner: the chart gets the page's height, which a bottom dock keeps short.
    auto* replay_bar = new QWidget;
    auto* replay_bar_layout = new QHBoxLayout(replay_bar);
    replay_bar_layout->setContentsMargins(0, 0, 0, 2);
    replay_bar_layout->addWidget(replay_button_);
    replay_bar_layout->addWidget(cancel_button_);
    auto* curves_page = new QWidget;
    auto* curves_layout = new QVBoxLayout(curves_page);
    curves_layout->setContentsMargins(0, 0, 0, 0);
    curves_layout->setSpacing(2);
    curves_layout->addWidget(chart_view_, 1);
    curves_layout->addWidget(replay_status_);

    auto* tabs = new QTabWidget;
    // The conversation's totals sit with the per-layer table: the map keeps the left side's height.
    auto* layers_page = new QWidget;
    auto* layers_layout = new QVBoxLayout(layers_page);
    layers_layout->setContentsMargins(0, 0, 0, 0);
    layers_layout->addWidget(totals_);
    layers_layout->addWidget(layer_table_, 1);
    tabs->addTab(curves_page, tr("Hit-rate replay"));
    tabs->addTab(layers_page, tr("Per layer"));
    tabs->setCornerWidget(replay_bar, Qt::TopRightCorner);

    auto* left = new QWidget;
    auto* left_layout = new QVBoxLayout(left);
    left_layout->setContentsMargins(0, 0, 0, 0);
    left_layout->addWidget(summary_);
    left_layout->addWidget(map_stack_, 1);
    auto* splitter = new QSplitter(Qt::Horizontal);
    splitter->addWidget(left);
    splitter->addWidget(tabs);
    splitter->setStretchFactor(0, 1);
    splitter->setStretchFactor(1, 1);
    splitter->setSizes({550, 450});  // kept in proportion as the view resizes
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 4);
    layout->addWidget(splitter, 1);

    timer_.setSingleShot(true);
    timer_.setInterval(150);
    connect(&timer_, &QTimer::timeout, this, &CacheView::refresh);
    replay_timer_.setSingleShot(true);
    replay_timer_.setInterval(1200);
    connect(&replay_timer_, &QTimer::timeout, this, &CacheView::replay);
    connect(conversation_, &Conversation::traceUpdated, this, [this] {
        schedule();
        replay_timer_.start();  // restarts while tokens stream in: one replay once the reply settles
    });
    connect(conversation_, &Conversation::tokensChanged, this, [this] {
        schedule();
        replay_timer_.start();
    });
    connect(conversation_, &Conversation::selectionChanged, this, &CacheView::schedule);
    connect(&watcher_, &QFutureWatcher<CacheCurves>::finished, this, [this] {
        replay_button_->setEnabled(true);
        cancel_button_->setEnabled(false);
        show_curves(watcher_.result());
        emit replayFinished();
    });
    set_model(ModelSummary{});
}

CacheView::~CacheView() {
    if (cancel_) cancel_->store(true);
    watcher_.waitForFinished();
}

void CacheView::set_model(const ModelSummary& model) {
    model_ = model;
    if (cancel_) cancel_->store(true);
    curves_ = CacheCurves{};
    reset_chart(chart_);
    replay_status_->setText(model.experts > 0 ? tr("No routing to replay yet.") : tr("No model is open."));
    map_stack_->setCurrentIndex(model.cache.budget > 0 ? 1 : 0);
    refresh();
}

void CacheView::fit_cells() {
    // Hundreds of experts: each layer wraps into rows of the most experts (a power of two, 16 to 64) that fit at
    // 12 pixels, so the map scrolls down by layer instead of sideways.
    const int experts = map_.state() ? map_.state()->n_experts : 0;
    if (experts > kWrapAbove) {
        const int room = map_table_->width() - map_table_->verticalHeader()->width() - 8 -
                         map_table_->style()->pixelMetric(QStyle::PM_ScrollBarExtent);
        int wrap = 64;
        while (wrap > 16 && wrap * 12 > room) wrap /= 2;
        map_.set_wrap(wrap);
    } else {
        map_.set_wrap(0);
    }
    // Cells as large as the view allows (square-ish, 12 to 44 pixels).
    const int cols = std::max(map_.columnCount(), 1), rows = std::max(map_.rowCount(), 1);
    const int label = map_table_->verticalHeader()->width() + 4;
    const int avail_h = map_table_->height() - map_table_->horizontalHeader()->height() - 4;
    // Rows that will not fit at the smallest height take a vertical scroll bar's width from the columns.
    const int bar = rows * 12 > avail_h ? map_table_->style()->pixelMetric(QStyle::PM_ScrollBarExtent) : 0;
    const int w = std::clamp((map_table_->width() - label - 4 - bar) / cols, 12, 44);
    const int h = std::clamp(avail_h / rows, 12, std::max(w, 18));
    map_table_->horizontalHeader()->setDefaultSectionSize(w);
    // Two- and three-digit expert numbers over narrow cells: a face small enough that they do not run together.
    QFont numbers = map_table_->font();
    if (w < 20 && map_.columnCount() > 10) numbers.setPixelSize(w < 16 ? 7 : 9);
    map_table_->horizontalHeader()->setFont(numbers);
    map_table_->verticalHeader()->setDefaultSectionSize(h);
}

bool CacheView::eventFilter(QObject* watched, QEvent* e) {
    if (watched == map_table_ && e->type() == QEvent::Resize) fit_cells();
    return QWidget::eventFilter(watched, e);
}

void CacheView::schedule() {
    if (!timer_.isActive()) timer_.start();
}

const ConversationToken* CacheView::state_holder(int position) const {
    const auto& tokens = conversation_->tokens();
    if (tokens.empty()) return nullptr;
    if (position < 0 || position >= static_cast<int>(tokens.size())) {
        for (size_t i = tokens.size(); i-- > 0;)
            if (tokens[i].trace.cache_state) return &tokens[i];
        return nullptr;
    }
    for (size_t i = static_cast<size_t>(position); i < tokens.size(); ++i)
        if (tokens[i].trace.cache_state) return &tokens[i];
    return nullptr;
}

void CacheView::refresh() {
    timer_.stop();
    const int selected = conversation_->selected();
    const ConversationToken* holder = state_holder(selected);
    const ConversationToken* shown = selected >= 0 ? conversation_->token(selected) : holder;
    if (model_.cache.budget > 0) {
        map_.set_state(holder ? holder->trace.cache_state : nullptr, shown ? &shown->trace : nullptr);
        map_stack_->setCurrentIndex(1);
        fit_cells();
    }
    const ModelSummary::Cache& c = model_.cache;
    QString head;
    if (c.budget > 0) {
        head = tr("<b>RAM budget %1</b>: %2 kept mapped, %3 of %4 experts per layer in slots of %5, %6%7.")
                   .arg(human_bytes(c.budget), human_bytes(c.resident_bytes)).arg(c.slot_count).arg(model_.experts)
                   .arg(human_bytes(c.slot_bytes), c.policy.toUpper(), c.prefetch ? tr(", prefetching predicted experts") : QString());
        if (holder != nullptr && shown != nullptr) {
            const CacheSnapshot& s = *holder->trace.cache_state;
            int loaded = 0, ahead = 0, evicted = 0;
            for (size_t li = 0; li < s.layers.size(); ++li) {
                loaded += s.count(static_cast<int>(li), CacheCell::Loaded);
                ahead += s.count(static_cast<int>(li), CacheCell::ReadAhead);
                evicted += s.count(static_cast<int>(li), CacheCell::Evicted);
            }
            const QString reads = ahead > 0 ? tr("%1 experts read on a miss and %2 ahead").arg(loaded).arg(ahead) : tr("%1 experts read").arg(loaded);
            // The evaluation's cache records sit on its first position (a prompt chunk's), the state on its last.
            const ConversationToken* first = holder;
            for (int p = holder->trace.position; p >= 0; --p) {
                const ConversationToken* t = conversation_->token(p);
                if (t != nullptr && !t->trace.cache.empty()) {
                    first = t;
                    break;
                }
            }
            uint64_t stall = 0;
            for (const LayerCacheStep& st : first->trace.cache) stall += st.stall_ns;
            const bool chunk = first != holder;
            head += QStringLiteral("<br>") + (chunk ? tr("After the prompt chunk %1–%2 (shown: token %3 “%4”): %5, %6 evicted, %7 ms waiting for reads.")
                                                          .arg(first->trace.position).arg(holder->trace.position).arg(shown->trace.position)
                                                          .arg(shown->trace.text.toHtmlEscaped(), reads).arg(evicted).arg(milliseconds_text(stall))
                                                    : tr("After token %1 “%2”: %3, %4 evicted, %5 ms waiting for reads.")
                                                          .arg(shown->trace.position).arg(shown->trace.text.toHtmlEscaped(), reads).arg(evicted).arg(milliseconds_text(stall)));
        } else {
            head += QStringLiteral("<br>") + tr("Nothing evaluated yet: every slot is empty.");
        }
    } else {
        head = model_.experts > 0 ? tr("<b>No RAM budget</b>: the whole model is mapped.") : tr("No model is open.");
    }
    summary_->setText(head);

    CacheTotals totals = cache_totals(*conversation_);
    const CacheLayerTotals& sum = totals.all;
    if (sum.hits + sum.misses > 0) {
        QString text = tr("Over the conversation: hit rate %1 % (%2 hits, %3 misses), %4 MB read, %5 ms waiting for reads")
                           .arg(sum.hit_rate() * 100.0, 0, 'f', 1).arg(sum.hits).arg(sum.misses).arg(megabytes_text(sum.bytes_read)).arg(milliseconds_text(sum.stall_ns));
        if (sum.prefetched > 0) text += tr(", %1 experts read ahead").arg(sum.prefetched);
        if (sum.predicted > 0) text += tr("; the prediction named %1 % of the experts used").arg(100.0 * double(sum.predicted_right) / double(sum.predicted), 0, 'f', 1);
        totals_->setText(text + QLatin1Char('.'));
    } else {
        totals_->setText(c.budget > 0 ? tr("No expert has been needed yet.") : QString());
    }
    if (totals_->text().isEmpty()) totals_->setText(tr("No expert cache: open the model with a RAM budget to count its hits and reads."));
    layers_.set_totals(std::move(totals.layers));
}

void CacheView::replay() {
    replay_timer_.stop();
    if (cancel_) cancel_->store(true);
    if (model_.experts <= 0 || model_.active_experts <= 0) return;
    tools::RoutingTrace trace = conversation_routing(*conversation_, model_.experts, model_.active_experts);
    if (trace.layers.empty() || trace.choices.front().empty()) {
        replay_status_->setText(tr("No routing to replay yet."));
        return;
    }
    const std::vector<uint32_t> counts = curve_slot_counts(trace.top_k, trace.n_experts, static_cast<uint32_t>(std::max(model_.cache.slot_count, 0)));
    cancel_ = std::make_shared<std::atomic<bool>>(false);
    replay_status_->setText(tr("Replaying %1 positions at %2 cache sizes…").arg(trace.choices.front().size()).arg(counts.size()));
    replay_button_->setEnabled(false);
    cancel_button_->setEnabled(true);
    // A replay still running was cancelled above and ends by itself (it owns its copies); the watcher follows the new one.
    watcher_.setFuture(QtConcurrent::run([trace = std::move(trace), counts, cancel = cancel_] { return replay_curves(trace, counts, *cancel); }));
}

void CacheView::show_curves(const CacheCurves& curves) {
    if (curves.cancelled) {
        replay_status_->setText(tr("Replay cancelled."));
        return;
    }
    curves_ = curves;
    reset_chart(chart_);
    if (curves.curves.empty()) {
        replay_status_->setText(tr("No routing to replay yet."));
        return;
    }
    auto* x = new QValueAxis;
    x->setTitleText(tr("slots per layer, of %1 experts").arg(model_.experts));
    x->setLabelFormat(QStringLiteral("%d"));
    x->setRange(curves.slot_counts.front(), curves.slot_counts.back());
    // Whole slot counts on the axis: ticks every 1, 2, 4, ... slots, about eight of them.
    int step = 1;
    while ((curves.slot_counts.back() - curves.slot_counts.front()) / uint32_t(step) > 8) step *= 2;
    x->setTickType(QValueAxis::TicksDynamic);
    x->setTickAnchor(0);
    x->setTickInterval(step);
    auto* y = new QValueAxis;
    y->setTitleText(tr("hits %"));
    y->setRange(0, 100);
    y->setLabelFormat(QStringLiteral("%d"));
    chart_->addAxis(x, Qt::AlignBottom);
    chart_->addAxis(y, Qt::AlignLeft);
    for (size_t i = 0; i < curves.curves.size(); ++i) {
        auto* s = new QLineSeries;
        s->setName(curves.curves[i].policy);
        for (size_t j = 0; j < curves.slot_counts.size() && j < curves.curves[i].rate.size(); ++j)
            s->append(curves.slot_counts[j], curves.curves[i].rate[j] * 100.0);
        QPen pen{QColor(QLatin1String(kCurveColors[i % 5]))};  // braces: clang reads the parenthesised form as a declaration
        pen.setWidthF(curves.curves[i].policy == QLatin1String("Belady") ? 2.5 : 1.8);
        if (curves.curves[i].policy == QLatin1String("Belady")) pen.setStyle(Qt::DashLine);
        s->setPen(pen);
        s->setPointsVisible(curves.slot_counts.size() <= 24);
        chart_->addSeries(s);
        s->attachAxis(x);
        s->attachAxis(y);
    }
    if (model_.cache.slot_count > 0) {
        auto* mark = new QLineSeries;
        mark->setName(tr("this budget (%1)").arg(model_.cache.slot_count));
        mark->append(model_.cache.slot_count, 0);
        mark->append(model_.cache.slot_count, 100);
        QPen pen(QPalette().color(QPalette::Text));
        pen.setStyle(Qt::DotLine);
        mark->setPen(pen);
        chart_->addSeries(mark);
        mark->attachAxis(x);
        mark->attachAxis(y);
    }
    QString status = tr("%1 positions").arg(curves.positions);
    if (model_.cache.slot_count > 0) {
        const auto at = std::find(curves.slot_counts.begin(), curves.slot_counts.end(), uint32_t(model_.cache.slot_count));
        if (at != curves.slot_counts.end()) {
            const size_t j = static_cast<size_t>(at - curves.slot_counts.begin());
            QStringList parts;
            for (const CacheCurve& c : curves.curves) parts << QStringLiteral("%1 %2 %").arg(c.policy).arg(c.rate[j] * 100.0, 0, 'f', 1);
            status += QStringLiteral("; ") + tr("at this budget's %1 slots %2").arg(model_.cache.slot_count).arg(parts.join(QStringLiteral(", ")));
        }
    }
    if (curves.prediction_accuracy >= 0)
        status += QStringLiteral("; ") + tr("prediction right for %1 % of the experts used").arg(curves.prediction_accuracy * 100.0, 0, 'f', 1);
    status += QLatin1Char('.');
    replay_status_->setToolTip(tr("The conversation's routing replayed through each policy, every layer's cache empty at the start, the "
                                  "pinned set learned from this conversation; LRU + prediction reads each layer's predicted experts before "
                                  "its token, as --cache-prefetch does (assuming the reads finish in time). Belady is the best any cache "
                                  "loading on demand can do."));
    replay_status_->setText(status);
}

}  // namespace colibri::studio
