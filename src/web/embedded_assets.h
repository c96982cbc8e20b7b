// The dashboard's static files (web/src/* and the chart library from web/node_modules), compiled
// into the binary by web/embed_assets.cmake so the dashboard and reports work with no internet and
// no files beside the binary.
#pragma once

#include <cstddef>
#include <string_view>

namespace meshrl::web {

struct EmbeddedAsset {
  const char* name;          // "index.html", "uPlot.iife.min.js", ...
  const char* content_type;
  const unsigned char* data;
  size_t size;

  std::string_view text() const { return {reinterpret_cast<const char*>(data), size}; }
};

// nullptr when there is no such asset.
const EmbeddedAsset* find_asset(std::string_view name);

}  // namespace meshrl::web
