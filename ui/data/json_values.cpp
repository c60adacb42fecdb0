#include "ui/data/json_values.h"

#include <algorithm>

namespace colibri::studio {

QJsonObject machine_load_json(const tools::MachineLoad& l) {
    return QJsonObject{{"measured", l.measured}, {"not_measured", QString::fromStdString(l.not_measured)}, {"cpus", static_cast<int>(l.cpus)},
                       {"own_cpus", l.own_cpus}, {"other_cpus", l.other_cpus}};
}

tools::MachineLoad machine_load_from_json(const QJsonValue& v) {
    tools::MachineLoad l;
    if (!v.isObject()) {
        l.not_measured = "not recorded (measured before the Studio watched the machine's load)";
        return l;
    }
    const QJsonObject o = v.toObject();
    l.measured = o.value("measured").toBool();
    l.not_measured = o.value("not_measured").toString().toStdString();
    l.cpus = static_cast<unsigned>(std::max(o.value("cpus").toInt(), 0));
    l.own_cpus = o.value("own_cpus").toDouble();
    l.other_cpus = o.value("other_cpus").toDouble();
    return l;
}

}  // namespace colibri::studio
