// Empties a QChart before it is drawn anew: removeAxis() only detaches an axis (the caller owns it then), so
// detached axes are deleted here rather than leaked or left to paint stale labels.
#pragma once
#include <QAbstractAxis>
#include <QChart>

namespace colibri::studio {

inline void reset_chart(QChart* chart) {
    chart->removeAllSeries();
    for (QAbstractAxis* axis : chart->axes()) {
        chart->removeAxis(axis);
        delete axis;
    }
}

}  // namespace colibri::studio
