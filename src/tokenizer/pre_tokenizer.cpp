#include "tokenizer/pre_tokenizer.h"

namespace meshrl::tokenizer {
namespace {

using Span = std::pair<uint32_t, uint32_t>;

struct Segment {
  uint32_t start, end;
  bool is_match;
};

// Cuts the piece [start, end) around `matches` (relative to start) following Hugging Face's
// SplitDelimiterBehavior, and appends the non-empty results to *out.
void split_piece(uint32_t start, uint32_t end, const std::vector<Span>& matches, SplitBehavior behavior, bool invert,
                 std::vector<Segment>* segs, std::vector<Span>* out) {
  segs->clear();
  uint32_t prev = 0;
  const uint32_t len = end - start;
  for (auto [s, e] : matches) {
    if (s > prev) segs->push_back({prev, s, invert});
    segs->push_back({s, e, !invert});
    prev = e;
  }
  if (prev < len) segs->push_back({prev, len, invert});

  auto emit = [&](uint32_t s, uint32_t e) {
    if (e > s) out->emplace_back(start + s, start + e);
  };
  switch (behavior) {
    case SplitBehavior::kRemoved:
      for (const auto& g : *segs)
        if (!g.is_match) emit(g.start, g.end);
      break;
    case SplitBehavior::kIsolated:
      for (const auto& g : *segs) emit(g.start, g.end);
      break;
    case SplitBehavior::kMergedWithPrevious: {
      // A match joins the piece before it unless that piece was itself a match.
      size_t first = out->size();
      bool prev_match = false;
      for (const auto& g : *segs) {
        if (g.is_match && !prev_match && out->size() > first) {
          out->back().second = start + g.end;
        } else {
          emit(g.start, g.end);
        }
        prev_match = g.is_match;
      }
      break;
    }
    case SplitBehavior::kMergedWithNext: {
      // Mirror image: walk backwards, a match joins the piece after it.
      std::vector<Span> rev;
      bool prev_match = false;
      for (auto it = segs->rbegin(); it != segs->rend(); ++it) {
        if (it->is_match && !prev_match && !rev.empty()) {
          rev.back().first = start + it->start;
        } else if (it->end > it->start) {
          rev.emplace_back(start + it->start, start + it->end);
        }
        prev_match = it->is_match;
      }
      out->insert(out->end(), rev.rbegin(), rev.rend());
      break;
    }
    case SplitBehavior::kContiguous: {
      size_t first = out->size();
      bool prev_match = false;
      bool have_prev = false;
      for (const auto& g : *segs) {
        if (have_prev && g.is_match == prev_match && out->size() > first) {
          out->back().second = start + g.end;
        } else {
          emit(g.start, g.end);
        }
        prev_match = g.is_match;
        have_prev = true;
      }
      break;
    }
  }
}

}  // namespace

Status PreTokenizer::apply(std::string_view text, Pieces* out) const {
  out->arena.assign(text.data(), text.size());
  out->spans.clear();
  if (!text.empty()) out->spans.emplace_back(0, static_cast<uint32_t>(text.size()));

  std::vector<Span> next;
  std::vector<Span> matches;
  std::vector<Segment> segs;
  for (const auto& step : steps_) {
    if (step.kind == PreTokenizerStep::Kind::kByteLevel && step.add_prefix_space) {
      bool need = false;
      for (auto [s, e] : out->spans) need |= out->arena[s] != ' ';
      if (need) {
        std::string arena;
        arena.reserve(out->arena.size() + out->spans.size());
        next.clear();
        for (auto [s, e] : out->spans) {
          uint32_t ns = static_cast<uint32_t>(arena.size());
          if (out->arena[s] != ' ') arena.push_back(' ');
          arena.append(out->arena, s, e - s);
          next.emplace_back(ns, static_cast<uint32_t>(arena.size()));
        }
        out->arena.swap(arena);
        out->spans.swap(next);
      }
    }
    if (!step.regex) continue;
    next.clear();
    const SplitBehavior behavior =
        step.kind == PreTokenizerStep::Kind::kByteLevel ? SplitBehavior::kIsolated : step.behavior;
    const bool invert = step.kind == PreTokenizerStep::Kind::kByteLevel ? false : step.invert;
    for (auto [s, e] : out->spans) {
      matches.clear();
      MESHRL_RETURN_IF_ERROR(step.regex->find_all(std::string_view(out->arena).substr(s, e - s), &matches));
      split_piece(s, e, matches, behavior, invert, &segs, &next);
    }
    out->spans.swap(next);
  }
  return Status::ok();
}

}  // namespace meshrl::tokenizer
