// Config field tables: a section of a config file as a list of fields, each a key with its typed
// destination, its range or allowed values, and one line of help. One table per section drives
// every path a value takes: reading a TOML file (core/toml_document.h), `--section.key=value`
// overrides (core/config_overrides.h), the range checks below, and writing the effective config
// back (TOML and JSON), so a key cannot be readable but not writable, or checked on one path and
// not on another. The components own their tables (rl/run_config.cpp, mesh/mesh_config.cpp,
// tasks/task_config.cpp, net/topology.cpp, mesh/node_local_config.cpp); this module knows nothing
// about which sections or keys exist.
//
// A table holds pointers into one config struct: build it from the struct it reads or writes, use
// it while that struct lives, and build a new one for a copy.
//
// Messages name the source, the section and the key, and say what was expected and what arrived:
//   "run.toml: [grpo] group_size must be >= 2, got 1"
//   "run.toml:3:6: [grpo] lr must be a number, got string \"fast\""     (a value read from the file)
//   "run.toml: [grpo] steps (command line) must be an integer, got 'abc'"
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace meshrl::config {

// Where a field's value lives. int is for the task keys that are 32-bit in their struct.
using FieldRef = std::variant<int*, int64_t*, uint64_t*, double*, bool*, std::string*, std::vector<std::string>*>;

// A numeric range. Messages describe it as "in [lo, hi]", "in (lo, hi]", ">= lo", "> lo" or
// "<= hi", then `note` ("(0 = off)"); `wording`, when set, replaces that description where a key
// is documented in other words ("> 0 (and at most 10)").
struct Range {
  double lo = -std::numeric_limits<double>::infinity();
  bool lo_open = false;
  double hi = std::numeric_limits<double>::infinity();
  bool hi_open = false;
  std::string note;
  std::string wording;

  bool contains(double v) const;
  std::string describe() const;
  Range with_note(std::string n) && { note = std::move(n); return std::move(*this); }
  Range worded(std::string w) && { wording = std::move(w); return std::move(*this); }
};
Range closed(double lo, double hi);       // [lo, hi]
Range open(double lo, double hi);         // (lo, hi)
Range open_closed(double lo, double hi);  // (lo, hi]
Range closed_open(double lo, double hi);  // [lo, hi)
Range at_least(double lo);                // >= lo
Range above(double lo);                   // > lo

struct Field {
  Field(std::string key_, FieldRef ref_, std::string help_ = "") : key(std::move(key_)), ref(ref_), help(std::move(help_)) {}

  std::string key;   // within its section; dotted for a nested table: "arithmetic.digits"
  FieldRef ref;
  std::string help;  // one line: what the key means (listings, --help)
  std::optional<Range> range;        // numeric fields only
  std::vector<std::string> one_of;   // a string field's allowed values; empty = any
  bool required = false;             // reading a section fails when the file lacks the key
  std::function<bool()> checked_when;  // range and one_of apply only while this holds (unset: always)

  Field in(Range r) && { range = std::move(r); return std::move(*this); }
  Field values(std::vector<std::string> v) && { one_of = std::move(v); return std::move(*this); }
  Field must_be_given() && { required = true; return std::move(*this); }
  Field when(std::function<bool()> f) && { checked_when = std::move(f); return std::move(*this); }
};

struct Section {
  std::string name;           // "grpo" -> [grpo]; "cities.dublin"; "" = keys outside any [section]
  std::vector<Field> fields;  // in the order they are written back and checked
  // Follows "unknown key 'x'" in messages: "; see configs/README.md". Empty: "; keys are a, b, c".
  std::string unknown_hint;

  Field* find(std::string_view key);
  const Field* find(std::string_view key) const;
  // Whether some key lies under `prefix.` (a nested table such as "arithmetic").
  bool has_table(std::string_view prefix) const;
  std::string unknown_key_hint() const;
};

// A line and column in a file (1-based); line 0 = not from a file (a command line, a JSON object).
struct Position {
  uint32_t line = 0;
  uint32_t column = 0;
};

// Where keys are, for messages: source "run.toml" and section "grpo" give "run.toml: [grpo] lr",
// or "run.toml:3:6: [grpo] lr" with a position; section "" gives "net.toml: seed".
struct Scope {
  std::string source;
  std::string section;

  std::string where(Position at = {}) const;                          // "run.toml:3:6: [grpo]"
  std::string name(std::string_view key, Position at = {}) const;     // "run.toml:3:6: [grpo] lr"
};

// Sets a field from command-line text, typed by the field: integers and numbers in full (no
// trailing bytes), true/false, a string as given, a list as a JSON array of strings or one bare
// string (a one-element list). `name` starts the message: "<name> must be an integer, got 'abc'".
Status set_from_text(const FieldRef& field, const std::string& text, const std::string& name);

// The range and allowed values of one field / of every field of a section, in table order:
// "<scope name of key> must be in [1, 1024], got 0" / "must be cpu, cuda, mps or auto, got \"tpu\"".
Status check_field(const Field& field, const Scope& scope);
Status check_fields(const Section& section, const Scope& scope);

// Every field as JSON, dotted keys as nested objects (summaries, manifests, hashes of a config).
nlohmann::json to_json(const Section& section);

// "a, b or c" (allowed values, key lists).
std::string join_or(const std::vector<std::string>& items);
// Shortest decimal form that reads back to exactly `v` ("2e+01" for 20; written configs).
std::string format_double(double v);
// For messages: a whole number as users write it ("20", "1000000"), anything else as format_double.
std::string format_number(double v);
// One line, at most 40 characters, for quoting user input in a message.
std::string clip_text(std::string s);
// Whether `s` is well-formed UTF-8 (no overlong forms, surrogates or code points past U+10FFFF).
// TOML files must be; command-line overrides are checked with it, so every string a config holds
// can be written back to TOML and read again unchanged.
bool is_valid_utf8(const std::string& s);

}  // namespace meshrl::config
