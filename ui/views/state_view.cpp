#include "ui/views/state_view.h"

#include <QComboBox>
#include <QFileDialog>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QHelpEvent>
#include <QLabel>
#include <QPainter>
#include <QPushButton>
#include <QSpinBox>
#include <QStackedWidget>
#include <QTableView>
#include <QToolTip>
#include <QVBoxLayout>
#include <cmath>

#include "ui/colors.h"
#include "ui/file_output.h"
#include "ui/views/heatmap_view.h"

namespace colibri::studio {

QColor LayerKindStrip::color(bool linear) { return linear ? QColor(0x2a, 0x9d, 0x8f) : QColor(0xe7, 0x6f, 0x51); }

void LayerKindStrip::set_model(const ModelSummary& model) {
    model_ = model;
    updateGeometry();
    update();
}

QString LayerKindStrip::legend_text(bool linear) const {
    return linear ? tr("Gated DeltaNet (%1)").arg(model_.linear_layer_ids.size())
                  : tr("full attention (%1)").arg(model_.layers - model_.linear_layer_ids.size());
}

int LayerKindStrip::legend_width() const {
    const QFontMetrics m(font());
    return 16 + m.horizontalAdvance(legend_text(true)) + 12 + 16 + m.horizontalAdvance(legend_text(false)) + 12 +
           (model_.moe_layer_ids.isEmpty() ? 0 : 16 + m.horizontalAdvance(tr("MoE"))) + 8;
}

QRect LayerKindStrip::strip_rect() const {
    // The legend takes the right (at most half); the boxes share the rest.
    const int legend = std::min(legend_width(), width() / 2);
    return QRect(4, 4, std::max(width() - legend - 16, 10), 22);
}

int LayerKindStrip::layer_at(QPoint p) const {
    const QRect r = strip_rect();
    if (model_.layers <= 0 || !r.contains(p)) return -1;
    return std::min(model_.layers - 1, (p.x() - r.left()) * model_.layers / r.width());
}

void LayerKindStrip::paintEvent(QPaintEvent*) {
    QPainter p(this);
    const QRect r = strip_rect();
    const int n = model_.layers;
    QFont small = font();
    small.setPixelSize(10);
    p.setFont(small);
    for (int l = 0; l < n; ++l) {
        const int x0 = r.left() + l * r.width() / n, x1 = r.left() + (l + 1) * r.width() / n;
        const QRect box(x0, r.top(), std::max(x1 - x0 - 1, 1), r.height());
        const QColor c = color(model_.is_linear(l));
        p.fillRect(box, c);
        // Numbers where they fit: every layer, or every 4th, 8th... on a deep model.
        const int step = std::max(1, int(std::ceil(16.0 * n / std::max(r.width(), 1))));
        if (l % step == 0 && box.width() * step >= 14) {
            p.setPen(text_color_on(c));
            p.drawText(QRect(x0, r.top(), box.width() * step, r.height()), Qt::AlignLeft | Qt::AlignVCenter, QStringLiteral(" %1").arg(l));
        }
        if (model_.moe_layer_ids.contains(l)) {  // a MoE layer: a tick under its box
            p.fillRect(QRect(x0, r.bottom() + 3, box.width(), 3), palette().color(QPalette::WindowText));
        }
    }
    // The legend.
    p.setFont(font());
    int x = r.right() + 12;
    const int y = r.top();
    for (const bool linear : {true, false}) {
        p.fillRect(QRect(x, y + 5, 12, 12), color(linear));
        x += 16;
        const QString text = legend_text(linear);
        p.setPen(palette().color(QPalette::WindowText));
        p.drawText(QPoint(x, y + 16), text);
        x += p.fontMetrics().horizontalAdvance(text) + 12;
    }
    if (!model_.moe_layer_ids.isEmpty()) {
        p.fillRect(QRect(x, y + 14, 12, 3), palette().color(QPalette::WindowText));
        p.drawText(QPoint(x + 16, y + 16), tr("MoE"));
    }
}

bool LayerKindStrip::event(QEvent* e) {
    if (e->type() != QEvent::ToolTip) return QWidget::event(e);
    auto* help = static_cast<QHelpEvent*>(e);
    const int l = layer_at(help->pos());
    if (l < 0) {
        QToolTip::hideText();
        e->ignore();
        return true;
    }
    QToolTip::showText(help->globalPos(), tr("layer %1: %2%3").arg(l)
                                              .arg(model_.is_linear(l) ? tr("Gated DeltaNet linear attention (recurrent state)")
                                                                       : tr("full softmax attention (KV cache)"))
                                              .arg(model_.moe_layer_ids.contains(l) ? tr(", MoE") : QString()));
    return true;
}

StateView::StateView(Conversation* conversation, QWidget* parent) : QWidget(parent), conversation_(conversation) {
    strip_ = new LayerKindStrip;
    quantity_ = new QComboBox;
    quantity_->addItem(tr("state norm ‖S‖"), int(LinearStateModel::Quantity::Norm));
    quantity_->addItem(tr("write strength β"), int(LinearStateModel::Quantity::Beta));
    quantity_->addItem(tr("decay (kept)"), int(LinearStateModel::Quantity::Decay));
    quantity_->setToolTip(tr("‖S‖: the Frobenius norm of the head's state after the token; β: how strongly the token "
                             "wrote into it; decay: the share of the state the token kept"));
    cell_ = new QSpinBox;
    cell_->setRange(4, 32);
    cell_->setValue(14);
    cell_->setSuffix(tr(" px"));
    cell_->setToolTip(tr("cell width (zoom)"));
    auto* csv = new QPushButton(tr("Export CSV…"));
    connect(quantity_, &QComboBox::currentIndexChanged, this,
            [this] { set_quantity(LinearStateModel::Quantity(quantity_->currentData().toInt())); });
    connect(cell_, &QSpinBox::valueChanged, this, &StateView::set_cell_size);
    connect(csv, &QPushButton::clicked, this, [this] {
        const QString path = QFileDialog::getSaveFileName(this, tr("Export states"), QStringLiteral("states.csv"), tr("CSV files (*.csv)"));
        if (path.isEmpty()) return;
        if (Status s = export_csv(path); !s) summary_->setText(QString::fromStdString(s.message()));
    });

    auto* controls = new QHBoxLayout;
    controls->addWidget(new QLabel(tr("show")));
    controls->addWidget(quantity_);
    controls->addWidget(new QLabel(tr("zoom")));
    controls->addWidget(cell_);
    controls->addStretch();
    controls->addWidget(csv);

    table_ = new QTableView;
    table_->setModel(&model_);
    table_->setShowGrid(false);
    table_->setSelectionMode(QAbstractItemView::NoSelection);
    table_->horizontalHeader()->setSectionResizeMode(QHeaderView::Fixed);
    table_->horizontalHeader()->setMinimumSectionSize(2);
    table_->verticalHeader()->setSectionResizeMode(QHeaderView::Fixed);
    table_->verticalHeader()->setDefaultSectionSize(14);
    table_->verticalHeader()->setMinimumSectionSize(2);
    QFont small = table_->font();
    small.setPixelSize(10);
    table_->verticalHeader()->setFont(small);
    table_->horizontalHeader()->setFont(small);
    // A click selects the token everywhere (chat, routing, profiler).
    connect(table_, &QTableView::clicked, this, [this](const QModelIndex& i) { conversation_->select(model_.position_of(i.column())); });
    legend_ = new HeatLegend;
    summary_ = new QLabel;
    summary_->setObjectName(QStringLiteral("state_summary"));
    summary_->setWordWrap(true);

    auto* map = new QWidget;
    auto* map_layout = new QHBoxLayout(map);
    map_layout->setContentsMargins(0, 0, 0, 0);
    map_layout->addWidget(table_, 1);
    map_layout->addWidget(legend_);
    auto* states = new QWidget;
    auto* states_layout = new QVBoxLayout(states);
    states_layout->setContentsMargins(0, 0, 0, 0);
    states_layout->addLayout(controls);
    states_layout->addWidget(map, 1);
    states_layout->addWidget(summary_);

    note_ = new QLabel(tr("This model has no Gated DeltaNet layers: every layer attends over the KV cache, so there is no "
                          "recurrent state to show."));
    note_->setWordWrap(true);
    note_->setAlignment(Qt::AlignCenter);
    pages_ = new QStackedWidget;
    pages_->addWidget(note_);
    pages_->addWidget(states);

    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 4);
    layout->addWidget(strip_);
    layout->addWidget(pages_, 1);
    strip_->hide();

