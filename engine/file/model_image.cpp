#include "engine/file/model_image.h"

#include <sys/mman.h>
#include <xxhash.h>
#include <zstd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace colibri {

using namespace format;

namespace {

constexpr uint8_t kAbsent = 0, kResident = 1, kFailed = 2;

uint64_t page_floor(uint64_t v) { return v / kSectionAlignment * kSectionAlignment; }

Status protect(uint8_t* base, uint64_t begin, uint64_t end, int prot) {
    const uint64_t lo = page_floor(begin), hi = align_up(end, kSectionAlignment);
    if (hi == lo) return Status::ok();
    if (mprotect(base + lo, hi - lo, prot) != 0) return error(std::string("mprotect failed: ") + std::strerror(errno));
    return Status::ok();
}

uint64_t header_checksum(ZstdHeader h) {
    h.header_xxh64 = 0;
    return XXH64(&h, sizeof(h), 0);
}

}  // namespace

ModelImage::~ModelImage() {
    if (owns_reservation_ && base_ != nullptr) munmap(base_, size_);
}

ModelImage::ModelImage(ModelImage&& o) noexcept
    : source_(std::move(o.source_)),
      base_(std::exchange(o.base_, nullptr)),
      size_(std::exchange(o.size_, 0)),
      compressed_(o.compressed_),
      owns_reservation_(std::exchange(o.owns_reservation_, false)),
      sections_(std::move(o.sections_)),
      frames_(std::move(o.frames_)),
      state_(std::move(o.state_)),
      fill_mutex_(std::move(o.fill_mutex_)) {}

ModelImage& ModelImage::operator=(ModelImage&& o) noexcept {
    if (this != &o) {
        if (owns_reservation_ && base_ != nullptr) munmap(base_, size_);
        source_ = std::move(o.source_);
        base_ = std::exchange(o.base_, nullptr);
        size_ = std::exchange(o.size_, 0);
        compressed_ = o.compressed_;
        owns_reservation_ = std::exchange(o.owns_reservation_, false);
        sections_ = std::move(o.sections_);
        frames_ = std::move(o.frames_);
        state_ = std::move(o.state_);
        fill_mutex_ = std::move(o.fill_mutex_);
    }
    return *this;
}

bool ModelImage::is_compressed_file(const uint8_t* data, uint64_t size) {
    return size >= sizeof(kZstdMagic) && std::memcmp(data, kZstdMagic, sizeof(kZstdMagic)) == 0;
}

Result<ZstdHeader> ModelImage::read_zstd_header(const uint8_t* data, uint64_t n) {
    if (n < sizeof(ZstdHeader))
        return error("truncated .bin.zst (" + std::to_string(n) + " bytes, its header needs " + std::to_string(sizeof(ZstdHeader)) + ")");
    ZstdHeader h;
    std::memcpy(&h, data, sizeof(h));
    if (h.version_major != kZstdVersionMajor)
        return error("unsupported .bin.zst version " + std::to_string(h.version_major) + "." + std::to_string(h.version_minor));
    if (header_checksum(h) != h.header_xxh64) return error(".bin.zst header checksum mismatch");
    if (h.frame_count == 0 || h.frame_table_offset != sizeof(ZstdHeader) ||
        h.frame_count > (n - sizeof(ZstdHeader)) / sizeof(FrameEntry))
        return error(".bin.zst frame table lies outside the file");
    return h;
}

