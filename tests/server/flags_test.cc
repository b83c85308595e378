// vtrain-server's command line: both spellings, both value forms, switches,
// defaults, and errors that name the flag.
#include "server/flags.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace vtrain::server {
namespace {

using ::testing::HasSubstr;
using ::vtrain::testing::StatusIs;

TEST(FlagsTest, DefaultsMatchServerOptions) {
  VTRAIN_ASSERT_OK_AND_ASSIGN(const CommandLine c, ParseCommandLine({}));
  const ServerOptions defaults;
  EXPECT_EQ(c.options.listen, defaults.listen);
  EXPECT_EQ(c.options.db_path, "vtrain.db");
  EXPECT_EQ(c.options.role, Role::kAll);
  EXPECT_EQ(c.options.max_message_bytes, 64 << 20);
  EXPECT_EQ(c.options.max_tasks, 50'000'000);
  EXPECT_EQ(c.options.max_concurrent_simulations, 0);
  EXPECT_FALSE(c.options.require_auth_for_reads);
  EXPECT_EQ(c.push_token_file, "");
  EXPECT_EQ(c.grace_seconds, 10);
  EXPECT_FALSE(c.help);
}

TEST(FlagsTest, DashedAndUnderscoredNamesWithEitherValueForm) {
  VTRAIN_ASSERT_OK_AND_ASSIGN(
      const CommandLine c,
      ParseCommandLine({"--push-token-file=/a", "--metrics_listen", "0.0.0.0:9090",
                        "--max-concurrent-simulations", "2", "--role=predictor", "--registry=r:1",
                        "--grace_seconds=3", "--max-tasks=7", "--prediction-cache-entries=0",
                        "--ready-without-registry-seconds=0"}));
  EXPECT_EQ(c.push_token_file, "/a");
  EXPECT_EQ(c.options.metrics_listen, "0.0.0.0:9090");
  EXPECT_EQ(c.options.max_concurrent_simulations, 2);
  EXPECT_EQ(c.options.role, Role::kPredictor);
  EXPECT_EQ(c.options.registry, "r:1");
  EXPECT_EQ(c.grace_seconds, 3);
  EXPECT_EQ(c.options.max_tasks, 7);
  EXPECT_EQ(c.options.prediction_cache_entries, 0);
  EXPECT_EQ(c.options.ready_without_registry_seconds, 0);

  VTRAIN_ASSERT_OK_AND_ASSIGN(const CommandLine u, ParseCommandLine({"--push_token_file", "/b"}));
  EXPECT_EQ(u.push_token_file, "/b");
}

TEST(FlagsTest, ValuesMayHoldEqualsSignsAndDashes) {
  VTRAIN_ASSERT_OK_AND_ASSIGN(const CommandLine c,
                              ParseCommandLine({"--db=/x/a=b.db", "--registry", "--odd"}));
  EXPECT_EQ(c.options.db_path, "/x/a=b.db");
  EXPECT_EQ(c.options.registry, "--odd");
}

TEST(FlagsTest, SwitchesAloneOrWithABoolean) {
  VTRAIN_ASSERT_OK_AND_ASSIGN(CommandLine c, ParseCommandLine({"--require-auth-for-reads"}));
  EXPECT_TRUE(c.options.require_auth_for_reads);
  VTRAIN_ASSERT_OK_AND_ASSIGN(c, ParseCommandLine({"--require_auth_for_reads=false"}));
  EXPECT_FALSE(c.options.require_auth_for_reads);
  EXPECT_THAT(ParseCommandLine({"--require-auth-for-reads=maybe"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--require-auth-for-reads='maybe' is not a boolean")));
}

TEST(FlagsTest, ErrorsNameTheFlag) {
  EXPECT_THAT(ParseCommandLine({"--bogus=1"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unknown flag --bogus")));
  EXPECT_THAT(ParseCommandLine({"--listen"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--listen needs a value")));
  EXPECT_THAT(ParseCommandLine({"--max-tasks=many"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--max-tasks='many' is not an integer")));
  EXPECT_THAT(ParseCommandLine({"--role=leader"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--role='leader'")));
  EXPECT_THAT(ParseCommandLine({"stray"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'stray'")));
  EXPECT_THAT(ParseCommandLine({"--max-tasks=0"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--max-tasks")));
  EXPECT_THAT(
      ParseCommandLine({"--max-concurrent-simulations=-1"}),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--max-concurrent-simulations")));
  EXPECT_THAT(ParseCommandLine({"--prediction-cache-entries=-5"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--prediction-cache-entries=-5 must be in [0, 1000000]")));
  EXPECT_THAT(ParseCommandLine({"--ready-without-registry-seconds=-1"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--ready-without-registry-seconds=-1 must be in [0, 3600]")));
}

TEST(FlagsTest, PortsOutOfRangeAreRefused) {
  EXPECT_THAT(ParseCommandLine({"--listen", ":99999"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--listen=:99999")));
  EXPECT_THAT(ParseCommandLine({"--metrics-listen=0.0.0.0:70000"}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--metrics-listen=")));
}

TEST(FlagsTest, HelpListsEveryFlagWithItsDefault) {
  VTRAIN_ASSERT_OK_AND_ASSIGN(const CommandLine c, ParseCommandLine({"--help"}));
  EXPECT_TRUE(c.help);
  const std::string usage = Usage();
  for (const char* name :
       {"--listen HOST:PORT", "--metrics-listen", "--db FILE", "--role ROLE", "--registry ",
        "--push-token-file FILE", "--require-auth-for-reads", "--tls-cert-file", "--tls-key-file",
        "--tls-client-ca-file", "--registry-ca-file", "--max-message-bytes", "--max-tasks",
        "--max-concurrent-simulations", "--prediction-cache-entries", "--grace-seconds",
        "--ready-without-registry-seconds", "--help"}) {
    EXPECT_THAT(usage, HasSubstr(name));
  }
  EXPECT_THAT(usage, HasSubstr("(default: \"127.0.0.1:50051\")"));
  EXPECT_THAT(usage, HasSubstr("(default: 67108864)"));
  EXPECT_THAT(usage, HasSubstr("(default: 4096)"));
}

}  // namespace
}  // namespace vtrain::server
