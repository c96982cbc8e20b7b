#include "web/embedded_assets.h"

namespace meshrl::web {

// Defined in the generated embedded_assets_data.cpp (build directory).
extern const EmbeddedAsset kEmbeddedAssets[];
extern const size_t kEmbeddedAssetCount;

const EmbeddedAsset* find_asset(std::string_view name) {
  for (size_t i = 0; i < kEmbeddedAssetCount; ++i)
    if (name == kEmbeddedAssets[i].name) return &kEmbeddedAssets[i];
  return nullptr;
}

}  // namespace meshrl::web
