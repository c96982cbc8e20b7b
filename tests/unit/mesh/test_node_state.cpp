// A node's saved local state (src/mesh/node_state.h): save -> load restores the error-feedback
// residual and the AdamW state bit for bit (and the next optimizer step is identical); a truncated
// or corrupt file, another run, node or parameter layout is refused with a reason naming the file.
//   build-nodestate/tests/test_mesh --gtest_filter='NodeState*'
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "core/file_io.h"
#include "mesh/node_state.h"
#include "rl/optimizer.h"

namespace meshrl::mesh {
namespace {

namespace fs = std::filesystem;

// Three parameters; "norm" never gets a gradient, so it has no AdamW moments (nullopt).
struct Toy {
  std::vector<std::pair<std::string, torch::Tensor>> params;
  std::unique_ptr<rl::Optimizer> opt;

  explicit Toy(int64_t wide = 5, double pooled_batches = 1) {
    torch::manual_seed(7);
    params = {{"w", torch::randn({wide, 3}).requires_grad_()},
              {"b", torch::randn({3}).requires_grad_()},
              {"norm", torch::ones({3}).requires_grad_()}};
    rl::OptimizerConfig oc;
    oc.schedule = {1e-2, 2, 10, 0.1};
    oc.weight_decay = 0.1;
    oc.pooled_batches = pooled_batches;
    opt = std::make_unique<rl::Optimizer>(tensors(), oc);
  }
  std::vector<torch::Tensor> tensors() const {
    std::vector<torch::Tensor> out;
    for (const auto& [n, t] : params) out.push_back(t);
    return out;
  }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& [n, t] : params) out.push_back(n);
    return out;
  }
  // One seeded step on w and b only.
  void step(int k) {
    torch::manual_seed(100 + k);
    params[0].second.mutable_grad() = torch::randn(params[0].second.sizes());
    params[1].second.mutable_grad() = torch::randn({3});
    if (!opt->pools_second_moment()) {
      opt->step();
      return;
    }
    // The pooled second moment also takes each parameter's half-batch spread (none for norm).
    opt->step({0.5 * torch::randn(params[0].second.sizes()), 0.5 * torch::randn({3}), torch::Tensor()});
  }
};

fs::path temp_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("meshrl-node-state-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  return d;
}

NodeState state_of(const Toy& toy) {
  NodeState s;
  s.run_id = "run-a";
  s.node = "paris";
  s.base_version = 4;
  s.base_hash = "0123456789abcdef0123456789abcdef";
  s.trainer_step = 12;
  s.layout = param_layout_fingerprint(toy.params);
  torch::manual_seed(3);
  s.residual = NamedTensors{{"w", "b"}, {torch::randn({5, 3}) * 1e-4, torch::randn({3}) * 1e-4}};
  s.param_names = toy.names();
  s.optimizer = toy.opt->state();
  return s;
}

NodeStateExpectation expect_of(const NodeState& s) { return {s.run_id, s.node, s.layout}; }

bool same_bits(const torch::Tensor& a, const torch::Tensor& b) {
  return a.sizes() == b.sizes() && a.scalar_type() == b.scalar_type() &&
         std::memcmp(a.contiguous().data_ptr(), b.contiguous().data_ptr(), a.numel() * a.element_size()) == 0;
}

NamedTensors exchanged(const Toy& toy) {
  NamedTensors ex;
  for (int i = 0; i < 2; ++i) {
    ex.names.push_back(toy.params[i].first);
    ex.tensors.push_back(toy.params[i].second.detach());
  }
  return ex;
}

TEST(NodeState, SaveLoadRoundTripsResidualAndOptimizerBitwise) {
  Toy a;
  for (int k = 0; k < 3; ++k) a.step(k);
  const NodeState saved = state_of(a);
  const fs::path dir = temp_dir("roundtrip");
  ASSERT_TRUE(save_node_state(dir, saved).is_ok());

  auto loaded = load_node_state(dir, expect_of(saved));
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().message();
  const NodeState& s = loaded.value();
  EXPECT_EQ(s.base_version, 4);
  EXPECT_EQ(s.base_hash, saved.base_hash);
  EXPECT_EQ(s.trainer_step, 12);
  ASSERT_EQ(s.residual.size(), 2u);
  for (size_t i = 0; i < s.residual.size(); ++i) {  // loaded in name order: b, w
    const size_t j = s.residual.names[i] == "w" ? 0 : 1;
    EXPECT_TRUE(same_bits(s.residual.tensors[i], saved.residual.tensors[j])) << s.residual.names[i];
  }

  // Into a fresh optimizer on the same parameters (as a restarted node): the same state exactly...
  Toy b;
  for (size_t i = 0; i < a.params.size(); ++i) b.params[i].second.detach().copy_(a.params[i].second.detach());
  auto fitted = fit_node_state(s, b.params, exchanged(b), dir);
  ASSERT_TRUE(fitted.is_ok()) << fitted.status().message();
  ASSERT_TRUE(b.opt->set_state(fitted.value()).is_ok());
  const rl::OptimizerState sa = a.opt->state(), sb = b.opt->state();
  EXPECT_EQ(sb.step, 3);
  ASSERT_EQ(sb.params.size(), 3u);
  EXPECT_FALSE(sb.params[2].has_value()) << "norm never had a gradient";
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(sb.params[i].has_value());
    EXPECT_EQ(sb.params[i]->step, sa.params[i]->step);
    EXPECT_TRUE(same_bits(sb.params[i]->exp_avg, sa.params[i]->exp_avg));
    EXPECT_TRUE(same_bits(sb.params[i]->exp_avg_sq, sa.params[i]->exp_avg_sq));
  }
  // ...so the next step moves both to the same bits, where a fresh optimizer (a restart without
  // the file) moves w elsewhere.
  Toy fresh;
  for (size_t i = 0; i < a.params.size(); ++i) fresh.params[i].second.detach().copy_(a.params[i].second.detach());
  a.step(3);
  b.step(3);
  fresh.step(3);
  for (size_t i = 0; i < a.params.size(); ++i) EXPECT_TRUE(same_bits(a.params[i].second, b.params[i].second)) << a.params[i].first;
  EXPECT_FALSE(same_bits(a.params[0].second, fresh.params[0].second));
  fs::remove_all(dir);
}

