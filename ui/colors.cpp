#include "ui/colors.h"

#include <QGuiApplication>
#include <QPalette>

#include <algorithm>
#include <array>
#include <cmath>

namespace colibri::studio {

QColor expert_color(int expert) {
    if (expert < 0) return QColor(Qt::lightGray);
    const double hue = std::fmod(expert * 137.508, 360.0);
    // Alternate the lightness a little as well, for many experts.
    return QColor::fromHsl(static_cast<int>(hue), 170, expert % 2 == 0 ? 150 : 120);
}

QColor rank_color(int rank) {
    static const std::array<QColor, 7> first = {QColor(0, 114, 178),  QColor(230, 159, 0),  QColor(0, 158, 115), QColor(213, 94, 0),
                                                QColor(86, 180, 233), QColor(204, 121, 167), QColor(240, 228, 66)};
    if (rank < 0) return QColor(Qt::gray);
    if (rank < static_cast<int>(first.size())) return first[static_cast<size_t>(rank)];
    return QColor::fromHsl(static_cast<int>(std::fmod(rank * 137.508, 360.0)), 160, rank % 2 == 0 ? 135 : 105);
}

QColor text_color_on(const QColor& background) {
    const double luminance = 0.299 * background.redF() + 0.587 * background.greenF() + 0.114 * background.blueF();
    return luminance > 0.55 ? QColor(Qt::black) : QColor(Qt::white);
}

QColor blend(const QColor& a, const QColor& b, double t) {
    t = std::clamp(t, 0.0, 1.0);
    return QColor::fromRgbF(static_cast<float>(a.redF() + (b.redF() - a.redF()) * t), static_cast<float>(a.greenF() + (b.greenF() - a.greenF()) * t),
                            static_cast<float>(a.blueF() + (b.blueF() - a.blueF()) * t));
}

bool dark_palette() {
    const QPalette p = QGuiApplication::palette();
    return p.color(QPalette::Window).lightness() < p.color(QPalette::WindowText).lightness();
}

QColor status_color(StatusColor s) {
    const bool dark = dark_palette();
    switch (s) {
    case StatusColor::Ok: return dark ? QColor(129, 199, 132) : QColor(46, 125, 50);
    case StatusColor::Warning: return dark ? QColor(255, 183, 77) : QColor(178, 106, 0);
    case StatusColor::Error: return dark ? QColor(239, 83, 80) : QColor(198, 40, 40);
    case StatusColor::Normal: break;
    }
    return QGuiApplication::palette().color(QPalette::WindowText);
}

QColor heat_color(double t) {
    static const std::array<QColor, 5> stops = {QColor(68, 1, 84), QColor(59, 82, 139), QColor(33, 145, 140),
                                                QColor(94, 201, 98), QColor(253, 231, 37)};
    if (!(t > 0.0)) return stops.front();
    if (t >= 1.0) return stops.back();
    const double x = t * (stops.size() - 1);
    const size_t i = static_cast<size_t>(x);
    const double f = x - static_cast<double>(i);
    const QColor& a = stops[i];
    const QColor& b = stops[i + 1];
    return QColor::fromRgbF(static_cast<float>(a.redF() + (b.redF() - a.redF()) * f), static_cast<float>(a.greenF() + (b.greenF() - a.greenF()) * f),
                            static_cast<float>(a.blueF() + (b.blueF() - a.blueF()) * f));
}

}  // namespace colibri::studio