Result<ModelImage> ModelImage::open(const std::string& path) {
    auto map = MappedFile::open(path);
    if (!map) return map.status();
    ModelImage img;
    img.source_ = std::move(map.value());
    const uint8_t* src = img.source_.data();
    const uint64_t n = img.source_.size();
    if (!is_compressed_file(src, n)) {
        // The mapping is private, so write_section's copy-on-write never reaches the file.
        img.base_ = const_cast<uint8_t*>(src);
        img.size_ = n;
        return img;
    }

    img.compressed_ = true;
    auto header = read_zstd_header(src, n);
    if (!header) return header.status();
    const ZstdHeader& h = header.value();
    if (h.image_size < sizeof(FileHeader) || h.image_size > (uint64_t(1) << 46))
        return error(".bin.zst image size " + std::to_string(h.image_size) + " out of range");
    if (!plausible_image_size(h.image_size, n))
        return error(".bin.zst image size " + std::to_string(h.image_size) + " is implausible for a file of " + std::to_string(n) +
                     " bytes (more than " + std::to_string(kMaxImageRatio) + " times larger: a decompression bomb?)");
    const uint8_t* table = src + h.frame_table_offset;
    if (XXH64(table, size_t(h.frame_count) * sizeof(FrameEntry), 0) != h.frame_table_xxh64)
        return error(".bin.zst frame table checksum mismatch");
    img.frames_.resize(h.frame_count);
    std::memcpy(img.frames_.data(), table, img.frames_.size() * sizeof(FrameEntry));
    const uint64_t data_start = h.frame_table_offset + uint64_t(h.frame_count) * sizeof(FrameEntry);
    for (size_t i = 0; i < img.frames_.size(); ++i) {
        const FrameEntry& f = img.frames_[i];
        if (f.stored_offset < data_start || f.stored_offset > n || f.stored_size > n - f.stored_offset ||
            f.image_offset > h.image_size || f.image_size > h.image_size - f.image_offset)
            return error(".bin.zst frame " + std::to_string(i) + " lies outside the file or the image");
    }

    // Address space for the whole image; pages cost nothing until a section is decompressed into them.
    void* region = mmap(nullptr, h.image_size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (region == MAP_FAILED) return error(std::string("cannot reserve the model image: ") + std::strerror(errno));
    img.base_ = static_cast<uint8_t*>(region);
    img.size_ = h.image_size;
    img.owns_reservation_ = true;

    // The metadata is frame 0 and starts the image; decompress it so ModelFile can validate the tables.
    const FrameEntry& meta = img.frames_[0];
    if (meta.image_offset != 0 || meta.image_size < sizeof(FileHeader))
        return error(".bin.zst frame 0 is not the metadata");
    if (meta.image_size > kMaxMetadataBytes)
        return error(".bin.zst metadata frame of " + std::to_string(meta.image_size) + " bytes exceeds the limit of " +
                     std::to_string(kMaxMetadataBytes >> 20) + " MiB");
    img.sections_.resize(img.frames_.size());
    img.sections_[0] = SectionEntry{static_cast<uint32_t>(SectionKind::Metadata), kNone, kNone, 0, 0, meta.image_size, 0};
    img.state_ = std::make_unique<std::atomic<uint8_t>[]>(img.frames_.size());
    for (size_t i = 0; i < img.frames_.size(); ++i) img.state_[i].store(kAbsent);
    COLIBRI_TRY(img.decompress_into_place(0));
    return img;
}

Status ModelImage::attach_sections(std::span<const SectionEntry> sections) {
    if (!compressed_) {
        sections_.assign(sections.begin(), sections.end());
        return Status::ok();
    }
    if (sections.size() != frames_.size())
        return error(".bin.zst has " + std::to_string(frames_.size()) + " frames for " + std::to_string(sections.size()) +
                     " sections");
    for (size_t i = 0; i < sections.size(); ++i) {
        if (frames_[i].image_offset != sections[i].offset || frames_[i].image_size != sections[i].size)
            return error(".bin.zst frame " + std::to_string(i) + " does not match section " + std::to_string(i));
    }
    sections_.assign(sections.begin(), sections.end());
    for (uint32_t i = 1; i < sections_.size(); ++i) {
        if (sections_[i].kind != static_cast<uint32_t>(SectionKind::Expert)) COLIBRI_TRY(ensure(i));
    }
    return Status::ok();
}

bool ModelImage::resident(uint32_t section) const {
    return !compressed_ || (section < frames_.size() && state_[section].load(std::memory_order_acquire) == kResident);
}

Status ModelImage::ensure(uint32_t section) const {
    if (!compressed_) return Status::ok();
    if (section >= frames_.size()) return error("section " + std::to_string(section) + " does not exist");
    const uint8_t s = state_[section].load(std::memory_order_acquire);
    if (s == kResident) return Status::ok();
    std::lock_guard lock(*fill_mutex_);
    return decompress_into_place(section);
}

// Called with fill_mutex_ held (or before the image is shared).
Status ModelImage::decompress_into_place(uint32_t section) const {
    const uint8_t s = state_[section].load(std::memory_order_acquire);
    const std::string label = "section " + std::to_string(section);
    if (s == kResident) return Status::ok();
    if (s == kFailed) return error(label + ": damaged zstd frame");
    const FrameEntry& f = frames_[section];
    uint8_t* dst = base_ + f.image_offset;
    COLIBRI_TRY(protect(base_, f.image_offset, f.image_offset + f.image_size, PROT_READ | PROT_WRITE));
    const size_t got = ZSTD_decompress(dst, f.image_size, source_.data() + f.stored_offset, f.stored_size);
    const bool bad = ZSTD_isError(got) || got != f.image_size;
    COLIBRI_TRY(protect(base_, f.image_offset, f.image_offset + f.image_size, PROT_READ));
    if (bad) {
        state_[section].store(kFailed, std::memory_order_release);
        return error(label + ": damaged zstd frame (" +
                     (ZSTD_isError(got) ? std::string(ZSTD_getErrorName(got)) : "wrong decompressed size") + ")");
    }
    state_[section].store(kResident, std::memory_order_release);
    return Status::ok();
}

uint64_t ModelImage::stored_section_size(uint32_t section) const {
    if (!compressed_) return section < sections_.size() ? sections_[section].size : 0;
    return section < frames_.size() ? frames_[section].stored_size : 0;
}

Result<uint64_t> ModelImage::hash_section(uint32_t section) const {
    if (section >= sections_.size()) return error("section " + std::to_string(section) + " does not exist");
    if (resident(section)) return XXH64(base_ + sections_[section].offset, sections_[section].size, 0);
    const FrameEntry& f = frames_[section];
    const std::string label = "section " + std::to_string(section);
    std::unique_ptr<ZSTD_DStream, size_t (*)(ZSTD_DStream*)> ds(ZSTD_createDStream(), ZSTD_freeDStream);
    std::unique_ptr<XXH64_state_t, XXH_errorcode (*)(XXH64_state_t*)> hs(XXH64_createState(), XXH64_freeState);
    if (!ds || !hs) return error("out of memory");
    XXH64_reset(hs.get(), 0);
    std::vector<uint8_t> buf(ZSTD_DStreamOutSize());
    ZSTD_inBuffer in{source_.data() + f.stored_offset, f.stored_size, 0};
    uint64_t produced = 0;
    size_t ret = 1;
    while (ret != 0) {
        ZSTD_outBuffer out{buf.data(), buf.size(), 0};
        ret = ZSTD_decompressStream(ds.get(), &out, &in);
        if (ZSTD_isError(ret)) return error(label + ": damaged zstd frame (" + std::string(ZSTD_getErrorName(ret)) + ")");
        produced += out.pos;
        if (produced > f.image_size) return error(label + ": damaged zstd frame (too much data)");
        XXH64_update(hs.get(), buf.data(), out.pos);
        if (ret != 0 && in.pos == in.size && out.pos < out.size) return error(label + ": damaged zstd frame (truncated)");
    }
    if (produced != f.image_size) return error(label + ": damaged zstd frame (wrong decompressed size)");
    return XXH64_digest(hs.get());
}

Status ModelImage::write_section(uint32_t section, uint64_t offset, const void* src, uint64_t bytes) {
    if (section >= sections_.size()) return error("section " + std::to_string(section) + " does not exist");
    const SectionEntry& s = sections_[section];
    if (offset < s.offset || bytes > s.size || offset - s.offset > s.size - bytes)
        return error("write outside section " + std::to_string(section));
    COLIBRI_TRY(ensure(section));
    COLIBRI_TRY(protect(base_, s.offset, s.offset + s.size, PROT_READ | PROT_WRITE));
    std::memcpy(base_ + offset, src, bytes);
    return protect(base_, s.offset, s.offset + s.size, PROT_READ);
}

}  // namespace colibri
