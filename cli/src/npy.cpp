#include "npy.hpp"

#include <bit>
#include <fstream>

#include "shardcheck/reference/types.hpp"

namespace shardcheck::npy {

static_assert(std::endian::native == std::endian::little, "the .npy files are written '<'");

std::string header(const std::string& descr, const std::vector<std::int64_t>& shape) {
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (";
  for (const std::int64_t n : shape) dict += std::to_string(n) + ", ";
  if (shape.size() > 1) dict.erase(dict.size() - 1);  // (2, 3) but (5,)
  dict += "), }";
  // magic (6) + version (2) + length (2) + dict + padding + '\n': a multiple of 64.
  const std::size_t used = 10 + dict.size() + 1;
  dict.append((64 - used % 64) % 64, ' ');
  dict += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(dict.size() & 0xff);
  out += static_cast<char>((dict.size() >> 8) & 0xff);
  return out + dict;
}

namespace {

template <class T>
void write_any(const std::filesystem::path& path, const char* descr, const T* data,
               std::int64_t rows, std::int64_t cols) {
  const std::int64_t n = checked_mul(rows, cols, path.filename().string() + " elements");
  std::ofstream f(path, std::ios::binary);
  const std::string h = header(descr, {rows, cols});
  f.write(h.data(), static_cast<std::streamsize>(h.size()));
  f.write(reinterpret_cast<const char*>(data),
          static_cast<std::streamsize>(checked_mul(n, sizeof(T), "npy bytes")));
  if (!f) throw error("--dump: cannot write " + path.string());
}

}  // namespace

void write(const std::filesystem::path& path, const float* data, std::int64_t rows,
           std::int64_t cols) {
  write_any(path, "<f4", data, rows, cols);
}

void write(const std::filesystem::path& path, const double* data, std::int64_t rows,
           std::int64_t cols) {
  write_any(path, "<f8", data, rows, cols);
}

}  // namespace shardcheck::npy
