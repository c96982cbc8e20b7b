// libFuzzer target for the run file (mesh/mesh_config.h -> rl/run_config.h -> tasks/task_config.h,
// core/config_fields.h, core/toml_document.h, toml++): the coordinator reads it from the operator, and every node reads the
// effective config back from the manifest it is sent. Any bytes must give a config or a one-line
// error, never a crash, an uncaught exception or a hang. Input: TOML text, optionally followed by
// a line "---" and command-line overrides, one per line ("--grpo.lr=0.1", "--mesh.rounds=3").
// A config that parses must survive what the coordinator does with it: written back as TOML
// (mesh_run_config_to_toml, the manifest's run_config_toml), it must parse again, to the same text.
// Found so far: an override string of invalid UTF-8 came back changed (now refused;
// corpus/fuzz_run_file/regression_override_not_utf8); the same for a value given as the next
// argument ("--task.jsonl.stop" "<bytes>", regression_override_value_not_utf8).
//   CXX=clang++ CC=clang cmake -S . -B build-fuzz -G Ninja -DMESHRL_FUZZ=ON
//   cmake --build build-fuzz --target fuzz_run_file
//   build-fuzz/tests/fuzz/fuzz_run_file tests/fuzz/corpus/fuzz_run_file -max_total_time=60
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "mesh/mesh_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (64u << 10)) return 0;  // run files are small; the loader caps them at 1 MiB
  std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> overrides;
  if (const size_t sep = text.find("\n---\n"); sep != std::string::npos) {
    std::string rest = text.substr(sep + 5);
    text.resize(sep + 1);
    size_t from = 0;
    while (from < rest.size()) {
      size_t end = rest.find('\n', from);
      if (end == std::string::npos) end = rest.size();
      overrides.push_back(rest.substr(from, end - from));
      from = end + 1;
    }
  }
  auto parsed = meshrl::mesh::parse_mesh_run_config(text, "fuzz.toml", overrides);
  if (!parsed.is_ok()) {
    if (parsed.status().message().empty()) std::abort();  // every refusal says why
    return 0;
  }
  const std::string written = meshrl::mesh::mesh_run_config_to_toml(parsed.value());
  auto again = meshrl::mesh::parse_mesh_run_config(written, "manifest");
  if (!again.is_ok()) {
    std::fprintf(stderr, "effective config does not parse again: %s\n--- written ---\n%s\n", again.status().message().c_str(),
                 written.c_str());
    std::abort();
  }
  const std::string rewritten = meshrl::mesh::mesh_run_config_to_toml(again.value());
  if (rewritten != written) {
    std::fprintf(stderr, "effective config changed when read back\n--- first ---\n%s\n--- second ---\n%s\n", written.c_str(),
                 rewritten.c_str());
    std::abort();
  }
  return 0;
}
