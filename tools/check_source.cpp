#include "check_source.h"

#include "engine/file/model_image.h"

#include <sys/mman.h>
#include <unistd.h>
#include <xxhash.h>
#include <zstd.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <new>

namespace colibri::tools {
namespace {
// Drops the whole pages of [p, p + n) from the resident set once they have been read. The mapping is a
// read-only view of the file that this process never writes, so nothing is lost (a later read faults the
// page back in), and checking a file of many GiB needs no more memory than a chunk.
void drop_read_pages(const uint8_t* p, uint64_t n) {
    const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
    const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + n) / page * page;
    if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}
}  // namespace


using namespace format;

void CheckSource::StreamDeleter::operator()(ZSTD_DStream* d) const { ZSTD_freeDStream(d); }

namespace {

// Chunks handed to the sink: large enough that hashing dominates, small enough for prompt cancellation.
constexpr uint64_t kChunkBytes = uint64_t(1) << 20;

}  // namespace

std::span<const uint8_t> CheckSource::prefix() const {
    if (compressed_) return {metadata_.data(), metadata_.size()};
    return {file_.data(), static_cast<size_t>(file_.size())};
}

Result<CheckSource> CheckSource::open(const std::string& path, bool* unreadable) {
    auto map = MappedFile::open(path);
    *unreadable = !map;
    if (!map) return map.status();
    CheckSource src;
    src.file_ = std::move(map.value());
    const uint8_t* data = src.file_.data();
    const uint64_t n = src.file_.size();
    if (n < sizeof(kZstdMagic) || std::memcmp(data, kZstdMagic, sizeof(kZstdMagic)) != 0) {
        src.image_size_ = n;
        return src;
    }

    // .bin.zst: the container header and the frame table locate everything; without them nothing can be read.
    src.compressed_ = true;
    auto header = ModelImage::read_zstd_header(data, n);
    if (!header) return header.status();
    const ZstdHeader& h = header.value();
    src.image_size_ = h.image_size;
    if (!plausible_image_size(h.image_size, n))
        src.problems_.push_back(".bin.zst image size " + std::to_string(h.image_size) + " is implausible for a file of " +
                                std::to_string(n) + " bytes (the loader refuses images more than " + std::to_string(kMaxImageRatio) +
                                " times their file)");
    const uint8_t* table = data + h.frame_table_offset;
    // A damaged table may still locate most frames: report it and read on, every frame bounds-checked.
    if (XXH64(table, size_t(h.frame_count) * sizeof(FrameEntry), 0) != h.frame_table_xxh64)
        src.problems_.push_back(".bin.zst frame table: xxh64 mismatch");
    src.frames_.resize(h.frame_count);
    std::memcpy(src.frames_.data(), table, src.frames_.size() * sizeof(FrameEntry));
    src.frame_usable_.assign(src.frames_.size(), false);
    const uint64_t data_start = h.frame_table_offset + uint64_t(h.frame_count) * sizeof(FrameEntry);
    for (size_t i = 0; i < src.frames_.size(); ++i) {
        const FrameEntry& f = src.frames_[i];
        const bool stored_ok = f.stored_offset >= data_start && f.stored_offset <= n && f.stored_size <= n - f.stored_offset;
        const bool image_ok = f.image_offset <= h.image_size && f.image_size <= h.image_size - f.image_offset;
        if (!stored_ok) src.problems_.push_back(".bin.zst frame " + std::to_string(i) + " lies outside the file");
        if (!image_ok) src.problems_.push_back(".bin.zst frame " + std::to_string(i) + " lies outside the image");
        src.frame_usable_[i] = stored_ok && image_ok;
    }

    // Frame 0 is the metadata, which locates every section: it must decompress.
    const FrameEntry& meta = src.frames_[0];
    if (!src.frame_usable_[0] || meta.image_offset != 0 || meta.image_size < sizeof(FileHeader) ||
        meta.image_size > kMaxMetadataBytes)
        return error(".bin.zst frame 0 is not the metadata");
    src.metadata_.reserve(meta.image_size);
    std::string why;
    const ReadResult r = src.read_frame(0, [&src](const uint8_t* p, size_t k) {
        src.metadata_.insert(src.metadata_.end(), p, p + k);
        return true;
    }, &why);
    if (r != ReadResult::Ok) return error(".bin.zst metadata frame: " + why);
    return src;
}

