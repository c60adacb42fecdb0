// A conversation's token ids through a second model (ReplayWorker): the routing of every position, for a
// routing comparison. A plain value, copied to the UI thread.
#pragma once
#include <QMetaType>
#include <QString>
#include <vector>

#include "ui/data/token_trace.h"

namespace colibri::studio {

struct ReplayResult {
    QString model;
    QString error;                 // set when nothing could be evaluated
    bool cancelled = false;
    std::vector<TokenTrace> traces;  // routing (and texts) per position, in order
};

}  // namespace colibri::studio

Q_DECLARE_METATYPE(colibri::studio::ReplayResult)
