// Colours shared by the views: one per expert (routing table, coloured text, legends) and the heat scale
// of the expert heatmap.
#pragma once
#include <QColor>

namespace colibri::studio {

// Distinct hues by the golden angle, so neighbouring expert numbers never look alike.
QColor expert_color(int expert);
// Text colour that reads on top of background.
QColor text_color_on(const QColor& background);
// t in [0, 1] along a perceptually ordered dark-blue → green → yellow scale (viridis' anchor colours).
QColor heat_color(double t);

}  // namespace colibri::studio
