#include <CLI/CLI.hpp>
#include <cstdio>

#include "commands.hpp"
#include "shardcheck/parallel/plan.hpp"

namespace shardcheck::commands {

namespace {

int do_list(const catalogue& cat) {
  for (const auto* s : cat.normal()) {
    const par::run_case c = [&] {
      par::run_case d = default_case(*s, 1, 1, 1, 1);
      par::complete_and_validate(*s, d);
      return d;
    }();
    const par::kernel_info& info = s->info();
    const par::case_plan plan = par::plan_of(*s, c, par::coords_of(0, s->mesh_dims(c)));
    std::printf("%s\n  %s\n  placements (%zu-axis mesh, defaults): %s\n", info.name.c_str(),
                info.summary.c_str(), plan.dims.size(), placements_line(plan).c_str());
    std::printf("  layers %zu", info.min_layers);
    if (info.max_layers != info.min_layers) std::printf("-%zu", info.max_layers);
    std::printf("; dtypes %s; layouts %s; modes %s%s\n", join(info.dtypes).c_str(),
                join(info.layouts).c_str(), join(info.modes).c_str(),
                info.uses_collectives ? "" : "; point-to-point only");
    if (!info.policies.empty()) {
      std::string pols;
      for (const precision& pol : info.policies)
        pols += (pols.empty() ? "" : ", ") + to_string(pol);
      std::printf("  precision policies (bf16, f16): %s\n", pols.c_str());
    }
    for (const auto& ps : info.params)
      std::printf("  parameter %s in [%lld, %lld], default %lld: %s\n", ps.name.c_str(),
                  static_cast<long long>(ps.min), static_cast<long long>(ps.max),
                  static_cast<long long>(ps.fallback), ps.help.c_str());
  }
  return 0;
}

}  // namespace

runner::command list(CLI::App& app, const catalogue& cat) {
  return {app.add_subcommand("list", "List the strategies with their placements"),
          [] { return false; }, [&cat] { return do_list(cat); }};
}

}  // namespace shardcheck::commands
