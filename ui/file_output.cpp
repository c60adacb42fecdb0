#include "ui/file_output.h"

#include <QFile>
#include <string_view>

#include "engine/file/temp_output.h"

namespace colibri::studio {

Status save_file(const QString& path, const QByteArray& bytes) {
    return write_file_atomically(QFile::encodeName(path).toStdString(), std::string_view(bytes.constData(), static_cast<size_t>(bytes.size())));
}

}  // namespace colibri::studio
