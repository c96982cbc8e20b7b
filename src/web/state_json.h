// Renders a RunSnapshot as the JSON the dashboard polls (/api/state) and `meshrl report` embeds.
// The shape is documented by the code below and read by web/src/dashboard.js.
#pragma once

#include <nlohmann/json.hpp>

#include "web/run_snapshot.h"

namespace meshrl::web {

nlohmann::json state_json(const RunSnapshot& s);
nlohmann::json version_point_json(const VersionPoint& p);

}  // namespace meshrl::web
