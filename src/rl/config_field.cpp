// Typed config fields. See config_field.h.
#include "rl/config_field.h"

#include <charconv>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include <nlohmann/json.hpp>

namespace meshrl::rl {

using nlohmann::json;

std::string format_double(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  // Shortest form that reads back exactly, for messages and the effective config.
  for (int p = 1; p <= 17; ++p) {
    char b[64];
    std::snprintf(b, sizeof b, "%.*g", p, v);
    if (std::strtod(b, nullptr) == v) return b;
  }
  return buf;
}

bool is_valid_utf8(const std::string& s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  for (size_t i = 0; i < n;) {
    const unsigned c = p[i];
    size_t len;
    unsigned cp;
    if (c < 0x80) { ++i; continue; }
    if (c >= 0xC2 && c <= 0xDF) len = 2, cp = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF) len = 3, cp = c & 0x0F;
    else if (c >= 0xF0 && c <= 0xF4) len = 4, cp = c & 0x07;
    else return false;
    if (i + len > n) return false;
    for (size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

std::string clip_text(std::string s) {
  for (char& ch : s)
    if (ch == '\n') ch = ' ';
  return s.size() > 40 ? s.substr(0, 37) + "..." : s;
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

Status set_field_from_toml(FieldRef field, const toml::node& n, const std::string& where) {
  auto wrong = [&](const char* expected) {
    return invalid_argument(where + " must be " + expected + ", got " + toml_type_name(n) + " " + toml_shown(n));
  };
  return std::visit(
      [&](auto* p) -> Status {
        using T = std::remove_pointer_t<decltype(p)>;
        if constexpr (std::is_same_v<T, int64_t>) {
          if (!n.is_integer()) return wrong("an integer");
          *p = n.as_integer()->get();
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
        } else {
          if (!n.is_string()) return wrong("a string");
          *p = n.as_string()->get();
        }
        return Status::ok();
      },
      field);
}

Status set_field_from_text(FieldRef field, const std::string& text, const std::string& where) {
  auto wrong = [&](const char* expected) {
    return invalid_argument(where + " must be " + expected + ", got '" + clip_text(text) + "'");
  };
  return std::visit(
      [&](auto* p) -> Status {
        using T = std::remove_pointer_t<decltype(p)>;
        if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, uint64_t>) {
          T v{};
          auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
          if (ec != std::errc() || end != text.data() + text.size() || text.empty())
            return wrong(std::is_same_v<T, int64_t> ? "an integer" : "a non-negative integer");
          if constexpr (std::is_same_v<T, uint64_t>)
            if (v > uint64_t(INT64_MAX)) return wrong("an integer below 2^63");
          *p = v;
        } else if constexpr (std::is_same_v<T, double>) {
          char* end = nullptr;
          const double v = std::strtod(text.c_str(), &end);
          if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(v)) return wrong("a finite number");
          *p = v;
        } else if constexpr (std::is_same_v<T, bool>) {
          if (text == "true") *p = true;
          else if (text == "false") *p = false;
          else return wrong("true or false");
        } else {
          *p = text;
        }
        return Status::ok();
      },
      field);
}

}  // namespace meshrl::rl
