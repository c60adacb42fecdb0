// JSON helpers shared by the Studio's stored measurements (kernel comparisons, profiles): number arrays, and the
// machine's load while a measurement ran (tools::MachineLoad) as an object.
#pragma once
#include <QJsonArray>
#include <QJsonObject>
#include <QJsonValue>
#include <vector>

#include "tools/measurement.h"

namespace colibri::studio {

template <typename T>
QJsonArray json_array_of(const std::vector<T>& v) {
    QJsonArray a;
    for (const T& x : v) a.append(static_cast<double>(x));
    return a;
}

template <typename T>
std::vector<T> vector_from_json(const QJsonValue& v) {
    std::vector<T> out;
    for (const auto& x : v.toArray()) out.push_back(static_cast<T>(x.toDouble()));
    return out;
}

QJsonObject machine_load_json(const tools::MachineLoad& l);
// A missing value reads as "not recorded" (measured before the Studio watched the machine's load).
tools::MachineLoad machine_load_from_json(const QJsonValue& v);

}  // namespace colibri::studio
