// Typed config fields: one key's destination (int64, uint64, double, bool or string) and the two
// ways a value reaches it — a TOML value from a run file, or text from a `--section.key=value`
// override — with the type checks and one-line messages every run-file section shares
// ([model] .. [checkpoint] in run_config.cpp, [mesh] in mesh/mesh_config.cpp).
// Knows nothing about which keys exist or their ranges.
#pragma once

#include <cstdint>
#include <string>
#include <variant>

#include <toml++/toml.h>

#include "core/status.h"

namespace meshrl::rl {

using FieldRef = std::variant<int64_t*, uint64_t*, double*, bool*, std::string*>;

// `where` names the key in messages ("run.toml: [grpo] lr"); errors read
// "<where> must be a number, got string \"fast\"".
Status set_field_from_toml(FieldRef field, const toml::node& value, const std::string& where);
// Errors read "<where> must be a finite number, got 'fast'".
Status set_field_from_text(FieldRef field, const std::string& text, const std::string& where);

// Whether `s` is well-formed UTF-8 (no overlong forms, surrogates or code points past U+10FFFF).
// TOML files must be; command-line overrides are checked with it, so every string a run config
// holds can be written back to TOML (the manifest) and read again unchanged.
bool is_valid_utf8(const std::string& s);

// Shortest decimal form that reads back to exactly `v` (messages and written configs).
std::string format_double(double v);
// One line, at most 40 characters, for quoting user input in a message.
std::string clip_text(std::string s);
// "integer", "float", "string", ... for messages.
std::string toml_type_name(const toml::node& n);
// The value as written (strings JSON-quoted), clipped.
std::string toml_shown(const toml::node& n);

}  // namespace meshrl::rl
