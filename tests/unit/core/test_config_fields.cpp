// Config field tables (core/config_fields.h, toml_document.h, config_overrides.h) on a small
// config of every field type: a TOML file read into it with errors naming file:line:col and the
// key, --section.key=value overrides typed by the field, range and allowed-value checks, and both
// writers reading back to the same values.
//   cmake --build build --target test_core && build/tests/test_core --gtest_filter='ConfigFields*'
#include <gtest/gtest.h>

#include <sstream>

#include "core/config_fields.h"
#include "core/config_overrides.h"
#include "core/toml_document.h"

namespace meshrl::config {
namespace {

struct Demo {
  int64_t steps = 10;
  uint64_t seed = 0;
  double lr = 0.5;
  bool fast = false;
  std::string mode = "sync";
  int digits = 2;
  std::vector<std::string> argv = {"a"};
  std::string name;
};

Section demo_section(Demo& d) {
  return {"demo",
          {
              Field("steps", &d.steps, "steps to run").in(closed(1, 100)),
              Field("seed", &d.seed, "seed"),
              Field("lr", &d.lr, "learning rate").in(open_closed(0, 10).worded("> 0 (and at most 10)")),
              Field("fast", &d.fast, "go fast"),
              Field("mode", &d.mode, "sync or async").values({"sync", "async"}),
              Field("sub.digits", &d.digits, "digits").in(closed(1, 6)).when([&d] { return d.mode == "sync"; }),
              Field("sub.argv", &d.argv, "a program"),
          },
          "; see the demo docs"};
}

Section other_section(Demo& d) { return {"other", {Field("name", &d.name, "a name").must_be_given()}, ""}; }

// Reads `text` (and overrides) into a Demo; returns the error message, "" when it read.
std::string read(const std::string& text, Demo& d, const std::vector<std::string>& overrides = {}) {
  std::vector<Section> sections = {demo_section(d)};
  const Status s = read_config(text, "demo.toml", overrides, sections);
  return s.is_ok() ? "" : s.message();
}

TEST(ConfigFields, ReadsEveryTypeAndSubTablesAsDottedKeys) {
  Demo d;
  ASSERT_EQ(read(R"([demo]
steps = 20
seed = 7
lr = 1            # an integer is a fine number
fast = true
mode = "async"
[demo.sub]
digits = 3
argv = ["python3", "v.py"]
)",
                 d),
            "");
  EXPECT_EQ(d.steps, 20);
  EXPECT_EQ(d.seed, 7u);
  EXPECT_EQ(d.lr, 1.0);
  EXPECT_TRUE(d.fast);
  EXPECT_EQ(d.mode, "async");
  EXPECT_EQ(d.digits, 3);
  EXPECT_EQ(d.argv, (std::vector<std::string>{"python3", "v.py"}));
}

TEST(ConfigFields, FileErrorsNameFileLineColumnAndKey) {
  Demo d;
  EXPECT_EQ(read("[demo]\nlr = \"fast\"\n", d), "demo.toml:2:6: [demo] lr must be a number, got string \"fast\"");
  EXPECT_EQ(read("[demo]\n\nstepz = 3\n", d), "demo.toml:3:1: [demo] unknown key 'stepz'; see the demo docs");
  EXPECT_EQ(read("[demo]\nseed = -1\n", d), "demo.toml:2:8: [demo] seed must be a non-negative integer, got integer -1");
  EXPECT_EQ(read("[demo]\nsub.digits = 3000000000\n", d), "demo.toml:2:14: [demo] sub.digits must be a 32-bit integer, got integer 3000000000");
  EXPECT_EQ(read("[demo]\nsub.argv = [\"a\", 1]\n", d), "demo.toml:2:12: [demo] sub.argv must be an array of strings, got array [ 'a', 1 ]");
  EXPECT_EQ(read("[demo]\nsub = 4\n", d), "demo.toml:2:7: [demo] sub must be a table, got integer 4");
  EXPECT_EQ(read("[demo]\nsub.nope = 4\n", d), "demo.toml:2:5: [demo] unknown key 'sub.nope'; see the demo docs");
  EXPECT_EQ(read("[demo]\nlr = nan\n", d), "demo.toml:2:6: [demo] lr must be a finite number, got float nan");
  EXPECT_EQ(read("[demoo]\nlr = 1\n", d), "demo.toml:1:2: unknown section [demoo]; sections are demo");
  EXPECT_EQ(read("lr = 1\n", d), "demo.toml:1:1: unknown top-level key 'lr'; every key belongs in a [section]");
  EXPECT_EQ(read("demo = 1\n", d), "demo.toml:1:1: 'demo' must be a [section] table, got integer");
  EXPECT_EQ(read("[demo]\nlr = = 1\n", d).rfind("demo.toml:2:", 0), 0u);  // TOML syntax, from toml++
}

TEST(ConfigFields, TopLevelKeysRequiredKeysAndTheGeneratedKeyList) {
  Demo d;
  Section top{"", {Field("name", &d.name, "a name").must_be_given(), Field("seed", &d.seed, "seed")}, ""};
  std::vector<Section> sections = {std::move(top), demo_section(d)};
  auto root = parse_toml("seed = 3\n[demo]\nsteps = 5\n", "t.toml");
  ASSERT_TRUE(root.is_ok());
  EXPECT_EQ(read_sections(root.value(), sections, "t.toml").message(), "t.toml: name is missing");
  root = parse_toml("name = \"x\"\nspeed = 3\n", "t.toml");
  EXPECT_EQ(read_sections(root.value(), sections, "t.toml").message(), "t.toml:2:1: unknown key 'speed'; keys are name, seed");
  root = parse_toml("name = \"x\"\nseed = 4\n[demo]\nsteps = 5\n", "t.toml");
  ASSERT_TRUE(read_sections(root.value(), sections, "t.toml").is_ok());
  EXPECT_EQ(d.name, "x");
  EXPECT_EQ(d.seed, 4u);
  EXPECT_EQ(d.steps, 5);

  Section other = other_section(d);
  std::vector<std::string> keys;
  auto t = parse_toml("name = \"\"\n", "o.toml");
  ASSERT_TRUE(read_section(t.value(), other, Scope{"o.toml", "other"}, &keys).is_ok());
  EXPECT_EQ(keys, std::vector<std::string>{"name"});  // given, though empty
  EXPECT_EQ(read_section(toml::table{}, other, Scope{"o.toml", "other"}).message(), "o.toml: [other] name is missing");
}

TEST(ConfigFields, RangesAndAllowedValuesAreCheckedWithTheirWords) {
  EXPECT_EQ(closed(1, 1024).describe(), "in [1, 1024]");
  EXPECT_EQ(open(0, 1).describe(), "in (0, 1)");
  EXPECT_EQ(open_closed(0, 0.5).describe(), "in (0, 0.5]");
  EXPECT_EQ(closed_open(0, 1).with_note("(0 = off)").describe(), "in [0, 1) (0 = off)");
  EXPECT_EQ(at_least(0).describe(), ">= 0");
  EXPECT_EQ(above(0).describe(), "> 0");
  EXPECT_TRUE(closed(1, 2).contains(1) && closed(1, 2).contains(2) && !closed(1, 2).contains(2.5));
  EXPECT_TRUE(!open(0, 1).contains(0) && !open(0, 1).contains(1) && open(0, 1).contains(0.5));

  Demo d;
  const Scope scope{"demo.toml", "demo"};
  d.steps = 0;
  EXPECT_EQ(check_fields(demo_section(d), scope).message(), "demo.toml: [demo] steps must be in [1, 100], got 0");
  d.steps = 100;
  d.lr = 11;
  EXPECT_EQ(check_fields(demo_section(d), scope).message(), "demo.toml: [demo] lr must be > 0 (and at most 10), got 11");
  d.lr = 0.25;
  d.mode = "fast";
  EXPECT_EQ(check_fields(demo_section(d), scope).message(), "demo.toml: [demo] mode must be sync or async, got \"fast\"");
  // sub.digits is checked only while mode = "sync".
  d.digits = 9;
  d.mode = "async";
  EXPECT_TRUE(check_fields(demo_section(d), scope).is_ok());
  d.mode = "sync";
  EXPECT_EQ(check_fields(demo_section(d), scope).message(), "demo.toml: [demo] sub.digits must be in [1, 6], got 9");
  // Checks run once, after the file and the overrides: an override may fix the file.
  Demo e;
  EXPECT_EQ(read("[demo]\nsteps = 0\n", e, {"--demo.steps=3"}), "");
  EXPECT_TRUE(check_fields(demo_section(e), scope).is_ok());
}

TEST(ConfigFields, OverridesAreTypedByTheFieldAndNameWhatIsWrong) {
  Demo d;
  ASSERT_EQ(read("", d,
                 {"--demo.steps=30", "--demo.lr", "2e-3", "demo.fast=true", "--demo.sub.argv=[\"python3\", \"v.py\"]",
                  "--demo.seed=9", "--demo.seed=12"}),
            "");
  EXPECT_EQ(d.steps, 30);
  EXPECT_EQ(d.lr, 2e-3);
  EXPECT_TRUE(d.fast);
  EXPECT_EQ(d.argv, (std::vector<std::string>{"python3", "v.py"}));
  EXPECT_EQ(d.seed, 12u);  // the later wins
  ASSERT_EQ(read("", d, {"--demo.sub.argv=./verify"}), "");
  EXPECT_EQ(d.argv, std::vector<std::string>{"./verify"});  // one bare string: a one-element list

  Demo e;
  EXPECT_EQ(read("", e, {"--demo.steps=abc"}), "demo.toml: [demo] steps (command line) must be an integer, got 'abc'");
  EXPECT_EQ(read("", e, {"--demo.steps=3.5"}), "demo.toml: [demo] steps (command line) must be an integer, got '3.5'");
  EXPECT_EQ(read("", e, {"--demo.seed=-1"}), "demo.toml: [demo] seed (command line) must be a non-negative integer, got '-1'");
  EXPECT_EQ(read("", e, {"--demo.seed=9223372036854775808"}),
            "demo.toml: [demo] seed (command line) must be an integer below 2^63, got '9223372036854775808'");
  EXPECT_EQ(read("", e, {"--demo.sub.digits=99999999999"}),
            "demo.toml: [demo] sub.digits (command line) must be a 32-bit integer, got '99999999999'");
  EXPECT_EQ(read("", e, {"--demo.lr=inf"}), "demo.toml: [demo] lr (command line) must be a finite number, got 'inf'");
  EXPECT_EQ(read("", e, {"--demo.fast=yes"}), "demo.toml: [demo] fast (command line) must be true or false, got 'yes'");
  EXPECT_EQ(read("", e, {"--demo.sub.argv=[1, 2]"}),
            "demo.toml: [demo] sub.argv (command line) must be a JSON array of strings, e.g. [\"python3\", \"verify.py\"], got '[1, 2]'");
  EXPECT_EQ(read("", e, {"--demo.nope=1"}), "demo.toml: [demo] unknown key 'nope' (command line); see the demo docs");
  EXPECT_EQ(read("", e, {"--demo.sub=1"}), "demo.toml: [demo] sub (command line) is a table; set one of its keys");
  EXPECT_EQ(read("", e, {"--nope.x=1"}), "command line: unknown section [nope] in '--nope.x=1'; sections are demo");
  EXPECT_EQ(read("", e, {"--demo"}), "command line: '--demo' is not an override; write --section.key=value");
  EXPECT_EQ(read("", e, {"--demo.steps"}), "command line: '--demo.steps' is not an override; write --section.key=value");
  EXPECT_EQ(read("", e, {"--demo.mode", std::string("a\xF3w")}), "command line: an override is not valid UTF-8");
}

TEST(ConfigFields, ParsedOverridesKeepTheArgumentAndTheDottedKey) {
  auto o = parse_overrides({"--mesh.inner_steps=8", "--task.jsonl.path", "p.jsonl", "grpo.lr=1"});
  ASSERT_TRUE(o.is_ok());
  ASSERT_EQ(o->size(), 3u);
  EXPECT_EQ((*o)[0].dotted(), "mesh.inner_steps");
  EXPECT_EQ((*o)[0].value, "8");
  EXPECT_EQ((*o)[1].arg, "--task.jsonl.path");
  EXPECT_EQ((*o)[1].section, "task");
  EXPECT_EQ((*o)[1].key, "jsonl.path");
  EXPECT_EQ((*o)[1].value, "p.jsonl");
  EXPECT_EQ((*o)[2].dotted(), "grpo.lr");
}

TEST(ConfigFields, BothWritersReadBackToTheSameValues) {
  Demo d;
  d.steps = 42;
  d.seed = 9'000'000'000ull;
  d.lr = 0.1;
  d.fast = true;
  d.mode = "async";
  d.digits = 5;
  d.argv = {"python3", "say \"hi\"\n"};
  // The [name] lines layout, written by hand: table order, the shortest exact double, a double
  // that is a whole number keeps ".0" (or it would read back as an integer).
  const std::string lines = section_lines(demo_section(d));
  EXPECT_EQ(lines,
            "[demo]\nsteps = 42\nseed = 9000000000\nlr = 0.1\nfast = true\nmode = \"async\"\nsub.digits = 5\n"
            "sub.argv = [\"python3\",\"say \\\"hi\\\"\\n\"]\n");
  d.lr = 2;
  EXPECT_NE(section_lines(demo_section(d)).find("lr = 2.0\n"), std::string::npos);

  toml::table root;
  root.insert("demo", to_toml_table(demo_section(d)));
  std::ostringstream formatted;
  formatted << toml::toml_formatter(root, toml::format_flags::indentation);
  for (const std::string& text : {formatted.str(), section_lines(demo_section(d))}) {
    Demo back;
    ASSERT_EQ(read(text, back), "") << text;
    EXPECT_EQ(to_json(demo_section(back)), to_json(demo_section(d))) << text;
  }
  const nlohmann::json j = to_json(demo_section(d));
  EXPECT_EQ(j["sub"]["digits"], 5);  // dotted keys nest
  EXPECT_EQ(j["seed"], 9'000'000'000ull);
  EXPECT_TRUE(j["seed"].is_number_unsigned());
}

TEST(ConfigFields, TextHelpers) {
  EXPECT_EQ(format_double(0.1), "0.1");
  EXPECT_EQ(format_double(1e-6), "1e-06");
  EXPECT_EQ(format_double(2), "2");
  EXPECT_EQ(format_double(-20), "-2e+01");  // shortest exact: what the [mesh] lines hold
  EXPECT_EQ(format_number(-20), "-20");     // what a message shows
  EXPECT_EQ(format_number(1e6), "1000000");
  EXPECT_EQ(format_number(0.0625), "0.0625");
  EXPECT_EQ(join_or({"a"}), "a");
  EXPECT_EQ(join_or({"a", "b", "c"}), "a, b or c");
  EXPECT_EQ(clip_text(std::string(50, 'x')), std::string(37, 'x') + "...");
  EXPECT_TRUE(is_valid_utf8("caf\xC3\xA9"));
  EXPECT_FALSE(is_valid_utf8("\xC0\xAF"));      // overlong
  EXPECT_FALSE(is_valid_utf8("\xED\xA0\x80"));  // surrogate
  EXPECT_EQ(Scope({"f.toml", ""}).name("seed", Position{3, 7}), "f.toml:3:7: seed");
  EXPECT_EQ(Scope({"f.toml", "grpo"}).name("lr"), "f.toml: [grpo] lr");
}

}  // namespace
}  // namespace meshrl::config
