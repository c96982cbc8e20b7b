// Config field tables. See config_fields.h.
#include "core/config_fields.h"

#include <charconv>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace meshrl::config {

using nlohmann::json;

namespace {

// The value of a numeric field as it would be written, for "got ..." in messages.
std::string shown_number(const FieldRef& f) {
  return std::visit(
      [](auto* p) -> std::string {
        using T = std::remove_pointer_t<decltype(p)>;
        if constexpr (std::is_same_v<T, double>) return format_number(*p);
        else if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) return std::to_string(*p);
        else return "";
      },
      f);
}

std::optional<double> numeric_value(const FieldRef& f) {
  return std::visit(
      [](auto* p) -> std::optional<double> {
        using T = std::remove_pointer_t<decltype(p)>;
        if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) return static_cast<double>(*p);
        else return std::nullopt;
      },
      f);
}

}  // namespace

namespace {
Range range_of(double lo, bool lo_open, double hi, bool hi_open) {
  Range r;
  r.lo = lo;
  r.lo_open = lo_open;
  r.hi = hi;
  r.hi_open = hi_open;
  return r;
}
constexpr double kInf = std::numeric_limits<double>::infinity();
}  // namespace

Range closed(double lo, double hi) { return range_of(lo, false, hi, false); }
Range open(double lo, double hi) { return range_of(lo, true, hi, true); }
Range open_closed(double lo, double hi) { return range_of(lo, true, hi, false); }
Range closed_open(double lo, double hi) { return range_of(lo, false, hi, true); }
Range at_least(double lo) { return range_of(lo, false, kInf, false); }
Range above(double lo) { return range_of(lo, true, kInf, false); }

bool Range::contains(double v) const {
  if (lo_open ? !(v > lo) : !(v >= lo)) return false;
  if (hi_open ? !(v < hi) : !(v <= hi)) return false;
  return true;
}

std::string Range::describe() const {
  if (!wording.empty()) return wording;
  std::string s;
  const bool has_lo = std::isfinite(lo), has_hi = std::isfinite(hi);
  if (has_lo && has_hi) {
    s = std::string("in ") + (lo_open ? "(" : "[") + format_number(lo) + ", " + format_number(hi) + (hi_open ? ")" : "]");
  } else if (has_lo) {
    s = (lo_open ? "> " : ">= ") + format_number(lo);
  } else if (has_hi) {
    s = (hi_open ? "< " : "<= ") + format_number(hi);
  } else {
    s = "a finite number";
  }
  return note.empty() ? s : s + " " + note;
}

Field* Section::find(std::string_view key) {
  for (Field& f : fields)
    if (f.key == key) return &f;
  return nullptr;
}

const Field* Section::find(std::string_view key) const { return const_cast<Section*>(this)->find(key); }

bool Section::has_table(std::string_view prefix) const {
  for (const Field& f : fields)
    if (f.key.size() > prefix.size() && f.key.compare(0, prefix.size(), prefix) == 0 && f.key[prefix.size()] == '.') return true;
  return false;
}

std::string Section::unknown_key_hint() const {
  if (!unknown_hint.empty()) return unknown_hint;
  std::string s;
  for (const Field& f : fields) s += (s.empty() ? "" : ", ") + f.key;
  return "; keys are " + s;
}

std::string Scope::where(Position at) const {
  std::string s = source;
  if (at.line > 0) s += ":" + std::to_string(at.line) + ":" + std::to_string(at.column);
  s += ":";
  if (!section.empty()) s += " [" + section + "]";
  return s;
}

std::string Scope::name(std::string_view key, Position at) const { return where(at) + " " + std::string(key); }

Status set_from_text(const FieldRef& field, const std::string& text, const std::string& name) {
  auto wrong = [&](const char* expected) {
    return invalid_argument(name + " must be " + expected + ", got '" + clip_text(text) + "'");
  };
  return std::visit(
      [&](auto* p) -> Status {
        using T = std::remove_pointer_t<decltype(p)>;
        if constexpr (std::is_same_v<T, int> || std::is_same_v<T, int64_t> || std::is_same_v<T, uint64_t>) {
          T v{};
          auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
          const char* expected = std::is_same_v<T, uint64_t> ? "a non-negative integer" : "an integer";
          if (ec == std::errc::result_out_of_range && end == text.data() + text.size() && std::is_same_v<T, int>)
            return wrong("a 32-bit integer");
          if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return wrong(expected);
          if constexpr (std::is_same_v<T, uint64_t>)
            if (v > uint64_t(INT64_MAX)) return wrong("an integer below 2^63");  // TOML integers are signed 64-bit
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
        } else if constexpr (std::is_same_v<T, std::string>) {
          *p = text;
        } else {
          // A JSON array of strings, or one bare string meaning a one-element list.
          const json v = json::parse(text, nullptr, /*allow_exceptions=*/false);
          if (v.is_discarded() || !v.is_array()) {
            *p = {text};
            return Status::ok();
          }
          std::vector<std::string> out;
          for (const json& e : v) {
            if (!e.is_string()) return wrong("a JSON array of strings, e.g. [\"python3\", \"verify.py\"]");
            out.push_back(e.get<std::string>());
          }
          *p = std::move(out);
        }
        return Status::ok();
      },
      field);
}

Status check_field(const Field& f, const Scope& scope) {
  if (f.checked_when && !f.checked_when()) return Status::ok();
  if (f.range) {
    const std::optional<double> v = numeric_value(f.ref);
    if (v && !f.range->contains(*v))
      return invalid_argument(scope.name(f.key) + " must be " + f.range->describe() + ", got " + shown_number(f.ref));
  }
  if (!f.one_of.empty()) {
    if (const auto* p = std::get_if<std::string*>(&f.ref)) {
      bool known = false;
      for (const std::string& v : f.one_of) known = known || v == **p;
      if (!known) return invalid_argument(scope.name(f.key) + " must be " + join_or(f.one_of) + ", got \"" + clip_text(**p) + "\"");
    }
  }
  return Status::ok();
}

Status check_fields(const Section& section, const Scope& scope) {
  for (const Field& f : section.fields) MESHRL_RETURN_IF_ERROR(check_field(f, scope));
  return Status::ok();
}

json to_json(const Section& section) {
  json j = json::object();
  for (const Field& f : section.fields) {
    json* slot = &j;
    size_t from = 0;
    for (size_t dot; (dot = f.key.find('.', from)) != std::string::npos; from = dot + 1) slot = &(*slot)[f.key.substr(from, dot - from)];
    std::visit([&](auto* p) { (*slot)[f.key.substr(from)] = *p; }, f.ref);
  }
  return j;
}

std::string join_or(const std::vector<std::string>& items) {
  std::string s;
  for (size_t i = 0; i < items.size(); ++i) s += (i == 0 ? "" : i + 1 == items.size() ? " or " : ", ") + items[i];
  return s;
}

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

std::string format_number(double v) {
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.0f", v);
    return buf;
  }
  return format_double(v);
}

std::string clip_text(std::string s) {
  for (char& ch : s)
    if (ch == '\n') ch = ' ';
  return s.size() > 40 ? s.substr(0, 37) + "..." : s;
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

}  // namespace meshrl::config