TEST(NodeState, SaveLoadKeepsThePooledSecondMomentsNoiseEma) {
  // A node with the pooled second moment (rl/optimizer.h) also keeps EMA(d^2): a restart that lost
  // it would divide by the plain moment until it rebuilt, so it is saved and restored bit for bit.
  Toy a(5, 4);
  for (int k = 0; k < 3; ++k) a.step(k);
  const NodeState saved = state_of(a);
  ASSERT_TRUE(saved.optimizer.params[0]->noise_sq.defined());
  const fs::path dir = temp_dir("pooled");
  ASSERT_TRUE(save_node_state(dir, saved).is_ok());
  auto loaded = load_node_state(dir, expect_of(saved));
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().message();
  Toy b(5, 4);
  for (size_t i = 0; i < a.params.size(); ++i) b.params[i].second.detach().copy_(a.params[i].second.detach());
  auto fitted = fit_node_state(loaded.value(), b.params, exchanged(b), dir);
  ASSERT_TRUE(fitted.is_ok()) << fitted.status().message();
  ASSERT_TRUE(b.opt->set_state(fitted.value()).is_ok());
  for (int i = 0; i < 2; ++i) EXPECT_TRUE(same_bits(b.opt->state().params[i]->noise_sq, a.opt->state().params[i]->noise_sq));
  a.step(3);
  b.step(3);
  for (size_t i = 0; i < a.params.size(); ++i) EXPECT_TRUE(same_bits(a.params[i].second, b.params[i].second)) << a.params[i].first;

  // A noise EMA whose shape does not fit the model is refused like a moment's.
  NodeState bad = saved;
  bad.optimizer.params[0]->noise_sq = torch::zeros({2, 2});
  ASSERT_TRUE(save_node_state(dir, bad).is_ok());
  auto reread = load_node_state(dir, expect_of(bad));
  ASSERT_TRUE(reread.is_ok()) << reread.status().message();
  const auto misfit = fit_node_state(reread.value(), b.params, exchanged(b), dir);
  ASSERT_FALSE(misfit.is_ok());
  EXPECT_NE(misfit.status().message().find("noise EMA of 'w' is [2, 2]"), std::string::npos) << misfit.status().message();
  fs::remove_all(dir);
}

TEST(NodeState, MissingFileIsNotFound) {
  const fs::path dir = temp_dir("missing");
  auto r = load_node_state(dir, {"run-a", "paris", "x"});
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
}

TEST(NodeState, CorruptTruncatedOtherRunNodeOrLayoutAreRefusedWithTheReason) {
  Toy a;
  a.step(0);
  const NodeState saved = state_of(a);
  const fs::path dir = temp_dir("refused");
  ASSERT_TRUE(save_node_state(dir, saved).is_ok());
  const fs::path file = node_state_path(dir);
  const std::string good = read_file(file).value();

  auto refused = [&](const NodeStateExpectation& e, const std::string& why) {
    auto r = load_node_state(dir, e);
    ASSERT_FALSE(r.is_ok()) << why;
    EXPECT_NE(r.status().message().find(file.string()), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find(why), std::string::npos) << r.status().message();
  };
  refused({"run-b", "paris", saved.layout}, "saved for run run-a, this run is run-b");
  refused({"run-a", "zurich", saved.layout}, "saved by node 'paris'");
  Toy wider(6);
  refused({"run-a", "paris", param_layout_fingerprint(wider.params)}, "parameter layout");

  // One flipped bit in the last tensor's data: the content hash catches it.
  std::string flipped = good;
  flipped.back() = static_cast<char>(flipped.back() ^ 1);
  ASSERT_TRUE(write_file_atomic(file, flipped).is_ok());
  refused(expect_of(saved), "corrupt: content hash");

  // Cut short (a crash mid-copy on a filesystem without atomic rename): refused by the parser.
  ASSERT_TRUE(write_file_atomic(file, good.substr(0, good.size() / 2)).is_ok());
  refused(expect_of(saved), "corrupt or truncated");

  ASSERT_TRUE(write_file_atomic(file, good).is_ok());
  EXPECT_TRUE(load_node_state(dir, expect_of(saved)).is_ok());
  fs::remove_all(dir);
}

TEST(NodeState, ShapesThatDoNotFitTheModelAreRefused) {
  Toy a;
  a.step(0);
  const NodeState saved = state_of(a);
  const fs::path dir = temp_dir("misfit");
  ASSERT_TRUE(save_node_state(dir, saved).is_ok());
  auto s = load_node_state(dir, expect_of(saved));
  ASSERT_TRUE(s.is_ok());
  Toy wider(6);  // same names, w is [6, 3]: the fingerprint would differ, and so do the tensors
  auto r = fit_node_state(s.value(), wider.params, exchanged(wider), dir);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("'w'"), std::string::npos) << r.status().message();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace meshrl::mesh
