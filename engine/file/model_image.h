// The bytes of a model as the engine addresses them: the image of a .bin. For a .bin that is the file itself,
// mapped privately read-only. For a .bin.zst it is an anonymous reservation of the image's size whose
// sections are decompressed in place on first use (experts) or at open (everything else), so tensor pointers
// are the same either way and never move.
//
// Pages stay read-only after they are filled; write_section() (expert hot-swap) unprotects exactly one
// section's pages for the copy, so a stray write anywhere else faults instead of corrupting weights.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "engine/base/status.h"
#include "engine/file/format.h"
#include "engine/file/mapped_file.h"

namespace colibri {

class ModelImage {
public:
    ModelImage() = default;
    ~ModelImage();
    ModelImage(ModelImage&& other) noexcept;
    ModelImage& operator=(ModelImage&& other) noexcept;
    ModelImage(const ModelImage&) = delete;
    ModelImage& operator=(const ModelImage&) = delete;

    // Opens a .bin or a .bin.zst (told apart by magic). For .bin.zst the container header and frame table are
    // checked and the metadata frame is decompressed; nothing else is read yet.
    static Result<ModelImage> open(const std::string& path);
    static bool is_compressed_file(const uint8_t* data, uint64_t size);
    // The container header of a .bin.zst of `size` bytes: version, header checksum and that the frame table
    // lies inside the file (the table's own checksum is the caller's: the loader refuses a mismatch, the
    // validator reports it and reads on).
    static Result<format::ZstdHeader> read_zstd_header(const uint8_t* data, uint64_t size);

    const uint8_t* data() const { return base_; }
    uint64_t size() const { return size_; }
    bool compressed() const { return compressed_; }
    uint64_t stored_size() const { return source_.size(); }

    // Compressed images: checks that frame i covers exactly section i, then decompresses every section that is
    // not an expert. A no-op for plain files.
    Status attach_sections(std::span<const format::SectionEntry> sections);
    // Makes a section's bytes readable (decompressing it once, thread-safe). A no-op for plain files.
    Status ensure(uint32_t section) const;
    bool resident(uint32_t section) const;
    // Bytes of the section as stored (compressed size for .bin.zst).
    uint64_t stored_section_size(uint32_t section) const;
    // Where a section's zstd frame lies in a .bin.zst (nullptr for plain files or a section that does not exist).
    const format::FrameEntry* frame(uint32_t section) const {
        return compressed_ && section < frames_.size() ? &frames_[section] : nullptr;
    }
    // xxh64 of a section's contents. A compressed section that is not resident is decompressed into a
    // bounded buffer and hashed on the fly instead of being made resident.
    Result<uint64_t> hash_section(uint32_t section) const;
    // Overwrites [offset, offset + bytes) of the image, which must lie inside one resident section: that
    // section's pages are made writable for the copy and read-only again after. Callers exclude readers.
    Status write_section(uint32_t section, uint64_t offset, const void* src, uint64_t bytes);

private:
    Status decompress_into_place(uint32_t section) const;

    MappedFile source_;          // the file as stored
    uint8_t* base_ = nullptr;    // image start (into source_ for plain files)
    uint64_t size_ = 0;
    bool compressed_ = false;
    bool owns_reservation_ = false;
    std::vector<format::SectionEntry> sections_;
    std::vector<format::FrameEntry> frames_;
    // 0 = not decompressed, 1 = resident, 2 = failed (damaged frame); per section.
    std::unique_ptr<std::atomic<uint8_t>[]> state_;
    std::unique_ptr<std::mutex> fill_mutex_ = std::make_unique<std::mutex>();
};

}  // namespace colibri
