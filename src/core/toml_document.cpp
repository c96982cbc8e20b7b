// TOML documents for config field tables. See toml_document.h.
#include "core/toml_document.h"

#include <cmath>
#include <set>
#include <sstream>

#include "core/config_overrides.h"

namespace meshrl::config {
namespace {

using nlohmann::json;

// One entry of a table: a field's value, a sub-table of dotted keys, or an unknown key.
Status read_entry(Section& s, const std::string& key, const toml::node& v, Position key_at, const Scope& scope,
                  std::set<std::string>& seen) {
  if (Field* f = s.find(key)) {
    MESHRL_RETURN_IF_ERROR(set_from_toml(f->ref, v, scope.name(key, position_of(v.source()))));
    seen.insert(key);
    return Status::ok();
  }
  if (s.has_table(key)) {
    const toml::table* t = v.as_table();
    if (!t)
      return invalid_argument(scope.name(key, position_of(v.source())) + " must be a table, got " + toml_type_name(v) + " " +
                              toml_shown(v));
    for (auto&& [k, sub] : *t)
      MESHRL_RETURN_IF_ERROR(read_entry(s, key + "." + std::string(k.str()), sub, position_of(k.source()), scope, seen));
    return Status::ok();
  }
  return invalid_argument(scope.where(key_at) + " unknown key '" + clip_text(key) + "'" + s.unknown_key_hint());
}

Status check_required(const Section& s, const std::set<std::string>& seen, const Scope& scope) {
  for (const Field& f : s.fields)
    if (f.required && !seen.count(f.key)) return invalid_argument(scope.name(f.key) + " is missing");
  return Status::ok();
}

}  // namespace

Position position_of(const toml::source_region& region) { return Position{region.begin.line, region.begin.column}; }

Result<toml::table> parse_toml(const std::string& text, const std::string& source) {
  try {
    return toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    return invalid_argument(source + ":" + std::to_string(e.source().begin.line) + ":" + std::to_string(e.source().begin.column) +
                            ": " + std::string(e.description()));
  }
}

Status read_key(Section& section, const std::string& key, const toml::node& value, Position key_at, const Scope& scope) {
  std::set<std::string> seen;
  return read_entry(section, key, value, key_at, scope, seen);
}

Status read_section(const toml::table& table, Section& section, const Scope& scope, std::vector<std::string>* keys_read) {
  std::set<std::string> seen;
  for (auto&& [k, v] : table) MESHRL_RETURN_IF_ERROR(read_entry(section, std::string(k.str()), v, position_of(k.source()), scope, seen));
  if (keys_read) keys_read->assign(seen.begin(), seen.end());
  return check_required(section, seen, scope);
}

Status read_sections(const toml::table& root, std::vector<Section>& sections, const std::string& source) {
  Section* top = nullptr;
  for (Section& s : sections)
    if (s.name.empty()) top = &s;
  const Scope top_scope{source, ""};
  std::set<std::string> top_seen;
  for (auto&& [k, v] : root) {
    const std::string key(k.str());
    const Position at = position_of(k.source());
    Section* named = nullptr;
    for (Section& s : sections)
      if (!s.name.empty() && s.name == key) named = &s;
    if (named) {
      if (!v.is_table()) return invalid_argument(top_scope.where(at) + " '" + key + "' must be a [section] table, got " + toml_type_name(v));
      MESHRL_RETURN_IF_ERROR(read_section(*v.as_table(), *named, Scope{source, key}));
    } else if (top) {
      MESHRL_RETURN_IF_ERROR(read_entry(*top, key, v, at, top_scope, top_seen));
    } else if (v.is_table()) {
      std::string list;
      for (const Section& s : sections) list += (list.empty() ? "" : ", ") + s.name;
      return invalid_argument(top_scope.where(at) + " unknown section [" + clip_text(key) + "]; sections are " + list);
    } else {
      return invalid_argument(top_scope.where(at) + " unknown top-level key '" + clip_text(key) + "'; every key belongs in a [section]");
    }
  }
  return top ? check_required(*top, top_seen, top_scope) : Status::ok();
}

Status read_config(const std::string& text, const std::string& source, const std::vector<std::string>& overrides,
                   std::vector<Section>& sections) {
  MESHRL_ASSIGN_OR_RETURN(toml::table root, parse_toml(text, source));
  MESHRL_RETURN_IF_ERROR(read_sections(root, sections, source));
  MESHRL_ASSIGN_OR_RETURN(std::vector<Override> parsed, parse_overrides(overrides));
  return apply_overrides(parsed, sections, source);
}

Status set_from_toml(const FieldRef& field, const toml::node& n, const std::string& name) {
  auto wrong = [&](const char* expected) {
    return invalid_argument(name + " must be " + expected + ", got " + toml_type_name(n) + " " + toml_shown(n));
  };
  return std::visit(
      [&](auto* p) -> Status {
        using T = std::remove_pointer_t<decltype(p)>;
        if constexpr (std::is_same_v<T, int64_t>) {
          if (!n.is_integer()) return wrong("an integer");
          *p = n.as_integer()->get();
        } else if constexpr (std::is_same_v<T, int>) {
          if (!n.is_integer()) return wrong("an integer");
          const int64_t v = n.as_integer()->get();
          if (v < INT32_MIN || v > INT32_MAX) return wrong("a 32-bit integer");
          *p = static_cast<int>(v);
        } else if constexpr (std::is_same_v<T, uint64_t>) {
          if (!n.is_integer() || n.as_integer()->get() < 0) return wrong("a non-negative integer");
          *p = static_cast<uint64_t>(n.as_integer()->get());
        } else if constexpr (std::is_same_v<T, double>) {
          double v;
          if (n.is_integer()) v = static_cast<double>(n.as_integer()->get());
          else if (n.is_floating_point()) v = n.as_floating_point()->get();
          else return wrong("a number");
          if (!std::isfinite(v)) return wrong("a finite number");
          *p = v;
        } else if constexpr (std::is_same_v<T, bool>) {
          if (!n.is_boolean()) return wrong("true or false");
          *p = n.as_boolean()->get();
        } else if constexpr (std::is_same_v<T, std::string>) {
          if (!n.is_string()) return wrong("a string");
          *p = n.as_string()->get();
        } else {
          const toml::array* a = n.as_array();
          if (!a) return wrong("an array of strings");
          std::vector<std::string> out;
          for (const toml::node& e : *a) {
            if (!e.is_string()) return wrong("an array of strings");
            out.push_back(e.as_string()->get());
          }
          *p = std::move(out);
        }
        return Status::ok();
      },
      field);
}

toml::table to_toml_table(const Section& section) {
  toml::table root;
  for (const Field& f : section.fields) {
    toml::table* t = &root;
    size_t from = 0;
    for (size_t dot; (dot = f.key.find('.', from)) != std::string::npos; from = dot + 1) {
      const std::string part = f.key.substr(from, dot - from);
      if (!t->contains(part)) t->insert(part, toml::table{});
      t = t->get_as<toml::table>(part);
    }
    const std::string leaf = f.key.substr(from);
    std::visit(
        [&](auto* p) {
          using T = std::remove_pointer_t<decltype(p)>;
          if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, double> || std::is_same_v<T, std::string>) {
            t->insert_or_assign(leaf, *p);
          } else if constexpr (std::is_integral_v<T>) {
            t->insert_or_assign(leaf, static_cast<int64_t>(*p));
          } else {
            toml::array a;
            for (const std::string& s : *p) a.push_back(s);
            t->insert_or_assign(leaf, std::move(a));
          }
        },
        f.ref);
  }
  return root;
}

