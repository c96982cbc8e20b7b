// One node's slice of a task. See sharded_task.h.
#include "mesh/sharded_task.h"

#include <xxhash.h>

#include "core/check.h"

namespace meshrl::mesh {

ShardedTask::ShardedTask(std::shared_ptr<const tasks::Task> inner, uint64_t index, uint64_t count)
    : inner_(std::move(inner)), index_(index), count_(count) {
  MESHRL_CHECK(count_ >= 1 && index_ < count_, "[sharded_task] shard " << index_ << " of " << count_);
}

std::string ShardedTask::name() const {
  return inner_->name() + "[shard " + std::to_string(index_) + "/" + std::to_string(count_) + "]";
}

uint64_t ShardedTask::shard_of(const std::string& prompt, uint64_t count) {
  return XXH3_64bits_withSeed(prompt.data(), prompt.size(), 0x5eed5a1d) % count;
}

tasks::Problem ShardedTask::sample(uint64_t seed) const { return inner_->sample(inner_seed(seed)); }

uint64_t ShardedTask::inner_seed(uint64_t seed) const {
  uint64_t used = seed;
  for (uint64_t attempt = 0; attempt < 10000; ++attempt) {
    // splitmix-style derivation keeps the attempts' seeds distinct from other prompts' seeds.
    uint64_t s = seed + 0x9e3779b97f4a7c15ull * (attempt + 1);
    s = (s ^ (s >> 30)) * 0xbf58476d1ce4e5b9ull;
    s = (s ^ (s >> 27)) * 0x94d049bb133111ebull;
    used = attempt == 0 ? seed : (s ^ (s >> 31));
    if (count_ == 1 || shard_of(inner_->sample(used).prompt, count_) == index_) return used;
  }
  return used;
}

}  // namespace meshrl::mesh
