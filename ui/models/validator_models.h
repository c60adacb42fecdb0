// The validator's data: the state of each section (from the structure, then from a verification), and the
// tensor table (name, shape, type, offset, size, alignment, checksum state of its section).
#pragma once
#include <QAbstractTableModel>
#include <QColor>
#include <vector>

#include "ui/models/table_model.h"
#include "ui/file_worker.h"

namespace colibri::studio {

enum class SectionState { NotChecked, Ok, Damaged, Misaligned };

QString section_state_name(SectionState s);
QColor section_state_color(SectionState s);
// Misaligned from the layout alone; checksum ok or damaged once report (may be null) covers the section.
std::vector<SectionState> section_states(const FileLayout& layout, const tools::CheckReport* report);

class TensorTableModel : public TableModel {
    Q_OBJECT
public:
    enum Column { Name, Shape, Type, Offset, Size, Alignment, Checksum, ColumnCount };
    enum Role { SectionRole = Qt::UserRole + 1 };

    explicit TensorTableModel(QObject* parent = nullptr);
    void set_layout(const FileLayout& layout);
    void set_states(const std::vector<SectionState>& states);
    const TensorInfo* tensor(int row) const;
    SectionState state_of(int row) const;

private:
    int rows() const override { return static_cast<int>(tensors_.size()); }
    QVariant other_data(int row, int column, int role) const override;
    std::vector<TensorInfo> tensors_;
    std::vector<SectionState> states_;
};

}  // namespace colibri::studio
