// Every file the Studio saves (conversations, Markdown, heatmaps, kernel results) is committed as the CLI's
// outputs are (engine/file/temp_output.h): complete or as it was, and what is not a regular file is refused.
// QSaveFile replaced a device node with a regular file and wrote through a link to one.
#pragma once
#include <QByteArray>
#include <QString>

#include "engine/base/status.h"

namespace colibri::studio {

Status save_file(const QString& path, const QByteArray& bytes);

}  // namespace colibri::studio
