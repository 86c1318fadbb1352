// A minimal PNG writer for rendered images: 8-bit RGB, filter 0 on every row, and the zlib
// stream made of stored (uncompressed) deflate blocks, so no compression library is linked
// (rlx_core only loads zlib at run time for gzip input). CRC-32 and Adler-32 are computed here.
#include <array>
#include <cmath>
#include <fstream>

#include "rlx/splat.h"

namespace rlx::splat {
namespace {

uint32_t crc32(const uint8_t* p, size_t n, uint32_t crc = 0) {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  crc = ~crc;
  for (size_t i = 0; i < n; ++i) crc = table[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

void put32(std::vector<uint8_t>& v, uint32_t x) {
  for (int s = 24; s >= 0; s -= 8) v.push_back(static_cast<uint8_t>(x >> s));
}

void chunk(std::vector<uint8_t>& out, const char* type, const std::vector<uint8_t>& data) {
  put32(out, static_cast<uint32_t>(data.size()));
  const size_t start = out.size();
  out.insert(out.end(), type, type + 4);
  out.insert(out.end(), data.begin(), data.end());
  put32(out, crc32(out.data() + start, out.size() - start));
}

}  // namespace

Status write_png(const std::string& path, const float* rgb, int64_t width, int64_t height) {
  if (width < 1 || height < 1 || width > (1 << 15) || height > (1 << 15))
    return error(ErrorCode::invalid_argument, path, ": image size ", width, "x", height, " is not in [1, 32768]");
  // raw scanlines: filter byte 0, then RGB
  std::vector<uint8_t> raw;
  raw.reserve(static_cast<size_t>(height) * (1 + width * 3));
  for (int64_t y = 0; y < height; ++y) {
    raw.push_back(0);
    for (int64_t x = 0; x < width * 3; ++x) {
      const float v = rgb[y * width * 3 + x];
      const float c = std::isnan(v) ? 0.f : std::min(1.f, std::max(0.f, v));
      raw.push_back(static_cast<uint8_t>(std::lround(c * 255.f)));
    }
  }
  // zlib stream: header (deflate, 32K window, no dictionary), stored blocks, Adler-32
  std::vector<uint8_t> z = {0x78, 0x01};
  for (size_t pos = 0; pos < raw.size() || pos == 0;) {
    const size_t len = std::min<size_t>(65535, raw.size() - pos);
    const bool last = pos + len == raw.size();
    z.push_back(last ? 1 : 0);
    z.push_back(static_cast<uint8_t>(len));
    z.push_back(static_cast<uint8_t>(len >> 8));
    z.push_back(static_cast<uint8_t>(~len));
    z.push_back(static_cast<uint8_t>(~len >> 8));
    z.insert(z.end(), raw.begin() + pos, raw.begin() + pos + len);
    pos += len;
    if (last) break;
  }
  uint32_t a = 1, b = 0;
  for (uint8_t c : raw) {
    a = (a + c) % 65521;
    b = (b + a) % 65521;
  }
  put32(z, (b << 16) | a);
  std::vector<uint8_t> out = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  std::vector<uint8_t> ihdr;
  put32(ihdr, static_cast<uint32_t>(width));
  put32(ihdr, static_cast<uint32_t>(height));
  ihdr.insert(ihdr.end(), {8, 2, 0, 0, 0});  // 8 bits, RGB, deflate, filter 0, no interlace
  chunk(out, "IHDR", ihdr);
  chunk(out, "IDAT", z);
  chunk(out, "IEND", {});
  std::ofstream f(path, std::ios::binary);
  if (!f) return error(ErrorCode::io_error, path, ": cannot create the file");
  f.write(reinterpret_cast<const char*>(out.data()), static_cast<std::streamsize>(out.size()));
  if (!f) return error(ErrorCode::io_error, path, ": writing failed");
  return Status::ok();
}

}  // namespace rlx::splat
