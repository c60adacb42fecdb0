#include "ui/views/budget_dialog.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDialogButtonBox>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSlider>
#include <algorithm>
#include <cmath>

#include "ui/data/model_summary.h"

namespace colibri::studio {

namespace {
constexpr double kMiB = 1024.0 * 1024.0;
}

QString BudgetDialog::default_hot_trace(const QString& model_path) {
    const QString beside = model_path + QStringLiteral(".hot-trace.json");
    return QFileInfo::exists(beside) ? beside : QString();
}

BudgetDialog::BudgetDialog(const QString& model_path, const LoadOptions& base, QWidget* parent)
    : QDialog(parent), path_(model_path), base_(base) {
    setWindowTitle(tr("Open with a RAM budget"));
    setMinimumWidth(480);
    model_bytes_ = static_cast<quint64>(QFileInfo(model_path).size());

    auto* about = new QLabel(tr("<b>%1</b> (%2 on disk). What every token uses (embeddings, attention, routers, norms, shared experts, "
                                "the lm head) stays mapped; the routed experts are read into per-layer slots within the rest of the "
                                "budget, so the weights never take more than it. The logits are the same as without a budget.")
                                 .arg(QFileInfo(model_path).fileName().toHtmlEscaped(), human_bytes(model_bytes_)));
    about->setWordWrap(true);

    budget_ = new QDoubleSpinBox;
    budget_->setObjectName(QStringLiteral("budget_mib"));
    budget_->setDecimals(1);
    budget_->setRange(1.0, 1024.0 * 1024.0 * 16.0);
    budget_->setSuffix(tr(" MiB"));
    budget_->setSingleStep(64.0);
    share_ = new QSlider(Qt::Horizontal);
    share_->setRange(5, 100);
    share_->setValue(50);
    auto* share_label = new QLabel;
    auto* budget_row = new QHBoxLayout;
    budget_row->addWidget(budget_);
    budget_row->addWidget(share_, 1);
    budget_row->addWidget(share_label);
    auto set_from_share = [this, share_label](int percent) {
        share_label->setText(tr("%1 % of the file").arg(percent));
        if (syncing_) return;
        syncing_ = true;
        budget_->setValue(std::max(1.0, std::round(double(model_bytes_) * percent / 100.0 / kMiB * 10.0) / 10.0));
        syncing_ = false;
    };
    connect(share_, &QSlider::valueChanged, this, set_from_share);
    connect(budget_, &QDoubleSpinBox::valueChanged, this, [this, share_label](double mib) {
        if (syncing_ || model_bytes_ == 0) return;
        syncing_ = true;
        const int percent = static_cast<int>(std::lround(mib * kMiB * 100.0 / double(model_bytes_)));
        share_->setValue(std::clamp(percent, share_->minimum(), share_->maximum()));
        share_label->setText(tr("%1 % of the file").arg(percent));
        syncing_ = false;
    });
    set_from_share(share_->value());

    policy_ = new QComboBox;
    policy_->setObjectName(QStringLiteral("cache_policy"));
    policy_->addItem(tr("LRU: evict the least recently used"), int(CachePolicy::Lru));
    policy_->addItem(tr("LFRU: evict the least used, uses decaying per token"), int(CachePolicy::Lfru));
    policy_->addItem(tr("Pinned: a hot set learned from a routing trace keeps its slots"), int(CachePolicy::Pinned));
    hot_trace_ = new QLineEdit(default_hot_trace(model_path));
    hot_trace_->setObjectName(QStringLiteral("hot_trace"));
    hot_trace_->setPlaceholderText(tr("a routing trace: colibri route --json"));
    auto* browse = new QPushButton(tr("Browse…"));
    connect(browse, &QPushButton::clicked, this, [this] {
        const QString f = QFileDialog::getOpenFileName(this, tr("Routing trace"), QFileInfo(path_).absolutePath(), tr("Routing traces (*.json);;All files (*)"));
        if (!f.isEmpty()) hot_trace_->setText(f);
    });
    auto* trace_row = new QHBoxLayout;
    trace_row->addWidget(hot_trace_, 1);
    trace_row->addWidget(browse);
    prefetch_ = new QCheckBox(tr("Read the experts predicted for the next layer ahead of use"));
    prefetch_->setObjectName(QStringLiteral("cache_prefetch"));
    prefetch_->setToolTip(tr("The next MoE layer's router on the current hidden state names its likely experts; their reads start while "
                             "this layer computes. It pays on slow storage; mispredicted experts are read too."));
    note_ = new QLabel;
    note_->setWordWrap(true);

    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel);
    buttons->button(QDialogButtonBox::Ok)->setText(tr("Open"));
    connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    connect(policy_, &QComboBox::currentIndexChanged, this, &BudgetDialog::update_state);
    connect(hot_trace_, &QLineEdit::textChanged, this, &BudgetDialog::update_state);

    auto* form = new QFormLayout(this);
    form->addRow(about);
    form->addRow(tr("Budget"), budget_row);
    form->addRow(tr("Policy"), policy_);
    form->addRow(tr("Hot-set trace"), trace_row);
    form->addRow(QString(), prefetch_);
    form->addRow(note_);
    form->addRow(buttons);
    ok_ = buttons->button(QDialogButtonBox::Ok);
    update_state();
}

void BudgetDialog::update_state() {
    const bool pinned = policy_->currentData().toInt() == int(CachePolicy::Pinned);
    hot_trace_->setEnabled(pinned);
    const bool missing = pinned && hot_trace_->text().trimmed().isEmpty();
    note_->setText(missing ? tr("The pinned policy needs a routing trace to learn its hot experts from.")
                           : tr("A budget too small for what every token uses plus one token's experts per layer is refused with the size "
                                "it needs."));
    ok_->setEnabled(!missing);
}

LoadOptions BudgetDialog::options() const {
    LoadOptions o = base_;
    o.ram_budget.bytes = static_cast<uint64_t>(budget_->value() * kMiB);
    o.cache_policy = static_cast<CachePolicy>(policy_->currentData().toInt());
    o.hot_trace = o.cache_policy == CachePolicy::Pinned ? hot_trace_->text().trimmed() : QString();
    o.cache_prefetch = prefetch_->isChecked();
    return o;
}

}  // namespace colibri::studio
