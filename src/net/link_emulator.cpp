#include "net/link_emulator.h"

#include "core/check.h"

namespace meshrl::net {

Result<std::unique_ptr<LinkEmulator>> LinkEmulator::start(const std::vector<LinkSpec>& specs) {
  std::unique_ptr<LinkEmulator> e(new LinkEmulator());
  for (const LinkSpec& s : specs) {
    if (s.name.empty()) return invalid_argument("[link emulator] a link has an empty name");
    if (e->has(s.name)) return invalid_argument("[link emulator] two links are named '" + s.name + "'");
    auto p = LinkProxy::start(s);
    if (!p.is_ok()) return p.status();  // e's destructor stops the links already started
    e->links_.push_back(std::move(p).value());
  }
  return e;
}

LinkEmulator::~LinkEmulator() { stop(); }

std::vector<std::string> LinkEmulator::names() const {
  std::vector<std::string> out;
  for (const auto& l : links_) out.push_back(l->spec().name);
  return out;
}

bool LinkEmulator::has(const std::string& name) const {
  for (const auto& l : links_)
    if (l->spec().name == name) return true;
  return false;
}

LinkProxy& LinkEmulator::link(const std::string& name) const {
  LinkProxy* found = nullptr;
  for (const auto& l : links_)
    if (l->spec().name == name) found = l.get();
  MESHRL_CHECK(found, "[link emulator] no link named '" << name << "'");
  return *found;
}

uint16_t LinkEmulator::port(const std::string& name) const { return link(name).port(); }
const LinkSpec& LinkEmulator::spec(const std::string& name) const { return link(name).spec(); }
void LinkEmulator::set_partitioned(const std::string& name, bool on) { link(name).set_partitioned(on); }
LinkStats LinkEmulator::stats(const std::string& name) const { return link(name).stats(); }

void LinkEmulator::stop() {
  for (auto& l : links_) l->stop();
}

}  // namespace meshrl::net
