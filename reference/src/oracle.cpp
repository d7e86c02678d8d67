#include "shardcheck/reference/oracle.hpp"

namespace shardcheck::ref {

namespace {

__extension__ typedef __float128 quad;

}  // namespace

template <class T>
void oracle_forward(weight_layout layout, std::size_t rows, std::size_t n_out, std::size_t k_in,
                    const T* x, const T* w, double* out) {
  const bool out_in = layout == weight_layout::out_in;
  for (std::size_t i = 0; i < rows; ++i) {
    for (std::size_t j = 0; j < n_out; ++j) {
      quad acc = 0;
      for (std::size_t k = 0; k < k_in; ++k) {
        const T wv = out_in ? w[j * k_in + k] : w[k * n_out + j];
        acc += static_cast<quad>(x[i * k_in + k]) * static_cast<quad>(wv);
      }
      out[i * n_out + j] = static_cast<double>(acc);
    }
  }
}

template void oracle_forward<float>(weight_layout, std::size_t, std::size_t, std::size_t,
                                    const float*, const float*, double*);
template void oracle_forward<double>(weight_layout, std::size_t, std::size_t, std::size_t,
                                     const double*, const double*, double*);

}  // namespace shardcheck::ref
