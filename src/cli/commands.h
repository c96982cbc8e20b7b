// Each `meshrl` subcommand registers itself on the root CLI11 app. One file per subcommand
// (cmd_<name>.cpp); each keeps its entry short and calls into the libraries under src/.
#pragma once

#include <CLI/CLI.hpp>

namespace meshrl::cli {

void add_generate_command(CLI::App& app);
void add_logprobs_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_sft_command(CLI::App& app);
void add_train_command(CLI::App& app);
void add_eval_command(CLI::App& app);
void add_link_emulator_command(CLI::App& app);
void add_coordinator_command(CLI::App& app);
void add_node_command(CLI::App& app);
void add_demo_command(CLI::App& app);
void add_report_command(CLI::App& app);
void add_ca_command(CLI::App& app);
void add_plan_command(CLI::App& app);
void add_merge_command(CLI::App& app);

}  // namespace meshrl::cli
