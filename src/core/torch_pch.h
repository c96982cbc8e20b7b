// The one precompiled header shared by every target that uses libtorch (meshrl_use_torch in
// CMakeLists.txt). Parsing torch/torch.h costs ~20 s per file; precompiled once, it costs ~1 s.
#pragma once
#include <torch/torch.h>

#include <map>
#include <memory>
#include <string>
#include <vector>
