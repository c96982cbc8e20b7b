// Recursive-descent parser and exact evaluator for countdown answers. See expression.h.
// Parsing builds a small tree first and evaluates afterwards, so a syntax error anywhere wins over
// a division by zero earlier in the line, and the outcome does not depend on evaluation order.
#include "tasks/expression.h"

#include <map>

namespace meshrl::tasks {
namespace {

struct Node {
  char op = 0;        // 0 for a number leaf, else one of + - * /
  int64_t value = 0;  // leaf value
  int left = -1, right = -1;
};

std::string describe_byte(char c) {
  const auto u = static_cast<unsigned char>(c);
  if (u >= 0x21 && u < 0x7F) return "'" + std::string(1, c) + "'";
  static const char* hex = "0123456789ABCDEF";
  return std::string("byte 0x") + hex[u >> 4] + hex[u & 15];
}

class Parser {
 public:
  explicit Parser(std::string_view s) : s_(s) {}

  // Returns the root node index, or -1 with error_/overflow_ set.
  int parse() {
    int root = expr(0);
    if (root < 0) return -1;
    skip_space();
    if (pos_ < s_.size()) return fail("unexpected " + describe_byte(s_[pos_]) + " at column " + std::to_string(pos_ + 1));
    return root;
  }

  std::vector<Node> nodes;
  std::string error;
  bool overflow = false;

 private:
  void skip_space() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\r')) ++pos_;
  }
  int fail(std::string msg) {
    if (error.empty()) error = std::move(msg);
    return -1;
  }
  std::string here() const {
    return pos_ < s_.size() ? describe_byte(s_[pos_]) + " at column " + std::to_string(pos_ + 1) : "the end";
  }
  int add(Node n) {
    nodes.push_back(n);
    return static_cast<int>(nodes.size()) - 1;
  }

  int expr(int depth) {
    int left = term(depth);
    while (left >= 0) {
      skip_space();
      if (pos_ >= s_.size() || (s_[pos_] != '+' && s_[pos_] != '-')) break;
      const char op = s_[pos_++];
      int right = term(depth);
      if (right < 0) return -1;
      left = add({op, 0, left, right});
    }
    return left;
  }

  int term(int depth) {
    int left = factor(depth);
    while (left >= 0) {
      skip_space();
      if (pos_ >= s_.size() || (s_[pos_] != '*' && s_[pos_] != '/')) break;
      const char op = s_[pos_++];
      int right = factor(depth);
      if (right < 0) return -1;
      left = add({op, 0, left, right});
    }
    return left;
  }

  int factor(int depth) {
    skip_space();
    if (pos_ >= s_.size()) return fail("expected a number or '(' at the end");
    const char c = s_[pos_];
    if (c == '(') {
      if (depth >= kMaxExpressionDepth) return fail("parentheses nested deeper than " + std::to_string(kMaxExpressionDepth));
      ++pos_;
      int inner = expr(depth + 1);
      if (inner < 0) return -1;
      skip_space();
      if (pos_ >= s_.size() || s_[pos_] != ')') return fail("expected ')' but found " + here());
      ++pos_;
      return inner;
    }
    if (c >= '0' && c <= '9') return number();
    return fail("expected a number or '(' but found " + here());
  }

  int number() {
    const size_t start = pos_;
    int64_t v = 0;
    bool too_big = false;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      const int d = s_[pos_] - '0';
      if (v > (INT64_MAX - d) / 10) too_big = true;
      else v = v * 10 + d;
      ++pos_;
    }
    const std::string_view lit = s_.substr(start, pos_ - start);
    if (lit.size() > 1 && lit[0] == '0') return fail("leading zero in '" + std::string(lit) + "' at column " + std::to_string(start + 1));
    if (too_big) {
      overflow = true;
      return fail("number '" + std::string(lit.substr(0, 24)) + (lit.size() > 24 ? "..." : "") + "' does not fit in 64 bits");
    }
    return add({0, v, -1, -1});
  }

  std::string_view s_;
  size_t pos_ = 0;
};

// Evaluates the tree; depth is bounded by the parser's limits (length and nesting).
RationalResult evaluate(const std::vector<Node>& nodes, int i) {
  const Node& n = nodes[i];
  if (n.op == 0) return {{n.value, 1}, RationalError::kNone};
  RationalResult a = evaluate(nodes, n.left);
  if (!a.ok()) return a;
  RationalResult b = evaluate(nodes, n.right);
  if (!b.ok()) return b;
  switch (n.op) {
    case '+': return rational_add(a.value, b.value);
    case '-': return rational_sub(a.value, b.value);
    case '*': return rational_mul(a.value, b.value);
    default: return rational_div(a.value, b.value);
  }
}

}  // namespace

ExpressionResult check_expression(std::string_view text, const std::vector<int64_t>& given) {
  ExpressionResult r;
  if (text.size() > kMaxExpressionBytes) {
    r.detail = "expression longer than " + std::to_string(kMaxExpressionBytes) + " bytes";
    return r;
  }
  Parser p(text);
  const int root = p.parse();
  if (root < 0) {
    r.outcome = p.overflow ? ExpressionOutcome::kOverflow : ExpressionOutcome::kSyntaxError;
    r.detail = text.find_first_not_of(" \t\r") == std::string_view::npos ? "empty expression" : p.error;
    return r;
  }

  std::map<int64_t, int> left;  // how many times each given number may still be used
  for (int64_t g : given) ++left[g];
  for (const Node& n : p.nodes) {
    if (n.op != 0) continue;
    auto it = left.find(n.value);
    if (it == left.end()) {
      r.outcome = ExpressionOutcome::kNumberNotGiven;
      r.detail = std::to_string(n.value) + " is not one of the given numbers";
      return r;
    }
    if (it->second-- == 0) {
      r.outcome = ExpressionOutcome::kNumberNotGiven;
      r.detail = std::to_string(n.value) + " is used more often than it was given";
      return r;
    }
  }

  const RationalResult v = evaluate(p.nodes, root);
  if (v.error == RationalError::kDivisionByZero) {
    r.outcome = ExpressionOutcome::kDivisionByZero;
    r.detail = "division by zero";
    return r;
  }
  if (v.error == RationalError::kOverflow) {
    r.outcome = ExpressionOutcome::kOverflow;
    r.detail = "an intermediate result does not fit in 64-bit rationals";
    return r;
  }
  r.outcome = ExpressionOutcome::kOk;
  r.value = v.value;
  r.detail = "ok";
  return r;
}

}  // namespace meshrl::tasks
