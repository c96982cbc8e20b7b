// External-program verifier. See command_task.h.
#include "tasks/command_task.h"

#include <cmath>

#include <nlohmann/json.hpp>

#include "tasks/answer.h"

namespace meshrl::tasks {
namespace {

using nlohmann::json;

std::string clip(std::string_view s, size_t n = 200) {
  std::string r(s.substr(0, n));
  for (char& c : r)
    if (static_cast<unsigned char>(c) < 0x20 && c != '\n') c = '?';
  return r + (s.size() > n ? "..." : "");
}

}  // namespace

CommandTask::CommandTask(const TaskConfig& cfg, JsonlSource source)
    : JsonlBackedTask(cfg, std::move(source)), failures_(cfg.max_failure_rate, cfg.failure_window) {}

Result<std::unique_ptr<Task>> CommandTask::create(const TaskConfig& cfg) {
  MESHRL_ASSIGN_OR_RETURN(JsonlSource src, load_jsonl_source(cfg, /*answer_required=*/false, nullptr));
  return std::unique_ptr<Task>(new CommandTask(cfg, std::move(src)));
}

std::string CommandTask::name() const {
  std::string cmd;
  for (const std::string& a : cfg_.command.argv) cmd += (cmd.empty() ? "" : " ") + a;
  return "command(" + cmd + " on " + source_.path + ", " + std::to_string(source_.train.size()) + " train / " +
         std::to_string(source_.eval.size()) + " eval)";
}

Result<Score> CommandTask::score(const Problem& problem, std::string_view completion) const {
  const json request = {{"prompt", problem.prompt}, {"answer", problem.answer}, {"completion", std::string(completion)}};
  const std::string input = request.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
  SubprocessOptions opt;
  opt.timeout_ms = cfg_.command.timeout_ms;
  opt.max_output_bytes = cfg_.command.max_output_bytes;
  const std::string where = "[tasks.command] verifier '" + cfg_.command.argv[0] + "' on problem " + problem.id;

  // Cannot start: the program or its path is wrong, whatever the completion; stop now.
  Result<SubprocessResult> run = run_subprocess(cfg_.command.argv, input, opt);
  if (!run.is_ok())
    return Status(run.status().code(), where + ": " + run.status().message() + "; check [task] command.argv");
  const SubprocessResult& r = *run;

  // One failed call costs this completion's reward; the window decides whether it costs the run.
  auto failed = [&](VerifierFailure kind, const std::string& why) -> Result<Score> {
    const std::string detail = where + ": " + why;
    MESHRL_RETURN_IF_ERROR(failures_.record(kind, detail));
    Score s;
    s.failure = kind;
    s.detail = detail;
    return s;
  };
  const std::string err = r.err.empty() ? "" : "; stderr: " + clip(r.err);
  if (r.timed_out) return failed(VerifierFailure::kTimeout, "did not finish within " + std::to_string(opt.timeout_ms) + " ms; killed" + err);
  if (r.output_over)
    return failed(VerifierFailure::kGarbage, "wrote more than " + std::to_string(opt.max_output_bytes) + " bytes to stdout; killed");
  if (r.term_signal) return failed(VerifierFailure::kCrash, "killed by signal " + std::to_string(r.term_signal) + err);
  if (r.exit_code != 0) return failed(VerifierFailure::kCrash, "exited with code " + std::to_string(r.exit_code) + err);

  const std::string_view text = trim(r.out);
  const json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  auto garbage = [&](const std::string& why) {
    return failed(VerifierFailure::kGarbage, why + "; expected a number or {\"reward\": x} on stdout, got \"" + clip(text) + "\"");
  };
  Score s;
  if (j.is_number()) {
    s.reward = j.get<double>();
    s.correct = s.reward >= 1.0;
    s.format_ok = true;
    s.detail = "reward from verifier";
  } else if (j.is_object()) {
    if (!j.contains("reward") || !j["reward"].is_number()) return garbage("no numeric \"reward\"");
    s.reward = j["reward"].get<double>();
    if (j.contains("correct") && !j["correct"].is_boolean()) return garbage("\"correct\" is not true/false");
    if (j.contains("format_ok") && !j["format_ok"].is_boolean()) return garbage("\"format_ok\" is not true/false");
    s.correct = j.contains("correct") ? j["correct"].get<bool>() : s.reward >= 1.0;
    s.format_ok = j.contains("format_ok") ? j["format_ok"].get<bool>() : true;
    s.detail = j.contains("detail") && j["detail"].is_string() ? j["detail"].get<std::string>() : "reward from verifier";
  } else {
    return garbage(text.empty() ? "empty output" : "unreadable output");
  }
  if (!std::isfinite(s.reward)) return garbage("reward is not finite");
  MESHRL_RETURN_IF_ERROR(failures_.record(VerifierFailure::kNone, ""));
  return s;
}

}  // namespace meshrl::tasks
