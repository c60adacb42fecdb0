// ModelSummaryModel: the two-column table (property, value) that shows a loaded model's ModelSummary.
#pragma once
#include <QString>
#include <QVector>
#include <utility>

#include "ui/data/model_summary.h"
#include "ui/models/table_model.h"

namespace colibri::studio {

class ModelSummaryModel : public TableModel {
    Q_OBJECT
public:
    explicit ModelSummaryModel(QObject* parent = nullptr);
    void set_summary(const ModelSummary& s);
    void clear();
    // The value shown for a key ("family", "experts", ...); empty when absent. For tests and the title bar.
    QString value(const QString& key) const;

private:
    int rows() const override { return static_cast<int>(rows_.size()); }
    QVector<std::pair<QString, QString>> rows_;
};

}  // namespace colibri::studio

