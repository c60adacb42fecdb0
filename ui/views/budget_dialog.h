// File ▸ Open with a RAM budget: how much memory the model's weights may take (what every token uses stays
// mapped; the routed experts live in per-layer slots within the rest), the cache's policy, the routing trace a
// pinned hot set is learned from, and whether predicted experts are read ahead.
#pragma once
#include <QDialog>

#include "ui/engine_worker.h"

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QPushButton;
class QSlider;

namespace colibri::studio {

class BudgetDialog : public QDialog {
    Q_OBJECT
public:
    // base: the options the Studio loads with otherwise (threads, context), kept in options().
    BudgetDialog(const QString& model_path, const LoadOptions& base, QWidget* parent = nullptr);
    LoadOptions options() const;
    // The default hot-set trace: <model>.hot-trace.json beside the model, as bench/scripts/bench_ram_budget.py saves it.
    static QString default_hot_trace(const QString& model_path);

    QDoubleSpinBox* budget_box() const { return budget_; }
    QComboBox* policy_box() const { return policy_; }
    QLineEdit* hot_trace_edit() const { return hot_trace_; }
    QCheckBox* prefetch_box() const { return prefetch_; }

private:
    void update_state();

    QString path_;
    LoadOptions base_;
    quint64 model_bytes_ = 0;
    QDoubleSpinBox* budget_ = nullptr;  // MiB
    QSlider* share_ = nullptr;          // % of the model's size
    QComboBox* policy_ = nullptr;
    QLineEdit* hot_trace_ = nullptr;
    QCheckBox* prefetch_ = nullptr;
    QLabel* note_ = nullptr;
    QPushButton* ok_ = nullptr;
    bool syncing_ = false;
};

}  // namespace colibri::studio
