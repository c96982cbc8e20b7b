// meshrl: one binary, many subcommands (see `meshrl --help`).
#include <cstdio>
#include <exception>

#include "cli/blas_kernels.h"
#include "cli/commands.h"
#include "cli/malloc_tuning.h"
#include "cli/terminal.h"
#include "core/status.h"

int main(int argc, char** argv) {
  meshrl::cli::reexec_with_better_blas_kernels(argv);
  meshrl::cli::tune_malloc_for_training();
  CLI::App app{"meshrl: reinforcement-learning post-training on a mesh of ordinary machines"};
  app.require_subcommand(1);
  meshrl::cli::add_generate_command(app);
  meshrl::cli::add_logprobs_command(app);
  meshrl::cli::add_bench_command(app);
  meshrl::cli::add_sft_command(app);
  meshrl::cli::add_train_command(app);
  meshrl::cli::add_eval_command(app);
  meshrl::cli::add_link_emulator_command(app);
  meshrl::cli::add_coordinator_command(app);
  meshrl::cli::add_node_command(app);
  meshrl::cli::add_demo_command(app);
  meshrl::cli::add_report_command(app);
  meshrl::cli::add_ca_command(app);
  meshrl::cli::add_plan_command(app);
  meshrl::cli::add_merge_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const meshrl::StatusError& e) {
    meshrl::cli::Terminal::get().end_bar();
    meshrl::cli::log_error(e.what());
    return 1;
  } catch (const std::exception& e) {
    meshrl::cli::Terminal::get().end_bar();
    meshrl::cli::log_error(std::string("error: ") + e.what());
    return 1;
  }
  return 0;
}
