#include "shardcheck/parallel/plan.hpp"

#include "shardcheck/reference/data.hpp"

namespace shardcheck::par {

std::uint32_t data_id_of(tensor_slot t) {
  // X, W_1 (a single layer's W), W_2 (ref::tensor_id::w2), W_l for l ≥ 3 (ids 8 + l, past every
  // named id), dY.
  switch (t.t) {
    case tensor::x: return static_cast<std::uint32_t>(ref::tensor_id::x);
    case tensor::w:
      if (t.layer == 0) return static_cast<std::uint32_t>(ref::tensor_id::w);
      if (t.layer == 1) return static_cast<std::uint32_t>(ref::tensor_id::w2);
      return static_cast<std::uint32_t>(8 + t.layer + 1);
    case tensor::dy: return static_cast<std::uint32_t>(ref::tensor_id::dy);
    default: return 0;
  }
}

const tensor_plan& case_plan::operator[](tensor_slot t) const {
  for (const tensor_plan& p : tensors)
    if (p.slot == t) return p;
  throw invalid_problem("case plan: no tensor " + std::string(to_string(t.t)) + " of layer " +
                        std::to_string(t.layer + 1));
}

std::size_t case_plan::layers() const { return outputs.size() - 2; }

case_plan plan_of(const kernel& k, const run_case& c, std::span<const int> coords) {
  case_plan out;
  out.dims = k.mesh_dims(c);
  out.coords.assign(coords.begin(), coords.end());
  out.outputs = outputs_of(c);
  for (const tensor_slot& t : tensors_of(c)) {
    tensor_plan p;
    p.slot = t;
    p.name = name_of(t, c);
    p.dims = dim_names(t, c.prob);
    p.where = k.placement(t, c);
    p.region = block_of(k, c, t, coords);
    p.data_id = data_id_of(t);
    out.tensors.push_back(std::move(p));
  }
  return out;
}

}  // namespace shardcheck::par
