// --quiet and --json, the same on every subcommand that has a final result (terminal.h).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace meshrl::cli {

struct OutputOptions {
  bool quiet = false;  // only errors and the final result
  bool json = false;   // only errors (stderr) and one JSON object (stdout)
};

// Adds --quiet (-q) and, when with_json, --json to cmd.
void add_output_options(CLI::App* cmd, OutputOptions& o, bool with_json = true);

// Sets the process's terminal verbosity and the name its log lines carry.
void apply_output_options(const OutputOptions& o, const std::string& log_name);

}  // namespace meshrl::cli
