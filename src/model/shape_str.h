// Tensor shapes as text for error messages: "[2, 3]" (the format torch prints), "undefined".
#pragma once

#include <torch/torch.h>

#include <string>

namespace meshrl::model {

inline std::string shape_str(c10::IntArrayRef shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

inline std::string shape_str(const torch::Tensor& t) { return t.defined() ? shape_str(t.sizes()) : "undefined"; }

}  // namespace meshrl::model
