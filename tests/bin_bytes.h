// A .bin held in memory to patch, for tests that craft damaged or hostile files: its tables read from the bytes
// as docs/FORMAT.md lays them out, sections rewritten with their checksums, the metadata resealed.
#pragma once
#include <xxhash.h>

#include <QByteArray>
#include <QtTest>
#include <cstring>
#include <string>

#include "engine/file/format.h"

namespace colibri::test {

using namespace colibri::format;

// A .bin held in memory to patch: its tables, read from the bytes as docs/FORMAT.md lays them out.
class BinBytes {
public:
    explicit BinBytes(const QByteArray& bytes) : b_(bytes.toStdString()) {}
    QByteArray bytes() const { return QByteArray::fromStdString(b_); }
    void flip(uint64_t offset, uint8_t mask) { b_.at(offset) = static_cast<char>(b_.at(offset) ^ mask); }
    FileHeader header() const { return at<FileHeader>(0); }
    void set_header(const FileHeader& h) { put(0, h); }
    SectionEntry section(uint32_t i) const { return at<SectionEntry>(header().section_table_offset + i * sizeof(SectionEntry)); }
    void set_section(uint32_t i, const SectionEntry& s) { put(header().section_table_offset + i * sizeof(SectionEntry), s); }
    uint32_t section_count() const { return header().section_count; }
    TensorEntry tensor(uint32_t i) const { return at<TensorEntry>(header().tensor_table_offset + i * sizeof(TensorEntry)); }
    void set_tensor(uint32_t i, const TensorEntry& t) { put(header().tensor_table_offset + i * sizeof(TensorEntry), t); }
    LayerEntry layer(uint32_t i) const { return at<LayerEntry>(header().layer_table_offset + i * sizeof(LayerEntry)); }
    ExpertEntry expert(uint32_t i) const { return at<ExpertEntry>(header().expert_table_offset + i * sizeof(ExpertEntry)); }
    void set_expert(uint32_t i, const ExpertEntry& e) { put(header().expert_table_offset + i * sizeof(ExpertEntry), e); }
    int tensor_index(const char* name) const {
        for (uint32_t i = 0; i < header().tensor_count; ++i)
            if (std::strncmp(tensor(i).name, name, kTensorNameBytes) == 0) return static_cast<int>(i);
        return -1;
    }
    int find_section(SectionKind kind, uint32_t layer = kNone, uint32_t expert = kNone) const {
        for (uint32_t i = 0; i < section_count(); ++i) {
            const SectionEntry s = section(i);
            if (s.kind == static_cast<uint32_t>(kind) && s.layer == layer && s.expert == expert) return static_cast<int>(i);
        }
        return -1;
    }
    // Replaces bytes inside section i and writes its new checksum into the table, as a writer would.
    void rewrite_section(uint32_t i, uint64_t at_in_section, const QByteArray& with) {
        SectionEntry s = section(i);
        b_.replace(s.offset + at_in_section, static_cast<size_t>(with.size()), with.toStdString());
        s.xxh64 = XXH64(b_.data() + s.offset, s.size, 0);
        set_section(i, s);
    }
    // Appends `bytes` at the end of the image (the file size in the header follows).
    void append(const QByteArray& bytes) {
        b_ += bytes.toStdString();
        FileHeader h = header();
        h.file_size = b_.size();
        put(0, h);
    }
    // The metadata checksum over the patched tables, so that only the structural damage remains.
    void reseal() {
        FileHeader h = header();
        h.metadata_xxh64 = 0;
        std::string meta = b_.substr(0, h.metadata_size);
        std::memcpy(meta.data(), &h, sizeof h);
        h.metadata_xxh64 = XXH64(meta.data(), meta.size(), 0);
        put(0, h);
    }

private:
    // Out-of-range reads give a zeroed entry (and fail the test that relied on them) instead of reading past b_.
    template <typename T>
    T at(uint64_t offset) const {
        T v{};
        if (fits(offset, sizeof v)) std::memcpy(&v, b_.data() + offset, sizeof v);
        return v;
    }
    template <typename T>
    void put(uint64_t offset, const T& v) {
        QVERIFY(fits(offset, sizeof v));
        std::memcpy(b_.data() + offset, &v, sizeof v);
    }
    bool fits(uint64_t offset, uint64_t n) const {
        const uint64_t size = b_.size();
        return offset <= size && n <= size - offset;
    }
    std::string b_;
};

}  // namespace colibri::test
