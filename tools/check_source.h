// The checker's view of a model file's bytes, the same for a .bin and a .bin.zst: the metadata, and each
// section's contents streamed in chunks. Nothing in the file is trusted: every range is bounds-checked, and a
// .bin.zst frame is decompressed incrementally (never more than the section's size), so a damaged or hostile
// file gives problems to report, never a crash or a runaway allocation.
//
// This is deliberately separate from ModelImage (the loader's): the loader stops at the first bad frame and
// keeps what it decompressed; the checker reads every frame once, keeps nothing, and reports all of them.
#pragma once
#include <zstd.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/file/format.h"
#include "engine/file/mapped_file.h"
#include "engine/base/status.h"

namespace colibri::tools {

// Not thread-safe: one check reads through it at a time.
class CheckSource {
public:
    enum class ReadResult { Ok, Cancelled, OutOfBounds, DamagedFrame };

    // Fails (the report's `fatal`) only when the file cannot be mapped, or for a .bin.zst when its container
    // header, frame table or metadata frame cannot be read: then nothing else can be located. *unreadable is
    // set when the path itself could not be opened or mapped.
    static Result<CheckSource> open(const std::string& path, bool* unreadable);

    bool compressed() const { return compressed_; }
    uint64_t stored_size() const { return file_.size(); }
    // Bytes of the uncompressed image: the file's size for a .bin, the container's image_size for a .bin.zst.
    uint64_t image_size() const { return image_size_; }
    // The image from offset 0 as far as it can be read directly: the whole mapping for a .bin, the
    // decompressed metadata frame for a .bin.zst.
    std::span<const uint8_t> prefix() const;
    // Problems of the container itself (.bin.zst frame table), one line each.
    const std::vector<std::string>& problems() const { return problems_; }

    // Compares the container with the image's section table: one frame per section, each covering exactly its
    // section. Adds a problem per disagreement; sections without a matching frame read as DamagedFrame.
    void attach(std::span<const format::SectionEntry> sections, const std::function<std::string(uint32_t)>& name_of);
    // Bytes section `index` takes on disk (its frame for a .bin.zst), 0 when unknown.
    uint64_t stored_section_size(uint32_t index, const format::SectionEntry& s) const;
    // Streams [s.offset, s.offset + s.size) of the image to sink in chunks, in order; sink returns false to
    // cancel. For DamagedFrame, *why says what zstd reported.
    ReadResult read(uint32_t index, const format::SectionEntry& s,
                    const std::function<bool(const uint8_t*, size_t)>& sink, std::string* why) const;

private:
    ReadResult read_frame(uint32_t index, const std::function<bool(const uint8_t*, size_t)>& sink, std::string* why) const;

    MappedFile file_;
    bool compressed_ = false;
    uint64_t image_size_ = 0;
    std::vector<uint8_t> metadata_;           // .bin.zst: frame 0 decompressed
    std::vector<format::FrameEntry> frames_;  // .bin.zst
    std::vector<bool> frame_usable_;          // frame lies inside the file and matches its section
    std::vector<std::string> problems_;
    // Reused by every read_frame() (so one CheckSource serves one thread at a time).
    struct StreamDeleter {
        void operator()(ZSTD_DStream* d) const;
    };
    mutable std::unique_ptr<ZSTD_DStream, StreamDeleter> stream_;
    mutable std::vector<uint8_t> out_buffer_;
};

}  // namespace colibri::tools
