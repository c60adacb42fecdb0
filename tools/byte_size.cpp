#include "tools/byte_size.h"

#include <cctype>
#include <cmath>
#include <exception>

namespace colibri::tools {

Result<uint64_t> parse_size(const std::string& text) {
    const std::string bad = "'" + text + "' is not a size (e.g. 6G, 512M, 1048576)";
    size_t used = 0;
    double v = 0;
    try {
        v = std::stod(text, &used);
    } catch (const std::exception&) {
        return error(bad);
    }
    std::string unit = text.substr(used);
    if (!unit.empty() && (unit.back() == 'B' || unit.back() == 'b')) unit.pop_back();
    if (!unit.empty() && (unit.back() == 'i')) unit.pop_back();
    double scale = 1;
    if (unit.size() == 1) {
        const std::string units = "KMGT";
        const size_t at = units.find(static_cast<char>(std::toupper(static_cast<unsigned char>(unit[0]))));
        if (at == std::string::npos) return error(bad);
        scale = std::pow(1024.0, double(at + 1));
    } else if (!unit.empty()) {
        return error(bad);
    }
    if (!(v > 0) || !std::isfinite(v) || v * scale >= 1.8e19) return error(bad);
    return static_cast<uint64_t>(v * scale);
}

Result<RamBudget> parse_ram_budget(const std::string& text) {
    RamBudget budget;
    if (!text.empty() && text.back() == '%') {
        const std::string number = text.substr(0, text.size() - 1);
        size_t used = 0;
        double v = 0;
        try {
            v = std::stod(number, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        if (used == 0 || used != number.size() || !(v > 0 && v <= 100))
            return error("'" + text + "' is not a share of the model between 0 and 100 % (e.g. 50%)");
        budget.file_share = v / 100.0;
        return budget;
    }
    auto bytes = parse_size(text);
    if (!bytes) return error("'" + text + "' is not a size (e.g. 6G, 512M, 1048576) or a share of the model (e.g. 50%)");
    budget.bytes = bytes.value();
    return budget;
}

}  // namespace colibri::tools
