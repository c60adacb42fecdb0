// The validator's data: the state of each section (from the structure, then from a verification), and the
// tensor table (name, shape, type, offset, size, alignment, checksum state of its section).
#pragma once
#include <QAbstractTableModel>
#include <QColor>
#include <vector>

#include "ui/file_worker.h"

namespace colibri::studio {

enum class SectionState { NotChecked, Ok, Damaged, Misaligned };

QString section_state_name(SectionState s);
QColor section_state_color(SectionState s);
// Misaligned from the layout alone; checksum ok or damaged once report (may be null) covers the section.
std::vector<SectionState> section_states(const FileLayout& layout, const tools::CheckReport* report);

class TensorTableModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column { Name, Shape, Type, Offset, Size, Alignment, Checksum, ColumnCount };
    enum Role { SectionRole = Qt::UserRole + 1 };

    using QAbstractTableModel::QAbstractTableModel;
    void set_layout(const FileLayout& layout);
    void set_states(const std::vector<SectionState>& states);
    const TensorInfo* tensor(int row) const;
    SectionState state_of(int row) const;

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;

private:
    std::vector<TensorInfo> tensors_;
    std::vector<SectionState> states_;
};

}  // namespace colibri::studio
