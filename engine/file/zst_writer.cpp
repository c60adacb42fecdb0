#include "engine/file/zst_writer.h"

#include <sys/mman.h>
#include <xxhash.h>
#include <zstd.h>

#include <cstring>
#include <memory>
#include <vector>

#include "engine/file/model_file.h"
#include "engine/file/temp_output.h"

namespace colibri {

using namespace format;

Status compress_model(const std::string& bin_path, const std::string& zst_path, const ZstOptions& options) {
    auto file = ModelFile::open(bin_path);
    if (!file) return file.status();
    return compress_model(*file.value(), bin_path, zst_path, options);
}

Status compress_model(const ModelFile& f, const std::string& bin_path, const std::string& zst_path, const ZstOptions& options) {
    if (f.compressed()) return error(bin_path + ": already a .bin.zst");
    if (options.level < 1 || options.level > ZSTD_maxCLevel())
        return error("zstd level " + std::to_string(options.level) + " out of range (1.." + std::to_string(ZSTD_maxCLevel()) + ")");

    TempOutput out;
    COLIBRI_TRY(out.create(zst_path));
    const auto sections = f.sections();
    std::vector<FrameEntry> frames(sections.size());
    uint64_t cursor = sizeof(ZstdHeader) + frames.size() * sizeof(FrameEntry);

    std::unique_ptr<ZSTD_CCtx, size_t (*)(ZSTD_CCtx*)> cctx(ZSTD_createCCtx(), ZSTD_freeCCtx);
    if (!cctx) return error("out of memory");
    ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_compressionLevel, options.level);
    ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_checksumFlag, 1);  // a damaged frame fails to decompress
    std::vector<uint8_t> buf(ZSTD_CStreamOutSize());

    uint64_t total = 0, done = 0;
    for (const SectionEntry& s : sections) total += s.size;
    for (uint32_t i = 0; i < sections.size(); ++i) {
        const SectionEntry& s = sections[i];
        if (i > 0 && !f.verify_section(i)) return error(bin_path + ": section " + f.section_label(i) + " checksum mismatch");
        frames[i] = FrameEntry{cursor, 0, s.offset, s.size};
        // Stream the section through a bounded buffer, so memory stays flat whatever the section size.
        ZSTD_CCtx_reset(cctx.get(), ZSTD_reset_session_only);
        ZSTD_CCtx_setPledgedSrcSize(cctx.get(), s.size);
        ZSTD_inBuffer in{f.data() + s.offset, s.size, 0};
        size_t remaining = 1;
        while (remaining != 0) {
            ZSTD_outBuffer o{buf.data(), buf.size(), 0};
            remaining = ZSTD_compressStream2(cctx.get(), &o, &in, ZSTD_e_end);
            if (ZSTD_isError(remaining)) return error(std::string("zstd: ") + ZSTD_getErrorName(remaining));
            COLIBRI_TRY(out.write_at(cursor, buf.data(), o.pos));
            cursor += o.pos;
        }
        frames[i].stored_size = cursor - frames[i].stored_offset;
        // Drop the section's pages from our resident set: the mapping is a private, never-written view of the
        // file, so this loses nothing, and peak memory stays near one section instead of the whole model.
        const uint64_t page_end = (s.offset + s.size) / 4096 * 4096;
        if (page_end > s.offset) madvise(const_cast<uint8_t*>(f.data()) + s.offset, page_end - s.offset, MADV_DONTNEED);
        done += s.size;
        if (options.progress && !options.progress(done, total)) return error("cancelled");
    }

    ZstdHeader h{};
    std::memcpy(h.magic, kZstdMagic, sizeof(kZstdMagic));
    h.version_major = kZstdVersionMajor;
    h.frame_count = static_cast<uint32_t>(frames.size());
    h.image_size = f.size();
    h.frame_table_offset = sizeof(ZstdHeader);
    h.frame_table_xxh64 = XXH64(frames.data(), frames.size() * sizeof(FrameEntry), 0);
    h.header_xxh64 = XXH64(&h, sizeof(h), 0);
    COLIBRI_TRY(out.write_at(0, &h, sizeof(h)));
    COLIBRI_TRY(out.write_at(sizeof(h), frames.data(), frames.size() * sizeof(FrameEntry)));
    return out.commit();
}

}  // namespace colibri
