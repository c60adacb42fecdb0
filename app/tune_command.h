// `colibri tune` and the kernel configuration every command starts with (kernels/tuner.h).
#pragma once

namespace colibri::cli {

// COLIBRI_KERNEL, else the tune cache, else CPUID; prints `colibri: COLIBRI_KERNEL: <why>` and returns false
// for a variant this binary or CPU cannot run.
bool configure_kernels_or_report();

// Runs the tuner, prints a table (or the JSON report) on stdout and writes the cache. Exit status.
int cmd_tune(bool as_json, bool quick);

}  // namespace colibri::cli
