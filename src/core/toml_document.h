// TOML documents for the config field tables (core/config_fields.h): the one parse of a config
// file's text, reading its sections into field tables, and writing the effective config back.
// toml++ does the parsing and formatting; knows nothing about which sections or keys exist.
//
// Every error is one line naming the file, and where a value or key of the file is at fault its
// line and column:
//   "run.toml:2:9: Error while parsing value: could not determine value type"   (TOML syntax)
//   "run.toml:2:1: [grpo] unknown key 'group_sise'; see configs/README.md"
//   "run.toml:2:6: [grpo] lr must be a number, got string \"fast\""
//   "run.toml:1:1: unknown section [gpro]; sections are model, task, sft, ..."
#pragma once

#include <string>
#include <vector>

#include <toml++/toml.h>

#include "core/config_fields.h"
#include "core/status.h"

namespace meshrl::config {

// TOML text -> table. Syntax errors read "<source>:<line>:<column>: <what toml++ says>".
Result<toml::table> parse_toml(const std::string& text, const std::string& source);

// Reads every key of `table` into `section`: a sub-table as dotted keys ("arithmetic.digits"),
// each value type-checked by its field. Unknown keys are errors, and so is a required key the
// table lacks ("net.toml: [cities.paris] uplink_mbps is missing"). Ranges are not checked here.
// `keys_read`, when given, receives the keys the table set (a value given empty is not absent).
Status read_section(const toml::table& table, Section& section, const Scope& scope,
                    std::vector<std::string>* keys_read = nullptr);

// One entry of a table into `section`: a field's value, or a sub-table of its dotted keys; an
// unknown key is an error. For a table some of whose entries the caller reads itself (a topology
// file's [cities.NAME] tables); read_section is this for every entry, then the required keys.
Status read_key(Section& section, const std::string& key, const toml::node& value, Position key_at, const Scope& scope);

// Reads a whole document: each top-level table into the section of its name, and top-level keys
// into the section named "" when there is one (else they are errors, as are unknown sections).
Status read_sections(const toml::table& root, std::vector<Section>& sections, const std::string& source);

// The one path of a config file: parse_toml, read_sections, then the command line's
// `--section.key=value` overrides (core/config_overrides.h). Range checks are the caller's
// (check_fields and its relations between keys), once, after the file and the overrides.
Status read_config(const std::string& text, const std::string& source, const std::vector<std::string>& overrides,
                   std::vector<Section>& sections);

// One TOML value into one field: "<name> must be an integer, got string \"3\"".
Status set_from_toml(const FieldRef& field, const toml::node& value, const std::string& name);

// Writing back. Two layouts, each pinned by files already written (a manifest's run_config_toml
// and a run directory's config.toml are hashed, and a resumed run compares them byte for byte):
//   to_toml_table: a table for toml++'s formatter (keys sorted, dotted keys as sub-tables, doubles
//     with 17 significant digits);
//   section_lines: "[name]", then "key = value" per field in table order, doubles in their
//     shortest exact form (format_double).
// Both read back through read_section to the same values.
toml::table to_toml_table(const Section& section);
std::string section_lines(const Section& section);

// For messages: "integer", "float", "string", ...; the value as written (strings JSON-quoted), clipped.
std::string toml_type_name(const toml::node& n);
std::string toml_shown(const toml::node& n);
Position position_of(const toml::source_region& region);

}  // namespace meshrl::config
