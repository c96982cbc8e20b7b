#include "cli/output_options.h"

#include "cli/terminal.h"

namespace meshrl::cli {

void add_output_options(CLI::App* cmd, OutputOptions& o, bool with_json) {
  cmd->add_flag("-q,--quiet", o.quiet, "print only errors and the final result");
  if (with_json) cmd->add_flag("--json", o.json, "print only errors (stderr) and the result as one JSON object (stdout)");
}

void apply_output_options(const OutputOptions& o, const std::string& log_name) {
  Terminal& t = Terminal::get();
  t.set_verbosity(o.json ? Verbosity::kJson : o.quiet ? Verbosity::kQuiet : Verbosity::kNormal);
  t.set_name(log_name);
}

}  // namespace meshrl::cli
