// A kernel auto-tune report as `colibri tune --json` writes it (kernels::tune_report_json), read back: the
// report's one reader, for the Studio's imports, its own tuner runs and its store. Schema:
//   {"colibri_version": string, "cpu": {"model": string, "features": [string]},
//    "results": [{"op", "type", "variant": string, "rows", "cols", "ns_median", "gflops", "gbps": number,
//                 "chosen": bool}]}
// Every field is checked, so that a report from another machine or version gives a one-line error instead of a
// half-filled chart: names this build does not know (an op, a weight type, a variant) are refused by name.
#pragma once
#include <string_view>

#include "engine/base/status.h"
#include "kernels/tuner.h"

namespace colibri::tools {

// `choice` and `timer` are not in the report: the parsed report has the default choice and no timer.
Result<kernels::TuneReport> parse_tune_report(std::string_view json);

}  // namespace colibri::tools
