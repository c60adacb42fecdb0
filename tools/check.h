// Validation of .bin and .bin.zst files: the report `colibri check` prints and the Studio's validator shows.
//
// Unlike the loader, which stops at the first thing it cannot use, the check keeps going: it reports every
// damaged section and tensor it can name, and stops early only when the header itself is unreadable (then
// `fatal` says why). Everything a section's name or a tensor's entry claims is bounds-checked before it is
// touched, so any file gives a report, never a crash.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace colibri::tools {

// What hashing a section found.
enum class ChecksumState {
    Ok,            // xxh64 of the contents equals the table's
    Mismatch,      // the contents hash to something else
    DamagedFrame,  // .bin.zst: the section's zstd frame does not decompress to the section's size
    Unreadable,    // the section lies (partly) outside the file, so its bytes were not hashed
    NotChecked,    // the check was cancelled before this section
};
const char* checksum_state_name(ChecksumState s);  // "ok", "mismatch", "damaged_frame", "unreadable", "not_checked"

struct SectionCheck {
    uint32_t index = 0;
    std::string kind;     // "expert", "attention", ... ("unknown" for a kind this build does not know)
    std::string name;     // "layer 2 expert 5 (gate up down)", "tokenizer", ...: what problems call it
    int64_t layer = -1;   // -1 when not per layer
    int64_t expert = -1;
    uint64_t offset = 0;  // in the image (for a .bin.zst: the uncompressed .bin)
    uint64_t size = 0;
    uint64_t stored_size = 0;  // bytes on disk: size for a .bin, the frame's size for a .bin.zst
    bool aligned = false;      // offset is a multiple of 4096
    bool in_bounds = false;    // [offset, offset + size) lies inside the image
    bool checksum_ok = false;  // checksum == Ok
    ChecksumState checksum = ChecksumState::NotChecked;
    uint64_t xxh64_expected = 0;  // from the section table (section 0: the header's metadata_xxh64)
    uint64_t xxh64_actual = 0;    // meaningful when the contents were hashed (Ok or Mismatch)
};

struct TensorCheck {
    std::string name;
    std::vector<uint64_t> shape;  // [rows] or [rows, cols]
    std::string type;             // "f32", "q8_0", ... ("unknown" for an unknown id)
    uint32_t section = 0;         // index into CheckReport::sections (may be out of range in a damaged file)
    uint64_t offset = 0;
    uint64_t size = 0;
    bool aligned = false;         // offset is a multiple of 64
    bool shape_ok = false;        // known type, valid shape, size matching it, inside its section, and what the
                                  // family's hyper-parameters expect of a tensor of that name
    ChecksumState checksum = ChecksumState::NotChecked;  // of its section
};

struct CheckReport {
    bool valid = false;
    bool cancelled = false;
    std::string path;
    std::string fatal;                   // set when the file could not be opened or its header not read at all
    bool unreadable = false;             // the path itself could not be opened or mapped (fatal says why), as
                                         // opposed to a file that opens but is not a readable model
    bool compressed = false;             // a .bin.zst
    uint64_t stored_size = 0;            // bytes of the file on disk
    uint64_t image_size = 0;             // bytes of the (uncompressed) image
    std::string family;                  // "mixtral", ... (empty when unknown)
    uint32_t version_major = 0, version_minor = 0;
    uint64_t bytes_checked = 0;          // section bytes hashed
    std::vector<SectionCheck> sections;
    std::vector<TensorCheck> tensors;
    std::vector<std::string> problems;   // one line each, starting with the damaged section's or tensor's name
};

struct CheckOptions {
    // Called as section bytes are hashed, with bytes done and the total, monotonically, ending at done ==
    // total when the check runs to the end; return false to cancel.
    std::function<bool(uint64_t done, uint64_t total)> progress;
    // Another thread may set this to cancel; it is read whenever progress would be called (about 256 times
    // over the file, at least every 8 MiB).
    const std::atomic<bool>* cancel = nullptr;
};

CheckReport check_model(const std::string& path, const CheckOptions& options);
// progress(done_bytes, total_bytes) is called as sections are hashed.
CheckReport check_model(const std::string& path, const std::function<void(uint64_t, uint64_t)>& progress = nullptr);

// The whole report as JSON (docs/FORMAT.md, "Check report").
std::string check_report_json(const CheckReport& report);

}  // namespace colibri::tools
