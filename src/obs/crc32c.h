// CRC-32C (Castagnoli, reflected polynomial 0x82f63b78), and the masked form of TFRecord files: a CRC stored
// next to the data it covers is rotated and offset so that a CRC of data containing CRCs stays well mixed.
#pragma once
#include <cstddef>
#include <cstdint>

namespace cnn {

uint32_t crc32c(const void* data, size_t n);
inline uint32_t mask_crc32c(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

}  // namespace cnn
