// Colours shared by the views: one per expert (routing table, coloured text, legends) and the heat scale
// of the expert heatmap.
#pragma once
#include <QColor>

namespace colibri::studio {

// Distinct hues by the golden angle, so neighbouring expert numbers never look alike.
QColor expert_color(int expert);
// One per rank of a server across ranks (the heatmap's owners, the Ranks table's columns): Okabe and Ito's
// colour-blind-safe set for the first seven, then hues by the golden angle.
QColor rank_color(int rank);
// Text colour that reads on top of background.
QColor text_color_on(const QColor& background);
// a mixed with b: t = 0 gives a, 1 gives b.
QColor blend(const QColor& a, const QColor& b, double t);

// Status text and marks that read on the application's palette, light or dark.
enum class StatusColor { Normal, Ok, Warning, Error };
QColor status_color(StatusColor s);
// Whether the application's palette is a dark one (light text on a dark window).
bool dark_palette();

// t in [0, 1] along a perceptually ordered dark-blue → green → yellow scale (viridis' anchor colours).
QColor heat_color(double t);

}  // namespace colibri::studio
