// Command-line overrides of config field tables (core/config_fields.h): "--section.key=value",
// "section.key=value", or "--section.key" followed by the value as the next argument. Each is
// typed by the field it sets; an unknown section or key is an error naming it. Knows nothing
// about which sections exist.
//   "command line: unknown section [nope] in '--nope.x=1'; sections are model, task, ..."
//   "run.toml: [grpo] unknown key 'nope' (command line); see configs/README.md"
//   "run.toml: [grpo] steps (command line) must be an integer, got 'abc'"
#pragma once

#include <string>
#include <vector>

#include "core/config_fields.h"
#include "core/status.h"

namespace meshrl::config {

struct Override {
  std::string arg;      // as given, for messages: "--grpo.lr=1e-4", or "--grpo.lr" for a value given apart
  std::string section;  // "grpo"
  std::string key;      // within the section, dotted for a nested table: "arithmetic.digits"
  std::string value;    // the text after '=' (or the next argument)

  std::string dotted() const { return section + "." + key; }  // "grpo.lr"
};

// Splits the arguments. Every argument must be valid UTF-8 (a value written back to TOML must
// read back unchanged), and each must name a section and a key.
Result<std::vector<Override>> parse_overrides(const std::vector<std::string>& args);

// Sets each override's field, in order (a later one wins). `source` names the config in messages.
// Ranges are not checked here: one override alone may leave a config inconsistent that the next
// one completes, so the caller checks once, after all of them.
Status apply_overrides(const std::vector<Override>& overrides, std::vector<Section>& sections, const std::string& source);

}  // namespace meshrl::config
