// Where in a section whose checksum failed the damage lies. A section's xxh64 covers all of its tensors, so the
// hash alone cannot say which one changed; the values can, when the damage made one of them impossible (NaN or
// infinite) or far out of line with its tensor (a flipped exponent bit): that value's tensor, row, column and
// byte offset are named. Otherwise the section's tensors and their offsets are listed.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "check.h"

namespace colibri::tools {

// bytes: the section's contents from section_offset (empty when too large to read again: then only the list).
// Returns the text that follows "xxh64 mismatch" in the problem line, starting with "; ".
std::string locate_damage(const std::vector<const TensorCheck*>& tensors, uint64_t section_offset, std::span<const uint8_t> bytes);

// "0x1f000": offsets in problem lines.
std::string hex_offset(uint64_t v);

}  // namespace colibri::tools
