// Command-line overrides. See config_overrides.h.
#include "core/config_overrides.h"

namespace meshrl::config {

Result<std::vector<Override>> parse_overrides(const std::vector<std::string>& args) {
  // Every argument, values given as a separate argument included (fuzz_run_file found one that
  // came back changed after a TOML round trip).
  for (const std::string& a : args)
    if (!is_valid_utf8(a)) return invalid_argument("command line: an override is not valid UTF-8");
  std::vector<Override> out;
  for (size_t i = 0; i < args.size(); ++i) {
    Override o;
    o.arg = args[i];
    std::string a = args[i];
    if (a.rfind("--", 0) == 0) a = a.substr(2);
    std::string key;
    const size_t eq = a.find('=');
    if (eq != std::string::npos) {
      key = a.substr(0, eq);
      o.value = a.substr(eq + 1);
    } else if (i + 1 < args.size() && args[i + 1].rfind("--", 0) != 0) {
      key = a;
      o.value = args[++i];
    } else {
      return invalid_argument("command line: '" + clip_text(args[i]) + "' is not an override; write --section.key=value");
    }
    const size_t dot = key.find('.');
    if (dot == std::string::npos || dot == 0 || dot + 1 == key.size())
      return invalid_argument("command line: '" + clip_text(o.arg) + "' is not an override; write --section.key=value");
    o.section = key.substr(0, dot);
    o.key = key.substr(dot + 1);
    out.push_back(std::move(o));
  }
  return out;
}

Status apply_overrides(const std::vector<Override>& overrides, std::vector<Section>& sections, const std::string& source) {
  for (const Override& o : overrides) {
    Section* s = nullptr;
    for (Section& x : sections)
      if (!x.name.empty() && x.name == o.section) s = &x;
    if (!s) {
      std::vector<std::string> names;
      for (const Section& x : sections)
        if (!x.name.empty()) names.push_back(x.name);
      std::string list;
      for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
      return invalid_argument("command line: unknown section [" + clip_text(o.section) + "] in '" + clip_text(o.arg) + "'; sections are " + list);
    }
    const Scope scope{source, s->name};
    Field* f = s->find(o.key);
    if (!f) {
      if (s->has_table(o.key)) return invalid_argument(scope.name(o.key) + " (command line) is a table; set one of its keys");
      return invalid_argument(scope.where() + " unknown key '" + clip_text(o.key) + "' (command line)" + s->unknown_key_hint());
    }
    MESHRL_RETURN_IF_ERROR(set_from_text(f->ref, o.value, scope.name(o.key) + " (command line)"));
  }
  return Status::ok();
}

}  // namespace meshrl::config
