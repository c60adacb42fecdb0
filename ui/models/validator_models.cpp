#include "ui/models/validator_models.h"

#include <QGuiApplication>
#include <QPalette>

#include "engine/file/format.h"
#include "ui/colors.h"
#include "ui/data/model_summary.h"

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

TensorTableModel::TensorTableModel(QObject* parent) : TableModel(parent) {
    auto t = [this](int row) -> const TensorInfo& { return *tensor(row); };
    set_columns({text(tr("name"), [t](int row) { return QVariant(t(row).name); }),
                 {tr("shape"),
                  [t](int row) {
                      return QVariant(t(row).dims == 1 ? QStringLiteral("[%1]").arg(t(row).rows) : QStringLiteral("[%1, %2]").arg(t(row).rows).arg(t(row).cols));
                  },
                  [t](int row) { return QVariant(static_cast<qulonglong>(t(row).rows * t(row).cols)); }, Qt::AlignLeft | Qt::AlignVCenter},
                 text(tr("type"), [t](int row) { return QVariant(t(row).type); }),
                 {tr("offset"), [t](int row) { return QVariant(QStringLiteral("0x%1").arg(t(row).offset, 0, 16)); },
                  [t](int row) { return QVariant(static_cast<qulonglong>(t(row).offset)); }},
                 {tr("size"), [t](int row) { return QVariant(human_bytes(t(row).size)); }, [t](int row) { return QVariant(static_cast<qulonglong>(t(row).size)); }},
                 text(tr("alignment"),
                      [t](int row) {
                          return QVariant(t(row).aligned ? tr("%1 B").arg(format::kTensorAlignment) : tr("off by %1 B").arg(t(row).offset % format::kTensorAlignment));
                      }),
                 text(tr("section checksum"), [this](int row) { return QVariant(section_state_name(state_of(row))); })});
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

QVariant TensorTableModel::other_data(int row, int column, int role) const {
    const TensorInfo* t = tensor(row);
    const SectionState state = state_of(row);
    if (role == SectionRole) return t->section;
    if (column == Checksum && role == Qt::BackgroundRole) return section_state_color(state);
    // A damaged tensor's whole row stands out, so it is found without reading the last column.
    if (role == Qt::BackgroundRole && (state == SectionState::Damaged || !t->shape_ok))
        return blend(QGuiApplication::palette().color(QPalette::Base), section_state_color(SectionState::Damaged), 0.35);
    if (role == Qt::ToolTipRole && state == SectionState::Damaged) return tr("its section's checksum does not match: the values may be wrong");
    if (column == Alignment && role == Qt::ForegroundRole && !t->aligned) return QColor(Qt::red);
    if (column == Shape && !t->shape_ok) {
        if (role == Qt::ForegroundRole) return QColor(Qt::red);
        if (role == Qt::ToolTipRole) return tr("type, shape or size do not agree with the section or the model's hyper-parameters");
    }
    return {};
}

}  // namespace colibri::studio
