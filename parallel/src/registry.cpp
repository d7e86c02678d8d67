#include "shardcheck/parallel/registry.hpp"

#include "strategies/column_parallel.hpp"
#include "strategies/column_row_pair.hpp"
#include "strategies/data_parallel.hpp"
#include "strategies/pipeline.hpp"
#include "strategies/redistribute_layer.hpp"
#include "strategies/row_parallel.hpp"
#include "strategies/sequence_parallel_pair.hpp"
#include "strategies/sharded_weights.hpp"
#include "strategies/summa.hpp"

namespace shardcheck::par {

void registry::add(std::unique_ptr<kernel> k) {
  if (find(k->name()) != nullptr) throw error("kernel '" + k->name() + "' registered twice");
  items_.push_back(std::move(k));
}

const kernel* registry::find(std::string_view name) const {
  for (const auto& k : items_)
    if (k->name() == name) return k.get();
  return nullptr;
}

registry builtin_strategies() {
  registry r;
  r.add(std::make_unique<data_parallel>());
  r.add(std::make_unique<column_parallel>());
  r.add(std::make_unique<row_parallel>());
  r.add(std::make_unique<redistribute_layer>());
  r.add(std::make_unique<sharded_weights>());
  r.add(std::make_unique<column_row_pair>());
  r.add(std::make_unique<sequence_parallel_pair>());
  r.add(std::make_unique<summa>());
  r.add(std::make_unique<pipeline>(pipeline_schedule::gpipe, false));
  r.add(std::make_unique<pipeline>(pipeline_schedule::one_f_one_b, false));
  r.add(std::make_unique<pipeline>(pipeline_schedule::one_f_one_b, true));
  return r;
}

}  // namespace shardcheck::par
