#pragma once
// NumPy's .npy format, version 1.0, for what `verify --dump` writes: the magic "\x93NUMPY", the
// version 1 0, a little-endian 2-byte header length, then a Python dict literal padded with
// spaces to a multiple of 64 bytes and ended by '\n', then the raw C-order data. A 2×3 float:
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// (Debian packages no standalone writer: xtensor's needs its arrays, so a copy per tensor.)
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace shardcheck::npy {

// The header for `descr` ("<f4", "<f8") and shape, padded as the format requires.
[[nodiscard]] std::string header(const std::string& descr, const std::vector<std::int64_t>& shape);

// Writes rows×cols values (row-major) to path; throws error when the file cannot be written.
void write(const std::filesystem::path& path, const float* data, std::int64_t rows,
           std::int64_t cols);
void write(const std::filesystem::path& path, const double* data, std::int64_t rows,
           std::int64_t cols);

}  // namespace shardcheck::npy