std::string section_lines(const Section& section) {
  std::ostringstream os;
  os << "[" << section.name << "]\n";
  for (const Field& f : section.fields) {
    os << f.key << " = ";
    std::visit(
        [&](auto* p) {
          using T = std::remove_pointer_t<decltype(p)>;
          if constexpr (std::is_same_v<T, std::string> || std::is_same_v<T, std::vector<std::string>>) {
            os << json(*p).dump();  // JSON strings and arrays of strings are TOML basic strings and arrays
          } else if constexpr (std::is_same_v<T, bool>) {
            os << (*p ? "true" : "false");
          } else if constexpr (std::is_same_v<T, double>) {
            std::string d = format_double(*p);
            if (d.find_first_of(".eEn") == std::string::npos) d += ".0";  // "2" would read back as an integer
            os << d;
          } else {
            os << *p;
          }
        },
        f.ref);
    os << "\n";
  }
  return os.str();
}

std::string toml_type_name(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::table: return "table";
    case toml::node_type::array: return "array";
    case toml::node_type::string: return "string";
    case toml::node_type::integer: return "integer";
    case toml::node_type::floating_point: return "float";
    case toml::node_type::boolean: return "boolean";
    case toml::node_type::date: return "date";
    case toml::node_type::time: return "time";
    case toml::node_type::date_time: return "date-time";
    default: return "value";
  }
}

std::string toml_shown(const toml::node& n) {
  if (n.is_string()) return clip_text(json(n.as_string()->get()).dump(-1, ' ', false, json::error_handler_t::replace));
  std::ostringstream os;
  n.visit([&os](auto&& v) { os << v; });
  return clip_text(os.str());
}

}  // namespace meshrl::config