void CheckSource::attach(std::span<const SectionEntry> sections, const std::function<std::string(uint32_t)>& name_of) {
    if (!compressed_) return;
    if (sections.size() != frames_.size())
        problems_.push_back(".bin.zst has " + std::to_string(frames_.size()) + " frames for " +
                            std::to_string(sections.size()) + " sections");
    for (size_t i = 1; i < std::min(sections.size(), frames_.size()); ++i) {
        const FrameEntry& f = frames_[i];
        if (f.image_offset != sections[i].offset || f.image_size != sections[i].size) {
            problems_.push_back(name_of(static_cast<uint32_t>(i)) + ": .bin.zst frame " + std::to_string(i) +
                                " does not cover the section");
            frame_usable_[i] = false;
        }
    }
    // Frames back to back in the file, none overlapping another (each would otherwise decode another's bytes).
    std::vector<std::pair<uint64_t, size_t>> order;
    for (size_t i = 0; i < frames_.size(); ++i)
        if (frame_usable_[i]) order.emplace_back(frames_[i].stored_offset, i);
    std::sort(order.begin(), order.end());
    for (size_t k = 1; k < order.size(); ++k) {
        const FrameEntry& prev = frames_[order[k - 1].second];
        if (prev.stored_offset + prev.stored_size > order[k].first)
            problems_.push_back(".bin.zst frames " + std::to_string(order[k - 1].second) + " and " +
                                std::to_string(order[k].second) + " overlap in the file");
    }
}

uint64_t CheckSource::stored_section_size(uint32_t index, const SectionEntry& s) const {
    if (!compressed_) return s.size;
    return index < frames_.size() ? frames_[index].stored_size : 0;
}

CheckSource::ReadResult CheckSource::read(uint32_t index, const SectionEntry& s,
                                          const std::function<bool(const uint8_t*, size_t)>& sink, std::string* why) const {
    if (s.offset > image_size_ || s.size > image_size_ - s.offset) return ReadResult::OutOfBounds;
    if (compressed_) {
        if (index >= frames_.size() || !frame_usable_[index]) {
            *why = "no frame covers the section";
            return ReadResult::DamagedFrame;
        }
        return read_frame(index, sink, why);
    }
    for (uint64_t at = 0; at < s.size; at += kChunkBytes) {
        const uint64_t k = std::min(kChunkBytes, s.size - at);
        if (!sink(file_.data() + s.offset + at, static_cast<size_t>(k))) return ReadResult::Cancelled;
        drop_read_pages(file_.data() + s.offset + at, k);
    }
    return ReadResult::Ok;
}

CheckSource::ReadResult CheckSource::read_frame(uint32_t index, const std::function<bool(const uint8_t*, size_t)>& sink,
                                                std::string* why) const {
    const FrameEntry& f = frames_[index];
    // One stream and one output buffer serve every frame: nothing is allocated per section.
    if (!stream_) stream_.reset(ZSTD_createDStream());
    if (!stream_) throw std::bad_alloc();
    ZSTD_DStream* ds = stream_.get();
    ZSTD_initDStream(ds);
    std::vector<uint8_t>& buf = out_buffer_;
    if (buf.empty()) buf.resize(std::max<size_t>(ZSTD_DStreamOutSize(), 1 << 20));
    // Output in chunks; a frame that would produce more than the section holds is damaged, and is stopped there.
    ZSTD_inBuffer in{file_.data() + f.stored_offset, static_cast<size_t>(f.stored_size), 0};
    uint64_t produced = 0;
    size_t ret = 1;
    while (ret != 0) {
        ZSTD_outBuffer out{buf.data(), buf.size(), 0};
        ret = ZSTD_decompressStream(ds, &out, &in);
        if (ZSTD_isError(ret)) {
            *why = std::string("zstd: ") + ZSTD_getErrorName(ret);
            return ReadResult::DamagedFrame;
        }
        if (out.pos > f.image_size - produced) {
            *why = "decompresses to more than the section's " + std::to_string(f.image_size) + " bytes";
            return ReadResult::DamagedFrame;
        }
        produced += out.pos;
        if (out.pos > 0 && !sink(buf.data(), out.pos)) return ReadResult::Cancelled;
        if (ret != 0 && in.pos == in.size && out.pos < out.size) {
            *why = "truncated zstd frame";
            return ReadResult::DamagedFrame;
        }
    }
    drop_read_pages(file_.data() + f.stored_offset, f.stored_size);
    if (produced != f.image_size) {
        *why = "decompresses to " + std::to_string(produced) + " bytes, the section has " + std::to_string(f.image_size);
        return ReadResult::DamagedFrame;
    }
    if (in.pos != in.size) {
        *why = "trailing bytes after the zstd frame";
        return ReadResult::DamagedFrame;
    }
    return ReadResult::Ok;
}

}  // namespace colibri::tools
