#include "ui/models/validator_models.h"

#include <QGuiApplication>
#include <QPalette>

#include "engine/file/format.h"
#include "ui/colors.h"
#include "ui/models/model_summary.h"

namespace colibri::studio {

QString section_state_name(SectionState s) {
    switch (s) {
    case SectionState::NotChecked: return QObject::tr("not checked");
    case SectionState::Ok: return QObject::tr("checksum ok");
    case SectionState::Damaged: return QObject::tr("damaged");
    case SectionState::Misaligned: return QObject::tr("misaligned");
    }
    return {};
}

QColor section_state_color(SectionState s) {
    switch (s) {
    case SectionState::NotChecked: return QColor(150, 160, 175);
    case SectionState::Ok: return QColor(76, 175, 80);
    case SectionState::Damaged: return QColor(220, 50, 47);
    case SectionState::Misaligned: return QColor(255, 152, 0);
    }
    return {};
}

std::vector<SectionState> section_states(const FileLayout& layout, const tools::CheckReport* report) {
    std::vector<SectionState> states(layout.sections.size(), SectionState::NotChecked);
    for (size_t i = 0; i < layout.sections.size(); ++i) {
        const SectionInfo& s = layout.sections[i];
        if (!s.in_bounds) states[i] = SectionState::Damaged;  // it cannot even be read
        else if (!s.aligned) states[i] = SectionState::Misaligned;
    }
    if (report == nullptr) return states;
    for (const tools::SectionCheck& c : report->sections) {
        if (c.index >= states.size() || states[c.index] != SectionState::NotChecked) continue;
        switch (c.checksum) {
        case tools::ChecksumState::Ok: states[c.index] = SectionState::Ok; break;
        case tools::ChecksumState::Mismatch:
        case tools::ChecksumState::DamagedFrame:
        case tools::ChecksumState::Unreadable: states[c.index] = SectionState::Damaged; break;
        case tools::ChecksumState::NotChecked: break;
        }
    }
    return states;
}

void TensorTableModel::set_layout(const FileLayout& layout) {
    beginResetModel();
    tensors_ = layout.tensors;
    states_ = section_states(layout, nullptr);
    endResetModel();
}

void TensorTableModel::set_states(const std::vector<SectionState>& states) {
    states_ = states;
    if (rowCount() > 0) emit dataChanged(index(0, Alignment), index(rowCount() - 1, Checksum));
}

const TensorInfo* TensorTableModel::tensor(int row) const {
    return row >= 0 && row < rowCount() ? &tensors_[static_cast<size_t>(row)] : nullptr;
}

SectionState TensorTableModel::state_of(int row) const {
    const TensorInfo* t = tensor(row);
    return t && static_cast<size_t>(t->section) < states_.size() ? states_[static_cast<size_t>(t->section)] : SectionState::NotChecked;
}

int TensorTableModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : static_cast<int>(tensors_.size()); }
int TensorTableModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QVariant TensorTableModel::data(const QModelIndex& index, int role) const {
    const TensorInfo* t = index.isValid() ? tensor(index.row()) : nullptr;
    if (t == nullptr) return {};
    const bool aligned = t->aligned;
    const SectionState state = state_of(index.row());
    if (role == SectionRole) return t->section;
    if (index.column() == Checksum && role == Qt::BackgroundRole) return section_state_color(state);
    // A damaged tensor's whole row stands out, so it is found without reading the last column.
    if (role == Qt::BackgroundRole && (state == SectionState::Damaged || !t->shape_ok))
        return blend(QGuiApplication::palette().color(QPalette::Base), section_state_color(SectionState::Damaged), 0.35);
    if (role == Qt::ToolTipRole && state == SectionState::Damaged) return tr("its section's checksum does not match: the values may be wrong");
    if (index.column() == Alignment && role == Qt::ForegroundRole && !aligned) return QColor(Qt::red);
    if (index.column() == Shape && !t->shape_ok) {
        if (role == Qt::ForegroundRole) return QColor(Qt::red);
        if (role == Qt::ToolTipRole) return tr("type, shape or size do not agree with the section or the model's hyper-parameters");
    }
    if ((index.column() == Offset || index.column() == Size) && role == Qt::TextAlignmentRole) return int(Qt::AlignRight | Qt::AlignVCenter);
    if (role != Qt::DisplayRole && role != Qt::EditRole) return {};
    const bool raw = role == Qt::EditRole;
    switch (index.column()) {
    case Name: return t->name;
    case Shape:
        if (raw) return static_cast<qulonglong>(t->rows * t->cols);
        return t->dims == 1 ? QStringLiteral("[%1]").arg(t->rows) : QStringLiteral("[%1, %2]").arg(t->rows).arg(t->cols);
    case Type: return t->type;
    case Offset: return raw ? QVariant(static_cast<qulonglong>(t->offset)) : QVariant(QStringLiteral("0x%1").arg(t->offset, 0, 16));
    case Size: return raw ? QVariant(static_cast<qulonglong>(t->size)) : QVariant(human_bytes(t->size));
    case Alignment:
        return aligned ? tr("%1 B").arg(format::kTensorAlignment)
                       : tr("off by %1 B").arg(t->offset % format::kTensorAlignment);
    case Checksum: return section_state_name(state);
    default: return {};
    }
}

QVariant TensorTableModel::headerData(int section, Qt::Orientation o, int role) const {
    if (o != Qt::Horizontal || role != Qt::DisplayRole) return {};
    switch (section) {
    case Name: return tr("name");
    case Shape: return tr("shape");
    case Type: return tr("type");
    case Offset: return tr("offset");
    case Size: return tr("size");
    case Alignment: return tr("alignment");
    case Checksum: return tr("section checksum");
    default: return {};
    }
}

}  // namespace colibri::studio
