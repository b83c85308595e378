// The bounded YAML reader (proto/yaml_reader.h): PyYAML safe_dump's layout
// and the same written by hand read alike; aliases are shared and bounded by
// their expanded size; tags, tabs, several documents and duplicate keys are
// refused with the line.
#include "proto/yaml_reader.h"

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace vtrain::proto {
namespace {

using ::testing::HasSubstr;
using Kind = YamlNode::Kind;

std::shared_ptr<const YamlNode> Read(const std::string& text) {
  absl::StatusOr<std::shared_ptr<const YamlNode>> n = ReadYaml(text, "t.yaml");
  EXPECT_TRUE(n.ok()) << n.status();
  return n.ok() ? *n : std::make_shared<YamlNode>();
}

std::string Refusal(const std::string& text, const YamlLimits& limits = {}) {
  absl::StatusOr<std::shared_ptr<const YamlNode>> n = ReadYaml(text, "t.yaml", limits);
  EXPECT_FALSE(n.ok());
  return n.ok() ? "" : std::string(n.status().message());
}

TEST(YamlReaderTest, ReadsSafeDumpLayout) {
  auto root = Read(
      "_target_: megatron.bridge.training.config.ConfigContainer\n"
      "ddp:\n"
      "  bucket_size: 134217728\n"
      "  overlap_grad_reduce: true  # a comment\n"
      "env_vars: {}\n"
      "model:\n"
      "  params_dtype:\n"
      "    _call_: false\n"
      "    _target_: torch.bfloat16\n"
      "  recompute_modules:\n"
      "  - core_attn\n"
      "  - 'mlp'\n"
      "  pipeline_model_parallel_layout:\n"
      "  - - embedding\n"
      "    - decoder\n"
      "  - [decoder, loss]\n"
      "  fp8: null\n"
      "  threshold: .inf\n"
      "  empty: ''\n"
      "  url: http://x:8080/a#b\n"
      "train: {global_batch_size: 512, micro_batch_size: 1}\n");
  ASSERT_EQ(root->kind, Kind::kMap);
  EXPECT_EQ(root->Find("ddp")->Find("bucket_size")->text, "134217728");
  EXPECT_EQ(root->Find("ddp")->Find("overlap_grad_reduce")->text, "true");
  EXPECT_EQ(root->Find("env_vars")->kind, Kind::kMap);
  EXPECT_TRUE(root->Find("env_vars")->map.empty());
  const YamlNode* model = root->Find("model");
  EXPECT_EQ(model->Find("params_dtype")->Find("_target_")->text, "torch.bfloat16");
  const YamlNode* modules = model->Find("recompute_modules");
  ASSERT_EQ(modules->kind, Kind::kSeq);
  ASSERT_EQ(modules->seq.size(), 2u);
  EXPECT_EQ(modules->seq[1]->text, "mlp");
  EXPECT_TRUE(modules->seq[1]->quoted);
  const YamlNode* layout = model->Find("pipeline_model_parallel_layout");
  ASSERT_EQ(layout->seq.size(), 2u);
  EXPECT_EQ(layout->seq[0]->seq[1]->text, "decoder");
  EXPECT_EQ(layout->seq[1]->seq[1]->text, "loss");
  EXPECT_TRUE(model->Find("fp8")->IsNull());
  EXPECT_EQ(model->Find("threshold")->text, ".inf");
  EXPECT_EQ(model->Find("empty")->kind, Kind::kScalar);
  EXPECT_EQ(model->Find("url")->text, "http://x:8080/a#b");
  EXPECT_EQ(root->Find("train")->Find("micro_batch_size")->text, "1");
  EXPECT_EQ(root->Find("train")->line, 21);
}

TEST(YamlReaderTest, SequencesOfMappingsFoldedScalarsAndBlockScalars) {
  auto root = Read(
      "---\n"
      "items:\n"
      "- name: a\n"
      "  size: 1\n"
      "-   name: b\n"
      "    size: 2\n"
      "long: a plain scalar\n"
      "  that goes on\n"
      "text: |\n"
      "  line one\n"
      "  line two\n"
      "quoted: \"tab\\there \\u00e9\"\n"
      "...\n");
  const YamlNode* items = root->Find("items");
  ASSERT_EQ(items->seq.size(), 2u);
  EXPECT_EQ(items->seq[1]->Find("size")->text, "2");
  EXPECT_EQ(root->Find("long")->text, "a plain scalar that goes on");
  EXPECT_EQ(root->Find("text")->text, "line one\nline two\n");
  EXPECT_EQ(root->Find("quoted")->text, "tab\there \xc3\xa9");
}

TEST(YamlReaderTest, AnchorsAliasesAndMerges) {
  auto root = Read(
      "base: &b {tp: 2, pp: 4}\n"
      "layers: &l [decoder, decoder]\n"
      "layout: [*l, *l]\n"
      "run:\n"
      "  <<: *b\n"
      "  pp: 8\n");
  const YamlNode* layout = root->Find("layout");
  ASSERT_EQ(layout->seq.size(), 2u);
  EXPECT_EQ(layout->seq[0].get(), layout->seq[1].get());  // shared, not copied
  EXPECT_EQ(root->Find("run")->Find("tp")->text, "2");
  EXPECT_EQ(root->Find("run")->Find("pp")->text, "8");  // its own key wins
}

TEST(YamlReaderTest, AliasesCannotExpandWithoutBound) {
  // Nine levels of ten aliases each: 10^9 nodes expanded, a few hundred bytes.
  std::string text = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i <= 9; ++i) {
    std::string items;
    for (int j = 0; j < 10; ++j) absl::StrAppend(&items, j > 0 ? ", " : "", "*a", i - 1);
    absl::StrAppend(&text, "a", i, ": &a", i, " [", items, "]\n");
  }
  EXPECT_THAT(Refusal(text), HasSubstr("expands (through its aliases) to more than"));
}

TEST(YamlReaderTest, RefusesWhatItDoesNotRead) {
  EXPECT_THAT(Refusal("a: !!python/object:os.system x\n"), HasSubstr("t.yaml:1: the tag"));
  EXPECT_THAT(Refusal("a:\n\tb: 1\n"), HasSubstr("t.yaml:2: a tab"));
  EXPECT_THAT(Refusal("a: 1\n---\nb: 2\n"), HasSubstr("t.yaml:2: a second document"));
  EXPECT_THAT(Refusal("a: 1\nb: 2\na: 3\n"), HasSubstr("t.yaml:3: key 'a' given twice"));
  EXPECT_THAT(Refusal("a: *nope\n"), HasSubstr("has no anchor"));
  EXPECT_THAT(Refusal("a: [1, 2\n"), HasSubstr("does not close"));
  EXPECT_THAT(Refusal("a: [x, y}\n"), HasSubstr("'}' where ',' or ']' belongs"));
  EXPECT_THAT(Refusal("a: {k: v]\n"), HasSubstr("']' where ',' or '}' belongs"));
  EXPECT_THAT(Refusal("a: 'open\n  more'\n"), HasSubstr("t.yaml:1: a quoted scalar"));
  EXPECT_THAT(Refusal("a:\n  b: 1\n c: 2\n"), HasSubstr("t.yaml:3:"));
  EXPECT_THAT(Refusal("? complex\n: key\n"), HasSubstr("complex keys"));
  YamlLimits small;
  small.max_bytes = 8;
  EXPECT_THAT(Refusal("a: 123456789\n", small), HasSubstr("over the 8-byte limit"));
  std::string deep;
  for (int i = 0; i < 100; ++i) deep += "[";
  EXPECT_THAT(Refusal("a: " + deep + "\n"), HasSubstr("nested deeper than 64"));
  std::string nested;
  for (int i = 0; i < 100; ++i) nested += std::string(static_cast<size_t>(2 * i), ' ') + "k:\n";
  EXPECT_THAT(Refusal(nested), HasSubstr("nested deeper than 64"));
}

TEST(YamlReaderTest, EmptyDocumentIsNull) {
  EXPECT_TRUE(Read("# nothing\n\n")->IsNull());
  EXPECT_TRUE(Read("")->IsNull());
}

}  // namespace
}  // namespace vtrain::proto