    set_cell_size(cell_->value());
    timer_.setSingleShot(true);
    timer_.setInterval(200);
    connect(&timer_, &QTimer::timeout, this, &StateView::refresh);
    connect(conversation_, &Conversation::traceUpdated, this, &StateView::schedule);
    connect(conversation_, &Conversation::tokensChanged, this, &StateView::schedule);
    connect(conversation_, &Conversation::selectionChanged, this, [this](int position) {
        for (int c = 0; c < model_.columnCount(); ++c)
            if (model_.position_of(c) == position) {
                table_->scrollTo(model_.index(0, c), QAbstractItemView::EnsureVisible);
                break;
            }
    });
}

bool StateView::hybrid() const { return model_.rowCount() > 0 || pages_->currentIndex() == 1; }

void StateView::set_model(const ModelSummary& model) {
    const bool linear = !model.linear_layer_ids.isEmpty();
    strip_->set_model(model);
    strip_->setVisible(linear);
    pages_->setCurrentIndex(linear ? 1 : 0);
    model_.set_layers(model.linear_layer_ids, model.linear_heads);
    refresh();
}

void StateView::set_quantity(LinearStateModel::Quantity q) {
    const int i = quantity_->findData(int(q));
    if (quantity_->currentIndex() != i) quantity_->setCurrentIndex(i);  // comes back here through the signal
    model_.set_quantity(q);
    legend_->set_max(model_.scale_max());
}

void StateView::set_cell_size(int pixels) {
    pixels = std::clamp(pixels, 4, 32);
    if (cell_->value() != pixels) cell_->setValue(pixels);
    table_->horizontalHeader()->setDefaultSectionSize(pixels);
    // Positions in the header only where their numbers fit.
    table_->horizontalHeader()->setVisible(pixels >= 24);
}

void StateView::schedule() {
    if (!timer_.isActive()) timer_.start();
}

void StateView::refresh() {
    timer_.stop();
    if (pages_->currentIndex() != 1) return;
    model_.update(*conversation_);
    legend_->set_max(model_.scale_max());
    if (model_.columnCount() == 0) {
        summary_->setText(tr("No evaluated tokens yet."));
        return;
    }
    // The largest state and the strongest write, with where they are.
    const auto where = [this](const LinearStateModel::Peak& p) {
        return tr("layer %1 head %2, position %3").arg(model_.layer_of(p.row)).arg(model_.head_of(p.row)).arg(model_.position_of(p.column));
    };
    const LinearStateModel::Peak norm = model_.peak(LinearStateModel::Quantity::Norm), beta = model_.peak(LinearStateModel::Quantity::Beta);
    summary_->setText(tr("%1 Gated DeltaNet layers × %2 heads over %3 tokens. Largest state ‖S‖ %4 (%5); strongest write β %6 (%7).")
                          .arg(model_.layer_count()).arg(model_.heads()).arg(model_.columnCount())
                          .arg(norm.value, 0, 'g', 4).arg(norm.row >= 0 ? where(norm) : QString())
                          .arg(beta.value, 0, 'f', 3).arg(beta.row >= 0 ? where(beta) : QString()));
}

Status StateView::export_csv(const QString& path) const { return save_file(path, model_.to_csv().toUtf8()); }

}  // namespace colibri::studio
